// Untrusted text that every process judges the same way, the daemon and ptybox-init alike:
// made printable for a one-line message, and the rule for an environment variable's name.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace ptybox {

inline constexpr size_t kMaxEnvNameBytes = 128;

// A portable variable name: [A-Za-z_][A-Za-z0-9_]*, at most kMaxEnvNameBytes characters.
[[nodiscard]] bool IsValidEnvName(std::string_view name);

// Untrusted text made safe to echo in a one-line message or a person's terminal: control
// characters (C0, DEL and the C1 controls U+0080..U+009F), line separators, bidirectional
// overrides and malformed UTF-8 escaped, at most `max_chars` characters then "...".
[[nodiscard]] std::string Printable(std::string_view text, size_t max_chars = 64);

}  // namespace ptybox
