// Base64 (RFC 4648, with padding): bytes that are not text (a terminal's raw output, split
// anywhere, perhaps inside a UTF-8 character) carried exactly inside JSON strings.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace ptybox {

[[nodiscard]] std::string Base64Encode(std::string_view bytes);
// nullopt for anything but canonical padded base64 (wrong length, a foreign character,
// padding in the middle).
[[nodiscard]] std::optional<std::string> Base64Decode(std::string_view text);

}  // namespace ptybox
