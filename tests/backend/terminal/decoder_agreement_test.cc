// The line model and the screen make the same of hostile input, however it is split: both
// consume the events of the one escape-sequence machine (VtParser), so strings, unterminated
// and overlong sequences, broken UTF-8 and C1 characters show the same text on both paths.
#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <vector>

#include "backend/terminal/terminal_decoder.h"
#include "tests/backend/terminal/decoder_test_util.h"

namespace ptybox::backend {
namespace {

constexpr size_t kMaxSequenceBytes = 64;  // small, so that overlong sequences are cheap to write

struct Case {
  std::string name;
  std::string input;
  std::vector<std::string> visible;  // the lines both paths show, the unterminated one last
};

// What the line path shows: its committed lines, then the unterminated one when not empty.
std::vector<std::string> LinePathText(const TerminalDecoder& decoder) {
  std::vector<std::string> lines;
  const ReadResult read = decoder.scrollback().Read(std::nullopt, 1 << 20, "");
  size_t from = 0;
  while (from < read.text.size()) {
    const size_t newline = read.text.find('\n', from);
    lines.push_back(read.text.substr(from, newline - from));
    from = newline + 1;
  }
  if (const std::string pending = decoder.PendingText(); !pending.empty()) {
    lines.push_back(pending);
  }
  return lines;
}

// What the screen shows: its rows (trailing blanks trimmed) without the empty ones at the end.
std::vector<std::string> ScreenText(const TerminalDecoder& decoder) {
  std::vector<std::string> rows;
  const std::string rendered = decoder.screen().Render();
  size_t from = 0;
  while (from <= rendered.size()) {
    size_t newline = rendered.find('\n', from);
    if (newline == std::string::npos) newline = rendered.size();
    rows.push_back(rendered.substr(from, newline - from));
    from = newline + 1;
  }
  while (!rows.empty() && rows.back().empty()) rows.pop_back();
  return rows;
}

std::vector<Case> HostileCases() {
  const std::string fffd = "\xEF\xBF\xBD";
  std::string seventeen_params = "1";
  for (int i = 1; i < 17; ++i) seventeen_params += ";1";
  return {
      {"OSC strings, BEL and ST",
       "a\x1b]0;title\x07"
       "b\x1b]2;t\x1b\\c\r\nnext",
       {"abc", "next"}},
      {"OSC abandoned by a CSI", "a\x1b]0;t\x1b[1mb", {"ab"}},
      {"OSC cancelled",
       "a\x1b]0;x\x18"
       "b",
       {"ab"}},
      {"DCS with a query", "x\x1bP$qm\x1b\\y\x1bPq#0;2\x07z\x1b\\!\r\n", {"xy!"}},
      {"SOS, PM, APC", "1\x1bXsos\x1b\\2\x1b^pm\x1b\\3\x1b_a\x07pc\x1b\\4", {"1234"}},
      {"unterminated OSC", "ok\r\n\x1b]0;never ends", {"ok"}},
      {"unterminated CSI", "ok\x1b[12", {"ok"}},
      {"overlong CSI", "a\x1b[" + std::string(80, '1') + "Cb", {"ab"}},
      {"overlong OSC",
       "a\x1b]" + std::string(100, 'x') +
           "\x07"
           "b",
       {"ab"}},
      {"too many CSI parameters", "x\x1b[" + seventeen_params + "my", {"xy"}},
      {"control inside a CSI", "ab\x1b[1\x08mc", {"ac"}},
      {"escape intermediates before [", "a\x1b([5Ab\x1b(((Bc", {"a5Abc"}},
      {"ESC before non-ASCII",
       "a\x1b\xC3\xA9"
       "b",
       {"a\xC3\xA9"
        "b"}},
      {"broken UTF-8",
       "\xff\xc3(\xe2\x82\r\nok\xed\xa0\x80",
       {fffd + fffd + "(" + fffd, "ok" + fffd + fffd + fffd}},
      {"overlong and surrogate UTF-8",
       "\xc0\xaf\xe0\x80\xaf|\xf4\x90\x80\x80",
       {fffd + fffd + fffd + fffd + fffd + "|" + fffd + fffd + fffd + fffd}},
      {"C1 characters",
       "a\xC2\x9B"
       "31mb\xC2\x85"
       "c\x9B",
       {"a31mbc" + fffd}},
      {"incomplete character at the end", "done\xE2\x82", {"done"}},
  };
}

TEST(DecoderAgreementTest, LineModelAndScreenAgreeOnEverySplit) {
  for (const Case& c : HostileCases()) {
    testing::ForEachSplit(c.input,
                          [&](const std::vector<std::string_view>& parts, const std::string& how) {
                            TerminalDecoder::Options options;
                            options.rows = 10;
                            options.columns = 60;
                            options.max_sequence_bytes = kMaxSequenceBytes;
                            TerminalDecoder decoder(options);
                            for (std::string_view part : parts) decoder.Feed(part);
                            EXPECT_EQ(LinePathText(decoder), c.visible) << c.name << ", " << how;
                            EXPECT_EQ(ScreenText(decoder), c.visible) << c.name << ", " << how;
                          });
  }
}

}  // namespace
}  // namespace ptybox::backend
