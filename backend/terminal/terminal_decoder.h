// The whole pipeline for one session: parser -> line model -> scrollback; libvterm screen.
// Owns every layer; the session feeds it PTY bytes and reads lines, pages and the screen.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "backend/terminal/line_model.h"
#include "backend/terminal/screen.h"
#include "backend/terminal/scrollback.h"
#include "backend/terminal/vt_parser.h"

namespace ptybox::backend {

class TerminalDecoder final {
 public:
  struct Options {
    int rows = 40;
    int columns = 120;
    size_t max_sequence_bytes = 256 * 1024;
    size_t max_line_bytes = 64 * 1024;
    size_t scrollback_lines = 10000;
    size_t scrollback_bytes = 4 * 1024 * 1024;
  };
  explicit TerminalDecoder(Options options);
  TerminalDecoder(const TerminalDecoder&) = delete;
  TerminalDecoder& operator=(const TerminalDecoder&) = delete;

  // An extra handler that sees every parsed event in stream order, after the line model.
  void SetObserver(VtHandler* observer);
  // Called for each committed line after it was appended to the scrollback.
  void SetLineListener(std::function<void(std::string_view line)> listener);
  void Feed(std::string_view bytes);
  // End of stream (the shell exited and its output was drained): flushes an incomplete UTF-8
  // character as U+FFFD.
  void Finish();
  void Resize(int rows, int columns);
  [[nodiscard]] const Scrollback& scrollback() const { return scrollback_; }
  [[nodiscard]] std::string PendingText() const { return line_model_.PendingText(); }
  [[nodiscard]] std::string PendingTextUntrimmed() const {
    return line_model_.PendingTextUntrimmed();
  }
  // The screen, brought up to date with every byte fed so far.
  [[nodiscard]] const Screen& screen() const;
  // Whether a program uses the alternate screen, without bringing the screen up to date
  // (switches always reach the screen at once, so this is never stale).
  [[nodiscard]] bool alternate_screen() const { return screen_->alternate_screen(); }
  std::string TakeReplies() { return screen_->TakeReplies(); }  // from the screen
  // Whether a program asked for application cursor keys (DECCKM), as of every byte fed.
  [[nodiscard]] bool application_cursor() const { return fanout_.application_cursor(); }
  [[nodiscard]] int rows() const { return screen_->rows(); }
  [[nodiscard]] int columns() const { return screen_->columns(); }

  // How many cursor-addressing sequences were decoded on the normal screen so far: CSIs that
  // move the cursor to another row (CUU CUD CNL CPL CUP HVP VPA VPR), erase the display (ED),
  // set a scroll region (DECSTBM), insert, delete or scroll lines (IL DL SU SD). Plain line
  // output (text, CR, LF, in-line edits, colours) never raises it: a send whose output left it
  // unchanged keeps the cheap line path (backend/send_render.h).
  [[nodiscard]] uint64_t addressing_events() const { return fanout_.addressing_events(); }
  // A rendering replaces what the line path made of a send: the lines after `offset` (an
  // earlier scrollback end) are dropped, the rendered lines appended (the line listener does
  // not see them), and the unterminated line replaced.
  void RewindScrollback(uint64_t offset) { scrollback_.Rewind(offset); }
  void AppendScrollback(std::string_view line) { scrollback_.Append(line); }
  void ReplacePending(std::string_view line) { line_model_.ReplacePending(line); }

  // Output on the normal screen waits in a backlog and reaches libvterm (which is ~20 times
  // slower than the line path) only when the screen is looked at, when a program switches to
  // the alternate screen, or when it asks the terminal something (cursor position, device
  // attributes). A backlog past this size is cut to its tail on a fresh screen: a flood of
  // line output leaves its last lines on the screen either way.
  static constexpr size_t kMaxScreenBacklog = 1024 * 1024;
  static constexpr size_t kScreenTail = 64 * 1024;

 private:
  // Hands each event to the line model (a direct call), then to the observer, and notes what
  // needs the screen at once. While the alternate screen is shown, the line model sees
  // nothing: a full-screen program's drawing is not lines (a terminal keeps none of it in its
  // scrollback either), and the line model's pending line is the normal screen's, which comes
  // back when the program leaves.
  class Fanout final : public VtHandler {
   public:
    explicit Fanout(LineModel& line_model) : line_model_(line_model) {}
    void set_observer(VtHandler* observer) { observer_ = observer; }
    void OnPrint(std::string_view utf8) override;
    void OnControl(char c) override;
    void OnCsi(const CsiSequence& csi) override;
    void OnOsc(std::string_view payload) override;
    // True once since the last call when a CSI switched screens or asked for an answer.
    bool TakeScreenNeeded() { return std::exchange(screen_needed_, false); }
    [[nodiscard]] bool application_cursor() const { return application_cursor_; }
    [[nodiscard]] uint64_t addressing_events() const { return addressing_events_; }
    void set_alternate(bool alternate) { alternate_ = alternate; }

   private:
    LineModel& line_model_;
    VtHandler* observer_ = nullptr;
    bool screen_needed_ = false;
    bool application_cursor_ = false;
    uint64_t addressing_events_ = 0;
    bool alternate_ = false;
  };

  void SyncScreen() const;
  void CutBacklog() const;

  Options options_;
  LineModel line_model_;
  Scrollback scrollback_;
  // The screen lags behind the line path by `screen_backlog_` (see kMaxScreenBacklog).
  mutable std::optional<Screen> screen_;
  mutable std::string screen_backlog_;
  Fanout fanout_;
  VtParser parser_;
  std::function<void(std::string_view)> listener_;
};

}  // namespace ptybox::backend
