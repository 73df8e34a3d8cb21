// Whitespace-delimited tokens and exact numbers, for the /proc parsers of every process (the
// daemon's foreground inspector and common/proc_stat, which ptybox-init links too).
#pragma once

#include <charconv>
#include <cstddef>
#include <string_view>
#include <system_error>

namespace ptybox::text {

inline bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n'; }

inline std::string_view SkipSpaces(std::string_view s) {
  size_t i = 0;
  while (i < s.size() && IsSpace(s[i])) ++i;
  return s.substr(i);
}

// Splits off the next whitespace-delimited token.
inline std::string_view NextToken(std::string_view& s) {
  s = SkipSpaces(s);
  size_t end = 0;
  while (end < s.size() && !IsSpace(s[end])) ++end;
  std::string_view token = s.substr(0, end);
  s.remove_prefix(end);
  return token;
}

// The whole token as a number in `base`, nothing before or after it.
template <typename T>
bool ParseNumber(std::string_view token, T& out, int base = 10) {
  if (token.empty()) return false;
  auto [ptr, ec] = std::from_chars(token.data(), token.data() + token.size(), out, base);
  return ec == std::errc() && ptr == token.data() + token.size();
}

}  // namespace ptybox::text
