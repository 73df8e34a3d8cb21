// The vocabulary helpers: key suggestions, edit distance, environment names, safe echoing.
#include "policy/schema.h"

#include <gtest/gtest.h>

#include <array>

namespace ptybox::policy {
namespace {

TEST(SchemaTest, EditDistanceCountsSwapsAsOneEdit) {
  EXPECT_EQ(EditDistance("network", "network"), 0);
  EXPECT_EQ(EditDistance("netwrok", "network"), 1);
  EXPECT_EQ(EditDistance("netwok", "network"), 1);
  EXPECT_EQ(EditDistance("", "mode"), 4);
  EXPECT_EQ(EditDistance("kitten", "sitting"), 3);
}

TEST(SchemaTest, SuggestsTheClosestPlausibleKey) {
  const auto top = TopLevelKeys();
  EXPECT_EQ(SuggestKey("netwrok", top), "network");
  EXPECT_EQ(SuggestKey("writeable", top), "writable");
  EXPECT_EQ(SuggestKey("limit", top), "limits");
  EXPECT_EQ(SuggestKey("ENV", top), "env");
  EXPECT_EQ(SuggestKey("sandbox", top), std::nullopt);
  EXPECT_EQ(SuggestKey("x", top), std::nullopt);
  EXPECT_EQ(SuggestKey(std::string(1000, 'a'), top), std::nullopt);
  constexpr std::array<std::string_view, 3> limits = {"idleSilenceMs", "timeoutMs", "maxOpenFiles"};
  EXPECT_EQ(SuggestKey("idle_silence_ms", limits), "idleSilenceMs");
  EXPECT_EQ(SuggestKey("max-open-files", limits), "maxOpenFiles");
  EXPECT_EQ(SuggestKey("timeout", limits), "timeoutMs");
  EXPECT_EQ(SuggestKey("maxOpenFile", limits), "maxOpenFiles");
}

TEST(SchemaTest, EnvironmentNames) {
  EXPECT_TRUE(IsValidEnvName("PATH"));
  EXPECT_TRUE(IsValidEnvName("_x1"));
  EXPECT_FALSE(IsValidEnvName(""));
  EXPECT_FALSE(IsValidEnvName("1X"));
  EXPECT_FALSE(IsValidEnvName("A-B"));
  EXPECT_FALSE(IsValidEnvName("A=B"));
  EXPECT_FALSE(IsValidEnvName("BASH_FUNC_f%%"));
  EXPECT_FALSE(IsValidEnvName(std::string(129, 'A')));
  for (std::string_view name : {"PROMPT_COMMAND", "PS0", "PS1", "PS2", "PS4", "BASH_ENV", "ENV",
                                "SHELLOPTS", "BASHOPTS", "PTYBOX_", "PTYBOX_SESSION"}) {
    EXPECT_TRUE(ReservedEnvReason(name).has_value()) << name;
  }
  for (std::string_view name : {"PATH", "PS3", "PTYBOX", "ENVIRONMENT", "HOME"}) {
    EXPECT_FALSE(ReservedEnvReason(name).has_value()) << name;
  }
  for (std::string_view name : DefaultEnvPass()) {
    EXPECT_TRUE(IsValidEnvName(name));
    EXPECT_FALSE(ReservedEnvReason(name).has_value());
  }
}

TEST(SchemaTest, PrintableEscapesControlsAndBrokenUtf8AndTruncates) {
  EXPECT_EQ(Printable("plain"), "plain");
  EXPECT_EQ(Printable("a\x1b[31m\n"), "a\\x1b[31m\\x0a");
  EXPECT_EQ(Printable("caf\xc3\xa9"), "caf\xc3\xa9");       // valid UTF-8 kept
  EXPECT_EQ(Printable("\xff\xc3"), "\\xff\\xc3");           // invalid bytes escaped
  EXPECT_EQ(Printable("\xed\xa0\x80"), "\\xed\\xa0\\x80");  // a surrogate is not UTF-8
  EXPECT_EQ(Printable("\xe0\x80\x80"), "\\xe0\\x80\\x80");  // nor an overlong form
  EXPECT_EQ(Printable(std::string(100, 'x'), 4), "xxxx...");
}

// Well-formed UTF-8 that a terminal acts on or that reorders what a person reads: a session
// name shown by `ptybox ls` must not clear the screen or set the window title.
TEST(SchemaTest, PrintableEscapesC1ControlsAndDirectionOverrides) {
  EXPECT_EQ(Printable("build\xc2\x9b"
                      "2J"),
            "build\\u009b2J");  // CSI
  EXPECT_EQ(Printable("\xc2\x9d"
                      "0;T\xc2\x9c"),
            "\\u009d0;T\\u009c");  // OSC ... ST
  EXPECT_EQ(Printable("\xe2\x80\xae"
                      "txt.exe"),
            "\\u202etxt.exe");  // right-to-left override
  EXPECT_EQ(Printable("a\xe2\x81\xa6"
                      "b\xe2\x80\xa8"),
            "a\\u2066b\\u2028");
  EXPECT_EQ(Printable("\xc2\xa0\xe2\x80\x94"), "\xc2\xa0\xe2\x80\x94");  // NBSP, em dash kept
}

TEST(SchemaTest, LimitSpecsCoverEveryFieldOnce) {
  Limits limits;
  int index = 1;
  for (const LimitSpec& spec : LimitSpecs()) {
    EXPECT_NE(spec.value == nullptr, spec.optional_value == nullptr) << spec.key;
    EXPECT_LT(spec.min, spec.max) << spec.key;
    EXPECT_GE(spec.min, 0) << spec.key;
    spec.Set(limits, spec.min + index);  // distinct values: two keys writing one field collide
    ++index;
  }
  index = 1;
  for (const LimitSpec& spec : LimitSpecs()) {
    EXPECT_EQ(spec.Get(limits), spec.min + index) << spec.key;
    EXPECT_EQ(FindLimit(spec.key), &spec);
    ++index;
  }
  EXPECT_EQ(LimitSpecs().size(), 21u);
  EXPECT_EQ(FindLimit("nope"), nullptr);
}

}  // namespace
}  // namespace ptybox::policy
