// Screen (libvterm): rendering of the visible rows, the alternate screen property, and the
// replies a program's queries produce (DSR cursor position report, primary DA).
#include "backend/terminal/screen.h"

#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "backend/terminal/reply_filter.h"
#include "tests/backend/terminal/decoder_invariants.h"

namespace ptybox::backend {
namespace {

std::vector<std::string> Rows(const std::string& rendered) {
  std::vector<std::string> rows;
  std::stringstream in(rendered);
  std::string row;
  while (std::getline(in, row)) rows.push_back(row);
  if (!rendered.empty() && rendered.back() == '\n') rows.emplace_back();
  return rows;
}

TEST(ScreenTest, RendersEveryRowTrimmed) {
  Screen s(4, 20);
  s.Feed("hello\r\n\x1b[1;31mred\x1b[0m   \r\n");
  EXPECT_EQ(s.Render(), "hello\nred\n\n");
  EXPECT_FALSE(s.alternate_screen());
}

TEST(ScreenTest, AlternateScreenIsTrackedAndRestored) {
  Screen s(5, 20);
  s.Feed("$ vim\r\n");
  s.Feed("\x1b[?1049h\x1b[H\x1b[2Jalt text");
  EXPECT_TRUE(s.alternate_screen());
  EXPECT_EQ(Rows(s.Render())[0], "alt text");
  s.Feed("\x1b[?1049l");
  EXPECT_FALSE(s.alternate_screen());
  EXPECT_EQ(Rows(s.Render())[0], "$ vim");
}

TEST(ScreenTest, VimLikeFullScreenDrawing) {
  Screen s(5, 20);
  // Alternate screen, scroll region, cursor addressing, erase, a status line in reverse video.
  s.Feed("\x1b[?1049h\x1b[?1h\x1b=\x1b[1;5r\x1b[H\x1b[2J");
  s.Feed("int main() {\r\n~\r\n~\r\n~\r\n");
  s.Feed("\x1b[5;1H\x1b[7m\"a.c\" 1L\x1b[m\x1b[1;5H\x1b[K() {}");
  s.Feed("\x1b[2;1H\x1b[Kreturn 0;");
  const std::vector<std::string> rows = Rows(s.Render());
  ASSERT_EQ(rows.size(), 5u);
  EXPECT_EQ(rows[0], "int () {}");
  EXPECT_EQ(rows[1], "return 0;");
  EXPECT_EQ(rows[2], "~");
  EXPECT_EQ(rows[4], "\"a.c\" 1L");
  EXPECT_TRUE(s.alternate_screen());
}

TEST(ScreenTest, WideAndCombiningCharacters) {
  Screen s(2, 10);
  s.Feed("\xE6\x97\xA5\xE6\x9C\xAC|e\xCC\x81|");
  EXPECT_EQ(Rows(s.Render())[0], "\xE6\x97\xA5\xE6\x9C\xAC|e\xCC\x81|");
}

TEST(ScreenTest, AnswersCursorPositionReport) {
  Screen s(10, 40);
  s.Feed("ab\r\ncde");
  EXPECT_EQ(s.TakeReplies(), "");
  s.Feed("\x1b[6n");
  EXPECT_EQ(s.TakeReplies(), "\x1b[2;4R");
  EXPECT_EQ(s.TakeReplies(), "");  // taken
}

TEST(ScreenTest, AnswersDeviceAttributes) {
  Screen s(10, 40);
  s.Feed("\x1b[c");
  const std::string da = s.TakeReplies();
  EXPECT_TRUE(da.starts_with("\x1b[?")) << ::testing::PrintToString(da);
  EXPECT_TRUE(da.ends_with("c")) << ::testing::PrintToString(da);
  s.Feed("\x1b[5n\x1b[6n");  // status report, then position: in order
  EXPECT_EQ(s.TakeReplies(), "\x1b[0n\x1b[1;1R");
}

// Every answer libvterm can make, and none that would carry a program's text: DECRQSS (a DCS
// request libvterm answers by echoing it) gets nothing, nor do 8-bit controls after S8C1T.
TEST(ScreenTest, RepliesAreOnlyReportShapes) {
  Screen s(10, 40);
  s.Feed("\x1b[?6n\x1b[>c\x1b[?2004$p\x1b[?5n");
  const std::string replies = s.TakeReplies();
  EXPECT_TRUE(replies.starts_with("\x1b[?1;1R\x1b[>")) << ::testing::PrintToString(replies);
  EXPECT_NE(replies.find("c\x1b[?2004;"), std::string::npos) << ::testing::PrintToString(replies);
  EXPECT_NE(replies.find("$y"), std::string::npos) << ::testing::PrintToString(replies);
  s.Feed("\x1bP$qm\x1b\\\x1bP$q\nrm -rf x\n\x1b\\");  // DECRQSS, the second with a command
  EXPECT_EQ(s.TakeReplies(), "");
  s.Feed("\x1b G\x1b[6n\x1b F\x1b[6n");  // 8-bit controls on, a report; off, a report
  EXPECT_EQ(s.TakeReplies(), "\x1b[1;1R");
}

TEST(ReplyFilterTest, KeepsWholeReportsAndNothingElse) {
  EXPECT_EQ(KeepKnownReplies("\x1b[12;40R\x1b[?1;2c\x1b[>0;100;0c\x1b[0n\x1b[?25;1$y"),
            "\x1b[12;40R\x1b[?1;2c\x1b[>0;100;0c\x1b[0n\x1b[?25;1$y");
  EXPECT_EQ(KeepKnownReplies("\x1bP0$rrm -rf ~\x1b\\\x1b[1;1R"), "\x1b[1;1R");
  const std::string c1_csi = "\x9b";  // 8-bit CSI
  EXPECT_EQ(KeepKnownReplies(c1_csi + "1;1R"), "");
  EXPECT_EQ(KeepKnownReplies("\x1b[1;1Recho hi\n"), "\x1b[1;1R");
  EXPECT_EQ(KeepKnownReplies("\x1b[1;1"), "");                                  // cut short
  EXPECT_EQ(KeepKnownReplies("\x1b[>1R\x1b[>5n\x1b[1c\x1b[5$y\x1b[?5$n"), "");  // wrong shapes
  EXPECT_EQ(KeepKnownReplies("\x1b[" + std::string(40, '1') + "R"), "");        // no such report
  EXPECT_EQ(KeepKnownReplies(""), "");
}

TEST(ScreenTest, RepliesAreBounded) {
  Screen s(10, 40);
  std::string flood;
  for (int i = 0; i < 100000; ++i) flood += "\x1b[6n";
  s.Feed(flood);
  EXPECT_LE(s.TakeReplies().size(), Screen::kMaxReplyBytes);
}

TEST(ScreenTest, ResizeChangesTheRenderedSize) {
  Screen s(3, 10);
  s.Feed("0123456789");
  s.Resize(4, 5);
  EXPECT_EQ(s.rows(), 4);
  EXPECT_EQ(s.columns(), 5);
  const std::vector<std::string> rows = Rows(s.Render());
  EXPECT_EQ(rows.size(), 4u);
  for (const auto& row : rows) EXPECT_LE(row.size(), 5u);
  Screen clamped(0, 100000);
  EXPECT_EQ(clamped.rows(), 1);
  EXPECT_EQ(clamped.columns(), Screen::kMaxColumns);
}

// libvterm 0.1.4 keeps a scroll region below the last row after shrinking, then scrolls it with
// a negative memmove size.
TEST(ScreenTest, ShrinkingBelowTheScrollRegionIsSafe) {
  Screen s(14, 95);
  s.Feed("\x1b[3r\x1b[5;10r\x1b[8;1Hkept");
  s.Resize(1, 15);
  s.Feed("\n\n\x1b[S\x1b[T\x1bM\x1b[L\x1b[M");
  s.Resize(3, 15);
  s.Feed("\x1b[6n");
  s.Feed("x\n");
  EXPECT_EQ(Rows(s.Render()).size(), 3u);
  EXPECT_TRUE(s.TakeReplies().ends_with("R"));
}

// libvterm 0.1.4 writes past its argument array on a CSI with more than 16 parameters.
TEST(ScreenTest, CsiWithManyParametersIsSafe) {
  Screen s(5, 40);
  std::string many = "\x1b[";
  for (int i = 0; i < 40; ++i) many += "1;";
  s.Feed(many + "1m" + "\x1b[" + std::string(300, ':') + "m" +
         "\x1b[1;1;1;1;1;1;1;1;1;1;1;1;1;1;1;1m");
  s.Feed("\x1b[38:2::255:0:0mok\x1b[99999999999999999999Cx\x1b[1?2h\x1b[6n");
  const std::vector<std::string> rows = Rows(s.Render());
  EXPECT_TRUE(rows[0].starts_with("ok")) << rows[0];
  EXPECT_TRUE(rows[0].ends_with("x")) << rows[0];  // the huge CUF stopped at the margin
  EXPECT_EQ(s.TakeReplies(), "\x1b[1;40R");
}

// libvterm 0.1.4 starts a CSI at '[' even after escape intermediates ("ESC & ["), past the
// parameter filter. The parser takes "ESC & [" for a complete escape, which Screen drops: what
// follows is text, on the screen as in the line model.
TEST(ScreenTest, CsiAfterEscapeIntermediatesIsFiltered) {
  Screen s(3, 60);
  s.Feed("\x1b&[" + std::string(40, ';') + "5m\r\n\x1b(Bok\x1b(((B!");
  const std::vector<std::string> rows = Rows(s.Render());
  EXPECT_EQ(rows[0], std::string(40, ';') + "5m");
  EXPECT_EQ(rows[1], "ok!");
}

// Escapes other than CSI reach libvterm from the parser's events, with their intermediates:
// DECSC/DECRC (ESC 7, ESC 8) and a character set designation (ESC ( 0: DEC line drawing).
TEST(ScreenTest, EscapesReachLibvterm) {
  Screen s(3, 20);
  s.Feed(
      "ab\x1b"
      "7\r\ncd\x1b"
      "8X\r\n\r\n\x1b(0q\x1b(Bq");
  const std::vector<std::string> rows = Rows(s.Render());
  EXPECT_EQ(rows[0], "abX");
  EXPECT_EQ(rows[1], "cd");
  EXPECT_EQ(rows[2], "\xE2\x94\x80q");
}

// ESC then a non-ASCII character inside a string made libvterm 0.1.4 start a CSI at a later
// '[', past the parameter filter.
TEST(ScreenTest, EscapeBeforeNonAsciiInAStringIsDropped) {
  Screen s(3, 20);
  s.Feed("\x1bX\x1b\xF4[" + std::string(40, ':') + "\x06\x1b\\ok");
  s.Feed("\x1b]0;t\x1b\xC3\xA9[" + std::string(40, ';') + "m\x07!");
  EXPECT_NE(s.Render().find("ok"), std::string::npos) << s.Render();
}

// libvterm 0.1.4 loops forever on REP (CSI b) repeating a zero-width character; Screen emulates
// REP: the last printed character, repeated up to the right margin.
TEST(ScreenTest, RepeatIsEmulatedSafely) {
  Screen s(3, 10);
  s.Feed("\x1b]0;title\x07\x1b[b\xCC\x81\x1b[b\x1b[5b");
  s.Feed("x\x1b[3b\r\n");
  s.Feed("\xE2\x94\x80\x1b[99b\r\n");  // ncurses: the character once, then CSI n-1 b
  s.Feed("a\x1b[?5b\x1b[1;2b\x1b[ b");
  const std::vector<std::string> rows = Rows(s.Render());
  EXPECT_EQ(rows[0], "xxxx");  // libvterm drops a combining mark with nothing to combine with
  std::string line;
  for (int i = 0; i < 10; ++i) line += "\xE2\x94\x80";
  EXPECT_EQ(rows[1], line);
  EXPECT_EQ(rows[2], "aa");  // only "CSI 1;2 b" repeats (its first parameter)
}

// libvterm 0.1.4 leaves the cursor on row -1 after shrinking with the cursor on the top row; the
// next erase writes through a null pointer.
TEST(ScreenTest, ShrinkingWithTheCursorOnTopIsSafe) {
  Screen s(20, 95);
  s.Feed("\nr\x1b[r");  // cursor home
  s.Resize(1, 5);
  s.Feed("\x1b[K\x1b[6n");
  EXPECT_EQ(s.TakeReplies(), "\x1b[1;1R");
  // A cursor saved there (the fix once saved it itself) is put back on the screen too.
  Screen saved(20, 95);
  saved.Feed(
      "\n'\x1b"
      "8");
  saved.Resize(1, 5);
  saved.Feed(
      "\x1b"
      "8\x1b[X\x1b[6n");
  EXPECT_EQ(saved.TakeReplies(), "\x1b[1;1R");
}

// libvterm 0.1.4 restores a cursor saved before a shrink (DECSC, or the alternate screen's
// 1049) as it was, below the last row (or on row -1, where the shrink left the current one), and
// the next erase writes there: a decoder fuzz input crashed (libvterm-saved-cursor-off-screen).
TEST(ScreenTest, ACursorSavedBeforeShrinkingIsRestoredOnTheScreen) {
  for (const char* restore : {"\x1b"
                              "8",
                              "\x1b[?1049l"}) {
    SCOPED_TRACE(::testing::PrintToString(restore));
    Screen s(20, 95);
    s.Feed(
        "\x1b[19;90Hmark\x1b[?1049h\x1b"
        "7");
    s.Resize(1, 5);
    s.Feed(restore);
    s.Feed("\x1b[8X\x1b[K\x1b[@\x1b[P\x1b[6n");
    EXPECT_EQ(s.TakeReplies(), "\x1b[1;5R");
    s.Resize(20, 95);
    s.Feed(
        "\x1b"
        "8\x1b[X\x1b[6n");
    EXPECT_TRUE(s.TakeReplies().starts_with("\x1b[1;"));
  }
}

// libvterm 0.1.4 writes out of bounds for a wide character on a one-column terminal.
TEST(ScreenTest, OneColumnIsTwoColumns) {
  Screen s(3, 1);
  EXPECT_EQ(s.columns(), 2);
  s.Feed(
      "\xE6\x97\xA5\xE6\x97\xA5"
      "a");
  s.Resize(2, 1);
  s.Feed("\xE6\x97\xA5");
  EXPECT_EQ(s.columns(), 2);
  EXPECT_EQ(Rows(s.Render()).size(), 2u);
}

TEST(ScreenTest, HostileInputRendersCleanText) {
  Screen s(5, 20);
  s.Feed("\xff\xfe\xc0\x80\x1b]0;");
  s.Feed(std::string(1 << 20, 'x'));  // an unterminated 1 MiB OSC
  s.Feed(
      "\x07"
      "ok\x1bP" +
      std::string(100000, 'q') + "\x1b\\!");
  s.Feed("\x1b[" + std::string(10000, '9') + "C\x1b[99999;99999H@\x1b[?99999h");
  const std::string rendered = s.Render();
  EXPECT_TRUE(testing::IsCleanText(rendered.substr(0, rendered.find('\n'))));
  EXPECT_NE(rendered.find("ok!"), std::string::npos) << rendered;
}

// libvterm 0.1.4 writes through a null pointer on an encoded C1 character in column 0
// followed by an erase; Screen keeps C1 characters (and malformed UTF-8) away from it.
TEST(ScreenTest, EncodedC1CharactersNeverReachLibvterm) {
  for (const std::string& input : {std::string("\xC2\x9B\x1b[J"), std::string("\xC2\x80\x1b[K"),
                                   std::string("\xC2\xC2\x9B\x9B\x1b[K")}) {
    Screen s(3, 31);
    for (size_t cut = 0; cut <= input.size(); ++cut) {
      s.Feed(input.substr(0, cut));
      s.Feed(input.substr(cut));
    }
    const std::string rendered = s.Render();
    EXPECT_TRUE(testing::IsCleanText(rendered.substr(0, rendered.find('\n'))));
  }
  Screen s(2, 10);
  s.Feed("a\xC2");
  s.Feed(
      "\x9B"
      "b\xE6\x97");
  s.Feed("\xA5\xFF");
  EXPECT_EQ(Rows(s.Render())[0], "ab\xE6\x97\xA5\xEF\xBF\xBD");
}

}  // namespace
}  // namespace ptybox::backend
