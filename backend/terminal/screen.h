// The rendered terminal screen of one session (libvterm): what a full-screen program shows,
// whether the alternate screen is active, and the answers a program asked for (cursor
// position reports, device attributes) that the session must write back to the PTY.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "backend/terminal/vt_parser.h"

struct VTerm;
struct VTermScreen;

namespace ptybox::backend {

class Screen final : private VtHandler {
 public:
  static constexpr size_t kDefaultMaxSequenceBytes = 256 * 1024;
  // Sizes are clamped to 1..kMaxRows and kMinColumns..kMaxColumns: libvterm 0.1.4 writes out of
  // bounds when a wide character is printed on a one-column terminal.
  static constexpr int kMaxRows = 500;
  static constexpr int kMinColumns = 2;
  static constexpr int kMaxColumns = 1000;
  // Replies beyond this many unread bytes are dropped (a program flooding DSR requests).
  static constexpr size_t kMaxReplyBytes = 64 * 1024;
  // A CSI parameter above this is passed to libvterm as this.
  static constexpr int kMaxParamValue = 9999;

  // `max_sequence_bytes` bounds one escape sequence, as for the decoder's line path (the
  // TerminalDecoder passes its own so that both make the same of an overlong one).
  Screen(int rows, int columns, size_t max_sequence_bytes = kDefaultMaxSequenceBytes);
  ~Screen();
  Screen(const Screen&) = delete;
  Screen& operator=(const Screen&) = delete;

  void Feed(std::string_view bytes);
  void Resize(int rows, int columns);
  [[nodiscard]] bool alternate_screen() const { return alternate_screen_; }
  // rows lines joined by '\n', trailing blanks trimmed per row.
  [[nodiscard]] std::string Render() const;
  // The cells [first_column, last_column) of one row (clamped to the screen), with or without
  // its trailing blanks.
  [[nodiscard]] std::string RowText(int row, int first_column, int last_column,
                                    bool trim = true) const;
  struct Position {
    int row = 0;
    int column = 0;
  };
  [[nodiscard]] Position Cursor() const;
  // Receives each row that scrolls off the top of the normal screen (rendered, trailing blanks
  // trimmed), in order. Only for scratch screens (a per-send render): it costs a rendering per
  // scrolled row.
  void SetScrolledRowSink(std::function<void(std::string_view row)> sink);
  // Answers owed to the program (DSR CPR, DA), in order; empties the queue.
  std::string TakeReplies();
  // Whether Resize(rows, columns) would leave the size as it is (after its clamping).
  [[nodiscard]] bool HasSize(int rows, int columns) const;
  [[nodiscard]] int rows() const { return rows_; }
  [[nodiscard]] int columns() const { return columns_; }

 private:
  friend struct ScreenCallbacks;  // libvterm's C callbacks (screen.cc)

  // libvterm 0.1.4 crashes on some input, so it never sees the session's bytes: they go through
  // the decoder's one escape-sequence machine (VtParser, its own instance, since the screen
  // lags behind the line path), and libvterm gets the events re-encoded:
  // - text as the parser vouches for it: valid UTF-8 without C1 characters (libvterm gives
  //   U+0080..U+009F a width of -1, and one of them in column 0 followed by an erase writes
  //   through a null pointer). Malformed bytes are U+FFFD; a split character is held back.
  // - CSI rebuilt from its parsed parameters: at most 16 (a 17th writes past libvterm's argument
  //   array: such a CSI is dropped), each at most kMaxParamValue, at most one intermediate
  //   (libvterm acts on no CSI with more). Malformed and overlong ones never become events.
  // - no REP (CSI b): repeating a zero-width character loops forever. Repeat() emulates it.
  // - escapes with at most two intermediates, and none before '[', ']' or 'P' (libvterm would
  //   start a CSI or a string there, which the parser saw as a complete escape).
  // - no strings: OSC, DCS, SOS, PM and APC show nothing, nothing here reads a title, and a
  //   DCS query (DECRQSS) goes unanswered, as the parser discards DCS.
  // Every write to libvterm thus ends between sequences. Resize() works around three more: see
  // screen.cc.
  void OnPrint(std::string_view utf8) override;
  void OnControl(char c) override;
  void OnCsi(const CsiSequence& csi) override;
  void OnOsc(std::string_view /*payload*/) override {}
  void OnEscape(const EscSequence& esc) override;
  void Repeat(int count);

  struct VTermDeleter {
    void operator()(VTerm* vt) const;
  };
  std::unique_ptr<VTerm, VTermDeleter> vt_;
  VTermScreen* screen_ = nullptr;
  int rows_;
  int columns_;
  bool alternate_screen_ = false;
  std::string replies_;
  std::function<void(std::string_view)> scrolled_sink_;
  std::string clean_;           // what the parser's events became, for libvterm; reused
  std::string last_character_;  // the last printed character, for REP
  VtParser parser_;
};

}  // namespace ptybox::backend
