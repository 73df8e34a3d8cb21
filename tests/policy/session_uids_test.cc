// The operator key `sessionIds`: parsed with its bounds, refused in a repository file, and
// carried into the resolved policy with its source.
#include <gtest/gtest.h>

#include "policy/policy_file.h"

namespace ptybox::policy {
namespace {

TEST(SessionUidsTest, OperatorSetsTheRange) {
  ParsedPolicyFile parsed =
      ParsePolicyText("version: 1\nsessionIds: {first: 300000000, count: 1024}\n", "/etc/p.yaml",
                      PolicyRole::kOperator);
  ASSERT_TRUE(parsed.errors.empty()) << parsed.errors[0].message;
  ASSERT_TRUE(parsed.file.session_uids);
  EXPECT_EQ(parsed.file.session_uids->value.first, SessionUid(300000000u));
  EXPECT_EQ(parsed.file.session_uids->value.count, 1024u);
  EXPECT_EQ(parsed.file.session_uids->where, "/etc/p.yaml:2:13");
}

TEST(SessionUidsTest, ARepositoryFileMayNotSetIt) {
  ParsedPolicyFile parsed = ParsePolicyText("version: 1\nsessionIds: {first: 1, count: 1}\n",
                                            "/w/.ptybox.yaml", PolicyRole::kRepository);
  ASSERT_EQ(parsed.errors.size(), 1u);
  EXPECT_NE(parsed.errors[0].message.find("only the operator policy may set `sessionIds`"),
            std::string::npos)
      << parsed.errors[0].message;
  EXPECT_FALSE(parsed.file.session_uids);
}

TEST(SessionUidsTest, BoundsAndShapeAreChecked) {
  for (const char* bad :
       {"sessionIds: 5", "sessionIds: {first: 0, count: 1}", "sessionIds: {first: 1, count: 0}",
        "sessionIds: {first: 1}", "sessionIds: {first: 4294967290, count: 100}",
        "sessionIds: {first: 1, count: 2000000}", "sessionIds: {first: 1, count: 1, extra: 2}",
        "sessionIds: {first: \"7\", count: 1}"}) {
    ParsedPolicyFile parsed = ParsePolicyText(std::string("version: 1\n") + bad + "\n",
                                              "/etc/p.yaml", PolicyRole::kOperator);
    EXPECT_FALSE(parsed.errors.empty()) << bad;
    EXPECT_FALSE(parsed.file.session_uids) << bad;
    if (!parsed.errors.empty()) {
      EXPECT_NE(parsed.errors[0].message.find("sessionIds"), std::string::npos)
          << parsed.errors[0].message;
    }
  }
}

TEST(SessionUidsTest, TheDefaultIsAboveSubuidRangesAndBelowTwoToThe31) {
  const SessionUidRange range;
  EXPECT_EQ(range.first, SessionUid(0x7FFF0000u));
  EXPECT_EQ(range.count, 65536u);
  EXPECT_GT(range.first, SessionUid(600100000u));
  EXPECT_LE(range.End(), uint64_t{1} << 31);
}

}  // namespace
}  // namespace ptybox::policy
