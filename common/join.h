// The one list joiner: a list made one line of text for messages, sources and descriptions
// ("a, b, c"; "a, b or c"). Items are anything a std::string can be appended from (string,
// string_view, const char*); a caller that quotes or bounds items does so before joining.
#pragma once

#include <cstddef>
#include <iterator>
#include <string>
#include <string_view>

namespace ptybox {

// The items in order with `separator` between them; "" for none.
template <typename Range>
[[nodiscard]] std::string Join(const Range& items, std::string_view separator = ", ") {
  std::string out;
  bool first = true;
  for (const auto& item : items) {
    if (!first) out += separator;
    out += item;
    first = false;
  }
  return out;
}

// "a", "a or b", "a, b or c": the alternatives a value may take.
template <typename Range>
[[nodiscard]] std::string JoinAlternatives(const Range& items) {
  std::string out;
  const size_t count = static_cast<size_t>(std::distance(std::begin(items), std::end(items)));
  size_t i = 0;
  for (const auto& item : items) {
    if (i > 0) out += i + 1 == count ? " or " : ", ";
    out += item;
    ++i;
  }
  return out;
}

}  // namespace ptybox
