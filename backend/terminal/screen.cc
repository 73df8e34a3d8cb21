// libvterm glue: one VTerm with UTF-8 input, its screen layer with the alternate screen
// enabled, the altscreen property tracked through settermprop, and the terminal's output
// (replies to queries) collected for the session.
#include "backend/terminal/screen.h"

#include <vterm.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "backend/terminal/line_model.h"
#include "backend/terminal/reply_filter.h"

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

// The normal callbacks, or a scratch screen's, whose rows scrolled off the top reach the row
// sink.
constexpr VTermScreenCallbacks MakeCallbacks(bool collect_scrolled_rows) {
  VTermScreenCallbacks callbacks{};
  callbacks.settermprop = &ScreenCallbacks::SetTermProp;
  if (collect_scrolled_rows) callbacks.sb_pushline = &ScreenCallbacks::PushLine;
  return callbacks;
}

const VTermScreenCallbacks kCallbacks = MakeCallbacks(false);
const VTermScreenCallbacks kCollectingCallbacks = MakeCallbacks(true);

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

Screen::Screen(int rows, int columns, size_t max_sequence_bytes)
    : rows_(std::clamp(rows, 1, kMaxRows)),
      columns_(std::clamp(columns, kMinColumns, kMaxColumns)),
      parser_(*this, max_sequence_bytes) {
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
  clean_.clear();
  parser_.Feed(bytes);
  if (!clean_.empty()) vterm_input_write(vt_.get(), clean_.data(), clean_.size());
}

void Screen::OnPrint(std::string_view utf8) {
  clean_.append(utf8);
  size_t last = utf8.size() - 1;  // the parser never hands out an empty run
  while (last > 0 && (static_cast<unsigned char>(utf8[last]) & 0xc0) == 0x80) --last;
  last_character_.assign(utf8.substr(last));
}

void Screen::OnControl(char c) { clean_.push_back(c); }

void Screen::OnEscape(const EscSequence& esc) {
  if (esc.intermediate_count > EscSequence::kMaxIntermediates) return;
  if (esc.intermediate_count > 0 && (esc.final == '[' || esc.final == ']' || esc.final == 'P')) {
    return;
  }
  clean_.push_back('\x1b');
  clean_.append(esc.intermediates.data(), static_cast<size_t>(esc.intermediate_count));
  clean_.push_back(esc.final);
}

void Screen::OnCsi(const CsiSequence& csi) {
  if (csi.too_many_params || csi.intermediate_count > 1) return;
  if (csi.final == 'b') {  // REP never reaches libvterm; only plain "CSI Pn b" repeats
    if (csi.private_marker == 0 && csi.intermediate_count == 0) {
      Repeat(std::clamp(csi.Param(0, 1), 1, kMaxParamValue));
    }
    return;
  }
  clean_.append("\x1b[");
  if (csi.private_marker != 0) clean_.push_back(csi.private_marker);
  for (int i = 0; i < csi.param_count; ++i) {
    if (i > 0) clean_.push_back(';');
    const int value = csi.params[static_cast<size_t>(i)];
    if (value >= 0) clean_.append(std::to_string(std::min(value, kMaxParamValue)));
  }
  if (csi.intermediate_count != 0) clean_.push_back(csi.intermediate);
  clean_.push_back(csi.final);
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

bool Screen::HasSize(int rows, int columns) const {
  return rows_ == std::clamp(rows, 1, kMaxRows) &&
         columns_ == std::clamp(columns, kMinColumns, kMaxColumns);
}

void Screen::Resize(int rows, int columns) {
  if (HasSize(rows, columns)) return;
  rows_ = std::clamp(rows, 1, kMaxRows);
  columns_ = std::clamp(columns, kMinColumns, kMaxColumns);
  vterm_set_size(vt_.get(), rows_, columns_);
  // libvterm 0.1.4 keeps the scroll region across a resize, and a region below the new last
  // row makes the next scroll memmove a negative size: reset it (DECSTBM without parameters).
  // Shrinking can also leave the cursor off the screen (row -1 when rows went to the
  // scrollback), and a cursor saved earlier (DECSC, CSI s, the alternate screen's 1049) stays
  // where it was: the next erase there writes through a null pointer. So both are put back on
  // the screen: the saved one is restored (DECRC), moved (CUP) and saved again (DECSC), then the
  // current one is moved back where it was, clamped. A full-screen program redraws after
  // SIGWINCH anyway; the pen the saved cursor carried becomes the current one, which no
  // rendering here shows.
  VTermState* state = vterm_obtain_state(vt_.get());
  VTermPos cursor;
  vterm_state_get_cursorpos(state, &cursor);
  const auto move_to = [this](const VTermPos& pos) {
    return "\x1b[" + std::to_string(std::clamp(pos.row, 0, rows_ - 1) + 1) + ";" +
           std::to_string(std::clamp(pos.col, 0, columns_ - 1) + 1) + "H";
  };
  const std::string restore =
      "\x1b"
      "8";
  vterm_input_write(vt_.get(), restore.data(), restore.size());
  VTermPos saved;
  vterm_state_get_cursorpos(state, &saved);
  const std::string fix = move_to(saved) +
                          "\x1b"
                          "7\x1b[r" +
                          move_to(cursor);
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
  // Only the report shapes, whatever libvterm wrote: no answer carries a program's text.
  return KeepKnownReplies(replies);
}

}  // namespace ptybox::backend
