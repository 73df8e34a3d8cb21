// Unguessable identifiers: random bytes from the kernel (getrandom), as lowercase hex.
#pragma once

#include <cstddef>
#include <string>

namespace ptybox {

// 2 * `bytes` hex digits of fresh randomness.
std::string RandomHex(size_t bytes);

}  // namespace ptybox
