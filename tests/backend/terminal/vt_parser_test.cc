// VtParser: bytes -> events, table-driven; every case is fed whole, split at every byte
// boundary (in two and three parts) and byte by byte, and must give the same events.
#include "backend/terminal/vt_parser.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "tests/backend/terminal/decoder_test_util.h"

namespace ptybox::backend {
namespace {

using testing::EventRecorder;
using testing::ForEachSplit;
using testing::ParseEvents;

struct ParserCase {
  const char* name;
  std::string input;
  std::vector<std::string> events;
};

const std::string kFffd = "\xEF\xBF\xBD";

std::vector<ParserCase> ParserCases() {
  return {
      {"plain text", "hello", {"text:hello"}},
      {"controls",
       "a\r\nb\x07\x08\t\x7f",
       {"text:a", "ctl:0d", "ctl:0a", "text:b", "ctl:07", "ctl:08", "ctl:09", "ctl:7f"}},
      {"two-byte character", "caf\xC3\xA9", {"text:caf\xC3\xA9"}},
      {"three-byte character", "\xE6\x97\xA5\xE6\x9C\xAC", {"text:\xE6\x97\xA5\xE6\x9C\xAC"}},
      {"four-byte character", "\xF0\x9F\x98\x80!", {"text:\xF0\x9F\x98\x80!"}},
      {"lone continuation byte", "a\x80z", {"text:a" + kFffd + "z"}},
      {"overlong two-byte", "\xC0\xAF", {"text:" + kFffd + kFffd}},
      {"overlong three-byte", "\xE0\x80\xAF", {"text:" + kFffd + kFffd + kFffd}},
      {"overlong four-byte", "\xF0\x80\x80\xAF", {"text:" + kFffd + kFffd + kFffd + kFffd}},
      {"surrogate", "\xED\xA0\x80", {"text:" + kFffd + kFffd + kFffd}},
      {"above U+10FFFF", "\xF4\x90\x80\x80", {"text:" + kFffd + kFffd + kFffd + kFffd}},
      {"F5 and FF leads", "\xF5\xFF", {"text:" + kFffd + kFffd}},
      {"truncated four-byte is one replacement",
       "\xF0\x9F\x98"
       "A",
       {"text:" + kFffd + "A"}},
      // The Unicode Standard's example of U+FFFD per maximal subpart (chapter 3, table 3-8).
      {"maximal subparts",
       "\x61\xF1\x80\x80\xE1\x80\xC2\x62\x80\x63\x80\xBF\x64",
       {"text:a" + kFffd + kFffd + kFffd + "b" + kFffd + "c" + kFffd + kFffd + "d"}},
      {"truncated character before a control", "\xE2\x82\n", {"text:" + kFffd, "ctl:0a"}},
      {"truncated character before ESC", "\xE2\x82\x1b[0m", {"text:" + kFffd, "csi:0;m"}},
      {"raw C1 CSI is malformed UTF-8, not CSI",
       "\x9b"
       "31m",
       {"text:" + kFffd + "31m"}},
      {"encoded C1 control renders nothing",
       "a\xC2\x9B"
       "b\xC2\x85"
       "c",
       {"text:abc"}},
      {"no-break space is text",
       "a\xC2\xA0"
       "b",
       {"text:a\xC2\xA0"
        "b"}},
      {"SGR", "\x1b[01;34mdir\x1b[0m", {"csi:1,34;m", "text:dir", "csi:0;m"}},
      {"CSI without parameters", "\x1b[m\x1b[K", {"csi:;m", "csi:;K"}},
      {"omitted parameters", "\x1b[;5H\x1b[3;H", {"csi:-,5;H", "csi:3,-;H"}},
      {"private marker", "\x1b[?25l\x1b[?1049h", {"csi:?25;l", "csi:?1049;h"}},
      {"intermediate", "\x1b[2 q", {"csi:2; q"}},
      {"colon sub-parameters", "\x1b[38:5:196m", {"csi:38,5,196;m"}},
      {"parameter values saturate", "\x1b[99999999999C", {"csi:65535;C"}},
      {"marker after parameters is malformed and swallowed", "\x1b[1?2hX", {"text:X"}},
      {"control inside CSI is executed", "\x1b[1\r2m", {"ctl:0d", "csi:12;m"}},
      {"ESC inside CSI starts a new sequence", "\x1b[12\x1b[3mX", {"csi:3;m", "text:X"}},
      {"CAN cancels a sequence", "\x1b[12\x18X", {"text:X"}},
      {"SUB cancels a string", "\x1b]0;t\x1aX", {"text:X"}},
      {"non-ASCII ends a CSI and is text", "\x1b[1\xC3\xA9", {"text:\xC3\xA9"}},
      {"stray ESC before text", "\x1b\xC3\xA9", {"text:\xC3\xA9"}},
      {"two-byte escapes render nothing",
       "a\x1b"
       "7b\x1b"
       "8c\x1b=d\x1b>e\x1bMf",
       {"text:abcdef"}},
      {"charset designation", "\x1b(Bx\x1b)0y", {"text:xy"}},
      {"OSC with BEL", "\x1b]0;title\x07next", {"osc:0;title", "text:next"}},
      {"OSC with ST", "\x1b]133;A\x1b\\$ ", {"osc:133;A", "text:$ "}},
      {"OSC with UTF-8 payload", "\x1b]2;\xC3\xA9t\xC3\xA9\x07", {"osc:2;\xC3\xA9t\xC3\xA9"}},
      {"OSC ignores other controls", "\x1b]0;a\rb\x07", {"osc:0;ab"}},
      {"OSC interrupted by ESC is abandoned", "\x1b]0;t\x1b[1mX", {"csi:1;m", "text:X"}},
      {"DCS swallowed through ST", "a\x1bPq#0;2;0;0;0\x1b\\b", {"text:ab"}},
      {"DCS ignores BEL", "\x1bP1$r\x07still\x1b\\b", {"text:b"}},
      {"APC, PM, SOS swallowed", "\x1b_apc\x1b\\1\x1b^pm\x1b\\2\x1bXsos\x1b\\3", {"text:123"}},
      {"stray ST", "a\x1b\\b", {"text:ab"}},
  };
}

TEST(VtParserTest, TableAtEverySplit) {
  for (const ParserCase& c : ParserCases()) {
    ForEachSplit(c.input, [&](const std::vector<std::string_view>& parts, const std::string& how) {
      // The recorder merges adjacent text (a split cuts a run in two; a swallowed sequence
      // leaves no event), so the record must match exactly.
      EXPECT_EQ(ParseEvents(parts), c.events) << c.name << " (" << how << ")";
    });
  }
}

TEST(VtParserTest, TooManyParametersAreBoundedAndIgnored) {
  std::string input = "\x1b[";
  for (int i = 0; i < 1000; ++i) input += std::to_string(i) + ";";
  input += "mX";
  EventRecorder recorder;
  VtParser parser(recorder, 256 * 1024);
  parser.Feed(input);
  ASSERT_EQ(recorder.events.size(), 2u);
  EXPECT_TRUE(recorder.events[0].starts_with("csi:0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15;m"))
      << recorder.events[0];
  EXPECT_EQ(recorder.events[1], "text:X");
}

TEST(VtParserTest, CsiParamCountIsAtMostTheMaximum) {
  struct Checker final : VtHandler {
    void OnPrint(std::string_view) override {}
    void OnControl(char) override {}
    void OnCsi(const CsiSequence& csi) override {
      EXPECT_LE(csi.param_count, CsiSequence::kMaxParams);
      EXPECT_EQ(csi.Param(40, 7), 7);
      ++count;
    }
    void OnOsc(std::string_view) override {}
    int count = 0;
  } checker;
  VtParser parser(checker, 1024);
  parser.Feed(std::string("\x1b[") + std::string(200, ';') + "H");
  EXPECT_EQ(checker.count, 1);
}

// The events the screen re-encodes for libvterm: escapes with their intermediates, and what a
// CSI had beyond its kept parameters (how many intermediates, whether parameters were lost).
TEST(VtParserTest, EscapesAndCsiDetailsAreReported) {
  struct Recorder final : VtHandler {
    void OnPrint(std::string_view utf8) override { events.push_back("text:" + std::string(utf8)); }
    void OnControl(char) override {}
    void OnCsi(const CsiSequence& csi) override {
      events.push_back("csi:" + std::to_string(csi.param_count) + "," +
                       std::to_string(csi.intermediate_count) + "," +
                       (csi.too_many_params ? "lost" : "kept") + csi.final);
    }
    void OnOsc(std::string_view) override {}
    void OnEscape(const EscSequence& esc) override {
      events.push_back("esc:" + std::to_string(esc.intermediate_count) + "," +
                       std::string(esc.intermediates.data(),
                                   static_cast<size_t>(std::min(esc.intermediate_count, 2))) +
                       esc.final);
    }
    std::vector<std::string> events;
  };
  std::string seventeen = "1";
  for (int i = 1; i < 17; ++i) seventeen += ";1";
  const std::string input =
      "\x1b"
      "7\x1b(0\x1b(((B\x1b([x\x1b[!!p\x1b[" +
      seventeen + "m\x1b[" + seventeen.substr(2) +
      "m\x1b\x1b"
      "8";
  const std::vector<std::string> expected = {"esc:0,7",        "esc:1,(0",       "esc:3,((B",
                                             "esc:1,([",       "text:x",         "csi:0,2,keptp",
                                             "csi:16,0,lostm", "csi:16,0,keptm", "esc:0,8"};
  ForEachSplit(input, [&](const std::vector<std::string_view>& parts, const std::string& how) {
    Recorder recorder;
    VtParser parser(recorder, 1024);
    for (std::string_view part : parts) parser.Feed(part);
    EXPECT_EQ(recorder.events, expected) << how;
  });
}

// Sequences longer than the bound are discarded through their terminator; the text after the
// terminator is kept.
TEST(VtParserTest, OverlongSequencesAreDiscardedThroughTheirTerminator) {
  const size_t bound = 64;
  struct Case {
    const char* name;
    std::string input;
    std::vector<std::string> events;
  };
  const std::string big(200, 'x');
  const std::string digits(200, '1');
  const std::vector<Case> cases = {
      {"OSC with BEL", "a\x1b]0;" + big + "\x07" + "b", {"text:ab"}},
      {"OSC with ST", "a\x1b]0;" + big + "\x1b\\b", {"text:ab"}},
      {"OSC just within the bound is delivered",
       "\x1b]" + std::string(61, 'y') + "\x07" + "b",
       {"osc:" + std::string(61, 'y'), "text:b"}},
      {"CSI", "a\x1b[" + digits + "mb", {"text:ab"}},
      {"DCS", "a\x1bP" + big + "\x1b\\b", {"text:ab"}},
      {"next OSC is delivered again", "\x1b]" + big + "\x07\x1b]1;ok\x07", {"osc:1;ok"}},
  };
  for (const Case& c : cases) {
    ForEachSplit(c.input, [&](const std::vector<std::string_view>& parts, const std::string& how) {
      EXPECT_EQ(ParseEvents(parts, bound), c.events) << c.name << " (" << how << ")";
    });
  }
}

TEST(VtParserTest, UnterminatedHugeOscKeepsMemoryBounded) {
  EventRecorder recorder;
  VtParser parser(recorder, 1024);
  const std::string chunk(64 * 1024, 'z');
  parser.Feed("\x1b]0;");
  for (int i = 0; i < 64; ++i) parser.Feed(chunk);  // 4 MiB: nothing delivered, nothing kept
  parser.Feed(
      "\x07"
      "after");
  EXPECT_EQ(recorder.events, std::vector<std::string>{"text:after"});
}

TEST(VtParserTest, MultibyteCharacterSplitAcrossFeedsIsKeptWhole) {
  EventRecorder recorder;
  VtParser parser(recorder, 1024);
  parser.Feed("a\xF0\x9F");
  EXPECT_EQ(recorder.events, std::vector<std::string>{"text:a"});
  parser.Feed("\x98");
  parser.Feed(
      "\x80"
      "b");
  EXPECT_EQ(recorder.events, std::vector<std::string>{"text:a\xF0\x9F\x98\x80"
                                                      "b"});
}

}  // namespace
}  // namespace ptybox::backend
