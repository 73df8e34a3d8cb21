// Layer 1 of the terminal decoder: bytes -> terminal events. UTF-8 is validated (malformed input
// becomes U+FFFD; a multibyte character split across Feed calls is kept whole); C0 controls,
// CSI, OSC and other escape sequences become events; DCS/SOS/PM/APC strings are discarded.
// A sequence longer than the bound is discarded through its terminator. The one escape-sequence
// machine of ptybox: the line model and the screen (backend/terminal/screen.h) both consume its
// events.
#pragma once

#include <array>
#include <cstddef>
#include <string>
#include <string_view>

namespace ptybox::backend {

struct CsiSequence {
  static constexpr int kMaxParams = 16;
  char private_marker = 0;     // '?', '>', '<', '=' or 0
  char intermediate = 0;       // last intermediate byte (0x20-0x2f) or 0
  int intermediate_count = 0;  // how many intermediate bytes there were (saturates at 255)
  char final = 0;              // 0x40-0x7e
  int param_count = 0;
  std::array<int, kMaxParams> params{};  // -1 = omitted (use the default)
  // More than kMaxParams parameters were written; the rest were ignored.
  bool too_many_params = false;
  // Parameter i, or `fallback` when omitted or absent.
  [[nodiscard]] int Param(int i, int fallback) const {
    return (i < param_count && params[i] >= 0) ? params[i] : fallback;
  }
};

// An escape sequence other than CSI and the strings: ESC, intermediates, a final byte
// (ESC 7, ESC M, ESC ( 0, ESC c, ...).
struct EscSequence {
  static constexpr int kMaxIntermediates = 2;
  std::array<char, kMaxIntermediates> intermediates{};  // the first ones (0x20-0x2f)
  int intermediate_count = 0;                           // how many there were (saturates at 255)
  char final = 0;                                       // 0x30-0x7e
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
  // An escape sequence that is not CSI nor a string. The line model renders nothing for them;
  // the screen passes them to libvterm.
  virtual void OnEscape(const EscSequence& /*esc*/) {}
};

class VtParser final {
 public:
  // `max_sequence_bytes` bounds one incomplete escape sequence (maxReadBytes, 256 KiB default).
  VtParser(VtHandler& handler, size_t max_sequence_bytes);
  void Feed(std::string_view bytes);
  // End of stream: a multibyte character still incomplete becomes one U+FFFD (WHATWG decoding
  // at end of input), never dropped.
  void Finish();

 private:
  enum class State : unsigned char {
    kGround,
    kEscape,              // after ESC
    kEscapeIntermediate,  // ESC 0x20-0x2f ...
    kCsiEntry,            // after ESC [
    kCsiParam,
    kCsiIntermediate,
    kCsiIgnore,     // malformed CSI: swallowed through its final byte
    kOscString,     // after ESC ]
    kIgnoreString,  // DCS, SOS, PM, APC: swallowed through ST
    kStringEscape,  // ESC inside an OSC or ignored string: ST or the start of a new escape
  };

  // Ground: printable runs (zero-copy views into the input), controls, the UTF-8 decoder.
  const unsigned char* FeedGround(const unsigned char* p, const unsigned char* end);
  // One byte of a multibyte character in progress; false when `b` must be processed again.
  bool Utf8Step(unsigned char b);
  void EmitReplacement();
  // One byte of an escape sequence; false when `b` must be processed again (in ground).
  bool SequenceByte(unsigned char b);
  const unsigned char* FeedCsiParams(const unsigned char* p, const unsigned char* end);
  const unsigned char* FeedOsc(const unsigned char* p, const unsigned char* end);
  const unsigned char* FeedIgnoredString(const unsigned char* p, const unsigned char* end);
  void StartSequence(State state);
  void StartCsi();
  void Count(size_t bytes);
  void DispatchCsi();
  void DispatchEscape(unsigned char final);
  void EscapeIntermediate(unsigned char b);
  void CsiIntermediate(unsigned char b);
  void Reset();

  VtHandler& handler_;
  size_t max_sequence_bytes_;
  State state_ = State::kGround;
  State string_state_ = State::kGround;  // which string kStringEscape interrupted
  // UTF-8 decoder (WHATWG): bytes of the character in progress and the allowed next range.
  std::array<char, 4> utf8_bytes_{};
  unsigned char utf8_len_ = 0;
  unsigned char utf8_need_ = 0;
  unsigned char utf8_lower_ = 0x80;
  unsigned char utf8_upper_ = 0xbf;
  // The sequence in progress.
  size_t sequence_bytes_ = 0;  // bytes since its ESC
  bool overflow_ = false;      // longer than max_sequence_bytes_: discarded through its end
  CsiSequence csi_;
  EscSequence esc_;
  int csi_index_ = -1;  // parameter being read; -1 before any; kMaxParams once past the last kept
  std::string osc_;
};

}  // namespace ptybox::backend
