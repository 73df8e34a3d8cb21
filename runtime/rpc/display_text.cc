#include "runtime/rpc/display_text.h"

#include <cstdint>
#include <cstdio>

#include "common/join.h"

namespace ptybox::runtime {
namespace {

// The length of the UTF-8 sequence starting at text[i] and its code point; 0 when invalid
// (overlong, surrogate, beyond U+10FFFF, cut short).
size_t DecodeUtf8(std::string_view text, size_t i, uint32_t& cp) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char lead = byte(i);
  size_t length = 0;
  uint32_t min = 0;
  if (lead < 0x80) {
    cp = lead;
    return 1;
  } else if ((lead & 0xe0) == 0xc0) {
    length = 2, cp = lead & 0x1f, min = 0x80;
  } else if ((lead & 0xf0) == 0xe0) {
    length = 3, cp = lead & 0x0f, min = 0x800;
  } else if ((lead & 0xf8) == 0xf0) {
    length = 4, cp = lead & 0x07, min = 0x10000;
  } else {
    return 0;
  }
  if (i + length > text.size()) return 0;
  for (size_t k = 1; k < length; ++k) {
    if ((byte(i + k) & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (byte(i + k) & 0x3f);
  }
  if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
  return length;
}

// Characters that change how the text around them is read or laid out without being seen.
bool Invisible(uint32_t cp) {
  return (cp >= 0x80 && cp <= 0x9f) || cp == 0xad || cp == 0x061c ||
         (cp >= 0x200b && cp <= 0x200f) || (cp >= 0x2028 && cp <= 0x202e) ||
         (cp >= 0x2060 && cp <= 0x2069) || cp == 0xfeff;
}

// `\xNN` for a byte, `\u{XXXX}` (at least four digits) for a code point.
std::string ByteEscape(unsigned char byte) {
  static constexpr char kHex[] = "0123456789abcdef";
  return std::string("\\x") + kHex[byte >> 4] + kHex[byte & 0xf];
}
std::string CodePointEscape(uint32_t cp) {
  char buffer[16];
  std::snprintf(buffer, sizeof buffer, "\\u{%04x}", static_cast<unsigned>(cp));
  return buffer;
}

// The escaped text, cut at `max_bytes`; `cut` says whether anything was left out.
std::string Escape(std::string_view text, size_t max_bytes, bool& cut) {
  cut = false;
  std::string out;
  for (size_t i = 0; i < text.size();) {
    uint32_t cp = 0;
    const size_t length = DecodeUtf8(text, i, cp);
    std::string piece;
    if (length == 0) {
      piece = ByteEscape(static_cast<unsigned char>(text[i]));
    } else if (cp == '\\') {
      piece = "\\\\";
    } else if (cp == '"') {
      piece = "\\\"";
    } else if (cp == '\n') {
      piece = "\\n";
    } else if (cp == '\r') {
      piece = "\\r";
    } else if (cp == '\t') {
      piece = "\\t";
    } else if (cp < 0x20 || cp == 0x7f) {
      piece = ByteEscape(static_cast<unsigned char>(cp));
    } else if (Invisible(cp)) {
      piece = CodePointEscape(cp);
    } else {
      piece = std::string(text.substr(i, length));
    }
    if (out.size() + piece.size() > max_bytes) {
      cut = true;
      return out;
    }
    out += piece;
    i += length == 0 ? 1 : length;
  }
  return out;
}

}  // namespace

std::string EscapedText(std::string_view text, size_t max_bytes) {
  bool cut = false;
  std::string out = Escape(text, max_bytes, cut);
  if (cut) out += "... (" + std::to_string(text.size()) + " bytes)";
  return out;
}

std::string QuotedText(std::string_view text, size_t max_bytes) {
  // The note on a cut stays outside the quotes, where the text cannot imitate it.
  bool cut = false;
  std::string out = "\"" + Escape(text, max_bytes, cut) + "\"";
  if (cut) out += "... (" + std::to_string(text.size()) + " bytes)";
  return out;
}

std::string QuotedList(const std::vector<std::string>& items, size_t max_entries,
                       size_t max_bytes) {
  std::vector<std::string> quoted;
  for (size_t i = 0; i < items.size() && i < max_entries; ++i) {
    quoted.push_back(QuotedText(items[i], max_bytes));
  }
  std::string out = Join(quoted);
  if (items.size() > max_entries) {
    out += " and " + std::to_string(items.size() - max_entries) + " more";
  }
  return out;
}

}  // namespace ptybox::runtime
