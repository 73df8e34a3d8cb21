// "1 connection", "2 connections": a count and its noun, for messages people read.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace ptybox::text {

// `n` and `one` (n == 1) or `many` (any other n).
inline std::string CountText(size_t n, std::string_view one, std::string_view many) {
  return std::to_string(n) + " " + std::string(n == 1 ? one : many);
}

}  // namespace ptybox::text
