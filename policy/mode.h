// The three sandbox modes, ordered from narrowest to widest. Widening is never a default:
// danger-full-access is only reached by naming it.
#pragma once

#include <optional>
#include <string_view>

namespace ptybox::policy {

enum class Mode { kReadOnly = 0, kWorkspaceWrite = 1, kDangerFullAccess = 2 };

// "read-only", "workspace-write", "danger-full-access".
std::string_view ToString(Mode mode);
// Exact spelling only; anything else (a typo, other case) is nullopt.
std::optional<Mode> ParseMode(std::string_view text);
// True when `mode` grants no more than `ceiling`.
constexpr bool Within(Mode mode, Mode ceiling) {
  return static_cast<int>(mode) <= static_cast<int>(ceiling);
}
constexpr bool IsConfined(Mode mode) { return mode != Mode::kDangerFullAccess; }

// Whether workspace-write gives each repository of the writable roots a private git directory
// whose commits come back ("Git for agents", docs/security.md) rather than a read-only .git:
// on unless PTYBOX_GIT_WRITE in this process's environment holds something other than 1, true,
// yes or on (0 turns it off; so does any other value), read at each call.
[[nodiscard]] bool GitWriteEnabled();

}  // namespace ptybox::policy
