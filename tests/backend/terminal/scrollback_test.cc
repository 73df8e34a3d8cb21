// Scrollback: bounded retention by lines and bytes, monotonic byte cursors, paging that never
// splits a UTF-8 character, truncation reported only for cursors older than what is retained.
#include "backend/terminal/scrollback.h"

#include <gtest/gtest.h>

#include <string>

namespace ptybox::backend {
namespace {

TEST(ScrollbackTest, EmptyReadsAsEndWithThePendingLine) {
  Scrollback s(10, 1024);
  const ReadResult r = s.Read(std::nullopt, 100, "$ ");
  EXPECT_EQ(r.text, "$ ");
  EXPECT_EQ(r.cursor, 0u);
  EXPECT_EQ(r.next_cursor, 0u);
  EXPECT_TRUE(r.end);
  EXPECT_FALSE(r.truncated);
}

TEST(ScrollbackTest, CursorsCountEveryLineAndItsNewline) {
  Scrollback s(10, 1024);
  s.Append("one");
  s.Append("");
  s.Append("three");
  EXPECT_EQ(s.begin(), 0u);
  EXPECT_EQ(s.end(), 4u + 1u + 6u);
  const ReadResult r = s.Read(std::nullopt, 1000, "$ ");
  EXPECT_EQ(r.text, "one\n\nthree\n$ ");
  EXPECT_EQ(r.next_cursor, s.end());
  EXPECT_TRUE(r.end);
}

TEST(ScrollbackTest, PagesFollowNextCursorAndOnlyTheLastHasThePendingLine) {
  Scrollback s(100, 4096);
  for (int i = 0; i < 10; ++i) s.Append("line" + std::to_string(i));  // 6 bytes each
  std::string all;
  std::optional<uint64_t> cursor;
  int pages = 0;
  while (true) {
    const ReadResult r = s.Read(cursor, 7, "PENDING");
    ++pages;
    EXPECT_FALSE(r.truncated);
    EXPECT_LE(r.text.size(), 7u);  // the unterminated line counts against the bound
    all += r.text;
    if (r.end) {
      EXPECT_EQ(r.next_cursor, s.end() + 7);  // the page started inside the pending line
      break;
    }
    EXPECT_EQ(r.text.size(), 7u);
    EXPECT_EQ(r.next_cursor, r.cursor + 7);
    cursor = r.next_cursor;
  }
  EXPECT_EQ(pages, 10);  // 60 + 7 bytes in pages of 7
  std::string expected;
  for (int i = 0; i < 10; ++i) expected += "line" + std::to_string(i) + "\n";
  expected += "PENDING";
  EXPECT_EQ(all, expected);
}

TEST(ScrollbackTest, DropsWholeOldestLinesByCount) {
  Scrollback s(3, 4096);
  for (int i = 0; i < 5; ++i) s.Append("l" + std::to_string(i));
  EXPECT_EQ(s.lines(), 3u);
  EXPECT_EQ(s.begin(), 6u);
  EXPECT_EQ(s.Read(std::nullopt, 100, "").text, "l2\nl3\nl4\n");
}

TEST(ScrollbackTest, DropsWholeOldestLinesByBytes) {
  Scrollback s(1000, 64);
  for (int i = 0; i < 20; ++i) s.Append(std::string(9, static_cast<char>('a' + i)));  // 10 bytes
  EXPECT_LE(s.end() - s.begin(), 64u);
  EXPECT_EQ(s.end() - s.begin(), 60u);
  EXPECT_EQ(s.Read(std::nullopt, 1000, "").text.substr(0, 10), std::string(9, 'o') + "\n");
}

TEST(ScrollbackTest, TruncatedOnlyWhenTheCursorIsOlderThanBegin) {
  Scrollback s(2, 4096);
  s.Append("a");
  const ReadResult first = s.Read(std::nullopt, 100, "");
  EXPECT_FALSE(first.truncated);
  s.Append("b");
  s.Append("c");  // "a" dropped
  const ReadResult stale = s.Read(first.cursor, 100, "");
  EXPECT_TRUE(stale.truncated);
  EXPECT_EQ(stale.cursor, s.begin());
  EXPECT_EQ(stale.text, "b\nc\n");
  // Not sticky: reading on from the returned cursor is not truncated.
  const ReadResult next = s.Read(stale.cursor, 100, "");
  EXPECT_FALSE(next.truncated);
  EXPECT_FALSE(s.Read(std::nullopt, 100, "").truncated);
}

TEST(ScrollbackTest, PagingWhileLinesAreDropped) {
  Scrollback s(4, 4096);
  for (int i = 0; i < 4; ++i) s.Append("x" + std::to_string(i));  // 3 bytes each
  ReadResult r = s.Read(std::nullopt, 3, "");
  EXPECT_EQ(r.text, "x0\n");
  for (int i = 4; i < 8; ++i) s.Append("x" + std::to_string(i));  // x0..x3 dropped
  r = s.Read(r.next_cursor, 3, "");
  EXPECT_TRUE(r.truncated);
  EXPECT_EQ(r.text, "x4\n");
  r = s.Read(r.next_cursor, 3, "");
  EXPECT_FALSE(r.truncated);
  EXPECT_EQ(r.text, "x5\n");
}

TEST(ScrollbackTest, CursorBeyondEndIsClampedToEnd) {
  Scrollback s(10, 1024);
  s.Append("abc");
  const ReadResult r = s.Read(1000, 100, "$ ");
  EXPECT_EQ(r.cursor, s.end());
  EXPECT_EQ(r.next_cursor, s.end());
  EXPECT_EQ(r.text, "$ ");
  EXPECT_TRUE(r.end);
  EXPECT_FALSE(r.truncated);
}

TEST(ScrollbackTest, APageThatReachesTheEndKeepsItsBoundWithTheUnterminatedLine) {
  Scrollback s(10, 1024);
  s.Append("ab");
  // 3 committed bytes and 5 pending ones: a bound of 5 stops inside the pending line.
  ReadResult r = s.Read(std::nullopt, 5, "\xE6\x97\xA5xy");
  EXPECT_EQ(r.text, "ab\n");  // the 3-byte character does not fit whole
  EXPECT_FALSE(r.end);
  EXPECT_EQ(r.next_cursor, s.end());
  r = s.Read(r.next_cursor, 4, "\xE6\x97\xA5xy");
  EXPECT_EQ(r.text, "\xE6\x97\xA5x");
  EXPECT_FALSE(r.end);
  r = s.Read(r.next_cursor, 4, "\xE6\x97\xA5xy");
  EXPECT_EQ(r.text, "y");
  EXPECT_TRUE(r.end);
  // The one-character minimum stays: a bound of 1 still returns the whole character.
  r = s.Read(s.end(), 1, "\xE6\x97\xA5xy");
  EXPECT_EQ(r.text, "\xE6\x97\xA5");
  EXPECT_EQ(r.next_cursor, s.end() + 3);
}

TEST(ScrollbackTest, CursorInsideACharacterMovesToTheNextOne) {
  Scrollback s(10, 1024);
  s.Append("\xE6\x97\xA5x");  // 3-byte character, 'x', '\n'
  const ReadResult r = s.Read(1, 100, "");
  EXPECT_EQ(r.cursor, 3u);
  EXPECT_EQ(r.text, "x\n");
}

TEST(ScrollbackTest, PagesAreCutAtCharacterBoundariesWithAtLeastOneCharacter) {
  Scrollback s(10, 1024);
  s.Append("\xF0\x9F\x98\x80\xF0\x9F\x98\x81");  // two 4-byte characters
  ReadResult r = s.Read(std::nullopt, 6, "");
  EXPECT_EQ(r.text, "\xF0\x9F\x98\x80");
  EXPECT_EQ(r.next_cursor, 4u);
  r = s.Read(r.next_cursor, 1, "");  // smaller than one character: still one character
  EXPECT_EQ(r.text, "\xF0\x9F\x98\x81");
  EXPECT_EQ(r.next_cursor, 8u);
  EXPECT_FALSE(r.end);
  // The unterminated line counts against the bound too: one character per page.
  r = s.Read(r.next_cursor, 0, "$");
  EXPECT_EQ(r.text, "\n");
  EXPECT_FALSE(r.end);
  r = s.Read(r.next_cursor, 0, "$");
  EXPECT_EQ(r.text, "$");
  EXPECT_TRUE(r.end);
}

TEST(ScrollbackTest, LineLongerThanTheByteBoundKeepsItsEnd) {
  Scrollback s(10, 64);
  s.Append("old");
  std::string line;
  for (int i = 0; i < 50; ++i) line += "\xC3\xA9";  // 100 bytes
  s.Append(line);
  EXPECT_LE(s.end() - s.begin(), 64u);
  const ReadResult r = s.Read(std::nullopt, 1000, "");
  EXPECT_EQ(r.text.back(), '\n');
  EXPECT_EQ(r.text.size() % 2, 1u);  // whole two-byte characters plus the newline
  EXPECT_EQ(static_cast<unsigned char>(r.text[0]), 0xC3);
  EXPECT_TRUE(s.Read(0, 10, "").truncated);
}

TEST(ScrollbackTest, RingWrapsAroundManyTimes) {
  Scrollback s(1000000, 100);
  std::string last;
  for (int i = 0; i < 10000; ++i) {
    last = "line " + std::to_string(i);
    s.Append(last);
  }
  const ReadResult r = s.Read(s.end() - last.size() - 1, 1000, "");
  EXPECT_EQ(r.text, last + "\n");
  EXPECT_LE(s.end() - s.begin(), 100u);
}

}  // namespace
}  // namespace ptybox::backend
