#include "policy/mode.h"

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

}  // namespace ptybox::policy
