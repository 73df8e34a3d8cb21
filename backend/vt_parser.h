// Layer 1 of the terminal decoder: bytes -> terminal events. UTF-8 is validated (malformed input
// becomes U+FFFD; a multibyte character split across Feed calls is kept whole); C0 controls,
// CSI, OSC and other escape sequences become events; DCS/SOS/PM/APC strings are discarded.
// A sequence longer than the bound is discarded through its terminator.
#pragma once

#include <array>
#include <cstddef>
#include <string>
#include <string_view>

namespace ptybox::backend {

struct CsiSequence {
  static constexpr int kMaxParams = 16;
  char private_marker = 0;  // '?', '>', '<', '=' or 0
  char intermediate = 0;    // last intermediate byte (0x20-0x2f) or 0
  char final = 0;           // 0x40-0x7e
  int param_count = 0;
  std::array<int, kMaxParams> params{};  // -1 = omitted (use the default)
  // Parameter i, or `fallback` when omitted or absent.
  [[nodiscard]] int Param(int i, int fallback) const {
    return (i < param_count && params[i] >= 0) ? params[i] : fallback;
  }
};

class VtHandler {
 public:
  virtual ~VtHandler() = default;
  // A run of printable text: valid UTF-8, no control characters.
  virtual void OnPrint(std::string_view utf8) = 0;
  // One C0 control character (0x00-0x1f except ESC) or DEL.
  virtual void OnControl(char c) = 0;
  virtual void OnCsi(const CsiSequence& csi) = 0;
  // A complete OSC string without "ESC ]" and without its terminator (BEL or ESC \).
  virtual void OnOsc(std::string_view payload) = 0;
};

class VtParser final {
 public:
  // `max_sequence_bytes` bounds one incomplete escape sequence (maxReadBytes, 256 KiB default).
  VtParser(VtHandler& handler, size_t max_sequence_bytes);
  void Feed(std::string_view bytes);

 private:
  // (implementation state)
};

}  // namespace ptybox::backend
