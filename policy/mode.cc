#include "policy/mode.h"

#include "policy/mode_names.h"

namespace ptybox::policy {

std::string_view ToString(Mode mode) { return kModeNames[static_cast<size_t>(mode)]; }

std::string ModeAlternatives() {
  std::string text;
  for (size_t i = 0; i < kModeNames.size(); ++i) {
    if (i > 0) text += i + 1 == kModeNames.size() ? " or " : ", ";
    text += kModeNames[i];
  }
  return text;
}

std::optional<Mode> ParseMode(std::string_view text) {
  for (Mode mode : kModes) {
    if (ToString(mode) == text) return mode;
  }
  return std::nullopt;
}

}  // namespace ptybox::policy
