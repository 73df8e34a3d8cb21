// Per-send rendering through a scratch libvterm screen: keeps the send's raw bytes (bounded),
// replays them after the boundary line, and reads the rows back.
#include "backend/send_render.h"

#include <algorithm>
#include <optional>

#include "backend/readiness/prompt_protocol.h"
#include "backend/terminal/screen.h"
#include "backend/terminal/send_capture.h"

namespace ptybox::backend {

SendRender::SendRender(std::string boundary_line, uint64_t addressing_events,
                       uint64_t scrollback_end)
    : boundary_line_(std::move(boundary_line)),
      addressing_events_(addressing_events),
      scrollback_end_(scrollback_end) {}

void SendRender::AddBytes(std::string_view bytes) {
  raw_.append(bytes);
  if (raw_.size() <= kMaxRawBytes) return;
  // Keep the tail from a line start; the rendering then starts there, without the boundary
  // line (it is long gone from the screen anyway).
  size_t from = raw_.size() - kRawTail;
  if (const size_t newline = raw_.find('\n', from); newline != std::string::npos) {
    from = newline + 1;
  }
  dropped_bytes_ += from;
  raw_.erase(0, from);
}

SendRender::Tail SendRender::Render(int rows, int columns, bool at_prompt,
                                    const std::function<void(std::string_view line)>& line) const {
  Screen screen(rows, columns);
  screen.SetScrolledRowSink(line);
  if (dropped_bytes_ == 0) screen.Feed(boundary_line_);
  screen.Feed(raw_);
  screen.SetScrolledRowSink(nullptr);

  const Screen::Position cursor = screen.Cursor();
  int last = cursor.row;
  for (int row = screen.rows() - 1; row > cursor.row; --row) {
    if (!screen.RowText(row, 0, screen.columns()).empty()) {
      last = row;
      break;
    }
  }
  // Where the prompt starts on the cursor's row, when it stands just before the cursor.
  std::optional<int> prompt_column;
  const int prompt_width = static_cast<int>(kPromptPs1.size());
  if (at_prompt && cursor.column >= prompt_width &&
      screen.RowText(cursor.row, cursor.column - prompt_width, cursor.column, false) ==
          kPromptPs1) {
    prompt_column = cursor.column - prompt_width;
  }
  const int columns_now = screen.columns();
  auto cursor_row_output = [&] {
    return screen.RowText(cursor.row, 0, prompt_column.value_or(columns_now));
  };

  // Blank rows are held back until text follows them: those just above an empty last row (a
  // program that moved the cursor to the bottom before it exited) are not lines.
  Tail tail;
  int blank_rows = 0;
  auto emit = [&](const std::string& text) {
    if (text.empty()) {
      ++blank_rows;
      return;
    }
    for (; blank_rows > 0; --blank_rows) line(std::string_view());
    line(text);
  };
  for (int row = 0; row <= last; ++row) {
    if (row == cursor.row) {
      if (row == last) break;
      emit(cursor_row_output());
      continue;
    }
    emit(screen.RowText(row, 0, columns_now));
  }
  if (cursor.row == last) {
    tail.pending = screen.RowText(cursor.row, 0, cursor.column, false);
    tail.pending_output = cursor_row_output();
    if (!tail.pending_output.empty()) {
      for (; blank_rows > 0; --blank_rows) line(std::string_view());
    }
  }
  return tail;
}

RenderedViewport ApplyRender(TerminalDecoder& decoder, const SendRender& render,
                             size_t max_result_bytes, bool at_prompt) {
  // The viewport applies the first-line rule to the rendered rows as to committed lines.
  SendCapture view(max_result_bytes, 1,
                   render.dropped_bytes() == 0 ? render.boundary_line() : std::string());
  decoder.RewindScrollback(render.scrollback_end());
  const SendRender::Tail tail =
      render.Render(decoder.rows(), decoder.columns(), at_prompt, [&](std::string_view line) {
        decoder.AppendScrollback(line);
        view.AddLine(line);
      });
  decoder.ReplacePending(tail.pending);
  RenderedViewport rendered;
  rendered.text = view.Viewport(tail.pending_output, &rendered.truncated);
  while (!rendered.text.empty() && rendered.text.back() == '\n') rendered.text.pop_back();
  if (render.dropped_bytes() > 0) {
    rendered.text = "[... " + std::to_string(render.dropped_bytes()) +
                    " bytes dropped before the rendered output ...]\n" + rendered.text;
    rendered.truncated = true;
  }
  return rendered;
}

}  // namespace ptybox::backend
