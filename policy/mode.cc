#include "policy/mode.h"

#include <cstdlib>

#include "common/join.h"
#include "policy/mode_names.h"

namespace ptybox::policy {

std::string_view ToString(Mode mode) { return kModeNames[static_cast<size_t>(mode)]; }

std::string ModeAlternatives() { return JoinAlternatives(kModeNames); }

std::optional<Mode> ParseMode(std::string_view text) {
  for (Mode mode : kModes) {
    if (ToString(mode) == text) return mode;
  }
  return std::nullopt;
}

// On when PTYBOX_GIT_WRITE is unset, or 1, true, yes or on; any other value (0, false, off, an
// empty or misspelt one) keeps every .git in a writable root read-only (the wall that held before
// Git for agents): an operator who meant to turn it off never gets it on by a spelling
// (outside review 47).
bool GitWriteEnabled() {
  const char* value = std::getenv("PTYBOX_GIT_WRITE");
  if (value == nullptr) return true;
  const std::string_view text(value);
  return text == "1" || text == "true" || text == "yes" || text == "on";
}

}  // namespace ptybox::policy
