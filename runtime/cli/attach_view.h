// What `ptybox attach` draws in a person's terminal, decided without any I/O. The session's
// output is never copied to the person's terminal: it feeds a screen model of the session's
// own size (backend/terminal/screen.h, the daemon's hardened libvterm path), and the view draws
// that model's text, row by row, with only its own cursor moves and erases. So nothing a
// session prints (a title, a clipboard write, a query that makes the terminal answer) reaches
// the person's terminal as a control.
//
// Size: the session keeps its own size (the agent's screen is what the agent sees; a watcher
// never resizes it). The session's rows x columns are drawn at the top left of the person's
// terminal (letterboxed: what lies beyond is blank); the last row is a status line. A terminal
// smaller than the session shows its top-left part and the status line says so.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "backend/terminal/screen.h"
#include "runtime/params.h"

namespace ptybox::runtime {

// The detach key: Ctrl-] (0x1d), as telnet's escape character.
inline constexpr char kDetachKey = '\x1d';
inline constexpr std::string_view kDetachKeyName = "Ctrl-]";

// Where the detach key is in `keys` (a read from the person's terminal); nullopt when absent.
[[nodiscard]] std::optional<size_t> FindDetachKey(std::string_view keys);
// A row of the screen model as bytes safe to write to a terminal: every C0 or C1 control and
// DEL becomes '?' (the model holds none; this is the wall, not the model).
[[nodiscard]] std::string TerminalSafe(std::string_view text);

class AttachView final {
 public:
  // The screen as terminal_watch returned it (lines, cursor, cols, rows).
  explicit AttachView(const Json& watch);

  // Output of the session (decoded terminal_watch_output data).
  void Feed(std::string_view bytes) { screen_.Feed(bytes); }
  // The person's terminal size changed (or is first known): the next Draw repaints everything.
  void SetTerminalSize(int rows, int columns);
  // The status line's text (name, size, what keys do, a notice).
  void SetStatus(std::string status);
  // Bytes that bring the person's terminal up to date with the model: the rows that changed
  // since the last Draw (all after SetTerminalSize), the status line, the cursor.
  [[nodiscard]] std::string Draw();

  [[nodiscard]] int session_rows() const { return screen_.rows(); }
  [[nodiscard]] int session_columns() const { return screen_.columns(); }
  // Does the person's terminal show all of the session (and the status line)?
  [[nodiscard]] bool fits() const;

 private:
  backend::Screen screen_;
  int term_rows_ = 24;
  int term_columns_ = 80;
  bool repaint_ = true;
  std::vector<std::optional<std::string>> drawn_;  // per shown row, what is on the terminal
  std::string status_;
  std::optional<std::string> drawn_status_;
};

}  // namespace ptybox::runtime
