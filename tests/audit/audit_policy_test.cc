// The `audit` policy key: an operator file sets it; a repository file may not set or change
// it (a located policy error), like every key that moves what the operator controls.
#include <gtest/gtest.h>

#include "policy/policy_file.h"
#include "policy/schema.h"

namespace ptybox::policy {
namespace {

TEST(AuditPolicyTest, AnOperatorFileSetsTheAuditLogAndRecordings) {
  ParsedPolicyFile parsed = ParsePolicyText(
      "version: 1\naudit:\n  log: /var/log/ptybox/audit.jsonl\n  recordDir: sessions\n"
      "  recordMaxBytes: 1048576\n",
      "/etc/ptybox/policy.yaml", PolicyRole::kOperator);
  ASSERT_TRUE(parsed.errors.empty()) << parsed.errors.front().message;
  ASSERT_TRUE(parsed.file.audit_log);
  EXPECT_EQ(parsed.file.audit_log->value, "/var/log/ptybox/audit.jsonl");
  EXPECT_EQ(parsed.file.audit_log->where, "/etc/ptybox/policy.yaml:3:8");
  ASSERT_TRUE(parsed.file.audit_record_dir);
  EXPECT_EQ(parsed.file.audit_record_dir->value, "/etc/ptybox/sessions");
  ASSERT_TRUE(parsed.file.audit_record_max_bytes);
  EXPECT_EQ(parsed.file.audit_record_max_bytes->value, 1048576);
}

TEST(AuditPolicyTest, ARepositoryFileMayNotSetIt) {
  ParsedPolicyFile parsed = ParsePolicyText("version: 1\naudit: {log: /tmp/elsewhere.jsonl}\n",
                                            "/ws/.ptybox.yaml", PolicyRole::kRepository);
  ASSERT_EQ(parsed.errors.size(), 1u);
  EXPECT_EQ(parsed.errors[0].kind, ErrorKind::kPolicyError);
  EXPECT_EQ(parsed.errors[0].message,
            "/ws/.ptybox.yaml:2:1: audit: only the operator policy may set `audit`; a repository "
            "policy cannot widen or move the sandbox. Remove it (operators set it in "
            "/etc/ptybox/policy.yaml or the --policy file)");
  EXPECT_FALSE(parsed.file.audit_log);
  EXPECT_TRUE(IsOperatorOnlyKey("audit"));
}

TEST(AuditPolicyTest, BadValuesAreLocatedErrors) {
  ParsedPolicyFile parsed =
      ParsePolicyText("version: 1\naudit:\n  log: ''\n  recordMaxBytes: 10\n  recrdDir: /x\n",
                      "/etc/ptybox/policy.yaml", PolicyRole::kOperator);
  ASSERT_EQ(parsed.errors.size(), 3u);
  EXPECT_NE(parsed.errors[0].message.find("policy.yaml:3:8: audit.log: expected a path"),
            std::string::npos)
      << parsed.errors[0].message;
  EXPECT_NE(parsed.errors[1].message.find("policy.yaml:4:19: audit.recordMaxBytes: expected an "
                                          "integer from 65536"),
            std::string::npos)
      << parsed.errors[1].message;
  EXPECT_NE(parsed.errors[2].message.find("audit.recrdDir: unknown key; did you mean "
                                          "`recordDir`?"),
            std::string::npos)
      << parsed.errors[2].message;
  ParsedPolicyFile scalar = ParsePolicyText("version: 1\naudit: /var/log/a\n",
                                            "/etc/ptybox/policy.yaml", PolicyRole::kOperator);
  ASSERT_EQ(scalar.errors.size(), 1u);
  EXPECT_NE(scalar.errors[0].message.find("audit: expected a mapping"), std::string::npos);
}

}  // namespace
}  // namespace ptybox::policy
