// What one owner's repository file may cost the others (docs/policy.md, "What a repository file
// may set"), the parse cache by file identity, the `hide` entries no spawn survives, and
// `policy check` on files that are links or not policies at all.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "policy/parse_cache.h"
#include "policy/report.h"
#include "policy/resolver.h"
#include "policy/schema.h"
#include "tests/policy/temp_dir.h"

namespace ptybox::policy {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

class SharedCostTest : public ::testing::Test {
 protected:
  SharedCostTest() : ws_(dir_.Dir("ws")) {
    inputs_.default_operator_policy = dir_.path() / "etc/policy.yaml";
    inputs_.workspace = ws_;
  }
  void Operator(const std::string& text) { dir_.File("etc/policy.yaml", text); }
  void Repo(const std::string& text) { dir_.File("ws/.ptybox.yaml", text); }
  TempDir dir_;
  fs::path ws_;
  ResolveInputs inputs_;
};

TEST_F(SharedCostTest, OnlyTheOperatorSetsTheDetachGrace) {
  Operator("version: 1\nlimits: {detachGraceMs: 600000}\n");
  for (const char* asked : {"0", "1000", "600000", "900000"}) {
    Repo(std::string("version: 1\nlimits: {detachGraceMs: ") + asked + "}\n");
    auto resolved = Resolve(inputs_);
    ASSERT_FALSE(resolved.has_value()) << asked;
    EXPECT_EQ(resolved.error().kind, ErrorKind::kPolicyDenied);
    EXPECT_NE(resolved.error().message.find(
                  ".ptybox.yaml:2:25: limits.detachGraceMs: only the operator policy may set it"),
              std::string::npos)
        << resolved.error().message;
    // What a disconnect uses: the operator's value, whatever the repository file says.
    auto grace = ReadOperatorDetachGrace(inputs_);
    ASSERT_TRUE(grace.has_value());
    EXPECT_EQ(*grace, 600000);
  }
  Repo("version: 2\n");  // a file no daemon reads refuses spawns, and still not the grace
  EXPECT_FALSE(Resolve(inputs_).has_value());
  EXPECT_EQ(ReadOperatorDetachGrace(inputs_).value_or(-1), 600000);
}

TEST_F(SharedCostTest, ARepositoryPollIntervalIsFlooredAndTheOperatorsIsNot) {
  Repo("version: 1\nlimits: {pollIntervalMs: 1}\n");
  auto resolved = Resolve(inputs_);
  ASSERT_FALSE(resolved.has_value());
  EXPECT_EQ(resolved.error().kind, ErrorKind::kPolicyDenied);
  EXPECT_NE(resolved.error().message.find("limits.pollIntervalMs: 1 is below 10, the least a "
                                          "repository policy may ask"),
            std::string::npos)
      << resolved.error().message;
  Repo("version: 1\nlimits: {pollIntervalMs: 10}\n");
  auto floor = Resolve(inputs_);
  ASSERT_TRUE(floor.has_value()) << floor.error().message;
  EXPECT_EQ(floor->limits.poll_interval_ms, 10);
  fs::remove(ws_ / ".ptybox.yaml");
  Operator("version: 1\nlimits: {pollIntervalMs: 1}\n");
  auto op = Resolve(inputs_);
  ASSERT_TRUE(op.has_value()) << op.error().message;
  EXPECT_EQ(op->limits.poll_interval_ms, 1);
}

TEST(ParseCacheTest, ValidOnlyForTheSameIdentityWrittenBeforeTheMargin) {
  FileIdentity a{1, 2, 3, {100, 0}, {100, 0}};
  const timespec margin{1, 0};
  EXPECT_TRUE(CachedParseStillValid(a, a, {102, 0}, margin));
  EXPECT_FALSE(CachedParseStillValid(a, a, {101, 0}, margin));  // racy: same second plus one
  EXPECT_FALSE(CachedParseStillValid(a, a, {100, 500}, margin));
  for (auto change :
       {+[](FileIdentity& f) { f.dev = 9; }, +[](FileIdentity& f) { f.ino = 9; },
        +[](FileIdentity& f) { f.size = 9; }, +[](FileIdentity& f) { f.mtime.tv_nsec = 1; },
        +[](FileIdentity& f) { f.ctime.tv_sec = 99; }}) {
    FileIdentity b = a;
    change(b);
    EXPECT_FALSE(CachedParseStillValid(a, b, {200, 0}, margin));
  }
}

TEST(ParseCacheTest, AnUnchangedFileIsParsedOnceAndAChangedOneAgain) {
  TempDir dir;
  const fs::path file = dir.File("p.yaml", "version: 1\nmode: read-only\n");
  // Past the racy margin of the write (a lower bound: a busy machine only adds to it).
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));
  const CacheStats before = PolicyCacheStats();
  for (int i = 0; i < 5; ++i) {
    auto yaml = ReadPolicyYaml(file, {});
    ASSERT_TRUE(yaml.has_value() && *yaml);
    EXPECT_TRUE((**yaml)->tree.has_value());
  }
  const CacheStats after = PolicyCacheStats();
  EXPECT_EQ(after.parses - before.parses, 1u);
  EXPECT_EQ(after.hits - before.hits, 4u);
  std::ofstream(file, std::ios::app) << "network: deny\n";
  auto changed = ReadPolicyYaml(file, {});
  ASSERT_TRUE(changed.has_value() && *changed);
  EXPECT_EQ((**changed)->tree->entries.size(), 3u);
  EXPECT_EQ(PolicyCacheStats().parses - after.parses, 1u);
}

TEST(HideRuleTest, PathsEverySessionNeedsCannotBeHidden) {
  for (const char* path :
       {"/", "/usr", "/usr/", "/lib64", "/etc", "/dev", "/proc", "/run", "/usr/bin/bash", "/bin/sh",
        "/usr/bin", "/var", "/var/run", "/tmp", "/sys"}) {
    EXPECT_TRUE(UncoverableHideReason(path).has_value()) << path;
  }
  for (const char* path : {"/usr/local/secret", "/etc/shadow", "/home/u/.ssh", "/tmp/ws/.env",
                           "/var/lib/secret", "/opt", "/srv/x", "/usrx", "/runs"}) {
    EXPECT_FALSE(UncoverableHideReason(path).has_value()) << path;
  }
  ParsedPolicyFile parsed = ParsePolicyText("version: 1\nhide: [/usr/local/s, /var]\n", "/x/p.yaml",
                                            PolicyRole::kOperator);
  ASSERT_EQ(parsed.errors.size(), 1u);
  EXPECT_EQ(parsed.errors[0].message,
            "/x/p.yaml:2:22: hide[1]: `/var` holds /var/run, a path every session needs to "
            "start; covering it would make every spawn fail. Hide the secret files beside it or "
            "inside it instead");
}

TEST(PolicyCheckTest, ALinkedFileIsRefusedAndNothingOfItIsShown) {
  TempDir dir;
  const fs::path secret =
      dir.File("shadow", "root:$6$SECRET-HASH-LINE:19000:0:99999:7:::\nuser:$6$SECRET2:1:::\n");
  const fs::path link = dir.path() / "policy.yaml";
  fs::create_symlink(secret, link);
  for (PolicyRole role : {PolicyRole::kOperator, PolicyRole::kRepository}) {
    std::vector<Error> errors = CheckPolicyFile(link, role);
    ASSERT_EQ(errors.size(), 1u);
    EXPECT_NE(errors[0].message.find("is a symbolic link"), std::string::npos) << errors[0].message;
    EXPECT_EQ(errors[0].message.find("SECRET"), std::string::npos) << errors[0].message;
  }
  // A hard link is refused too; the file itself (not a policy) is named, its lines are not.
  const fs::path hard = dir.path() / "hard.yaml";
  fs::create_hard_link(secret, hard);
  EXPECT_NE(CheckPolicyFile(hard, PolicyRole::kOperator)[0].message.find("hard links"),
            std::string::npos);
  fs::remove(hard);
  std::vector<Error> direct = CheckPolicyFile(secret, PolicyRole::kOperator);
  ASSERT_EQ(direct.size(), 1u);
  EXPECT_NE(direct[0].message.find("is not a policy file"), std::string::npos);
  EXPECT_EQ(direct[0].message.find("SECRET"), std::string::npos) << direct[0].message;
  // The operator file at its default place may be a link, as the resolver allows.
  const fs::path good = dir.File("real.yaml", "version: 1\n");
  const fs::path default_link = dir.path() / "default.yaml";
  fs::create_symlink(good, default_link);
  EXPECT_TRUE(CheckPolicyFile(default_link, PolicyRole::kOperator, true).empty());
}

TEST(PolicyCheckTest, AHideEntryLeadingToANeededDirectoryIsFlagged) {
  TempDir dir;
  fs::create_directory_symlink("/usr", dir.path() / "usr-link");
  const fs::path file =
      dir.File("op.yaml", "version: 1\nhide: [" + (dir.path() / "usr-link").string() + "]\n");
  std::vector<Error> errors = CheckPolicyFile(file, PolicyRole::kOperator);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].message.find("usr-link` leads to `/usr` is a path every session "
                                   "needs to start"),
            std::string::npos)
      << errors[0].message;
}

}  // namespace
}  // namespace ptybox::policy
