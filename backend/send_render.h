// One send's output as the terminal showed it, for output that addresses the cursor across
// rows on the normal screen (a TUI without the alternate screen, a multi-line progress display,
// `top`, prompt_toolkit REPLs): the line path would concatenate its fragments, so the send's
// raw bytes are replayed on a scratch screen of the session's size, seeded with the line that
// stood at the write boundary, and read back row by row. Plain output never pays for it: its
// bytes are only kept, and rendered only when the decoder counted an addressing sequence during
// the send (TerminalDecoder::addressing_events).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "backend/terminal/terminal_decoder.h"

namespace ptybox::backend {

struct RenderedViewport {
  std::string text;
  bool truncated = false;
};

class SendRender final {
 public:
  // The raw bytes kept per send: past kMaxRawBytes, only the last kRawTail (from a line start)
  // stay, and the rendering starts there. libvterm renders a few hundred KB/s to a few MB/s
  // depending on load (a 700 KB flood took 4 s on a loaded 2-core machine): the bound keeps a
  // rendering well under a second.
  static constexpr size_t kMaxRawBytes = 256 * 1024;
  static constexpr size_t kRawTail = 64 * 1024;

  // `boundary_line`: the unterminated line at the write boundary with its trailing blanks (the
  // prompt "$ "); `addressing_events` and `scrollback_end`: the decoder's at the boundary.
  SendRender(std::string boundary_line, uint64_t addressing_events, uint64_t scrollback_end);

  void AddBytes(std::string_view bytes);  // output after the boundary, in order
  // Whether the output since the boundary addressed the cursor: only then is it rendered.
  [[nodiscard]] bool Needed(uint64_t addressing_events_now) const {
    return addressing_events_now != addressing_events_;
  }
  [[nodiscard]] const std::string& boundary_line() const { return boundary_line_; }
  [[nodiscard]] uint64_t scrollback_end() const { return scrollback_end_; }
  [[nodiscard]] uint64_t dropped_bytes() const { return dropped_bytes_; }
  [[nodiscard]] size_t raw_bytes() const { return raw_.size(); }

  struct Tail {
    // The cursor's row up to the cursor, with its blanks: the unterminated line from now on.
    std::string pending;
    // The same row as output: without the prompt when the send settled at it, trailing blanks
    // trimmed.
    std::string pending_output;
  };
  // Replays the bytes on a rows x columns screen and hands `line` each finished row in order:
  // the rows that scrolled off the top, then the screen's rows down to the cursor's row (or to
  // the last row holding text, when that is lower; trailing blank rows are never lines). The
  // cursor's row is the Tail when it is the last; otherwise it is a line too (without the
  // prompt). Blank rows right above an empty last row are dropped. `at_prompt`: the send settled at
  // the shell's prompt ("$ " just before the cursor), which is not output.
  Tail Render(int rows, int columns, bool at_prompt,
              const std::function<void(std::string_view line)>& line) const;

 private:
  std::string boundary_line_;
  uint64_t addressing_events_;
  uint64_t scrollback_end_;
  std::string raw_;
  uint64_t dropped_bytes_ = 0;
};

// What the session does at settlement when render.Needed(): the lines the line path committed
// since the boundary are replaced in the decoder's scrollback by the rendered rows, its
// unterminated line by the rendered cursor row; returns the send's viewport (the first-line
// rule applied, bounded by max_result_bytes, trailing blank lines trimmed).
RenderedViewport ApplyRender(TerminalDecoder& decoder, const SendRender& render,
                             size_t max_result_bytes, bool at_prompt);

}  // namespace ptybox::backend
