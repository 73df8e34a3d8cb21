// UTF-8 lead bytes (Unicode 15, table 3-7): how many continuation bytes follow and the range the
// first of them must fall in, which rules out overlongs, surrogates and code points past
// U+10FFFF. Shared by the decoder's parser and the screen's input filter.
#pragma once

#include <optional>

namespace ptybox::backend {

struct Utf8Lead {
  unsigned char need;   // continuation bytes that follow
  unsigned char lower;  // range of the first continuation byte
  unsigned char upper;
};

// nullopt for a byte that cannot start a multibyte character (ASCII is not asked about).
constexpr std::optional<Utf8Lead> ClassifyUtf8Lead(unsigned char b) {
  if (b >= 0xc2 && b <= 0xdf) return Utf8Lead{1, 0x80, 0xbf};
  if (b >= 0xe0 && b <= 0xef) {
    return Utf8Lead{2, static_cast<unsigned char>(b == 0xe0 ? 0xa0 : 0x80),
                    static_cast<unsigned char>(b == 0xed ? 0x9f : 0xbf)};
  }
  if (b >= 0xf0 && b <= 0xf4) {
    return Utf8Lead{3, static_cast<unsigned char>(b == 0xf0 ? 0x90 : 0x80),
                    static_cast<unsigned char>(b == 0xf4 ? 0x8f : 0xbf)};
  }
  return std::nullopt;
}

}  // namespace ptybox::backend
