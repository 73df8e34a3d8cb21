// The one way an error travels up a layer unchanged: `if (!opened) return Propagate(opened);`
// instead of spelling std::unexpected(opened.error()) at every call site. Only for a result
// known to hold an error.
#pragma once

#include <expected>
#include <utility>

#include "common/error.h"

namespace ptybox {

template <typename T>
[[nodiscard]] std::unexpected<Error> Propagate(const Result<T>& failed) {
  return std::unexpected(failed.error());
}

template <typename T>
[[nodiscard]] std::unexpected<Error> Propagate(Result<T>&& failed) {
  return std::unexpected(std::move(failed).error());
}

}  // namespace ptybox
