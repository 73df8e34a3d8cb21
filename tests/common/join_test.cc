// The one joiner and the one propagation helper: what every message built with them relies on.
#include "common/join.h"

#include <gtest/gtest.h>

#include <array>
#include <string>
#include <string_view>
#include <vector>

#include "backend/contract_types.h"
#include "common/propagate.h"
#include "policy/mode_names.h"
#include "policy/network_names.h"

namespace ptybox {
namespace {

TEST(JoinTest, JoinsAnyListOfStringsWithItsSeparator) {
  EXPECT_EQ(Join(std::vector<std::string>{}), "");
  EXPECT_EQ(Join(std::vector<std::string>{"a"}), "a");
  EXPECT_EQ(Join(std::vector<std::string>{"a", "b", "c"}), "a, b, c");
  EXPECT_EQ(Join(std::array<std::string_view, 2>{"x", "y"}, " "), "x y");
}

TEST(JoinTest, AlternativesEndWithOr) {
  EXPECT_EQ(JoinAlternatives(std::vector<std::string>{}), "");
  EXPECT_EQ(JoinAlternatives(std::vector<std::string>{"a"}), "a");
  EXPECT_EQ(JoinAlternatives(std::vector<std::string>{"a", "b"}), "a or b");
  EXPECT_EQ(JoinAlternatives(policy::kModeNames),
            "read-only, workspace-write or danger-full-access");
  EXPECT_EQ(policy::ModeAlternatives(), JoinAlternatives(policy::kModeNames));
}

Result<int> Number(bool ok) {
  if (!ok) return Fail(ErrorKind::kNotFound, "no number", "n");
  return 7;
}

Result<std::string> Text(bool ok) {
  Result<int> number = Number(ok);
  if (!number) return Propagate(number);
  return std::to_string(*number);
}

Result<void> Moved(bool ok) {
  Result<std::string> text = Text(ok);
  if (!text) return Propagate(std::move(text));
  return {};
}

TEST(PropagateTest, AnErrorTravelsUpUnchangedAcrossResultTypes) {
  EXPECT_EQ(*Text(true), "7");
  EXPECT_TRUE(Moved(true).has_value());
  Result<void> failed = Moved(false);
  ASSERT_FALSE(failed.has_value());
  EXPECT_EQ(failed.error().kind, ErrorKind::kNotFound);
  EXPECT_EQ(failed.error().message, "no number");
  EXPECT_EQ(failed.error().context, "n");
}

TEST(TokenTest, EachModeAndNetworkValueIsOneTokenWithItsName) {
  for (const policy::ModeToken& token : policy::kModeTokens) {
    EXPECT_EQ(policy::ToString(token.value), token.name);
    EXPECT_EQ(policy::ParseMode(token.name), token.value);
  }
  EXPECT_EQ(policy::kModes.size(), policy::kModeNames.size());
  EXPECT_EQ(policy::NetworkName(true), "allow");
  EXPECT_EQ(policy::NetworkName(false), "deny");
}

TEST(TokenTest, EachWaitReasonIsOneTokenWithItsName) {
  std::vector<std::string> names;
  for (const backend::WaitReasonToken& token : backend::kWaitReasonTokens) {
    EXPECT_EQ(backend::ToString(token.value), token.name);
    names.emplace_back(token.name);
  }
  EXPECT_EQ(backend::WaitReasonNames(), names);
  EXPECT_EQ(Join(names), "stdin_read, inferred_idle, timeout, session_exit, pattern");
}

}  // namespace
}  // namespace ptybox
