// `pattern` (RE2) and the foreground command line: compile errors, bounds, hostile input.
#include "backend/readiness/output_pattern.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

#include "backend/readiness/foreground_command.h"

namespace ptybox::backend {
namespace {

TEST(OutputPatternTest, FindsTheFirstMatchAndItsLine) {
  auto pattern = OutputPattern::Compile(R"(Listening on \d+)");
  ASSERT_TRUE(pattern.has_value());
  EXPECT_FALSE((*pattern)->Find("starting up"));
  std::optional<PatternMatch> match = (*pattern)->Find("INFO Listening on 8000, Listening on 9");
  ASSERT_TRUE(match);
  EXPECT_EQ(match->text, "Listening on 8000");
  EXPECT_EQ(match->line, "INFO Listening on 8000, Listening on 9");
}

TEST(OutputPatternTest, RefusesWhatDoesNotCompileWithTheReason) {
  for (const char* bad : {"(unclosed", "a{2,1}", R"((a)\1)", "(?=lookahead)"}) {
    auto pattern = OutputPattern::Compile(bad);
    ASSERT_FALSE(pattern.has_value()) << bad;
    EXPECT_EQ(pattern.error().kind, ErrorKind::kInvalidParams);
    EXPECT_NE(pattern.error().message.find("RE2"), std::string::npos) << pattern.error().message;
    EXPECT_EQ(pattern.error().context, "pattern");
  }
  EXPECT_FALSE(OutputPattern::Compile("").has_value());
}

TEST(OutputPatternTest, RefusesAPatternLongerThanTheBound) {
  EXPECT_TRUE(OutputPattern::Compile(std::string(kMaxPatternBytes, 'a')).has_value());
  auto pattern = OutputPattern::Compile(std::string(kMaxPatternBytes + 1, 'a'));
  ASSERT_FALSE(pattern.has_value());
  EXPECT_NE(pattern.error().message.find("1024"), std::string::npos);
}

TEST(OutputPatternTest, RefusesAPatternThatCompilesToTooLargeAProgram) {
  auto pattern = OutputPattern::Compile("a{1000}b{1000}c{1000}d{1000}e{1000}f{1000}");
  ASSERT_FALSE(pattern.has_value());
  EXPECT_EQ(pattern.error().kind, ErrorKind::kInvalidParams);
  EXPECT_NE(pattern.error().message.find("too complex"), std::string::npos)
      << pattern.error().message;
  EXPECT_TRUE(OutputPattern::Compile("error.{0,200}failed").has_value())
      << "a pattern a model writes compiles";
}

TEST(OutputPatternTest, ACatastrophicPatternOnAHugeLineStaysLinearAndBounded) {
  // (a*)*b backtracks exponentially in std::regex; RE2 answers in one pass. The line is
  // matched on its first kMaxPatternLineBytes only: a match past them is not seen.
  auto pattern = OutputPattern::Compile("(a*)*b");
  ASSERT_TRUE(pattern.has_value());
  std::string line(1 << 20, 'a');
  EXPECT_FALSE((*pattern)->Find(line));
  line += "b";
  EXPECT_FALSE((*pattern)->Find(line)) << "past the per-line bound";
  std::string early(100, 'a');
  early += "b" + std::string(1 << 20, 'x');
  std::optional<PatternMatch> match = (*pattern)->Find(early);
  ASSERT_TRUE(match);
  EXPECT_EQ(match->text.size(), 101u);
  EXPECT_EQ(match->line.size(), kMaxMatchBytes) << "the line is cut to the bound";
}

TEST(OutputPatternTest, MatchTextIsCutAtACharacterBoundary) {
  auto pattern = OutputPattern::Compile("é+");
  ASSERT_TRUE(pattern.has_value());
  std::string line;
  for (int i = 0; i < 2000; ++i) line += "é";
  std::optional<PatternMatch> match = (*pattern)->Find(line);
  ASSERT_TRUE(match);
  EXPECT_LE(match->text.size(), kMaxMatchBytes);
  EXPECT_EQ(match->text.size() % 2, 0u) << "no half character";
}

TEST(ForegroundCommandTest, ArgumentsBecomeOneLine) {
  using namespace std::string_literals;
  EXPECT_EQ(CommandLineText("sleep\0"s
                            "5\0"s),
            "sleep 5");
  EXPECT_EQ(CommandLineText("a\tb\x1b[31m\0"s), "a b [31m");
  EXPECT_EQ(CommandLineText(""), "");
}

TEST(ForegroundCommandTest, HostileBytesAreBoundedAndValidUtf8) {
  std::string raw(10000, 'x');
  std::string text = CommandLineText(raw);
  EXPECT_LE(text.size(), kMaxForegroundCommandBytes);
  EXPECT_TRUE(text.ends_with("..."));
  EXPECT_EQ(CommandLineText("\xff\xc3"), "\xef\xbf\xbd\xef\xbf\xbd");
  std::string wide;
  for (int i = 0; i < 300; ++i) wide += "\xe2\x82\xac";  // €
  text = CommandLineText(wide);
  EXPECT_LE(text.size(), kMaxForegroundCommandBytes);
  EXPECT_EQ((text.size() - 3) % 3, 0u) << "whole characters, then ...";
}

TEST(ForegroundCommandTest, ReadsALiveProcessAndNothingForAMissingOne) {
  EXPECT_NE(ReadCommandLine(getpid()).find("output_pattern_test"), std::string::npos);
  EXPECT_EQ(ReadCommandLine(0), "");
  EXPECT_EQ(ReadCommandLine(-1), "");
}

}  // namespace
}  // namespace ptybox::backend
