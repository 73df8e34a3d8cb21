// Unguessable identifiers: random bytes from the kernel (getrandom), as lowercase hex.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace ptybox {

// 2 * `bytes` hex digits of fresh randomness.
std::string RandomHex(size_t bytes);

// `bytes` as lowercase hex, two digits per byte (object ids, digests).
[[nodiscard]] std::string HexEncode(std::string_view bytes);

// Equality of two secrets in time that depends on their lengths only, never on where they first
// differ (an owner token checked against a guess).
[[nodiscard]] bool SecretEquals(std::string_view a, std::string_view b);

}  // namespace ptybox
