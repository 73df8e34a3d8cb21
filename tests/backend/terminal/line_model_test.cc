// LineModel through the parser: input bytes -> committed lines and the pending line, each case
// fed whole, at every split and byte by byte (libvterm t/*.test style tables).
#include "backend/terminal/line_model.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/backend/terminal/decoder_test_util.h"

namespace ptybox::backend {
namespace {

using testing::ForEachSplit;
using testing::Rendered;
using testing::RenderLines;

struct LineCase {
  const char* name;
  std::string input;
  std::vector<std::string> lines;
  std::string pending;
  int columns = 80;
};

std::vector<LineCase> LineCases() {
  return {
      {"one line", "hello\n", {"hello"}, ""},
      {"CR LF is one newline", "a\r\nb\r\n", {"a", "b"}, ""},
      {"lone LF is one newline", "a\nb\n", {"a", "b"}, ""},
      {"empty lines are kept", "a\n\n\nb", {"a", "", ""}, "b"},
      {"pending line", "$ ", {}, "$"},
      {"trailing blanks trimmed", "a   \nb \t ", {"a"}, "b"},
      {"progress bar collapses", "10%\r20%\r30%\n", {"30%"}, ""},
      {"progress bar with erase", "downloading 9%\r\x1b[Kdone\n", {"done"}, ""},
      {"CR then text overwrites", "abcdef\rXY", {}, "XYcdef"},
      {"CR keeps the line for LF", "abc\r\n", {"abc"}, ""},
      {"BS moves left without erasing", "abc\b\bX", {}, "aXc"},
      {"BS stops at the start", "\b\bab", {}, "ab"},
      {"TAB is one tab character", "a\tb\n", {"a\tb"}, ""},
      {"TAB at a tab stop", "12345678\tb", {}, "12345678\tb"},
      {"TAB over text only moves", "abcdefghij\r\tX", {}, "abcdefghXj"},
      {"text over a TAB", "\tX\rab", {}, "ab      X"},
      {"BEL and other controls produce no text",
       std::string("a\x07"
                   "b\x00"
                   "c\x0e"
                   "d\x7f",
                   8),
       {},
       "abcd"},
      {"VT and FF commit like LF", "a\vb\fc", {"a", "b"}, "c"},
      {"coloured ls",
       "\x1b[0m\x1b[01;34mdir\x1b[0m  \x1b[01;32mrun.sh\x1b[0m\r\n",
       {"dir  run.sh"},
       ""},
      {"EL 0 from the cursor", "hello\x1b[3D\x1b[K", {}, "he"},
      {"EL 1 to the cursor", "hello\x1b[2D\x1b[1K", {}, "    o"},
      {"EL 2 the whole row", "hello\x1b[2K!", {}, "     !"},
      {"CUF and CHA", "a\x1b[3CX\x1b[10GY", {}, "a   X    Y"},
      {"CUB stops at the start", "abc\x1b[9DX", {}, "Xbc"},
      {"CUF stops at the last column", "a\x1b[99CZ", {}, "a   Z", 5},
      {"ECH erases without moving", "abcdef\x1b[4D\x1b[2X", {}, "ab  ef"},
      {"DCH deletes and pulls left", "abcdef\x1b[4D\x1b[2P", {}, "abef"},
      {"ICH inserts blanks", "abcdef\x1b[4D\x1b[2@", {}, "ab  cdef"},
      {"ICH pushes text off the right margin", "abcde\x1b[3G\x1b[2@X", {}, "abX c", 5},
      {"other CSI ignored", "a\x1b[2J\x1b[H\x1b[5Ab\x1b[?25l", {}, "ab"},
      {"OSC title leaves no text", "\x1b]0;user@host: ~\x07$ ls\r\n", {"$ ls"}, ""},
      {"wide characters", "\xE6\x97\xA5\xE6\x9C\xAC!", {}, "\xE6\x97\xA5\xE6\x9C\xAC!"},
      {"overwrite the right half of a wide character",
       "\xE6\x97\xA5\xE6\x9C\xAC\b\b\bX",
       {},
       " X\xE6\x9C\xAC"},
      {"overwrite the left half of a wide character",
       "\xE6\x97\xA5\xE6\x9C\xAC\b\bX",
       {},
       "\xE6\x97\xA5X"},
      {"emoji is wide",
       "\xF0\x9F\x98\x80"
       "a\b\b\bb",
       {},
       "b a"},
      {"combining mark joins its character", "e\xCC\x81t\xC3\xA9\rX", {}, "Xt\xC3\xA9"},
      {"combining marks overwritten with their base",
       "a\xCC\x81\xCC\x82"
       "b\rX",
       {},
       "Xb"},
      {"combining mark at the start stands alone",
       "\xCC\x81"
       "a",
       {},
       "\xCC\x81"
       "a"},
      {"emoji ZWJ sequence stays intact",
       "\xF0\x9F\x91\xA8\xE2\x80\x8D\xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x91\xA7\n",
       {"\xF0\x9F\x91\xA8\xE2\x80\x8D\xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x91\xA7"},
       ""},
      {"malformed UTF-8 is U+FFFD",
       "a\xFF"
       "b\n",
       {"a\xEF\xBF\xBD"
        "b"},
       ""},
      // Wrapping at 10 columns.
      {"long line wraps but stays one line", "0123456789abc\n", {"0123456789abc"}, "", 10},
      {"CR after wrapping goes to the wrapped row", "0123456789abc\rX", {}, "0123456789Xbc", 10},
      {"CR in the deferred wrap goes to the row of the last column",
       "0123456789\rX",
       {},
       "X123456789",
       10},
      // readline: the character in the last column, then " \r" to force the wrap.
      {"readline wrap redraw", "$ echo 0123\r\n", {"$ echo 0123"}, "", 10},
      {"readline forced wrap", "$ echo 012 \rXYZ\r\n", {"$ echo 012XYZ"}, "", 10},
      {"readline redraw of the wrapped row",
       "$ echo 012 \r3456\r\x1b[K78\n",
       {"$ echo 01278"},
       "",
       10},
      {"BS in the deferred wrap stays on the last column", "0123456789\bX", {}, "012345678X", 10},
      {"wide character does not split across rows", "abcd\xE6\x97\xA5", {}, "abcd \xE6\x97\xA5", 5},
      {"EL erases to the end of the physical row",
       "0123456789abcdef\x1b[3G\x1b[Kx",
       {},
       "0123456789abx",
       10},
      {"EL on an earlier row keeps the later rows",
       "0123456789abcdef\x1b[3D\r\x1b[K",
       {},
       "0123456789",
       10},
  };
}

TEST(LineModelTest, TableAtEverySplit) {
  for (const LineCase& c : LineCases()) {
    const Rendered expected{c.lines, c.pending};
    EXPECT_EQ(RenderLines({c.input}, c.columns, 64 * 1024, 256 * 1024, /*text_mode=*/false),
              expected)
        << c.name << " (cells only)";
    ForEachSplit(c.input, [&](const std::vector<std::string_view>& parts, const std::string& how) {
      EXPECT_EQ(RenderLines(parts, c.columns), expected) << c.name << " (" << how << ")";
    });
  }
}

TEST(LineModelTest, CarriageReturnCarriedAcrossFeedsMakesOneNewline) {
  EXPECT_EQ(RenderLines({"a\r", "\n", "b\r", "\r\n"}), (Rendered{{"a", "b"}, ""}));
}

TEST(LineModelTest, LongLineIsCommittedEarly) {
  const std::string input(200, 'x');
  for (size_t step : {1u, 7u, 64u, 200u}) {
    std::vector<std::string_view> parts;
    for (size_t i = 0; i < input.size(); i += step)
      parts.push_back(std::string_view(input).substr(i, step));
    const Rendered r = RenderLines(parts, 80, 64);
    ASSERT_EQ(r.lines.size(), 3u) << step;
    for (const auto& line : r.lines) EXPECT_EQ(line, std::string(64, 'x'));
    EXPECT_EQ(r.pending, std::string(8, 'x'));
  }
}

TEST(LineModelTest, SoftBreakNeverSplitsACharacter) {
  std::string input;
  for (int i = 0; i < 100; ++i) input += "\xE6\x97\xA5";  // 3 bytes, 2 cells each
  const Rendered r = RenderLines({input}, 80, 64);
  ASSERT_FALSE(r.lines.empty());
  for (const auto& line : r.lines) {
    EXPECT_LE(line.size(), 64u);
    EXPECT_EQ(line.size() % 3, 0u);
  }
}

TEST(LineModelTest, ProgressRedrawNeverGrowsTheLine) {
  std::string input;
  for (int i = 0; i < 10000; ++i) input += "\rprogress " + std::to_string(i % 100) + "%";
  input += "\n";
  const Rendered r = RenderLines({input}, 80, 64);
  EXPECT_EQ(r.lines, std::vector<std::string>{"progress 99%"});
}

TEST(LineModelTest, TabsAndCursorMovesStayWithinTheBound) {
  std::string input;
  for (int i = 0; i < 1000; ++i) input += "\t\x1b[99C\x1b[5@x";
  LineModel model(200, 64);
  size_t longest = 0;
  model.SetLineSink([&](std::string_view line) { longest = std::max(longest, line.size()); });
  VtParser parser(model, 1024);
  parser.Feed(input);
  EXPECT_LE(longest, 64u);
  EXPECT_LE(model.PendingText().size(), 64u);
}

// A full line (at max_line_bytes) is overwritten, not broken, after a resize put the cursor on
// an earlier row: the same in the plain-text and the cell paths.
TEST(LineModelTest, OverwritingAFullLineDoesNotBreakIt) {
  for (bool text_mode : {true, false}) {
    LineModel model(100, 64);
    if (!text_mode) model.DisableTextMode();
    std::vector<std::string> lines;
    model.SetLineSink([&](std::string_view line) { lines.emplace_back(line); });
    VtParser parser(model, 1024);
    parser.Feed(std::string(64, 'a') + "\r");
    model.SetColumns(10);
    parser.Feed(std::string(12, 'b'));  // wraps onto the second row, over the a's
    EXPECT_TRUE(lines.empty()) << text_mode;
    EXPECT_EQ(model.PendingText(), std::string(12, 'b') + std::string(52, 'a')) << text_mode;
  }
}

TEST(LineModelTest, ResizeReflowsTheLogicalLine) {
  LineModel model(10, 1024);
  VtParser parser(model, 1024);
  parser.Feed("0123456789abc");
  model.SetColumns(20);  // now one row: CR goes to the start of the line
  parser.Feed("\rX");
  EXPECT_EQ(model.PendingText(), "X123456789abc");
  model.SetColumns(4);  // cursor on cell 1: row 0
  parser.Feed("\rY");
  EXPECT_EQ(model.PendingText(), "Y123456789abc");
}

TEST(LineModelTest, CharWidth) {
  EXPECT_EQ(TerminalCharWidth(U'a'), 1);
  EXPECT_EQ(TerminalCharWidth(U'\u00e9'), 1);
  EXPECT_EQ(TerminalCharWidth(U'\u0301'), 0);      // combining acute
  EXPECT_EQ(TerminalCharWidth(U'\u200d'), 0);      // ZWJ
  EXPECT_EQ(TerminalCharWidth(U'\ufe0f'), 0);      // VS16
  EXPECT_EQ(TerminalCharWidth(U'\u65e5'), 2);      // CJK
  EXPECT_EQ(TerminalCharWidth(U'\uac00'), 2);      // Hangul
  EXPECT_EQ(TerminalCharWidth(U'\uff21'), 2);      // fullwidth A
  EXPECT_EQ(TerminalCharWidth(U'\U0001F600'), 2);  // emoji
  EXPECT_EQ(TerminalCharWidth(U'\U00020000'), 2);  // CJK extension B
  EXPECT_EQ(TerminalCharWidth(U'\u2500'), 1);      // box drawing
  EXPECT_EQ(TerminalCharWidth(U'\u3000'), 2);      // ideographic space
}

}  // namespace
}  // namespace ptybox::backend
