// TerminalDecoder: the wiring (scrollback, line listener, observer order, screen, replies,
// resize) and a deterministic randomized property test of the whole line path.
#include "backend/terminal/terminal_decoder.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "tests/backend/terminal/decoder_invariants.h"
#include "tests/backend/terminal/decoder_test_util.h"

namespace ptybox::backend {
namespace {

using testing::EventRecorder;
using testing::IsCleanText;

TerminalDecoder::Options SmallOptions() {
  TerminalDecoder::Options options;
  options.rows = 5;
  options.columns = 20;
  return options;
}

TEST(TerminalDecoderTest, LinesReachScrollbackThenListener) {
  TerminalDecoder decoder(SmallOptions());
  std::vector<std::string> heard;
  decoder.SetLineListener([&](std::string_view line) {
    heard.emplace_back(line);
    // Already in the scrollback when the listener runs.
    const ReadResult r = decoder.scrollback().Read(std::nullopt, 1 << 20, "");
    EXPECT_TRUE(r.text.ends_with(std::string(line) + "\n"));
  });
  decoder.Feed("\x1b[32mone\x1b[0m\r\ntw");
  decoder.Feed("o\r");
  decoder.Feed("\n$ ");
  EXPECT_EQ(heard, (std::vector<std::string>{"one", "two"}));
  EXPECT_EQ(decoder.PendingText(), "$");
  const ReadResult r = decoder.scrollback().Read(std::nullopt, 1 << 20, decoder.PendingText());
  EXPECT_EQ(r.text, "one\ntwo\n$");
}

// The observer sees OSC strings (the prompt marker) in stream order, after the line model: when
// it sees the marker, the text before it is already in the line model.
TEST(TerminalDecoderTest, ObserverSeesEventsAfterTheLineModel) {
  TerminalDecoder decoder(SmallOptions());
  struct Observer final : VtHandler {
    explicit Observer(TerminalDecoder& d) : decoder(d) {}
    void OnPrint(std::string_view) override {}
    void OnControl(char) override {}
    void OnCsi(const CsiSequence&) override {}
    void OnOsc(std::string_view payload) override {
      oscs.emplace_back(payload);
      pending_at_osc.push_back(decoder.PendingText());
    }
    TerminalDecoder& decoder;
    std::vector<std::string> oscs;
    std::vector<std::string> pending_at_osc;
  } observer(decoder);
  decoder.SetObserver(&observer);
  decoder.Feed("out\r\nabc\x1b]133;A\x07");
  decoder.Feed("$ \x1b]7;file:///tmp\x1b");
  decoder.Feed("\\");
  EXPECT_EQ(observer.oscs, (std::vector<std::string>{"133;A", "7;file:///tmp"}));
  EXPECT_EQ(observer.pending_at_osc, (std::vector<std::string>{"abc", "abc$"}));
}

TEST(TerminalDecoderTest, ObserverSeesTheSameEventsAsTheParser) {
  TerminalDecoder decoder(SmallOptions());
  EventRecorder observed;
  decoder.SetObserver(&observed);
  const std::string input = "a\x1b[1;2mb\r\n\x1b]0;t\x07\xC3\xA9\x07";
  decoder.Feed(input);
  EXPECT_EQ(observed.events, testing::ParseEvents({input}));
}

TEST(TerminalDecoderTest, ScreenAndRepliesFollowTheSameBytes) {
  TerminalDecoder decoder(SmallOptions());
  decoder.Feed("$ top\r\n\x1b[?1049h\x1b[Hload 0.5\x1b[6n");
  EXPECT_TRUE(decoder.screen().alternate_screen());
  EXPECT_TRUE(decoder.screen().Render().starts_with("load 0.5"));
  EXPECT_EQ(decoder.TakeReplies(), "\x1b[1;9R");
  decoder.Feed("\x1b[?1049l");
  EXPECT_FALSE(decoder.screen().alternate_screen());
}

TEST(TerminalDecoderTest, ResizeReachesLineModelAndScreen) {
  TerminalDecoder decoder(SmallOptions());
  decoder.Resize(10, 5);
  EXPECT_EQ(decoder.screen().columns(), 5);
  EXPECT_EQ(decoder.screen().rows(), 10);
  decoder.Feed("0123456\rX");  // CR goes to the start of the second 5-column row
  EXPECT_EQ(decoder.PendingText(), "01234X6");
}

TEST(TerminalDecoderTest, ScrollbackBoundsApply) {
  TerminalDecoder::Options options = SmallOptions();
  options.scrollback_lines = 3;
  TerminalDecoder decoder(options);
  for (int i = 0; i < 10; ++i) decoder.Feed("l" + std::to_string(i) + "\n");
  EXPECT_EQ(decoder.scrollback().Read(std::nullopt, 100, "").text, "l7\nl8\nl9\n");
}

// Random output, escape-heavy, split at random points: every committed line and the pending
// line are clean text within the bound, and the split never changes the result.
std::string RandomOutput(std::mt19937_64& rng) {
  static const std::vector<std::string> kPieces = {"\x1b",
                                                   "[",
                                                   "]",
                                                   "P",
                                                   "_",
                                                   "^",
                                                   "X",
                                                   "\x07",
                                                   "\x1b\\",
                                                   "0",
                                                   "1",
                                                   "9",
                                                   ";",
                                                   ":",
                                                   "?",
                                                   ">",
                                                   " ",
                                                   "m",
                                                   "K",
                                                   "C",
                                                   "D",
                                                   "G",
                                                   "P",
                                                   "X",
                                                   "@",
                                                   "H",
                                                   "J",
                                                   "h",
                                                   "l",
                                                   "\r",
                                                   "\n",
                                                   "\r\n",
                                                   "\b",
                                                   "\t",
                                                   "\x18",
                                                   "\x1a",
                                                   "\x7f",
                                                   "\x00",
                                                   "text",
                                                   "\xC3\xA9",
                                                   "\xE6\x97\xA5",
                                                   "\xF0\x9F\x98\x80",
                                                   "\xCC\x81",
                                                   "\xE2\x80\x8D",
                                                   "\xEF\xB8\x8F",
                                                   "\xC2",
                                                   "\xE2\x82",
                                                   "\xF0\x9F",
                                                   "\x80",
                                                   "\xBF",
                                                   "\xC0",
                                                   "\xED\xA0\x80",
                                                   "\xF4\x90",
                                                   "\xC2\x9B",
                                                   "\x9b",
                                                   "\xff",
                                                   "\x1b[",
                                                   "\x1b]0;",
                                                   "\x1b[?",
                                                   "\x1b[2K",
                                                   "\x1b[5@",
                                                   "\x1b[3P",
                                                   "\x1b[9X",
                                                   "\x1b[99C",
                                                   "\x1b[1G"};
  std::string out;
  const int mode = static_cast<int>(rng() % 3);
  const size_t length = rng() % 200;
  if (mode == 0) {  // random bytes
    for (size_t i = 0; i < length; ++i) out.push_back(static_cast<char>(rng() & 0xff));
  } else {  // pieces of escape sequences, UTF-8 and controls
    while (out.size() < length) {
      const std::string& piece = kPieces[rng() % kPieces.size()];
      out += piece.empty() ? std::string(1, '\0') : piece;
      if (mode == 2 && rng() % 4 == 0) out.push_back(static_cast<char>(rng() & 0xff));
    }
  }
  return out;
}

struct LineRun {
  std::vector<std::string> lines;
  std::string pending;
  bool operator==(const LineRun&) const = default;
};

LineRun RunLines(const std::vector<std::string_view>& parts, int columns, size_t max_line,
                 size_t max_sequence, bool text_mode = true) {
  LineRun run;
  LineModel model(columns, max_line);
  if (!text_mode) model.DisableTextMode();
  model.SetLineSink([&](std::string_view line) { run.lines.emplace_back(line); });
  VtParser parser(model, max_sequence);
  for (std::string_view part : parts) {
    parser.Feed(part);
    EXPECT_LE(model.PendingText().size(), max_line);
  }
  run.pending = model.PendingText();
  return run;
}

TEST(TerminalDecoderTest, RandomOutputPropertyTest) {
  std::mt19937_64 rng(0x5eedd3c0de);
  constexpr int kCases = 100000;
  for (int i = 0; i < kCases; ++i) {
    const std::string input = RandomOutput(rng);
    const int columns = 1 + static_cast<int>(rng() % 30);
    const size_t max_line = 64 + rng() % 64;
    const size_t max_sequence = 16 + rng() % 64;
    std::vector<size_t> cuts;
    for (size_t at = 0; at < input.size(); at += 1 + rng() % 16) {
      if (at > 0) cuts.push_back(at);
    }
    // Whole and in cells only, against split with the plain-text fast path: the same lines.
    const LineRun whole = RunLines({input}, columns, max_line, max_sequence, false);
    const LineRun split = RunLines(testing::SplitAt(input, cuts), columns, max_line, max_sequence);
    ASSERT_EQ(whole, split) << "case " << i << " input " << ::testing::PrintToString(input);
    for (const std::string& line : whole.lines) {
      ASSERT_TRUE(IsCleanText(line)) << "case " << i << " line " << ::testing::PrintToString(line);
      ASSERT_LE(line.size(), max_line);
    }
    ASSERT_TRUE(IsCleanText(whole.pending)) << "case " << i;
  }
}

// The whole pipeline, screen included, on a smaller random sample.
TEST(TerminalDecoderTest, RandomOutputThroughTheWholePipeline) {
  std::mt19937_64 rng(42);
  TerminalDecoder::Options options = SmallOptions();
  options.max_line_bytes = 128;
  options.max_sequence_bytes = 64;
  options.scrollback_bytes = 4096;
  TerminalDecoder decoder(options);
  for (int i = 0; i < 3000; ++i) {
    const std::string input = RandomOutput(rng);
    const size_t cut = input.empty() ? 0 : rng() % input.size();
    decoder.Feed(std::string_view(input).substr(0, cut));
    decoder.Feed(std::string_view(input).substr(cut));
    if (i % 500 == 0)
      decoder.Resize(1 + static_cast<int>(rng() % 10), 1 + static_cast<int>(rng() % 40));
    ASSERT_LE(decoder.PendingText().size(), 128u);
    (void)decoder.TakeReplies();
  }
  const ReadResult r = decoder.scrollback().Read(std::nullopt, 1 << 20, decoder.PendingText());
  EXPECT_TRUE(IsCleanText([&] {
    std::string text = r.text;
    std::erase(text, '\n');
    return text;
  }()));
  EXPECT_LE(decoder.scrollback().end() - decoder.scrollback().begin(), 4096u);
  const std::string screen = decoder.screen().Render();
  EXPECT_EQ(screen.find('\x1b'), std::string::npos);
}

}  // namespace
}  // namespace ptybox::backend
