// SendCapture: the first-line rule, the bounded head + tail viewport with its drop line, and
// the background output stream bounded by max_unconsumed_bytes.
#include "backend/terminal/send_capture.h"

#include <gtest/gtest.h>

#include <string>

namespace ptybox::backend {
namespace {

TEST(SendCaptureTest, FirstLineEqualToThePendingPromptIsSkipped) {
  SendCapture c(1024, 1024, "$");
  c.AddLine("$");
  c.AddLine("hello");
  bool truncated = true;
  EXPECT_EQ(c.Viewport("", &truncated), "hello");
  EXPECT_FALSE(truncated);
}

TEST(SendCaptureTest, FirstLineContributesWhatFollowsTheCommonPrefix) {
  SendCapture c(1024, 1024, "$ ");
  c.AddLine("$ ls");
  c.AddLine("a b");
  EXPECT_EQ(c.Viewport("", nullptr), "ls\na b");
}

TEST(SendCaptureTest, OnlyTheFirstLineIsCompared) {
  SendCapture c(1024, 1024, "$");
  c.AddLine("out");
  c.AddLine("$");  // a later identical line is output
  EXPECT_EQ(c.Viewport("", nullptr), "out\n$");
}

TEST(SendCaptureTest, WithoutCommittedLinesTheRuleAppliesToThePendingLine) {
  SendCapture same(1024, 1024, "Password:");
  EXPECT_EQ(same.Viewport("Password:", nullptr), "");
  SendCapture longer(1024, 1024, "Name:");
  EXPECT_EQ(longer.Viewport("Name: bob", nullptr), " bob");
  SendCapture other(1024, 1024, "$");
  EXPECT_EQ(other.Viewport("progress 50%", nullptr), "progress 50%");
}

TEST(SendCaptureTest, PendingLineFollowsTheLines) {
  SendCapture c(1024, 1024, "");
  c.AddLine("a");
  EXPECT_EQ(c.Viewport("Continue? [y/N]", nullptr), "a\nContinue? [y/N]");
  EXPECT_EQ(c.Viewport("", nullptr), "a");
}

TEST(SendCaptureTest, OnlyOneTrailingNewlineIsTrimmed) {
  SendCapture c(1024, 1024, "");
  c.AddLine("a");
  c.AddLine("");
  EXPECT_EQ(c.Viewport("", nullptr), "a\n");
}

TEST(SendCaptureTest, CommonPrefixNeverSplitsACharacter) {
  SendCapture c(1024, 1024, "caf\xC3\xA9");  // é = C3 A9
  c.AddLine("caf\xC3\xA8!");                 // è = C3 A8
  EXPECT_EQ(c.Viewport("", nullptr), "\xC3\xA8!");
}

TEST(SendCaptureTest, LongOutputKeepsHeadAndTailWithOneDropLine) {
  const size_t max = 1024;
  SendCapture c(max, 1 << 20, "");
  for (int i = 0; i < 20000; ++i) c.AddLine("line " + std::to_string(i));
  bool truncated = false;
  const std::string v = c.Viewport("$ partial", &truncated);
  EXPECT_TRUE(truncated);
  EXPECT_LE(v.size(), max);
  EXPECT_TRUE(v.starts_with("line 0\nline 1\n"));
  EXPECT_TRUE(v.ends_with("line 19999\n$ partial"));
  const size_t marker = v.find("\n[... ");
  ASSERT_NE(marker, std::string::npos);
  const size_t marker_end = v.find(" dropped ...]\n", marker);
  ASSERT_NE(marker_end, std::string::npos);
  EXPECT_EQ(v.find("[... ", marker + 1), marker + 1);  // exactly one drop line
  // The numbers in the drop line account for everything not shown.
  uint64_t total = 0;
  for (int i = 0; i < 20000; ++i) total += ("line " + std::to_string(i) + "\n").size();
  total += 9;  // "$ partial"
  const std::string head = v.substr(0, marker + 1);
  const std::string tail = v.substr(marker_end + 14);
  unsigned long long bytes = 0, lines = 0;
  ASSERT_EQ(std::sscanf(v.c_str() + marker + 1, "[... %llu bytes (%llu lines)", &bytes, &lines), 2);
  EXPECT_EQ(bytes, total - head.size() - tail.size());
  const auto count = [](const std::string& s) { return std::count(s.begin(), s.end(), '\n'); };
  EXPECT_EQ(lines, 20000u - static_cast<uint64_t>(count(head) + count(tail)));
  // Cuts were moved to line boundaries.
  EXPECT_TRUE(head.ends_with("\n"));
  EXPECT_TRUE(tail.starts_with("line "));
}

TEST(SendCaptureTest, OneHugeLineIsCutAtCharacterBoundaries) {
  SendCapture c(256, 1 << 20, "");
  std::string line;
  for (int i = 0; i < 1000; ++i) line += "\xE6\x97\xA5";
  c.AddLine(line);
  bool truncated = false;
  const std::string v = c.Viewport("", &truncated);
  EXPECT_TRUE(truncated);
  EXPECT_LE(v.size(), 256u);
  const size_t marker = v.find("\n[... ");
  ASSERT_NE(marker, std::string::npos);
  EXPECT_EQ(marker % 3, 0u);  // head of whole characters
  const size_t after = v.find("]\n", marker) + 2;
  EXPECT_EQ((v.size() - after) % 3, 0u);
  EXPECT_EQ(static_cast<unsigned char>(v[after]), 0xE6);
}

TEST(SendCaptureTest, TakeOutputConsumesInOrder) {
  SendCapture c(1024, 1024, "$");
  c.AddLine("$ cmd");
  c.AddLine("out1");
  bool dropped = true;
  EXPECT_EQ(c.TakeOutput(1000, &dropped), " cmd\nout1\n");
  EXPECT_FALSE(dropped);
  EXPECT_EQ(c.TakeOutput(1000, &dropped), "");
  c.AddLine("out2");
  EXPECT_EQ(c.TakeOutput(3, nullptr), "out");
  EXPECT_EQ(c.TakeOutput(3, nullptr), "2\n");
  // Consuming does not change the viewport.
  EXPECT_EQ(c.Viewport("", nullptr), " cmd\nout1\nout2");
}

TEST(SendCaptureTest, TakeOutputNeverSplitsACharacter) {
  SendCapture c(1024, 1024, "");
  c.AddLine("\xF0\x9F\x98\x80");
  EXPECT_EQ(c.TakeOutput(2, nullptr), "\xF0\x9F\x98\x80");
  EXPECT_EQ(c.TakeOutput(2, nullptr), "\n");
}

TEST(SendCaptureTest, UnconsumedOutputIsBoundedAndDropsTheOldest) {
  SendCapture c(1024, 100, "");
  for (int i = 0; i < 100; ++i) c.AddLine("line " + std::to_string(i));
  bool dropped = false;
  const std::string out = c.TakeOutput(1 << 20, &dropped);
  EXPECT_TRUE(dropped);
  EXPECT_LE(out.size(), 100u);
  EXPECT_TRUE(out.ends_with("line 99\n"));
  c.AddLine("next");
  EXPECT_EQ(c.TakeOutput(1 << 20, &dropped), "next\n");
  EXPECT_FALSE(dropped);  // reported once
}

// The scrollback a capture's lines were committed to: each line and its "\n", and the offset
// just past it (what the decoder's line listener hands SendOperation::OnLine).
struct FakeScrollback {
  std::string bytes;
  uint64_t Commit(std::string_view line) {
    bytes.append(line);
    bytes.push_back('\n');
    return bytes.size();
  }
};

TEST(SendCaptureTest, TakenOutputNamesWhereItStartsInTheScrollback) {
  FakeScrollback sb;
  sb.Commit("earlier");
  SendCapture c(1024, 1024, "$ ");
  c.AddLine("$ cmd", sb.Commit("$ cmd"));  // contributes "cmd": the prompt is not output
  c.AddLine("out1", sb.Commit("out1"));
  c.AddLine("out2", sb.Commit("out2"));
  std::optional<uint64_t> at;
  const std::string first = c.TakeOutput(6, nullptr, &at);  // cut mid-line
  ASSERT_TRUE(at);
  EXPECT_EQ(sb.bytes.substr(*at, first.size()), first);
  EXPECT_EQ(first, "cmd\nou");
  const std::string rest = c.TakeOutput(100, nullptr, &at);
  ASSERT_TRUE(at);
  EXPECT_EQ(sb.bytes.substr(*at), rest);
  EXPECT_EQ(c.TakeOutput(100, nullptr, &at), "");
  EXPECT_FALSE(at);
}

TEST(SendCaptureTest, OutputWithAGapInTheScrollbackNamesNoPlace) {
  FakeScrollback sb;
  SendCapture c(1024, 1024, "");
  c.AddLine("a", sb.Commit("a"));
  sb.Commit("$ an intermediate prompt");  // in the scrollback, not output
  c.AddLine("b", sb.Commit("b"));
  c.AddLine("c", sb.Commit("c"));
  c.AddLine("unplaced");  // nowhere known
  c.AddLine("d", sb.Commit("d"));
  std::optional<uint64_t> at = 0;
  EXPECT_EQ(c.TakeOutput(4, nullptr, &at), "a\nb\n");
  EXPECT_FALSE(at) << "a read from one cursor would return the prompt line too";
  EXPECT_EQ(c.TakeOutput(2, nullptr, &at), "c\n");
  ASSERT_TRUE(at);
  EXPECT_EQ(sb.bytes.substr(*at, 2), "c\n");
  EXPECT_EQ(c.TakeOutput(9, nullptr, &at), "unplaced\n");
  EXPECT_FALSE(at);
  EXPECT_EQ(c.TakeOutput(100, nullptr, &at), "d\n");
  ASSERT_TRUE(at);
  EXPECT_EQ(sb.bytes.substr(*at), "d\n");
}

TEST(SendCaptureTest, DroppedAndForgottenOutputKeepsItsPlaceExact) {
  FakeScrollback sb;
  SendCapture c(1024, 100, "");
  for (int i = 0; i < 100; ++i) {
    const std::string line = "line " + std::to_string(i);
    c.AddLine(line, sb.Commit(line));
  }
  bool dropped = false;
  std::optional<uint64_t> at;
  const std::string kept = c.TakeOutput(50, &dropped, &at);
  EXPECT_TRUE(dropped);
  ASSERT_TRUE(at);
  EXPECT_EQ(sb.bytes.substr(*at, kept.size()), kept);
  c.ForgetPlaces();  // a rendering replaced those lines
  EXPECT_FALSE(c.TakeOutput(10, nullptr, &at).empty());
  EXPECT_FALSE(at);
  c.AddLine("after", sb.Commit("after"));
  c.TakeOutput(1 << 20, nullptr, &at);
  EXPECT_FALSE(at) << "the forgotten bytes are in the same take";
  c.AddLine("next", sb.Commit("next"));
  EXPECT_EQ(c.TakeOutput(1 << 20, nullptr, &at), "next\n");
  ASSERT_TRUE(at);
  EXPECT_EQ(sb.bytes.substr(*at), "next\n");
}

}  // namespace
}  // namespace ptybox::backend

namespace ptybox::backend {
namespace {

TEST(SendCaptureBoundaryTest, BoundaryKeepsTrailingBlanksOfAPrompt) {
  // python's ">>> " before the input; its answer lands on the same line.
  SendCapture capture(4096, 4096, ">>> ");
  capture.AddLine(">>> 42");
  bool truncated = false;
  EXPECT_EQ(capture.Viewport(">>>", &truncated), "42\n>>>");
  // The prompt line committed unchanged (rendered without its blank) is not output.
  SendCapture unchanged(4096, 4096, "$ ");
  unchanged.AddLine("$");
  unchanged.AddLine("hi");
  EXPECT_EQ(unchanged.Viewport("", &truncated), "hi");
}

// A rendered screen is bounded like a viewport (docs/security.md, "Daemon robustness": a 1000 x 500
// screen of combining marks came back whole, megabytes, with truncated false).
TEST(SendCaptureBoundTest, AScreenIsBoundedLikeAViewport) {
  bool truncated = true;
  EXPECT_EQ(SendCapture::Bound("row 1\nrow 2", 1024, &truncated), "row 1\nrow 2");
  EXPECT_FALSE(truncated);

  std::string screen;
  for (int row = 0; row < 500; ++row) {
    for (int col = 0; col < 999; ++col) screen += "e\xcc\x81";  // e + combining acute
    screen += "\n";
  }
  const std::string bounded = SendCapture::Bound(screen, 1024, &truncated);
  EXPECT_TRUE(truncated);
  EXPECT_LE(bounded.size(), 1024u);
  EXPECT_NE(bounded.find("dropped ...]"), std::string::npos) << "the drop line says so";
  EXPECT_TRUE(bounded.starts_with("e\xcc\x81")) << "the head is kept";
  // Whole characters only, at every cut: each \xcc is followed by its \x81, each \x81
  // follows its \xcc.
  for (size_t i = 0; i < bounded.size(); ++i) {
    if (bounded[i] == '\xcc') {
      EXPECT_EQ(bounded[i + 1], '\x81') << "at " << i;
    }
    if (bounded[i] == '\x81') {
      EXPECT_TRUE(i > 0 && bounded[i - 1] == '\xcc') << "at " << i;
    }
  }

  // Under the smallest viewport: the longest prefix of whole characters.
  const std::string tiny = SendCapture::Bound(screen, 10, &truncated);
  EXPECT_TRUE(truncated);
  EXPECT_EQ(tiny,
            "e\xcc\x81"
            "e\xcc\x81"
            "e\xcc\x81"
            "e");  // 10 bytes
}

}  // namespace
}  // namespace ptybox::backend
