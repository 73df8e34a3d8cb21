// Text that reaches a person or a model (MCP consent questions, `initialize` instructions, the
// policy resource, error messages): a path or name a repository, a session or the model chose is
// shown quoted, escaped and bounded, so it reads as data and never as a line of instructions.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace ptybox::runtime {

// `text` with every character that could make it read as more than one value escaped: `\` and
// `"` as `\\` and `\"`; newline, carriage return and tab as `\n`, `\r`, `\t`; other control
// characters and DEL as `\xNN`; C1 controls, bidirectional overrides and isolates, zero-width
// characters and the Unicode line and paragraph separators as `\u{XXXX}`; bytes that are not
// UTF-8 as `\xNN`. At most `max_bytes` of escaped text, then `... (N bytes)` naming the size of
// the whole `text`.
[[nodiscard]] std::string EscapedText(std::string_view text, size_t max_bytes = 200);

// EscapedText in double quotes; the `... (N bytes)` of a cut follows the closing quote, where
// the text cannot imitate it.
[[nodiscard]] std::string QuotedText(std::string_view text, size_t max_bytes = 200);

// The first `max_entries` of `items`, each QuotedText, joined by ", ", then "and N more".
[[nodiscard]] std::string QuotedList(const std::vector<std::string>& items, size_t max_entries = 8,
                                     size_t max_bytes = 200);

}  // namespace ptybox::runtime
