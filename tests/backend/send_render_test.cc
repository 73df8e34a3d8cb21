// Per-send rendering (backend/send_render.h) with injected output, the way ShellSession drives
// it: plain line output never counts as cursor addressing (the cheap path); cursor-addressed
// output on the normal screen is replayed on a scratch screen and replaces what the line path
// made of it, in the viewport and in the scrollback; the alternate screen never reaches the
// line path.
#include "backend/send_render.h"

#include <gtest/gtest.h>

#include <string>

#include "backend/terminal/terminal_decoder.h"

namespace ptybox::backend {
namespace {

TerminalDecoder::Options Small(int rows = 10, int columns = 40) {
  TerminalDecoder::Options o;
  o.rows = rows;
  o.columns = columns;
  return o;
}

// One send on a decoder that shows the prompt "$ ": its output fed to the decoder and to the
// render, as ShellSession::OnOutput does.
class Send {
 public:
  explicit Send(TerminalDecoder& decoder)
      : decoder_(decoder),
        render_(decoder.PendingTextUntrimmed(), decoder.addressing_events(),
                decoder.scrollback().end()) {}
  void Output(std::string_view bytes) {
    render_.AddBytes(bytes);
    decoder_.Feed(bytes);
  }
  [[nodiscard]] bool Needed() const { return render_.Needed(decoder_.addressing_events()); }
  RenderedViewport Apply(bool at_prompt) {
    return ApplyRender(decoder_, render_, 256 * 1024, at_prompt);
  }
  const SendRender& render() const { return render_; }

 private:
  TerminalDecoder& decoder_;
  SendRender render_;
};

std::string ScrollbackText(const TerminalDecoder& decoder) {
  return decoder.scrollback().Read(std::nullopt, 1 << 20, decoder.PendingText()).text;
}

TEST(SendRenderTest, PlainLineOutputTakesTheCheapPath) {
  TerminalDecoder decoder(Small());
  decoder.Feed("$ ");
  for (std::string_view output :
       {"hello\r\nworld\r\n", "abc\rX\r\n", "a\x1b[2Kb\r\n", "\r 10%\r 50%\r\x1b[Kdone\r\n",
        "\x1b[1;31mred\x1b[0m \x1b]0;title\x07done\r\n", "col\tumns\x1b[5D\x1b[3Pend\r\n",
        "\x1b[?2004h\x1b[?25lbracketed\x1b[?25h\r\n"}) {
    Send send(decoder);
    send.Output("\r\n");  // readline ends the (unechoed) command line
    send.Output(output);
    send.Output("$ ");
    EXPECT_FALSE(send.Needed()) << output;
  }
  // The line path's own answers for the in-line cases the task names.
  EXPECT_NE(ScrollbackText(decoder).find("\nXbc\n"), std::string::npos) << ScrollbackText(decoder);
  EXPECT_NE(ScrollbackText(decoder).find("\n b\n"), std::string::npos) << ScrollbackText(decoder);
  EXPECT_NE(ScrollbackText(decoder).find("\ndone\n"), std::string::npos) << ScrollbackText(decoder);
}

TEST(SendRenderTest, CursorUpProgressShowsTheFinalLines) {
  TerminalDecoder decoder(Small());
  decoder.Feed("old line\r\n$ ");
  Send send(decoder);
  send.Output("a: 0%\r\nb: 0%\r\n");
  send.Output("\x1b[2A\ra: 100%\r\n\rb: 100%\r\n");
  send.Output("$ ");
  ASSERT_TRUE(send.Needed());
  const RenderedViewport v = send.Apply(/*at_prompt=*/true);
  EXPECT_EQ(v.text, "a: 100%\nb: 100%");
  EXPECT_FALSE(v.truncated);
  // The scrollback holds the same rendering, the line before the send untouched, and the
  // prompt is the unterminated line again.
  EXPECT_EQ(ScrollbackText(decoder), "old line\na: 100%\nb: 100%\n$");
  EXPECT_EQ(decoder.PendingTextUntrimmed(), "$ ");
  // The next send starts from a clean line.
  decoder.Feed("next\r\n");
  EXPECT_EQ(ScrollbackText(decoder), "old line\na: 100%\nb: 100%\n$ next\n");
}

TEST(SendRenderTest, BlankRowsAboveAnEmptyLastRowAreNotLines) {
  TerminalDecoder decoder(Small(10, 40));
  decoder.Feed("$ ");
  Send send(decoder);
  // top's exit: the frame, then the cursor to the bottom row and a newline.
  send.Output("\x1b[H\x1b[2Jframe\r\nlast row of it\x1b[10;1H\r\n");
  send.Output("$ ");
  const RenderedViewport v = send.Apply(/*at_prompt=*/true);
  EXPECT_EQ(v.text, "frame\nlast row of it");
  EXPECT_EQ(ScrollbackText(decoder), "frame\nlast row of it\n$");
}

TEST(SendRenderTest, RedrawsDoNotStackOnlyTheLastFrameShows) {
  TerminalDecoder decoder(Small());
  decoder.Feed("$ ");
  Send send(decoder);
  send.Output("\x1b[H\x1b[2Jtop - 10:00:01\r\nTasks: 3 total\r\n");
  send.Output("\x1b[H\x1b[2Jtop - 10:00:02\r\nTasks: 4 total\r\n");
  ASSERT_TRUE(send.Needed());
  const RenderedViewport v = send.Apply(/*at_prompt=*/false);
  EXPECT_EQ(v.text, "top - 10:00:02\nTasks: 4 total");
  EXPECT_EQ(ScrollbackText(decoder).find("10:00:01"), std::string::npos) << ScrollbackText(decoder);
}

TEST(SendRenderTest, TrailingBlankRowsAreTrimmedAndThePromptIsNotOutput) {
  TerminalDecoder decoder(Small(30, 40));
  decoder.Feed("$ ");
  Send send(decoder);
  // A prompt_toolkit-style REPL: reserves rows below, moves back up, prints, shows its prompt.
  send.Output("\r\n\r\n\r\n\r\n\r\n\r\n\x1b[6A\x1b[J42\r\n\r\nIn [2]: ");
  const RenderedViewport v = send.Apply(/*at_prompt=*/false);
  EXPECT_EQ(v.text, "42\n\nIn [2]:");
}

TEST(SendRenderTest, APromptAtSettlementIsLeftOutAndTextBeforeItKept) {
  TerminalDecoder decoder(Small());
  decoder.Feed("$ ");
  Send send(decoder);
  send.Output("\x1b[2J\x1b[Hone\r\ntwo");
  send.Output("\x1b]6973;nonce;0;/tmp\x07$ ");
  const RenderedViewport v = send.Apply(/*at_prompt=*/true);
  EXPECT_EQ(v.text, "one\ntwo");
  EXPECT_EQ(decoder.PendingTextUntrimmed(), "two$ ");
}

TEST(SendRenderTest, RowsThatScrolledOffAreKept) {
  TerminalDecoder decoder(Small(5, 40));
  decoder.Feed("$ ");
  Send send(decoder);
  std::string lines;
  for (int i = 0; i < 12; ++i) lines += "line " + std::to_string(i) + "\r\n";
  send.Output(lines);
  send.Output("\x1b[1A\x1b[2Kfinal\r\n$ ");
  const RenderedViewport v = send.Apply(/*at_prompt=*/true);
  std::string expected;
  for (int i = 0; i < 11; ++i) expected += "line " + std::to_string(i) + "\n";
  expected += "final";
  EXPECT_EQ(v.text, expected);
}

TEST(SendRenderTest, TheAlternateScreenNeverReachesTheLinePath) {
  TerminalDecoder decoder(Small());
  decoder.Feed("before\r\n$ ");
  const uint64_t events = decoder.addressing_events();
  // vi's drawing: cursor addressing, all of it on the alternate screen.
  decoder.Feed("\x1b[?1049h\x1b[H\x1b[2J~\r\n~\x1b[10;1H\"f.txt\" [New]\x1b[1;1Hhello");
  EXPECT_TRUE(decoder.alternate_screen());
  decoder.Feed("\x1b[10;1H\"f.txt\" [New] 1L, 6B written\x1b[?1049l");
  EXPECT_FALSE(decoder.alternate_screen());
  EXPECT_EQ(decoder.addressing_events(), events);
  EXPECT_EQ(ScrollbackText(decoder), "before\n$");
  EXPECT_EQ(decoder.PendingTextUntrimmed(), "$ ");
  decoder.Feed("after\r\n");
  EXPECT_EQ(ScrollbackText(decoder), "before\n$ after\n");
}

TEST(SendRenderTest, ANormalScreenTuiThatLeavesIsRenderedWithoutItsFragments) {
  TerminalDecoder decoder(Small(6, 40));
  decoder.Feed("$ ");
  Send send(decoder);
  // A full-screen editor on the normal screen: draws, redraws a status line, exits at the
  // bottom row with its message.
  send.Output("\x1b[H\x1b[2Jhello\r\n~\r\n~\x1b[6;1H-- INSERT --\x1b[1;6H");
  send.Output("\x1b[6;1H\x1b[K:wq\x1b[6;1H\x1b[K\"f.txt\" [New] 1L, 6B written\r\n");
  send.Output("$ ");
  const RenderedViewport v = send.Apply(/*at_prompt=*/true);
  EXPECT_EQ(v.text.find("INSERT"), std::string::npos) << v.text;
  EXPECT_EQ(v.text.find(":wq"), std::string::npos) << v.text;
  EXPECT_NE(v.text.find("\"f.txt\" [New] 1L, 6B written"), std::string::npos) << v.text;
  EXPECT_EQ(ScrollbackText(decoder).find("INSERT"), std::string::npos) << ScrollbackText(decoder);
}

TEST(SendRenderTest, AFloodKeepsItsTailAndSaysWhatWasDropped) {
  TerminalDecoder decoder(Small(5, 40));
  decoder.Feed("$ ");
  Send send(decoder);
  send.Output("\x1b[2J");
  const std::string line(99, 'y');
  std::string chunk;
  for (int i = 0; i < 1000; ++i) chunk += line + "\r\n";
  for (int i = 0; i < 12; ++i) send.Output(chunk);  // 1.2 MB
  send.Output("end\r\n$ ");
  EXPECT_GT(send.render().dropped_bytes(), 0u);
  EXPECT_LE(send.render().raw_bytes(), SendRender::kMaxRawBytes);
  const RenderedViewport v = send.Apply(/*at_prompt=*/true);
  EXPECT_TRUE(v.truncated);
  EXPECT_EQ(v.text.rfind("[... ", 0), 0u) << v.text.substr(0, 80);
  EXPECT_EQ(v.text.substr(v.text.size() - 4), "\nend");
  EXPECT_LE(v.text.size(), 256u * 1024 + 200);
}

TEST(SendRenderTest, ScrollbackRewindDropsOnlyLaterLines) {
  Scrollback s(100, 4096);
  s.Append("keep");
  const uint64_t mark = s.end();
  s.Append("junk 1");
  s.Append("junk 2");
  const uint64_t junk_end = s.end();
  s.Rewind(mark);
  EXPECT_EQ(s.end(), junk_end);  // offsets are never used twice
  EXPECT_EQ(s.lines(), 1u);
  s.Append("rendered");
  EXPECT_EQ(s.Read(std::nullopt, 100, "").text, "keep\nrendered\n");
  // A cursor handed out into the withdrawn lines is told so and continues after them.
  const ReadResult stale = s.Read(mark + 2, 100, "");
  EXPECT_TRUE(stale.truncated);
  EXPECT_EQ(stale.cursor, junk_end);
  EXPECT_EQ(stale.text, "rendered\n");
  // A page that ends where they begin continues after them, not truncated.
  const ReadResult head = s.Read(std::nullopt, 5, "");
  EXPECT_EQ(head.text, "keep\n");
  EXPECT_EQ(head.next_cursor, junk_end);
  EXPECT_FALSE(s.Read(head.next_cursor, 100, "").truncated);
  s.Rewind(s.end() + 5);  // nothing after the end: unchanged
  EXPECT_EQ(s.Read(std::nullopt, 100, "").text, "keep\nrendered\n");
}

TEST(SendRenderTest, RewindPastWhatWasDroppedClearsTheRest) {
  Scrollback s(2, 4096);
  const uint64_t mark = s.end();
  s.Append("a");
  s.Append("b");
  s.Append("c");  // "a" evicted: the mark is older than what is retained
  s.Rewind(mark);
  EXPECT_EQ(s.lines(), 0u);
  EXPECT_EQ(s.Read(std::nullopt, 100, "").text, "");
  s.Append("d");
  EXPECT_EQ(s.Read(std::nullopt, 100, "").text, "d\n");
}

}  // namespace
}  // namespace ptybox::backend
