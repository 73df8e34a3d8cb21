// Value-and-name tokens (nsjail's NS_VALSTR_STRUCT): an enum value and the name it is spelled
// with, written once as one table row, so neither can drift from the other. The tables (modes,
// wait reasons) list their enum in order, which InEnumOrder checks beside each.
#pragma once

#include <array>
#include <cstddef>
#include <string_view>

namespace ptybox {

// One row of a token table: the value and its name.
template <typename Enum>
struct NameToken {
  Enum value;
  std::string_view name;
};

// Whether `tokens[i].value` is the enum value `i` for every i, so a ToString can index the
// table: `static_assert(InEnumOrder(kModeTokens), "...")` beside it.
template <typename Enum, size_t N>
[[nodiscard]] constexpr bool InEnumOrder(const std::array<NameToken<Enum>, N>& tokens) {
  for (size_t i = 0; i < N; ++i) {
    if (static_cast<size_t>(tokens[i].value) != i) return false;
  }
  return true;
}

}  // namespace ptybox
