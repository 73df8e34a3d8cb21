// What every piece of decoder output must be, shared by the property test and the libFuzzer
// target: valid UTF-8 (no overlongs, surrogates or code points above U+10FFFF), no C0 control
// other than TAB, no DEL, no C1 control character.
#pragma once

#include <cstddef>
#include <string_view>

namespace ptybox::backend::testing {

// True when `text` is clean rendered terminal text.
inline bool IsCleanText(std::string_view text) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    const unsigned char b = s[i];
    if (b < 0x80) {
      if ((b < 0x20 && b != '\t') || b == 0x7f) return false;
      ++i;
      continue;
    }
    size_t size = 0;
    char32_t cp = 0;
    if (b >= 0xc2 && b <= 0xdf) {
      size = 2;
      cp = b & 0x1f;
    } else if (b >= 0xe0 && b <= 0xef) {
      size = 3;
      cp = b & 0x0f;
    } else if (b >= 0xf0 && b <= 0xf4) {
      size = 4;
      cp = b & 0x07;
    } else {
      return false;
    }
    if (i + size > n) return false;
    for (size_t k = 1; k < size; ++k) {
      if ((s[i + k] & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (s[i + k] & 0x3f);
    }
    if ((size == 3 && cp < 0x800) || (size == 4 && cp < 0x10000) || cp > 0x10ffff ||
        (cp >= 0xd800 && cp <= 0xdfff) || (cp >= 0x80 && cp < 0xa0)) {
      return false;
    }
    i += size;
  }
  return true;
}

}  // namespace ptybox::backend::testing
