// runtime/display_text.h: what a repository, a session or the model chose reaches a person or a
// model quoted, escaped and bounded.
#include "runtime/rpc/display_text.h"

#include <gtest/gtest.h>

namespace ptybox::runtime {
namespace {

TEST(DisplayTextTest, EveryCharacterThatCouldSplitALineIsEscaped) {
  const struct {
    std::string in;
    std::string out;
  } kCases[] = {
      {"plain/path", "plain/path"},
      {"a\nb", "a\\nb"},
      {"a\r\nb\tc", "a\\r\\nb\\tc"},
      {"quote\" and \\", "quote\\\" and \\\\"},
      {std::string("nul\0x", 5), "nul\\x00x"},
      {"\x1b[31mred", "\\x1b[31mred"},
      {"del\x7f", "del\\x7f"},
      {"\xc2\x85next line (C1)", "\\u{0085}next line (C1)"},
      {"bidi \xe2\x80\xae override", "bidi \\u{202e} override"},
      {"isolate \xe2\x81\xa6", "isolate \\u{2066}"},
      {"zero\xe2\x80\x8bwidth", "zero\\u{200b}width"},
      {"line\xe2\x80\xa8sep", "line\\u{2028}sep"},
      {"bom\xef\xbb\xbf", "bom\\u{feff}"},
      {"caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac", "caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac"},
      {"bad \xff\xc3", "bad \\xff\\xc3"},
      {"overlong \xc0\xaf", "overlong \\xc0\\xaf"},
      {"surrogate \xed\xa0\x80", "surrogate \\xed\\xa0\\x80"},
  };
  for (const auto& c : kCases) EXPECT_EQ(EscapedText(c.in), c.out) << c.in;
}

TEST(DisplayTextTest, TextIsBoundedAndTheCutIsOutsideTheQuotes) {
  const std::string long_name(1 << 20, 'a');
  const std::string quoted = QuotedText(long_name, 64);
  EXPECT_EQ(quoted, "\"" + std::string(64, 'a') + "\"... (1048576 bytes)");
  // An escape is never split.
  EXPECT_EQ(EscapedText(std::string(10, '\n'), 5), "\\n\\n... (10 bytes)");
  // Multi-byte characters are never split either.
  EXPECT_EQ(EscapedText("\xe6\x97\xa5\xe6\x9c\xac", 4), "\xe6\x97\xa5... (6 bytes)");
  EXPECT_EQ(QuotedText("fits", 4), "\"fits\"");
}

TEST(DisplayTextTest, ListsAreBoundedInEntries) {
  std::vector<std::string> items;
  for (int i = 0; i < 20; ++i) items.push_back("/r" + std::to_string(i));
  EXPECT_EQ(QuotedList({"/a", "/b\n"}), "\"/a\", \"/b\\n\"");
  EXPECT_EQ(QuotedList(items, 2), "\"/r0\", \"/r1\" and 18 more");
  EXPECT_EQ(QuotedList({}), "");
}

}  // namespace
}  // namespace ptybox::runtime
