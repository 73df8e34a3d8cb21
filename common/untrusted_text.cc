#include "common/untrusted_text.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>

namespace ptybox {

bool IsValidEnvName(std::string_view name) {
  if (name.empty() || name.size() > kMaxEnvNameBytes) return false;
  auto alpha = [](char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_'; };
  if (!alpha(name[0])) return false;
  return std::all_of(name.begin() + 1, name.end(),
                     [&](char c) { return alpha(c) || (c >= '0' && c <= '9'); });
}

namespace {

// The code point of a well-formed UTF-8 sequence when it is one a terminal or a person's
// reading acts on: the C1 controls U+0080..U+009F, the line and paragraph separators, and the
// bidirectional marks, embeddings, overrides and isolates. 0 otherwise.
uint32_t ControlPoint(std::string_view sequence) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(sequence[k]); };
  if (sequence.size() == 2 && b(0) == 0xc2 && b(1) <= 0x9f) return b(1);
  if (sequence.size() != 3 || b(0) != 0xe2) return 0;
  const uint32_t point = 0x2000u | ((b(1) & 0x3fu) << 6) | (b(2) & 0x3fu);
  const bool control = point == 0x200e || point == 0x200f || (point >= 0x2028 && point <= 0x202e) ||
                       (point >= 0x2066 && point <= 0x2069);
  return control ? point : 0;
}

}  // namespace

std::string Printable(std::string_view text, size_t max_chars) {
  std::string out;
  size_t shown = 0;
  size_t i = 0;
  while (i < text.size()) {
    if (shown == max_chars) {
      out += "...";
      break;
    }
    const auto c = static_cast<unsigned char>(text[i]);
    // Length of a well-formed UTF-8 sequence starting here, or 0 for a byte to escape.
    size_t length = 0;
    if (c >= 0x20 && c < 0x7f) {
      length = 1;
    } else if (c >= 0xc2 && c <= 0xf4) {
      const size_t want = c < 0xe0 ? 2 : c < 0xf0 ? 3 : 4;
      if (i + want <= text.size()) {
        length = want;
        for (size_t k = 1; k < want; ++k) {
          if ((static_cast<unsigned char>(text[i + k]) & 0xc0) != 0x80) length = 0;
        }
        // Second-byte ranges that exclude overlong forms, surrogates and values past U+10FFFF.
        const auto second = static_cast<unsigned char>(text[i + 1]);
        if ((c == 0xe0 && second < 0xa0) || (c == 0xed && second > 0x9f) ||
            (c == 0xf0 && second < 0x90) || (c == 0xf4 && second > 0x8f)) {
          length = 0;
        }
      }
    }
    if (length == 0) {
      char buffer[8];
      std::snprintf(buffer, sizeof buffer, "\\x%02x", c);
      out += buffer;
      length = 1;
    } else if (uint32_t point = length > 1 ? ControlPoint(text.substr(i, length)) : 0; point != 0) {
      // Well-formed, but a terminal acts on it: a C1 control (CSI, OSC, ... in UTF-8) or a
      // direction override that reorders what a person reads.
      char buffer[16];
      std::snprintf(buffer, sizeof buffer, "\\u%04x", static_cast<unsigned>(point));
      out += buffer;
    } else {
      out.append(text.substr(i, length));
    }
    i += length;
    ++shown;
  }
  return out;
}

}  // namespace ptybox
