#include "policy/mode.h"

namespace ptybox::policy {

std::string_view ToString(Mode mode) {
  switch (mode) {
    case Mode::kReadOnly: return "read-only";
    case Mode::kWorkspaceWrite: return "workspace-write";
    case Mode::kDangerFullAccess: return "danger-full-access";
  }
  return "read-only";
}

std::optional<Mode> ParseMode(std::string_view text) {
  if (text == "read-only") return Mode::kReadOnly;
  if (text == "workspace-write") return Mode::kWorkspaceWrite;
  if (text == "danger-full-access") return Mode::kDangerFullAccess;
  return std::nullopt;
}

}  // namespace ptybox::policy
