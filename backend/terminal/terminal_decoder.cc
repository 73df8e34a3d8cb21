// Wiring of the decoder layers: raw bytes go to the parser (whose events reach the line model,
// then the observer) and, through a backlog, to the libvterm screen (which runs the same parser
// on them); committed lines go to the scrollback, then to the line listener.
#include "backend/terminal/terminal_decoder.h"

#include <optional>

namespace ptybox::backend {

void TerminalDecoder::Fanout::OnPrint(std::string_view utf8) {
  if (!alternate_) line_model_.OnPrint(utf8);
  if (observer_ != nullptr) observer_->OnPrint(utf8);
}

void TerminalDecoder::Fanout::OnControl(char c) {
  if (!alternate_) line_model_.OnControl(c);
  if (observer_ != nullptr) observer_->OnControl(c);
}

namespace {

// Sequences the screen must see at once: switches to or from the alternate screen, and
// questions the terminal answers (DSR cursor position / status, device attributes).
bool NeedsScreenNow(const CsiSequence& csi) {
  if (csi.private_marker == '?' && (csi.final == 'h' || csi.final == 'l')) {
    for (int i = 0; i < csi.param_count; ++i) {
      int mode = csi.params[static_cast<size_t>(i)];
      if (mode == 47 || mode == 1047 || mode == 1049) return true;
    }
    return false;
  }
  if (csi.final == 'n' && csi.intermediate == 0) return true;  // DSR
  if (csi.final == 'c' && csi.intermediate == 0) return true;  // DA, secondary DA
  return false;
}

// A switch to (true) or from (false) the alternate screen, or nullopt.
std::optional<bool> AlternateSwitch(const CsiSequence& csi) {
  if (csi.private_marker != '?' || csi.intermediate != 0) return std::nullopt;
  if (csi.final != 'h' && csi.final != 'l') return std::nullopt;
  for (int i = 0; i < csi.param_count; ++i) {
    int mode = csi.params[static_cast<size_t>(i)];
    if (mode == 47 || mode == 1047 || mode == 1049) return csi.final == 'h';
  }
  return std::nullopt;
}

// Sequences that place output on rows other than the cursor's line, which the line path
// cannot follow (TerminalDecoder::addressing_events).
bool AddressesCursor(const CsiSequence& csi) {
  if (csi.intermediate != 0) return false;
  if (csi.private_marker == '?') return csi.final == 'J';  // DECSED
  if (csi.private_marker != 0) return false;
  switch (csi.final) {
    case 'A':  // CUU
    case 'B':  // CUD
    case 'E':  // CNL
    case 'F':  // CPL
    case 'H':  // CUP
    case 'f':  // HVP
    case 'd':  // VPA
    case 'e':  // VPR
    case 'J':  // ED
    case 'r':  // DECSTBM
    case 'L':  // IL
    case 'M':  // DL
    case 'S':  // SU
    case 'T':  // SD
      return true;
    default:
      return false;
  }
}

}  // namespace

void TerminalDecoder::Fanout::OnCsi(const CsiSequence& csi) {
  // DECCKM (CSI ? 1 h / l): the encoding of cursor keys a program asked for (terminal_send
  // `keys`). A soft reset (DECSTR, CSI ! p) clears it.
  if (csi.private_marker == '?' && (csi.final == 'h' || csi.final == 'l')) {
    for (int i = 0; i < csi.param_count; ++i) {
      if (csi.params[static_cast<size_t>(i)] == 1) application_cursor_ = csi.final == 'h';
    }
  } else if (csi.final == 'p' && csi.intermediate == '!') {
    application_cursor_ = false;
  }
  if (!alternate_) line_model_.OnCsi(csi);
  if (observer_ != nullptr) observer_->OnCsi(csi);
  if (NeedsScreenNow(csi)) screen_needed_ = true;
  if (const std::optional<bool> to_alternate = AlternateSwitch(csi)) {
    alternate_ = *to_alternate;
  } else if (!alternate_ && AddressesCursor(csi)) {
    ++addressing_events_;
  }
}

void TerminalDecoder::Fanout::OnOsc(std::string_view payload) {
  if (!alternate_) line_model_.OnOsc(payload);
  if (observer_ != nullptr) observer_->OnOsc(payload);
}

TerminalDecoder::TerminalDecoder(Options options)
    : options_(options),
      line_model_(options.columns, options.max_line_bytes),
      scrollback_(options.scrollback_lines, options.scrollback_bytes),
      screen_(std::in_place, options.rows, options.columns, options.max_sequence_bytes),
      fanout_(line_model_),
      parser_(fanout_, options.max_sequence_bytes) {
  line_model_.SetLineSink([this](std::string_view line) {
    scrollback_.Append(line);
    if (listener_) listener_(line);
  });
}

void TerminalDecoder::SetObserver(VtHandler* observer) { fanout_.set_observer(observer); }

void TerminalDecoder::SetLineListener(std::function<void(std::string_view line)> listener) {
  listener_ = std::move(listener);
}

void TerminalDecoder::Feed(std::string_view bytes) {
  parser_.Feed(bytes);
  const bool needed = fanout_.TakeScreenNeeded();
  if (!needed && !screen_->alternate_screen()) {
    screen_backlog_.append(bytes);
    if (screen_backlog_.size() > kMaxScreenBacklog) CutBacklog();
    return;
  }
  // A full-screen program, or a question to answer in stream order: the screen goes along.
  SyncScreen();
  screen_->Feed(bytes);
  // The screen has the last word on which screen is shown (a reset also leaves the alternate
  // screen).
  fanout_.set_alternate(screen_->alternate_screen());
}

void TerminalDecoder::Finish() {
  // The line path only: the screen renders what libvterm made of the same bytes.
  parser_.Finish();
}

void TerminalDecoder::SyncScreen() const {
  if (screen_backlog_.empty()) return;
  std::string backlog;
  backlog.swap(screen_backlog_);
  screen_->Feed(backlog);
}

void TerminalDecoder::CutBacklog() const {
  // Keep the tail from a line start, on a fresh screen of the same size.
  size_t from = screen_backlog_.size() - kScreenTail;
  size_t newline = screen_backlog_.find('\n', from);
  from = newline == std::string::npos ? from : newline + 1;
  const int rows = screen_->rows();
  const int columns = screen_->columns();
  screen_.emplace(rows, columns, options_.max_sequence_bytes);
  screen_backlog_.erase(0, from);
}

const Screen& TerminalDecoder::screen() const {
  SyncScreen();
  return *screen_;
}

void TerminalDecoder::Resize(int rows, int columns) {
  // The same size again changes nothing a program could see (the kernel sends no SIGWINCH
  // either): libvterm would still reallocate and clear both screens (about 8 ms at 500x1000;
  // outside review 9 stalled other owners with pipelined same-size resizes) and reset the
  // scroll region under a full-screen program.
  if (screen_->HasSize(rows, columns)) return;
  line_model_.SetColumns(columns);
  SyncScreen();
  screen_->Resize(rows, columns);
}

}  // namespace ptybox::backend
