// The record encoders: bounded, valid UTF-8 text; one JSON line per record; asciicast v2
// header and events.
#include "runtime/audit/audit_record.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>

namespace ptybox::runtime::audit {
namespace {

TEST(ValidUtf8Test, ReplacesEveryMalformedByte) {
  EXPECT_EQ(ValidUtf8("plain"), "plain");
  EXPECT_EQ(ValidUtf8("caf\xC3\xA9"), "caf\xC3\xA9");
  // A lone continuation, an overlong NUL, a surrogate, past U+10FFFF, a cut character.
  EXPECT_EQ(ValidUtf8("\x80"), "\xEF\xBF\xBD");
  EXPECT_EQ(ValidUtf8("\xC0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(ValidUtf8("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
  const std::string fffd = "\xEF\xBF\xBD";
  EXPECT_EQ(ValidUtf8("\xF4\x90\x80\x80"), fffd + fffd + fffd + fffd);
  EXPECT_EQ(ValidUtf8("a\xE2\x82"), "a\xEF\xBF\xBD\xEF\xBF\xBD");
}

TEST(BoundTest, KeepsShortTextWhole) {
  Bounded b = Bound("echo hi\n", 64);
  EXPECT_EQ(b.text, "echo hi\n");
  EXPECT_FALSE(b.truncated);
  EXPECT_EQ(b.original_bytes, 8u);
}

TEST(BoundTest, KeepsHeadAndTailOfALongText) {
  std::string big = "HEAD" + std::string(100000, 'x') + "TAIL";
  Bounded b = Bound(big, 1000);
  EXPECT_TRUE(b.truncated);
  EXPECT_EQ(b.original_bytes, big.size());
  EXPECT_TRUE(b.text.starts_with("HEAD")) << b.text.substr(0, 10);
  EXPECT_TRUE(b.text.ends_with("TAIL"));
  EXPECT_NE(b.text.find("[... " + std::to_string(big.size() - 1000) + " bytes omitted ...]"),
            std::string::npos);
  EXPECT_LE(b.text.size(), 1000u + 48u);
}

TEST(BoundTest, HostileBytesStayBoundedAndValidAsJson) {
  // Invalid UTF-8 triples in size when replaced, control characters grow six-fold escaped:
  // the line stays bounded and parses.
  std::string hostile;
  for (int i = 0; i < 200000; ++i) hostile += (i % 2 == 0) ? '\xFF' : '\x01';
  Json record = {{"event", "send_result"}};
  PutBounded(record, "viewport", hostile);
  const std::string line = JsonLine(record);
  EXPECT_EQ(line.back(), '\n');
  EXPECT_LE(line.size(), 6 * (kMaxFieldBytes + 48) + 128);
  Json parsed = Json::parse(line);
  EXPECT_EQ(parsed["viewportBytes"], hostile.size());
  EXPECT_EQ(ValidUtf8(parsed["viewport"].get<std::string>()), parsed["viewport"]);
}

TEST(BoundTest, NeverCutsACharacter) {
  std::string euros;
  for (int i = 0; i < 1000; ++i) euros += "\xE2\x82\xAC";  // U+20AC, three bytes
  Bounded b = Bound(euros, 100);
  EXPECT_TRUE(b.truncated);
  EXPECT_EQ(ValidUtf8(b.text), b.text);
}

TEST(Utf8StreamTest, HoldsACharacterSplitAcrossReads) {
  Utf8Stream s;
  EXPECT_EQ(s.Feed("price: \xE2\x82"), "price: ");
  EXPECT_EQ(s.Feed("\xAC!"), "\xE2\x82\xAC!");
  EXPECT_EQ(s.Feed("\xFFz"), "\xEF\xBF\xBDz");
  EXPECT_EQ(s.Feed("\xF0\x9F"), "");
  EXPECT_EQ(s.Flush(), "\xEF\xBF\xBD\xEF\xBF\xBD");
}

TEST(MarkerStripperTest, RemovesPromptMarkersAlsoWhenSplit) {
  MarkerStripper m;
  EXPECT_EQ(m.Feed("a\x1b]6973;nonce;0;/ws\x07$ "), "a$ ");
  EXPECT_EQ(m.Feed("out\x1b]69"), "out");
  EXPECT_EQ(m.Feed("73;nonce;1;/ws\x1b\\$ "), "$ ");
  // Other escapes pass whole, also an ESC at the end of a read.
  EXPECT_EQ(m.Feed("\x1b[31mred\x1b"), "\x1b[31mred");
  EXPECT_EQ(m.Feed("]0;title\x07"), "\x1b]0;title\x07");
  EXPECT_EQ(m.Feed("\x1b\x1b]6973;x\x07z"), "\x1bz");
  // A marker that never ends hides what follows, as the terminal shows nothing of it.
  std::string endless = "\x1b]6973;" + std::string(64 * 1024, 'n');
  EXPECT_EQ(m.Feed(endless), "");
  EXPECT_EQ(m.Feed("still inside\x07"
                   "after"),
            "after");
}

TEST(MarkerStripperTest, AMarkerOfAnyLengthIsStrippedAndNothingOfItPassesOn) {
  // The marker holds the shell's ${PWD@Q}: a working directory of 18 directories of 250
  // characters made it longer than 4 KiB, and the stripper used to pass such a marker on, nonce
  // and all, while the daemon's prompt parser accepted it. Every length is dropped, fed whole,
  // in chunks, and byte by byte, and the output around it stays.
  const std::string nonce = "0123456789abcdef0123456789abcdef";
  for (size_t cwd_bytes : {4000u, 4096u, 4500u, 20000u, 300000u}) {
    const std::string marker = "\x1b]6973;" + nonce + ";0;'/" + std::string(cwd_bytes, 'd') + "'";
    for (const std::string end : {"\x07", "\x1b\\"}) {
      const std::string in = "before" + marker + end + "$ after";
      {
        MarkerStripper m;
        EXPECT_EQ(m.Feed(in), "before$ after") << cwd_bytes;
      }
      for (size_t chunk : {1u, 7u, 4096u, 4097u}) {
        MarkerStripper m;
        std::string got;
        for (size_t at = 0; at < in.size(); at += chunk) got += m.Feed(in.substr(at, chunk));
        EXPECT_EQ(got, "before$ after") << cwd_bytes << " in chunks of " << chunk;
        EXPECT_EQ(got.find(nonce), std::string::npos);
      }
    }
  }
}

TEST(MarkerStripperTest, PlainOutputBetweenMarkersPassesWholeInAnyChunks) {
  // The stripper copies what lies between escapes in one piece (it sees every byte of every
  // session's output); the result is the same for every way the stream is cut.
  std::string in;
  std::string want;
  for (int line = 0; line < 2000; ++line) {
    const std::string text = "line " + std::to_string(line) + " \x1b[1mbold\x1b[0m\r\n";
    in += text;
    want += text;
    if (line % 97 == 0) in += "\x1b]6973;0123456789abcdef;" + std::to_string(line) + ";'/w'\x07";
    if (line % 89 == 0) {
      in += "\x1b]0;title\x07";
      want += "\x1b]0;title\x07";
    }
  }
  for (size_t chunk :
       {size_t{1}, size_t{2}, size_t{7}, size_t{64}, size_t{4095}, size_t{65536}, in.size()}) {
    MarkerStripper m;
    std::string got;
    for (size_t at = 0; at < in.size(); at += chunk) got += m.Feed(in.substr(at, chunk));
    EXPECT_EQ(got, want) << "in chunks of " << chunk;
  }
}

TEST(MarkerStripperTest, AMarkerEndsWhereTheTerminalParserEndsIt) {
  // backend/terminal/vt_parser.cc ends an OSC string at BEL or ST, cancels it at CAN or SUB, and
  // lets an ESC that is not ST start a new sequence. A marker cancelled by CAN used to swallow the
  // visible output after it. Each stream is fed whole, split at every byte, and byte by byte.
  const struct {
    std::string in;
    std::string out;
  } kCases[] = {
      {"a\x1b]6973;n;0;/\x07"
       "b",
       "ab"},
      {"a\x1b]6973;n;0;/\x1b\\b", "ab"},
      {"a\x1b]6973;n\x18visible", "avisible"},
      {"a\x1b]6973;n\x1avisible", "avisible"},
      {"a\x1b]6973;n\x1b[31mred", "a\x1b[31mred"},
      {"a\x1b]6973;n\x1b\x1b]6973;m\x07z", "a\x1bz"},
      {"a\x1b]6973;n\x1b]0;title\x07z", "a\x1b]0;title\x07z"},
      {"\x1b]6973;n\x05still inside\x07"
       "after",
       "after"},
      {"\x1b]6973;n\xc3\xa9\x07ok", "ok"},
      {"\x1b]0;title\x07x", "\x1b]0;title\x07x"},
      {"\x1b]697\x18x", "\x1b]697\x18x"},
      {"\x1b]6973;\x18\x1b]6973;\x1a\x1b]6973;\x07!", "!"},
  };
  for (const auto& c : kCases) {
    {
      MarkerStripper m;
      EXPECT_EQ(m.Feed(c.in), c.out) << "whole: " << c.in;
    }
    for (size_t cut = 0; cut <= c.in.size(); ++cut) {
      MarkerStripper m;
      std::string got = m.Feed(c.in.substr(0, cut));
      got += m.Feed(c.in.substr(cut));
      EXPECT_EQ(got, c.out) << "split at " << cut << ": " << c.in;
    }
    MarkerStripper m;
    std::string got;
    for (char b : c.in) got += m.Feed(std::string_view(&b, 1));
    EXPECT_EQ(got, c.out) << "byte by byte: " << c.in;
  }
}

TEST(IsoTimestampTest, IsUtcWithMilliseconds) {
  using namespace std::chrono;
  const system_clock::time_point at{milliseconds(1796074805123)};
  EXPECT_EQ(IsoTimestamp(at), "2026-11-30T21:40:05.123Z");
}

TEST(CastTest, HeaderIsAsciicastV2) {
  CastHeader h;
  h.width = 100;
  h.height = 30;
  h.timestamp = 1796074805;
  h.env = {{"SHELL", "bash"}, {"TERM", "xterm-256color"}};
  const std::string line = CastHeaderLine(h);
  EXPECT_EQ(line.back(), '\n');
  Json j = Json::parse(line);
  EXPECT_EQ(j["version"], 2);
  EXPECT_EQ(j["width"], 100);
  EXPECT_EQ(j["height"], 30);
  EXPECT_EQ(j["timestamp"], 1796074805);
  EXPECT_EQ(j["env"]["TERM"], "xterm-256color");
  EXPECT_EQ(j["env"]["SHELL"], "bash");
}

TEST(CastTest, EventsAreTimeCodeData) {
  EXPECT_EQ(CastEventLine(1.5, 'o', "hi\r\n"), "[1.500000, \"o\", \"hi\\r\\n\"]\n");
  EXPECT_EQ(CastEventLine(0.000001, 'i', "ls\n"), "[0.000001, \"i\", \"ls\\n\"]\n");
  EXPECT_EQ(CastEventLine(2, 'r', CastSize(100, 30)), "[2.000000, \"r\", \"100x30\"]\n");
  // Escapes and control characters stay one valid JSON array per line.
  Json j = Json::parse(CastEventLine(3.25, 'o', "\x1b[31mred\x1b[0m\t\"q\"\\"));
  ASSERT_TRUE(j.is_array());
  ASSERT_EQ(j.size(), 3u);
  EXPECT_DOUBLE_EQ(j[0].get<double>(), 3.25);
  EXPECT_EQ(j[1], "o");
  EXPECT_EQ(j[2], "\x1b[31mred\x1b[0m\t\"q\"\\");
  // A NaN or negative time (never produced) is written as 0, still valid.
  EXPECT_EQ(Json::parse(CastEventLine(-1, 'o', "x"))[0], 0.0);
}

}  // namespace
}  // namespace ptybox::runtime::audit
