// Layer 1 of the terminal decoder: a DEC/ECMA-48 escape-sequence state machine (the shape of
// the VT500 parser that libvterm's parser.c and tmux's input.c follow) with a WHATWG UTF-8
// decoder in the ground state. Owns only the sequence and the character in progress.
#include "backend/terminal/vt_parser.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <optional>

#include "backend/terminal/utf8.h"

namespace ptybox::backend {
namespace {

constexpr unsigned char kBel = 0x07;
constexpr unsigned char kCan = 0x18;
constexpr unsigned char kSub = 0x1a;
constexpr unsigned char kEsc = 0x1b;
constexpr unsigned char kDel = 0x7f;
constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD
constexpr int kMaxParamValue = 65535;

// U+0080..U+009F (C2 80..C2 9F): C1 controls as characters. They render nothing and are not
// interpreted (a raw 0x9b is not CSI; it is malformed UTF-8).
inline bool IsC1Character(unsigned char lead, unsigned char second) {
  return lead == 0xc2 && second < 0xa0;
}

// Length of the valid, complete UTF-8 character at `p` (whose lead byte is >= 0x80), or 0 when
// it is malformed or cut off by `end`; the byte-wise decoder (Utf8Step) then handles it. Both
// follow the lead-byte table of utf8.h: no overlongs, no surrogates, nothing above U+10FFFF.
inline size_t ValidCharLength(const unsigned char* p, const unsigned char* end) {
  const std::optional<Utf8Lead> lead = ClassifyUtf8Lead(p[0]);
  if (!lead) return 0;
  const size_t length = size_t{lead->need} + 1;
  if (static_cast<size_t>(end - p) < length) return 0;
  if (p[1] < lead->lower || p[1] > lead->upper) return 0;
  for (size_t i = 2; i < length; ++i) {
    if ((p[i] & 0xc0) != 0x80) return 0;
  }
  return length;
}

}  // namespace

VtParser::VtParser(VtHandler& handler, size_t max_sequence_bytes)
    : handler_(handler), max_sequence_bytes_(std::max<size_t>(max_sequence_bytes, 16)) {}

void VtParser::Feed(std::string_view bytes) {
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  const auto* const end = p + bytes.size();
  while (p < end) {
    switch (state_) {
      case State::kGround: {
        if (utf8_need_ != 0) {
          if (Utf8Step(*p)) ++p;
          break;
        }
        p = FeedGround(p, end);
        if (p == end) return;
        const unsigned char b = *p;
        if (b >= 0x80) {  // malformed, cut off by the end of this Feed, or a C1 character
          if (Utf8Step(b)) ++p;
        } else if (b == kEsc) {
          StartSequence(State::kEscape);
          ++p;
          if (p < end && *p == '[') {  // the common case, without the general dispatch
            Count(1);
            StartCsi();
            ++p;
          }
        } else {
          handler_.OnControl(static_cast<char>(b));
          ++p;
        }
        break;
      }
      case State::kCsiEntry:
      case State::kCsiParam:
        p = FeedCsiParams(p, end);
        break;
      case State::kOscString:
        p = FeedOsc(p, end);
        break;
      case State::kIgnoreString:
        p = FeedIgnoredString(p, end);
        break;
      default:
        if (SequenceByte(*p)) ++p;
        break;
    }
  }
}

const unsigned char* VtParser::FeedGround(const unsigned char* p, const unsigned char* end) {
  const unsigned char* run = p;
  while (p < end) {
    // Eight printable ASCII bytes at a time: no byte below 0x20, none at 0x7f or above.
    constexpr uint64_t kOnes = 0x0101010101010101;
    constexpr uint64_t kHigh = 0x8080808080808080;
    while (end - p >= 8) {
      uint64_t word;
      std::memcpy(&word, p, sizeof word);
      if (((word - 0x20 * kOnes) | word | (word + kOnes)) & kHigh) break;
      p += 8;
    }
    if (p == end) break;
    const unsigned char b = *p;
    if (b >= 0x20 && b < 0x7f) {
      ++p;
      continue;
    }
    if (b >= 0x80) {
      const size_t n = ValidCharLength(p, end);
      if (n != 0 && !IsC1Character(b, p[1])) {
        p += n;
        continue;
      }
    }
    break;
  }
  if (p != run) {
    handler_.OnPrint(
        std::string_view(reinterpret_cast<const char*>(run), static_cast<size_t>(p - run)));
  }
  return p;
}

bool VtParser::Utf8Step(unsigned char b) {
  if (utf8_need_ == 0) {
    const std::optional<Utf8Lead> lead = ClassifyUtf8Lead(b);
    if (!lead) {  // a continuation byte without a lead, C0/C1-overlong leads, F5..FF
      EmitReplacement();
      return true;
    }
    utf8_need_ = lead->need;
    utf8_lower_ = lead->lower;
    utf8_upper_ = lead->upper;
    utf8_bytes_[0] = static_cast<char>(b);
    utf8_len_ = 1;
    return true;
  }
  if (b < utf8_lower_ || b > utf8_upper_) {
    // The maximal valid prefix becomes one U+FFFD; `b` starts afresh.
    utf8_need_ = 0;
    utf8_len_ = 0;
    EmitReplacement();
    return false;
  }
  utf8_lower_ = 0x80;
  utf8_upper_ = 0xbf;
  utf8_bytes_[utf8_len_++] = static_cast<char>(b);
  if (utf8_len_ == utf8_need_ + 1) {
    if (!IsC1Character(static_cast<unsigned char>(utf8_bytes_[0]),
                       static_cast<unsigned char>(utf8_bytes_[1]))) {
      handler_.OnPrint(std::string_view(utf8_bytes_.data(), utf8_len_));
    }
    utf8_need_ = 0;
    utf8_len_ = 0;
  }
  return true;
}

void VtParser::EmitReplacement() { handler_.OnPrint(kReplacement); }

void VtParser::Finish() {
  if (state_ != State::kGround || utf8_need_ == 0) return;
  utf8_need_ = 0;
  utf8_len_ = 0;
  utf8_lower_ = 0x80;
  utf8_upper_ = 0xbf;
  EmitReplacement();
}

void VtParser::StartSequence(State state) {
  state_ = state;
  sequence_bytes_ = 1;  // the ESC
  overflow_ = false;
  esc_ = EscSequence{};
}

void VtParser::StartCsi() {
  csi_ = CsiSequence{};
  csi_.params.fill(-1);
  csi_index_ = -1;
  state_ = State::kCsiEntry;
}

void VtParser::Count(size_t bytes) {
  sequence_bytes_ += bytes;
  if (!overflow_ && sequence_bytes_ > max_sequence_bytes_) {
    overflow_ = true;
    std::string().swap(osc_);  // discarded through its terminator: keep nothing meanwhile
  }
}

void VtParser::Reset() {
  state_ = State::kGround;
  osc_.clear();
}

bool VtParser::SequenceByte(unsigned char b) {
  if (state_ == State::kStringEscape) {
    if (b == '\\') {  // ST
      if (string_state_ == State::kOscString && !overflow_) handler_.OnOsc(osc_);
      Reset();
      return true;
    }
    // The string ended without ST: it is abandoned and its ESC starts a new sequence.
    osc_.clear();
    StartSequence(State::kEscape);
    return false;
  }
  if (b == kEsc) {  // from anywhere: abandon the sequence, start another
    StartSequence(State::kEscape);
    return true;
  }
  if (b == kCan || b == kSub) {  // cancel
    Reset();
    return true;
  }
  if (b < 0x20) {  // C0 controls are executed in the middle of a sequence
    handler_.OnControl(static_cast<char>(b));
    return true;
  }
  if (b == kDel) return true;
  if (b >= 0x80) {  // not part of any sequence: abandon it and print the byte as text
    Reset();
    return false;
  }
  Count(1);
  switch (state_) {
    case State::kEscape:
      if (b <= 0x2f) {
        EscapeIntermediate(b);
        state_ = State::kEscapeIntermediate;
        return true;
      }
      switch (b) {
        case '[':
          StartCsi();
          return true;
        case ']':
          osc_.clear();
          state_ = State::kOscString;
          return true;
        case 'P':  // DCS
        case 'X':  // SOS
        case '^':  // PM
        case '_':  // APC
          state_ = State::kIgnoreString;
          return true;
        default:  // a complete two-byte sequence (ESC 7, ESC =, ESC M, ...)
          DispatchEscape(b);
          return true;
      }
    case State::kEscapeIntermediate:
      if (b <= 0x2f) {
        EscapeIntermediate(b);
      } else {
        DispatchEscape(b);  // its final byte (ESC ( 0, ESC # 8, ...)
      }
      return true;
    case State::kCsiEntry:
      if (b >= 0x3c && b <= 0x3f) {
        csi_.private_marker = static_cast<char>(b);
        state_ = State::kCsiParam;
        return true;
      }
      [[fallthrough]];
    case State::kCsiParam:
      // Digits and separators never get here: FeedCsiParams takes them.
      if (b >= 0x3c && b <= 0x3f) {
        state_ = State::kCsiIgnore;
      } else if (b <= 0x2f) {
        CsiIntermediate(b);
        state_ = State::kCsiIntermediate;
      } else {
        csi_.final = static_cast<char>(b);
        DispatchCsi();
      }
      return true;
    case State::kCsiIntermediate:
      if (b <= 0x2f) {
        CsiIntermediate(b);
      } else if (b <= 0x3f) {
        state_ = State::kCsiIgnore;
      } else {
        csi_.final = static_cast<char>(b);
        DispatchCsi();
      }
      return true;
    case State::kCsiIgnore:
      if (b > 0x3f) state_ = State::kGround;
      return true;
    default:
      Reset();
      return true;
  }
}

const unsigned char* VtParser::FeedCsiParams(const unsigned char* p, const unsigned char* end) {
  // The parameters of a CSI (digits, separators) and its final byte, without the general byte
  // dispatch, which takes everything else.
  const unsigned char* start = p;
  int index = csi_index_;
  while (p < end) {
    const unsigned char b = *p;
    const unsigned digit = b - static_cast<unsigned>('0');
    if (digit < 10) {
      if (index < 0) index = 0;
      if (index < CsiSequence::kMaxParams) {
        int& value = csi_.params[static_cast<size_t>(index)];
        value = value < 0 ? static_cast<int>(digit)
                          : std::min(value * 10 + static_cast<int>(digit), kMaxParamValue);
      }
      state_ = State::kCsiParam;
      ++p;
      continue;
    }
    if (b == ';' || b == ':') {
      if (index < 0) index = 0;
      if (index < CsiSequence::kMaxParams) ++index;
      state_ = State::kCsiParam;
      ++p;
      continue;
    }
    csi_index_ = index;
    if (b >= 0x40 && b <= 0x7e) {
      Count(static_cast<size_t>(p - start) + 1);
      csi_.final = static_cast<char>(b);
      DispatchCsi();
      return p + 1;
    }
    Count(static_cast<size_t>(p - start));
    if (SequenceByte(b)) ++p;  // anything else takes the general path
    return p;
  }
  csi_index_ = index;
  Count(static_cast<size_t>(p - start));
  return p;
}

void VtParser::CsiIntermediate(unsigned char b) {
  csi_.intermediate = static_cast<char>(b);
  csi_.intermediate_count = std::min(csi_.intermediate_count + 1, 255);
}

void VtParser::DispatchCsi() {
  state_ = State::kGround;
  if (overflow_) return;
  csi_.param_count = csi_index_ < 0 ? 0 : std::min(csi_index_ + 1, CsiSequence::kMaxParams);
  csi_.too_many_params = csi_index_ >= CsiSequence::kMaxParams;
  handler_.OnCsi(csi_);
}

void VtParser::EscapeIntermediate(unsigned char b) {
  if (esc_.intermediate_count < EscSequence::kMaxIntermediates) {
    esc_.intermediates[static_cast<size_t>(esc_.intermediate_count)] = static_cast<char>(b);
  }
  esc_.intermediate_count = std::min(esc_.intermediate_count + 1, 255);
}

void VtParser::DispatchEscape(unsigned char final) {
  state_ = State::kGround;
  if (overflow_) return;
  esc_.final = static_cast<char>(final);
  handler_.OnEscape(esc_);
}

const unsigned char* VtParser::FeedOsc(const unsigned char* p, const unsigned char* end) {
  while (p < end) {
    if (*p >= 0x20) {
      const unsigned char* q = p;
      while (q < end && *q >= 0x20) ++q;
      const auto n = static_cast<size_t>(q - p);
      Count(n);
      if (!overflow_) osc_.append(reinterpret_cast<const char*>(p), n);
      p = q;
      continue;
    }
    const unsigned char b = *p++;
    if (b == kBel) {
      if (!overflow_) handler_.OnOsc(osc_);
      Reset();
      return p;
    }
    if (b == kEsc) {
      Count(1);
      string_state_ = State::kOscString;
      state_ = State::kStringEscape;
      return p;
    }
    if (b == kCan || b == kSub) {
      Reset();
      return p;
    }
    Count(1);  // other C0 controls inside a string are ignored
  }
  return p;
}

const unsigned char* VtParser::FeedIgnoredString(const unsigned char* p, const unsigned char* end) {
  // Nothing of the string is kept, so its length costs nothing: only its end matters.
  while (p < end) {
    const unsigned char b = *p++;
    if (b == kEsc) {
      string_state_ = State::kIgnoreString;
      state_ = State::kStringEscape;
      return p;
    }
    if (b == kCan || b == kSub) {
      Reset();
      return p;
    }
  }
  return p;
}

}  // namespace ptybox::backend
