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

// On unless PTYBOX_GIT_WRITE=0, which keeps every .git in a writable root read-only (the wall
// that held before Git for agents) for an operator who wants no commit from a session.
bool GitWriteEnabled() {
  const char* value = std::getenv("PTYBOX_GIT_WRITE");
  return value == nullptr || std::string_view(value) != "0";
}

}  // namespace ptybox::policy
