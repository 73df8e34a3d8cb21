// libFuzzer target for the terminal decoder (tmux fuzz/input-fuzzer.c style): the input is fed
// through the whole pipeline in two parts, split at a byte chosen from the data, and every
// invariant of the decoder's output is checked; a violation traps. Built by scripts/fuzz.sh.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "backend/terminal/line_model.h"
#include "backend/terminal/send_capture.h"
#include "backend/terminal/terminal_decoder.h"
#include "backend/terminal/vt_parser.h"
#include "tests/backend/terminal/decoder_invariants.h"

namespace {

using ptybox::backend::CsiSequence;
using ptybox::backend::LineModel;
using ptybox::backend::ReadResult;
using ptybox::backend::SendCapture;
using ptybox::backend::TerminalDecoder;
using ptybox::backend::VtHandler;
using ptybox::backend::VtParser;
using ptybox::backend::testing::IsCleanText;

void Check(bool ok) {
  if (!ok) __builtin_trap();
}

// Text with its newlines removed must be clean (pages, viewports and screens hold many lines).
bool IsCleanMultiline(std::string_view text) {
  size_t from = 0;
  while (from <= text.size()) {
    size_t nl = text.find('\n', from);
    if (nl == std::string_view::npos) nl = text.size();
    if (!IsCleanText(text.substr(from, nl - from))) return false;
    from = nl + 1;
  }
  return true;
}

// Checks every event the parser hands out.
class CheckingObserver final : public VtHandler {
 public:
  explicit CheckingObserver(size_t max_sequence) : max_sequence_(max_sequence) {}
  void OnPrint(std::string_view utf8) override { Check(!utf8.empty() && IsCleanText(utf8)); }
  void OnControl(char c) override { Check((c >= 0 && c < 0x20 && c != 0x1b) || c == 0x7f); }
  void OnCsi(const CsiSequence& csi) override {
    Check(csi.param_count >= 0 && csi.param_count <= CsiSequence::kMaxParams);
    Check(csi.final >= 0x40 && csi.final <= 0x7e);
  }
  void OnOsc(std::string_view payload) override {
    Check(payload.size() <= max_sequence_);
    Check(payload.find('\x07') == std::string_view::npos);
  }
  void OnEscape(const ptybox::backend::EscSequence& esc) override {
    Check(esc.final >= 0x30 && esc.final <= 0x7e);
    Check(esc.intermediate_count >= 0 && esc.intermediate_count <= 255);
    for (int i = 0; i < std::min(esc.intermediate_count, 2); ++i) {
      Check(esc.intermediates[static_cast<size_t>(i)] >= 0x20 &&
            esc.intermediates[static_cast<size_t>(i)] <= 0x2f);
    }
  }

 private:
  size_t max_sequence_;
};

struct LinePath {
  std::string lines;  // each committed line + "\n"
  std::string pending;
};

LinePath RunLinePath(std::string_view a, std::string_view b, int columns, size_t max_line,
                     size_t max_sequence, bool text_mode, int columns_after_a = 0) {
  LinePath out;
  LineModel model(columns, max_line);
  if (!text_mode) model.DisableTextMode();
  model.SetLineSink([&](std::string_view line) {
    out.lines.append(line);
    out.lines.push_back('\n');
  });
  VtParser parser(model, max_sequence);
  parser.Feed(a);
  if (columns_after_a > 0) model.SetColumns(columns_after_a);
  parser.Feed(b);
  out.pending = model.PendingText();
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 6) return 0;
  TerminalDecoder::Options options;
  options.columns = 1 + data[0] % 100;
  options.rows = 1 + data[1] % 30;
  options.max_line_bytes = 64 + data[2] * 4;
  options.max_sequence_bytes = 16 + data[3] * 2;
  options.scrollback_lines = 1 + data[4] % 64;
  options.scrollback_bytes = 4096;
  const std::string_view input(reinterpret_cast<const char*>(data) + 6, size - 6);
  const size_t cut = (static_cast<size_t>(data[5]) * 257 + data[4]) % (input.size() + 1);
  const std::string_view first = input.substr(0, cut);
  const std::string_view second = input.substr(cut);

  TerminalDecoder decoder(options);
  CheckingObserver observer(options.max_sequence_bytes);
  decoder.SetObserver(&observer);
  SendCapture capture(256 + data[2], 64 + data[3], "$");
  size_t lines = 0;
  decoder.SetLineListener([&](std::string_view line) {
    Check(IsCleanText(line));
    Check(line.size() <= options.max_line_bytes);
    capture.AddLine(line);
    ++lines;
  });

  decoder.Feed(first);
  Check(decoder.PendingText().size() <= options.max_line_bytes);
  if (data[0] & 0x80) decoder.Resize(1 + data[4] % 30, 1 + data[5] % 100);
  decoder.Feed(second);
  const std::string pending = decoder.PendingText();
  Check(IsCleanText(pending));
  Check(pending.size() <= options.max_line_bytes);

  // The split never changes the line path's result, nor does the plain-text fast path (also
  // across a change of width).
  if ((data[0] & 0x80) == 0) {
    const LinePath whole = RunLinePath(input, {}, options.columns, options.max_line_bytes,
                                       options.max_sequence_bytes, false);
    const LinePath split = RunLinePath(first, second, options.columns, options.max_line_bytes,
                                       options.max_sequence_bytes, true);
    Check(whole.lines == split.lines && whole.pending == split.pending);
  } else {
    const int width = 1 + data[5] % 100;
    const LinePath cells = RunLinePath(first, second, options.columns, options.max_line_bytes,
                                       options.max_sequence_bytes, false, width);
    const LinePath text = RunLinePath(first, second, options.columns, options.max_line_bytes,
                                      options.max_sequence_bytes, true, width);
    Check(cells.lines == text.lines && cells.pending == text.pending);
  }

  // Scrollback: bounded, and paging walks it with clean text and increasing cursors.
  const auto& scrollback = decoder.scrollback();
  Check(scrollback.end() - scrollback.begin() <= options.scrollback_bytes);
  Check(scrollback.lines() <= options.scrollback_lines);
  std::optional<uint64_t> cursor;
  for (int page = 0; page < 10000; ++page) {
    const size_t bound = 1 + data[1] % 97;
    const ReadResult r = scrollback.Read(cursor, bound, pending);
    Check(!r.truncated);
    // The unterminated line continues the offsets: a page may stop inside it.
    Check(r.cursor >= scrollback.begin() && r.next_cursor <= scrollback.end() + pending.size());
    // Every page keeps its bound, the unterminated line included (at least one character).
    Check(r.text.size() <= std::max<size_t>(bound, 4));
    Check(IsCleanMultiline(r.text));
    if (r.end) break;
    Check(r.next_cursor > r.cursor);
    cursor = r.next_cursor;
  }
  Check(!scrollback.Read(0, 16, "").truncated || scrollback.begin() > 0);

  // Send capture: bounded viewport and output, clean text.
  bool truncated = false;
  const std::string viewport = capture.Viewport(pending, &truncated);
  Check(viewport.size() <= 256u + data[2]);
  Check(IsCleanMultiline(viewport));
  bool dropped = false;
  const std::string output = capture.TakeOutput(1 + data[3], &dropped);
  Check(IsCleanMultiline(output));

  // Screen: clean rows, right count.
  const std::string screen = decoder.screen().Render();
  Check(IsCleanMultiline(screen));
  Check(static_cast<int>(std::count(screen.begin(), screen.end(), '\n')) ==
        decoder.screen().rows() - 1);
  Check(decoder.TakeReplies().size() <= ptybox::backend::Screen::kMaxReplyBytes);
  (void)lines;
  return 0;
}
