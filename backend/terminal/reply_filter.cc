#include "backend/terminal/reply_filter.h"

#include <cstddef>

namespace ptybox::backend {
namespace {

// Longer than any report libvterm makes ("?9999;2$y", "?500;1000R"): a longer run of digits is
// not one of its answers.
constexpr size_t kMaxParameterBytes = 24;

bool IsParameterByte(char c) { return (c >= '0' && c <= '9') || c == ';'; }

// The length of the known reply at the start of `s`, or 0.
size_t KnownReplyLength(std::string_view s) {
  if (s.size() < 3 || s[0] != '\x1b' || s[1] != '[') return 0;
  size_t i = 2;
  const char prefix = (s[i] == '?' || s[i] == '>') ? s[i++] : '\0';
  const size_t digits_from = i;
  while (i < s.size() && IsParameterByte(s[i]) && i - digits_from < kMaxParameterBytes) ++i;
  if (i >= s.size()) return 0;
  const bool dollar = s[i] == '$';
  if (dollar && ++i >= s.size()) return 0;
  const char final = s[i];
  const bool known = dollar ? (prefix == '?' && final == 'y')
                            : (final == 'R' && prefix != '>') || (final == 'n' && prefix != '>') ||
                                  (final == 'c' && prefix != '\0');
  return known ? i + 1 : 0;
}

}  // namespace

std::string KeepKnownReplies(std::string_view replies) {
  std::string kept;
  size_t at = 0;
  while (at < replies.size()) {
    if (const size_t n = KnownReplyLength(replies.substr(at)); n > 0) {
      kept.append(replies.substr(at, n));
      at += n;
      continue;
    }
    // Not a known reply: skip to the next ESC, where the next one may start.
    const size_t next = replies.find('\x1b', at + 1);
    at = next == std::string_view::npos ? replies.size() : next;
  }
  return kept;
}

}  // namespace ptybox::backend
