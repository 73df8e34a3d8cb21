// Named keys (backend/terminal/key_encoder.h): every name's bytes as xterm sends them, the cursor
// keys in both DECCKM modes, modifiers, literal text, and unknown names refused naming them and
// listing the valid ones.
#include "backend/terminal/key_encoder.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

namespace ptybox::backend {
namespace {

const KeyModes kNormal{};
const KeyModes kApplication{.application_cursor = true};

std::string Encode(std::string_view entry, const KeyModes& modes = kNormal) {
  Result<std::string> bytes = EncodeKey(entry, modes);
  EXPECT_TRUE(bytes.has_value()) << entry << ": " << (bytes ? "" : bytes.error().message);
  return bytes ? *bytes : std::string("<error>");
}

TEST(KeyEncoderTest, EveryNameHasItsXtermBytes) {
  const std::map<std::string, std::string> expected = {
      {"Enter", "\r"},       {"Tab", "\t"},         {"BTab", "\x1b[Z"},      {"BSpace", "\x7f"},
      {"Escape", "\x1b"},    {"Space", " "},        {"Up", "\x1b[A"},        {"Down", "\x1b[B"},
      {"Right", "\x1b[C"},   {"Left", "\x1b[D"},    {"Home", "\x1b[H"},      {"End", "\x1b[F"},
      {"IC", "\x1b[2~"},     {"Insert", "\x1b[2~"}, {"DC", "\x1b[3~"},       {"Delete", "\x1b[3~"},
      {"PageUp", "\x1b[5~"}, {"PPage", "\x1b[5~"},  {"PageDown", "\x1b[6~"}, {"NPage", "\x1b[6~"},
      {"F1", "\x1bOP"},      {"F2", "\x1bOQ"},      {"F3", "\x1bOR"},        {"F4", "\x1bOS"},
      {"F5", "\x1b[15~"},    {"F6", "\x1b[17~"},    {"F7", "\x1b[18~"},      {"F8", "\x1b[19~"},
      {"F9", "\x1b[20~"},    {"F10", "\x1b[21~"},   {"F11", "\x1b[23~"},     {"F12", "\x1b[24~"},
  };
  ASSERT_EQ(KeyNames().size(), expected.size()) << "a name without an expectation";
  for (const std::string& name : KeyNames()) {
    ASSERT_TRUE(expected.contains(name)) << name;
    EXPECT_EQ(Encode(name), expected.at(name)) << name;
  }
}

TEST(KeyEncoderTest, CursorKeysFollowApplicationCursorMode) {
  EXPECT_EQ(Encode("Up", kApplication), "\x1bOA");
  EXPECT_EQ(Encode("Down", kApplication), "\x1bOB");
  EXPECT_EQ(Encode("Right", kApplication), "\x1bOC");
  EXPECT_EQ(Encode("Left", kApplication), "\x1bOD");
  EXPECT_EQ(Encode("Home", kApplication), "\x1bOH");
  EXPECT_EQ(Encode("End", kApplication), "\x1bOF");
  // Keys that are not cursor keys do not change.
  EXPECT_EQ(Encode("PageUp", kApplication), "\x1b[5~");
  EXPECT_EQ(Encode("Enter", kApplication), "\r");
}

TEST(KeyEncoderTest, ModifiersOnCharactersAndNamedKeys) {
  EXPECT_EQ(Encode("C-c"), "\x03");
  EXPECT_EQ(Encode("C-d"), "\x04");
  EXPECT_EQ(Encode("C-C"), "\x03") << "control ignores case, as a terminal does";
  EXPECT_EQ(Encode("C-z"), "\x1a");
  EXPECT_EQ(Encode("C-["), "\x1b");
  EXPECT_EQ(Encode("C-\\"), "\x1c");
  EXPECT_EQ(Encode("C-Space"), std::string(1, '\0'));
  EXPECT_EQ(Encode("C-@"), std::string(1, '\0'));
  EXPECT_EQ(Encode("C-?"), "\x7f");
  EXPECT_EQ(Encode("M-x"), "\x1bx");
  EXPECT_EQ(Encode("M-Enter"), "\x1b\r");
  EXPECT_EQ(Encode("C-M-x"), "\x1b\x18");
  EXPECT_EQ(Encode("M-C-x"), "\x1b\x18");
  EXPECT_EQ(Encode("S-a"), "A");
  EXPECT_EQ(Encode("S-Tab"), "\x1b[Z");
  EXPECT_EQ(Encode("C-Up"), "\x1b[1;5A");
  EXPECT_EQ(Encode("C-Up", kApplication), "\x1b[1;5A") << "modified keys have one form";
  EXPECT_EQ(Encode("S-Left"), "\x1b[1;2D");
  EXPECT_EQ(Encode("M-F1"), "\x1b[1;3P");
  EXPECT_EQ(Encode("C-S-F5"), "\x1b[15;6~");
  EXPECT_EQ(Encode("C-DC"), "\x1b[3;5~");
}

TEST(KeyEncoderTest, OtherEntriesAreLiteralText) {
  EXPECT_EQ(Encode(":q!"), ":q!");
  EXPECT_EQ(Encode("ls -l"), "ls -l");
  EXPECT_EQ(Encode("x"), "x");
  EXPECT_EQ(Encode("C-"), "C-");
  EXPECT_EQ(Encode("héllo"), "héllo");
  Result<std::string> all = EncodeKeys({"Escape", ":q!", "Enter"}, kNormal);
  ASSERT_TRUE(all.has_value());
  EXPECT_EQ(*all, "\x1b:q!\r");
}

TEST(KeyEncoderTest, UnknownNamesAreRefusedNamingThemAndListingTheValidOnes) {
  for (const char* bad : {"C-Foo", "F13", "F0", "enter", "ESCAPE", "pageup", "C-1", "S-1",
                          "C-Enter", "S-Escape", "X-y-z"}) {
    Result<std::string> bytes = EncodeKey(bad, kNormal);
    if (std::string_view(bad) == "X-y-z") {
      EXPECT_TRUE(bytes.has_value()) << "no modifier, no name: literal text";
      continue;
    }
    ASSERT_FALSE(bytes.has_value()) << bad;
    EXPECT_EQ(bytes.error().kind, ErrorKind::kInvalidParams);
    const std::string& message = bytes.error().message;
    EXPECT_NE(message.find("unknown key \"" + std::string(bad) + "\""), std::string::npos)
        << message;
    EXPECT_NE(message.find("Enter, Tab, BTab, BSpace, Escape, Space, Up, Down"), std::string::npos)
        << message;
    EXPECT_NE(message.find("F12"), std::string::npos) << message;
  }
  Result<std::string> hint = EncodeKey("enter", kNormal);
  ASSERT_FALSE(hint.has_value());
  EXPECT_NE(hint.error().message.find("did you mean \"Enter\""), std::string::npos);
  // In a list, the entry is named by its index.
  Result<std::string> listed = EncodeKeys({"Escape", "C-Foo"}, kNormal);
  ASSERT_FALSE(listed.has_value());
  EXPECT_EQ(listed.error().context, "keys[1]");
  EXPECT_TRUE(listed.error().message.starts_with("keys[1]: unknown key \"C-Foo\""))
      << listed.error().message;
}

}  // namespace
}  // namespace ptybox::backend
