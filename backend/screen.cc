// libvterm glue: one VTerm with UTF-8 input, its screen layer with the alternate screen
// enabled, the altscreen property tracked through settermprop, and the terminal's output
// (replies to queries) collected for the session.
#include "backend/screen.h"

#include "backend/utf8.h"

#include <vterm.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

#include "backend/line_model.h"

namespace ptybox::backend {

struct ScreenCallbacks {
  static int SetTermProp(VTermProp prop, VTermValue* value, void* user) {
    if (prop == VTERM_PROP_ALTSCREEN)
      static_cast<Screen*>(user)->alternate_screen_ = value->boolean;
    return 1;
  }
  static int PushLine(int cols, const VTermScreenCell* cells, void* user);
  static void Output(const char* bytes, size_t size, void* user) {
    std::string& replies = static_cast<Screen*>(user)->replies_;
    if (replies.size() + size <= Screen::kMaxReplyBytes) replies.append(bytes, size);
  }
};

namespace {

const VTermScreenCallbacks kCallbacks = {
    .damage = nullptr,
    .moverect = nullptr,
    .movecursor = nullptr,
    .settermprop = &ScreenCallbacks::SetTermProp,
    .bell = nullptr,
    .resize = nullptr,
    .sb_pushline = nullptr,
    .sb_popline = nullptr,
};

// A scratch screen's: rows scrolled off the top reach the row sink.
const VTermScreenCallbacks kCollectingCallbacks = {
    .damage = nullptr,
    .moverect = nullptr,
    .movecursor = nullptr,
    .settermprop = &ScreenCallbacks::SetTermProp,
    .bell = nullptr,
    .resize = nullptr,
    .sb_pushline = &ScreenCallbacks::PushLine,
    .sb_popline = nullptr,
};

constexpr uint32_t kWideContinuation = 0xffffffff;  // libvterm's mark on a wide char's 2nd cell

void AppendUtf8(uint32_t cp, std::string& out) {
  if (cp < 0x20 || (cp >= 0x7f && cp < 0xa0) || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) {
    cp = 0xfffd;  // never a control in the rendering
  }
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xc0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xe0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  } else {
    out.push_back(static_cast<char>(0xf0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3f)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  }
}

// Appends one cell's text: nothing for a wide character's second half, a blank for an empty
// cell.
void AppendCell(const VTermScreenCell& cell, std::string& out) {
  if (cell.chars[0] == kWideContinuation) return;
  if (cell.chars[0] == 0) {
    out.push_back(' ');
    return;
  }
  for (int i = 0; i < VTERM_MAX_CHARS_PER_CELL && cell.chars[i] != 0; ++i) {
    AppendUtf8(cell.chars[i], out);
  }
}

void TrimBlanks(std::string& out, size_t from) {
  size_t end = out.size();
  while (end > from && out[end - 1] == ' ') --end;
  out.resize(end);
}

}  // namespace

int ScreenCallbacks::PushLine(int cols, const VTermScreenCell* cells, void* user) {
  auto* screen = static_cast<Screen*>(user);
  if (!screen->scrolled_sink_) return 1;
  std::string row;
  for (int col = 0; col < cols; ++col) AppendCell(cells[col], row);
  TrimBlanks(row, 0);
  screen->scrolled_sink_(row);
  return 1;
}

void Screen::VTermDeleter::operator()(VTerm* vt) const { vterm_free(vt); }

Screen::Screen(int rows, int columns)
    : rows_(std::clamp(rows, 1, kMaxRows)),
      columns_(std::clamp(columns, kMinColumns, kMaxColumns)) {
  vt_.reset(vterm_new(rows_, columns_));
  vterm_set_utf8(vt_.get(), 1);
  vterm_output_set_callback(vt_.get(), &ScreenCallbacks::Output, this);
  screen_ = vterm_obtain_screen(vt_.get());
  vterm_screen_set_callbacks(screen_, &kCallbacks, this);
  vterm_screen_enable_altscreen(screen_, 1);
  vterm_screen_reset(screen_, 1);
}

Screen::~Screen() = default;

void Screen::Feed(std::string_view bytes) {
  Sanitize(bytes);
  if (!clean_.empty()) vterm_input_write(vt_.get(), clean_.data(), clean_.size());
}

void Screen::Sanitize(std::string_view bytes) {
  static constexpr std::string_view kReplacement = "\xEF\xBF\xBD";
  clean_.clear();
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  const auto* const end = p + bytes.size();
  while (p < end) {
    if (utf8_need_ == 0) {
      const unsigned char* run = p;
      while (p < end && *p < 0x80) ++p;
      FilterAscii(reinterpret_cast<const char*>(run), static_cast<size_t>(p - run));
      if (p == end) break;
      const unsigned char b = *p++;
      const std::optional<Utf8Lead> lead = ClassifyUtf8Lead(b);
      if (!lead) {
        FilterCharacter(kReplacement);
        continue;
      }
      utf8_need_ = lead->need;
      utf8_lower_ = lead->lower;
      utf8_upper_ = lead->upper;
      utf8_bytes_[0] = static_cast<char>(b);
      utf8_len_ = 1;
      continue;
    }
    const unsigned char b = *p;
    if (b < utf8_lower_ || b > utf8_upper_) {  // `b` is looked at again as a fresh byte
      utf8_need_ = 0;
      FilterCharacter(kReplacement);
      continue;
    }
    ++p;
    utf8_lower_ = 0x80;
    utf8_upper_ = 0xbf;
    utf8_bytes_[utf8_len_++] = static_cast<char>(b);
    if (utf8_len_ == utf8_need_ + 1) {
      const bool c1 = static_cast<unsigned char>(utf8_bytes_[0]) == 0xc2 &&
                      static_cast<unsigned char>(utf8_bytes_[1]) < 0xa0;
      if (!c1) FilterCharacter(std::string_view(utf8_bytes_.data(), utf8_len_));
      utf8_need_ = 0;
    }
  }
}

void Screen::FilterAscii(const char* text, size_t size) {
  auto printable = [](char c) { return c >= 0x20 && c < 0x7f; };
  size_t i = 0;
  while (i < size) {
    if (filter_ == Filter::kGround) {
      const void* esc = std::memchr(text + i, 0x1b, size - i);
      const size_t stop =
          esc != nullptr ? static_cast<size_t>(static_cast<const char*>(esc) - text) : size;
      for (size_t k = stop; k > i; --k) {
        if (printable(text[k - 1])) {
          last_character_.assign(1, text[k - 1]);
          break;
        }
      }
      clean_.append(text + i, stop - i);
      i = stop;
      if (i < size) {
        StartEscape();
        ++i;
      }
      continue;
    }
    const char c = text[i];
    const auto b = static_cast<unsigned char>(c);
    switch (filter_) {
      case Filter::kEscape:
        // ESC, then intermediates (kept in escape_), then a final byte. libvterm starts a CSI
        // or a string at '[' or ']' even after intermediates, so those drop them.
        ++i;
        if (b >= 0x20 && b <= 0x2f) {
          if (escape_.size() < kMaxEscapeIntermediates) {
            escape_.push_back(c);
          } else {
            escape_overflow_ = true;
          }
          break;
        }
        if (b == '[') {
          filter_ = Filter::kCsi;
          csi_.assign("\x1b[");
          csi_overflow_ = false;
          break;
        }
        if (b == 0x1b) {  // ESC ESC: the first one is dropped
          escape_.clear();
          escape_overflow_ = false;
          break;
        }
        if (b == 0x7f) break;          // DEL: ignored
        if (b == 0x18 || b == 0x1a) {  // CAN, SUB: cancel
          filter_ = Filter::kGround;
          break;
        }
        if (b < 0x20) {  // a C0 control acts in the middle of the escape, which goes on
          clean_.push_back(c);
          break;
        }
        if (b == ']' || b == 'P' || b == 'X' || b == '^' || b == '_') {
          clean_.push_back('\x1b');
          clean_.push_back(c);
          filter_ = Filter::kString;
          break;
        }
        if (!escape_overflow_) {
          clean_.push_back('\x1b');
          clean_.append(escape_);
          clean_.push_back(c);
        }
        filter_ = Filter::kGround;
        break;
      case Filter::kString: {
        // Passed through until BEL, ESC or a cancel; its text is not printed.
        const size_t start = i;
        while (i < size && text[i] != '\x07' && text[i] != '\x1b' && text[i] != '\x18' &&
               text[i] != '\x1a') {
          ++i;
        }
        clean_.append(text + start, i - start);
        if (i == size) break;
        if (text[i] == '\x1b') {
          filter_ = Filter::kStringEscape;
        } else {
          clean_.push_back(text[i]);
          filter_ = Filter::kGround;
        }
        ++i;
        break;
      }
      case Filter::kStringEscape:
        if (b == '\\') {  // ST
          clean_.append("\x1b\\");
          filter_ = Filter::kGround;
          ++i;
        } else {  // the string ended; this ESC starts another escape
          StartEscape();
        }
        break;
      case Filter::kCsi:
        ++i;
        if (b >= 0x20 && b <= 0x3f) {
          if (csi_.size() < kMaxCsiBytes) {
            csi_.push_back(c);
          } else {
            csi_overflow_ = true;
          }
        } else if (b >= 0x40 && b <= 0x7e) {
          csi_.push_back(c);
          filter_ = Filter::kGround;
          if (!csi_overflow_) EmitCsi();
        } else if (b == 0x1b) {  // abandons the CSI, starts another escape
          StartEscape();
        } else if (b == 0x18 || b == 0x1a) {  // CAN, SUB: cancel
          filter_ = Filter::kGround;
        } else if (b != 0x7f) {
          clean_.push_back(c);  // C0 controls act where they appear
        }
        break;
      case Filter::kGround:
        break;
    }
  }
}

void Screen::StartEscape() {
  filter_ = Filter::kEscape;
  escape_.clear();
  escape_overflow_ = false;
}

void Screen::FilterCharacter(std::string_view utf8) {
  if (filter_ == Filter::kString) {  // part of an OSC title or another string
    clean_.append(utf8);
    return;
  }
  // Not part of any escape sequence: an ESC or CSI in progress is dropped, the character kept.
  // libvterm never sees an ESC followed by a non-ASCII byte: after ESC 0xEF it takes a later
  // '[' for the start of a CSI, one the filter did not see.
  filter_ = Filter::kGround;
  clean_.append(utf8);
  last_character_.assign(utf8);
}

void Screen::Repeat(int count) {
  // REP (CSI b) is emulated: libvterm 0.1.4 loops forever repeating a zero-width character.
  // The last printed character is repeated up to the right margin, as REP does.
  if (last_character_.empty()) return;
  const auto* s = reinterpret_cast<const unsigned char*>(last_character_.data());
  char32_t cp = s[0];
  if (last_character_.size() == 2) cp = (s[0] & 0x1f) << 6 | (s[1] & 0x3f);
  if (last_character_.size() == 3) cp = (s[0] & 0x0f) << 12 | (s[1] & 0x3f) << 6 | (s[2] & 0x3f);
  if (last_character_.size() == 4) {
    cp = (s[0] & 0x07) << 18 | (s[1] & 0x3f) << 12 | (s[2] & 0x3f) << 6 | (s[3] & 0x3f);
  }
  const int width = TerminalCharWidth(cp);
  if (width == 0) return;
  vterm_input_write(vt_.get(), clean_.data(), clean_.size());  // to know where the cursor is
  clean_.clear();
  VTermPos cursor;
  vterm_state_get_cursorpos(vterm_obtain_state(vt_.get()), &cursor);
  const int room = std::max(0, (columns_ - cursor.col) / width);
  for (int n = std::min(count, room); n > 0; --n) clean_.append(last_character_);
}

void Screen::EmitCsi() {
  constexpr int kMaxArgs = 16;
  constexpr int kMaxValue = 9999;
  constexpr size_t kMaxIntermediates = 2;
  const std::string_view body = std::string_view(csi_).substr(2, csi_.size() - 3);
  std::string out = "\x1b[";
  size_t i = 0;
  if (i < body.size() && body[i] >= 0x3c && body[i] <= 0x3f) out.push_back(body[i++]);
  int args = 1;
  int value = -1;  // the parameter being read; -1 while it has no digits
  auto flush = [&] {
    if (value >= 0) out += std::to_string(std::min(value, kMaxValue));
    value = -1;
  };
  for (; i < body.size(); ++i) {
    const char c = body[i];
    if (c >= '0' && c <= '9') {
      value = std::min((value < 0 ? 0 : value) * 10 + (c - '0'), kMaxValue + 1);
    } else if (c == ';' || c == ':') {
      flush();
      if (++args > kMaxArgs) return;  // libvterm would write past its argument array
      out.push_back(c);
    } else {
      break;
    }
  }
  flush();
  const size_t intermediates = i;
  while (i < body.size() && body[i] >= 0x20 && body[i] <= 0x2f) out.push_back(body[i++]);
  if (i != body.size() || i - intermediates > kMaxIntermediates) return;  // malformed: dropped
  if (csi_.back() == 'b') {  // REP never reaches libvterm; only plain "CSI Pn b" repeats
    const std::string_view params = std::string_view(out).substr(2);
    if (params.find_first_not_of("0123456789;:") == std::string_view::npos) {
      Repeat(std::max(1, std::atoi(out.c_str() + 2)));
    }
    return;
  }
  out.push_back(csi_.back());
  clean_.append(out);
}

void Screen::Resize(int rows, int columns) {
  rows_ = std::clamp(rows, 1, kMaxRows);
  columns_ = std::clamp(columns, kMinColumns, kMaxColumns);
  vterm_set_size(vt_.get(), rows_, columns_);
  // libvterm 0.1.4 keeps the scroll region across a resize, and a region below the new last
  // row makes the next scroll memmove a negative size: reset it (DECSTBM without parameters)
  // between a cursor save and restore (DECSC, DECRC), which a full-screen program redraws
  // after SIGWINCH anyway. Shrinking can also leave the cursor above the first row (row -1),
  // where the next erase writes through a null pointer: put it back on the screen (CUP).
  std::string fix =
      "\x1b"
      "7\x1b[r\x1b"
      "8";
  VTermPos cursor;
  vterm_state_get_cursorpos(vterm_obtain_state(vt_.get()), &cursor);
  fix += "\x1b[" + std::to_string(std::clamp(cursor.row, 0, rows_ - 1) + 1) + ";" +
         std::to_string(std::clamp(cursor.col, 0, columns_ - 1) + 1) + "H";
  vterm_input_write(vt_.get(), fix.data(), fix.size());
}

std::string Screen::Render() const {
  std::string out;
  out.reserve(static_cast<size_t>(rows_) * static_cast<size_t>(columns_ + 1));
  for (int row = 0; row < rows_; ++row) {
    if (row > 0) out.push_back('\n');
    out.append(RowText(row, 0, columns_));
  }
  return out;
}

std::string Screen::RowText(int row, int first_column, int last_column, bool trim) const {
  std::string out;
  if (row < 0 || row >= rows_) return out;
  first_column = std::clamp(first_column, 0, columns_);
  last_column = std::clamp(last_column, first_column, columns_);
  VTermScreenCell cell;
  for (int col = first_column; col < last_column; ++col) {
    if (vterm_screen_get_cell(screen_, VTermPos{row, col}, &cell) == 0) continue;
    AppendCell(cell, out);
  }
  if (trim) TrimBlanks(out, 0);
  return out;
}

Screen::Position Screen::Cursor() const {
  VTermPos cursor;
  vterm_state_get_cursorpos(vterm_obtain_state(vt_.get()), &cursor);
  return Position{std::clamp(cursor.row, 0, rows_ - 1), std::clamp(cursor.col, 0, columns_ - 1)};
}

void Screen::SetScrolledRowSink(std::function<void(std::string_view row)> sink) {
  scrolled_sink_ = std::move(sink);
  vterm_screen_set_callbacks(screen_, scrolled_sink_ ? &kCollectingCallbacks : &kCallbacks, this);
}

std::string Screen::TakeReplies() {
  std::string replies;
  replies.swap(replies_);
  return replies;
}

}  // namespace ptybox::backend
