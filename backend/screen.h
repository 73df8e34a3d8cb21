// The rendered terminal screen of one session (libvterm): what a full-screen program shows,
// whether the alternate screen is active, and the answers a program asked for (cursor
// position reports, device attributes) that the session must write back to the PTY.
#pragma once

#include <array>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

struct VTerm;
struct VTermScreen;

namespace ptybox::backend {

class Screen final {
 public:
  // Sizes are clamped to 1..kMaxRows and kMinColumns..kMaxColumns: libvterm 0.1.4 writes out of
  // bounds when a wide character is printed on a one-column terminal.
  static constexpr int kMaxRows = 500;
  static constexpr int kMinColumns = 2;
  static constexpr int kMaxColumns = 1000;
  // Replies beyond this many unread bytes are dropped (a program flooding DSR requests).
  static constexpr size_t kMaxReplyBytes = 64 * 1024;
  // A longer CSI sequence is not passed to libvterm.
  static constexpr size_t kMaxCsiBytes = 256;
  // An escape sequence with more intermediate bytes is not passed to libvterm.
  static constexpr size_t kMaxEscapeIntermediates = 2;

  Screen(int rows, int columns);
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
  [[nodiscard]] int rows() const { return rows_; }
  [[nodiscard]] int columns() const { return columns_; }

 private:
  friend struct ScreenCallbacks;  // libvterm's C callbacks (screen.cc)

  // libvterm 0.1.4 crashes on some input, so it only ever sees a cleaned stream:
  // - valid UTF-8 without C1 characters: it gives U+0080..U+009F a width of -1, and one of them
  //   in column 0 followed by an erase writes through a null pointer. Malformed bytes become
  //   U+FFFD; a character split across Feed calls is held back until it is complete.
  // - CSI sequences with at most 16 parameters (a 17th writes past its argument array), each
  //   at most 9999, at most two intermediates, nothing malformed, at most kMaxCsiBytes long.
  // - no intermediates before '[' or a string introducer (ESC & [ still starts a CSI there).
  // - no REP (CSI b): repeating a zero-width character loops forever. Repeat() emulates it.
  // The filter follows escape sequences and strings far enough to know the last character.
  // Resize() works around two more: see screen.cc.
  void Sanitize(std::string_view bytes);
  void FilterAscii(const char* text, size_t size);
  void FilterCharacter(std::string_view utf8);
  void EmitCsi();
  void Repeat(int count);
  void StartEscape();

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
  std::string clean_;  // Sanitize's output, reused
  enum class Filter : unsigned char {
    kGround,
    kEscape,
    kCsi,
    kString,        // OSC, DCS, SOS, PM, APC
    kStringEscape,  // ESC in a string: ST, or the start of another escape
  };
  Filter filter_ = Filter::kGround;
  std::string escape_;  // intermediates of the escape in progress
  bool escape_overflow_ = false;
  std::string csi_;  // the CSI in progress, from its ESC
  bool csi_overflow_ = false;
  std::string last_character_;  // the last printed character, for REP
  std::array<char, 4> utf8_bytes_{};
  unsigned char utf8_len_ = 0;
  unsigned char utf8_need_ = 0;
  unsigned char utf8_lower_ = 0x80;
  unsigned char utf8_upper_ = 0xbf;
};

}  // namespace ptybox::backend
