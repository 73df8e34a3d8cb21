// Resolve() on real files in a scratch tree: the operator file (explicit or default), the
// repository file in the workspace, the client's requested mode; and ResolveCwd().
#include "policy/resolver.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>

#include "policy/schema.h"
#include "tests/policy/temp_dir.h"

namespace ptybox::policy {
namespace {

namespace fs = std::filesystem;
using testing::Expand;
using testing::TempDir;

class ResolverTest : public ::testing::Test {
 protected:
  ResolverTest() : ws_(dir_.Dir("ws")) {
    inputs_.default_operator_policy = dir_.path() / "etc/policy.yaml";
    inputs_.workspace = ws_;
  }

  fs::path Operator(const std::string& text) {
    return dir_.File("etc/policy.yaml", Expand(text, dir_.path()));
  }
  fs::path Repo(const std::string& text) {
    return dir_.File("ws/.ptybox.yaml", Expand(text, dir_.path()));
  }
  ResolvedPolicy MustResolve() {
    auto resolved = Resolve(inputs_);
    EXPECT_TRUE(resolved.has_value()) << resolved.error().message;
    return resolved.value_or(ResolvedPolicy{});
  }
  // The error, with "{dir}" in `want` standing for the scratch directory.
  void ExpectError(ErrorKind kind, const std::string& want) {
    auto resolved = Resolve(inputs_);
    ASSERT_FALSE(resolved.has_value());
    EXPECT_EQ(resolved.error().kind, kind);
    EXPECT_EQ(resolved.error().message, Expand(want, dir_.path()));
  }

  TempDir dir_;
  fs::path ws_;
  ResolveInputs inputs_;
};

TEST_F(ResolverTest, WithNeitherFileTheDefaultsApply) {
  ResolvedPolicy p = MustResolve();
  EXPECT_EQ(p.mode, Mode::kWorkspaceWrite);
  EXPECT_EQ(p.ceiling, Mode::kDangerFullAccess);
  EXPECT_EQ(p.workspace_root, ws_);
  EXPECT_TRUE(p.writable_roots.empty());
  EXPECT_FALSE(p.network_allowed);
  EXPECT_EQ(p.env.pass, (std::vector<std::string>{"PATH", "HOME", "LANG", "LANGUAGE", "LC_ALL",
                                                  "LC_CTYPE", "TZ", "USER", "LOGNAME"}));
  EXPECT_TRUE(p.env.set.empty());
  EXPECT_EQ(p.limits.idle_silence_ms, Limits{}.idle_silence_ms);
  EXPECT_FALSE(p.limits.max_processes);
  EXPECT_TRUE(p.policy_files.empty());
  EXPECT_EQ(p.sources.at("mode"), "default");
  EXPECT_EQ(p.sources.at("ceiling"), "default");
  EXPECT_EQ(p.sources.at("workspace"), "command line");
  EXPECT_EQ(p.sources.at("writable"), "default");
  EXPECT_EQ(p.sources.at("network"), "default");
  EXPECT_EQ(p.sources.at("env"), "default");
  for (const LimitSpec& spec : LimitSpecs()) {
    EXPECT_EQ(p.sources.at("limits." + std::string(spec.key)), "default");
  }
}

// `hide`: the default credentials list, replaced by the operator's, added to by a repository
// (which can never reveal: it has no way to remove an entry).
TEST_F(ResolverTest, HiddenPathsLayerOperatorThenRepository) {
  ResolvedPolicy defaults = MustResolve();
  EXPECT_EQ(defaults.hidden.size(), DefaultHidden().size());
  EXPECT_NE(std::find(defaults.hidden.begin(), defaults.hidden.end(), "~/.ssh"),
            defaults.hidden.end());
  EXPECT_EQ(defaults.sources.at("hide"), "default");

  Repo("version: 1\nhide: [.env, ~/.ssh, ~/work/../.token]\n");
  ResolvedPolicy repo = MustResolve();
  EXPECT_EQ(repo.hidden.size(), DefaultHidden().size() + 2);
  EXPECT_EQ(repo.hidden[repo.hidden.size() - 2], (ws_ / ".env").string());
  EXPECT_EQ(repo.hidden.back(), "~/.token");
  EXPECT_EQ(repo.sources.at("hide"), Expand("default, {dir}/ws/.ptybox.yaml:2:7", dir_.path()));

  Operator("version: 1\nhide: [/srv/secret]\n");
  ResolvedPolicy op = MustResolve();
  EXPECT_EQ(op.hidden, (std::vector<std::string>{"/srv/secret", (ws_ / ".env").string(), "~/.ssh",
                                                 "~/.token"}));
}

TEST_F(ResolverTest, TheDefaultOperatorFileIsReadWhenPresent) {
  Operator("version: 1\nmode: read-only\nnetwork: allow\n");
  ResolvedPolicy p = MustResolve();
  EXPECT_EQ(p.mode, Mode::kReadOnly);
  EXPECT_TRUE(p.network_allowed);
  EXPECT_EQ(p.sources.at("mode"), Expand("{dir}/etc/policy.yaml:2:7", dir_.path()));
  EXPECT_EQ(p.policy_files, std::vector<fs::path>{dir_.path() / "etc/policy.yaml"});
}

TEST_F(ResolverTest, AnExplicitPolicyReplacesTheDefaultOne) {
  Operator("version: 1\nmode: read-only\n");
  inputs_.operator_policy = dir_.File("mine.yaml", "version: 1\nmode: danger-full-access\n");
  EXPECT_EQ(MustResolve().mode, Mode::kDangerFullAccess);
}

TEST_F(ResolverTest, AMissingExplicitPolicyIsAnError) {
  inputs_.operator_policy = dir_.path() / "nope.yaml";
  ExpectError(ErrorKind::kPolicyError,
              "cannot read the operator policy: open {dir}/nope.yaml: No such file or directory");
}

TEST_F(ResolverTest, AnInvalidOperatorFileCountsTheOtherProblems) {
  Operator("version: 1\nmode: rw\nnetwork: yes\nlimits: {timeoutMs: 0}\n");
  ExpectError(ErrorKind::kPolicyError,
              "{dir}/etc/policy.yaml:2:7: mode: expected one of read-only, workspace-write, "
              "danger-full-access, got `rw` (and 2 more problems; run `ptybox policy check "
              "{dir}/etc/policy.yaml` to list them)");
}

TEST_F(ResolverTest, RepositoryModeAboveTheCeilingIsDeniedNamingBothFiles) {
  Operator("version: 1\nmode: read-only\nceiling: read-only\n");
  Repo("version: 1\nmode: workspace-write\n");
  ExpectError(ErrorKind::kPolicyDenied,
              "{dir}/ws/.ptybox.yaml:2:7: mode: `workspace-write` is above the ceiling "
              "`read-only` set by {dir}/etc/policy.yaml:3:10; a repository policy may only "
              "narrow the operator policy. Lower `mode` in {dir}/ws/.ptybox.yaml, or raise "
              "`ceiling` in {dir}/etc/policy.yaml");
}

TEST_F(ResolverTest, RepositoryCannotReachDangerFullAccessThroughTheDefaultCeiling) {
  Repo("version: 1\nmode: danger-full-access\n");
  ExpectError(ErrorKind::kPolicyDenied,
              "{dir}/ws/.ptybox.yaml:2:7: mode: `danger-full-access` is above the operator's "
              "mode `workspace-write` (the built-in default; no operator policy sets it); a "
              "repository policy never widens the sandbox to danger-full-access, since anything "
              "running in the workspace could write .ptybox.yaml. Lower `mode` in "
              "{dir}/ws/.ptybox.yaml, or request the mode explicitly (--mode or "
              "policy_set_mode, allowed up to the ceiling `danger-full-access` set by the "
              "built-in default; no operator policy sets it)");
  // The same file with an explicit danger ceiling: still denied, the operator's mode decides.
  Operator("version: 1\nceiling: danger-full-access\n");
  auto resolved = Resolve(inputs_);
  ASSERT_FALSE(resolved.has_value());
  EXPECT_EQ(resolved.error().kind, ErrorKind::kPolicyDenied);
}

TEST_F(ResolverTest, RepositoryMayRaiseWithinTheCeilingBelowDanger) {
  Operator("version: 1\nmode: read-only\nceiling: workspace-write\n");
  Repo("version: 1\nmode: workspace-write\n");
  ResolvedPolicy p = MustResolve();
  EXPECT_EQ(p.mode, Mode::kWorkspaceWrite);
  EXPECT_EQ(p.sources.at("mode"), Expand("{dir}/ws/.ptybox.yaml:2:7", dir_.path()));
}

TEST_F(ResolverTest, RepositoryMayKeepDangerWhenTheOperatorChoseIt) {
  Operator("version: 1\nmode: danger-full-access\n");
  Repo("version: 1\nmode: danger-full-access\n");
  EXPECT_EQ(MustResolve().mode, Mode::kDangerFullAccess);
}

TEST_F(ResolverTest, RepositoryMayNarrowTheMode) {
  Operator("version: 1\nmode: danger-full-access\n");
  Repo("version: 1\nmode: read-only\n");
  EXPECT_EQ(MustResolve().mode, Mode::kReadOnly);
}

TEST_F(ResolverTest, RequestedModeIsBoundedByTheCeilingOnly) {
  Operator("version: 1\nmode: read-only\nceiling: workspace-write\n");
  Repo("version: 1\nmode: read-only\n");
  inputs_.requested_mode = Mode::kWorkspaceWrite;
  ResolvedPolicy p = MustResolve();
  EXPECT_EQ(p.mode, Mode::kWorkspaceWrite);
  EXPECT_EQ(p.sources.at("mode"), "client request");
  inputs_.requested_mode = Mode::kDangerFullAccess;
  ExpectError(ErrorKind::kPolicyDenied,
              "client request: mode: `danger-full-access` (requested by the client with "
              "policy_set_mode or --mode) is above the ceiling `workspace-write` set by "
              "{dir}/etc/policy.yaml:3:10; request a narrower mode, or ask the operator to "
              "raise `ceiling` in {dir}/etc/policy.yaml");
}

TEST_F(ResolverTest, RequestedDangerIsAllowedByTheDefaultCeiling) {
  inputs_.requested_mode = Mode::kDangerFullAccess;
  EXPECT_EQ(MustResolve().mode, Mode::kDangerFullAccess);
}

TEST_F(ResolverTest, RepositoryMayDenyNetworkButNotAllowIt) {
  Repo("version: 1\nnetwork: allow\n");
  ExpectError(ErrorKind::kPolicyDenied,
              "{dir}/ws/.ptybox.yaml:2:10: network: `allow` is not permitted: the operator "
              "denies network (the built-in default; no operator policy sets it); a repository "
              "policy may deny network but never allow it. Remove `network: allow` from "
              "{dir}/ws/.ptybox.yaml, or ask the operator to allow network");
  Operator("version: 1\nnetwork: deny\n");
  ExpectError(ErrorKind::kPolicyDenied,
              "{dir}/ws/.ptybox.yaml:2:10: network: `allow` is not permitted: the operator "
              "denies network ({dir}/etc/policy.yaml:2:10); a repository policy may deny "
              "network but never allow it. Remove `network: allow` from "
              "{dir}/ws/.ptybox.yaml, or ask the operator to allow network");
  Operator("version: 1\nnetwork: allow\n");
  EXPECT_TRUE(MustResolve().network_allowed);
  Repo("version: 1\nnetwork: deny\n");
  EXPECT_FALSE(MustResolve().network_allowed);
}

TEST_F(ResolverTest, RepositoryWritableRootsMustStayInsideTheWorkspace) {
  dir_.Dir("ws/build");
  dir_.Dir("outside");
  fs::create_symlink(dir_.path() / "outside", ws_ / "escape");
  Repo("version: 1\nwritable: [build, ../outside, escape, /tmp, build/..]\n");
  auto resolved = Resolve(inputs_);
  ASSERT_FALSE(resolved.has_value());
  EXPECT_EQ(resolved.error().kind, ErrorKind::kPolicyDenied);
  EXPECT_EQ(resolved.error().message,
            Expand("{dir}/ws/.ptybox.yaml:2:19: writable: {dir}/outside is outside the "
                   "workspace {dir}/ws (symbolic links and `..` resolved); a repository policy "
                   "may only name directories inside the workspace. Remove it (and 1 more "
                   "problem)",
                   dir_.path()));
  Repo("version: 1\nwritable: [build, build/.., ./build/../build]\n");
  ResolvedPolicy p = MustResolve();
  EXPECT_EQ(p.writable_roots, (std::vector<fs::path>{ws_ / "build", ws_}));
}

// A writable root inside a repository's .git would stay read-only (every .git in a writable root
// is protected): refused, whoever names it, instead of silently having no effect.
TEST_F(ResolverTest, AWritableRootInsideAProtectedGitIsRefused) {
  dir_.Dir("ws/.git/hooks");
  dir_.Dir("ws/vendor/lib/.git/objects");
  dir_.Dir("ws/build");
  dir_.Dir("cache/.git/info");
  Repo("version: 1\nwritable: [.git/hooks]\n");
  ExpectError(ErrorKind::kPolicyDenied,
              "{dir}/ws/.ptybox.yaml:2:12: writable: {dir}/ws/.git/hooks lies inside the "
              "repository data {dir}/ws/.git, which every workspace-write session gets read-only "
              "(every repository's .git in the workspace and the writable roots is protected: "
              "docs/security.md, \"Protected paths\"), so it would not be writable. Remove it; "
              "change that repository's .git from the host or a danger-full-access session");
  Repo("version: 1\nwritable: [build, vendor/lib/.git/objects]\n");
  ExpectError(ErrorKind::kPolicyDenied,
              "{dir}/ws/.ptybox.yaml:2:19: writable: {dir}/ws/vendor/lib/.git/objects lies "
              "inside the repository data {dir}/ws/vendor/lib/.git, which every workspace-write "
              "session gets read-only (every repository's .git in the workspace and the writable "
              "roots is protected: docs/security.md, \"Protected paths\"), so it would not be "
              "writable. Remove it; change that repository's .git from the host or a "
              "danger-full-access session");
  // The command line, and the operator's own roots: inside another granted root's .git.
  Repo("version: 1\n");
  inputs_.command_line = {{"--writable", ".git"}};
  auto resolved = Resolve(inputs_);
  ASSERT_FALSE(resolved.has_value());
  EXPECT_TRUE(resolved.error().message.starts_with(Expand(
      "command line --writable .git: writable: {dir}/ws/.git lies inside the repository data "
      "{dir}/ws/.git,",
      dir_.path())))
      << resolved.error().message;
  inputs_.command_line.clear();
  Operator("version: 1\nwritable: [../cache, ../cache/.git/info]\n");
  resolved = Resolve(inputs_);
  ASSERT_FALSE(resolved.has_value());
  EXPECT_NE(
      resolved.error().message.find(Expand(
          "{dir}/cache/.git/info lies inside the repository data {dir}/cache/.git,", dir_.path())),
      std::string::npos)
      << resolved.error().message;
  // A directory merely named like one, or a root that is itself a repository, is fine.
  dir_.Dir("ws/build/git");
  Operator("version: 1\nwritable: [../cache]\n");
  Repo("version: 1\nwritable: [build/git, vendor/lib]\n");
  EXPECT_EQ(MustResolve().writable_roots,
            (std::vector<fs::path>{dir_.path() / "cache", ws_ / "build/git", ws_ / "vendor/lib"}));
}

TEST_F(ResolverTest, OperatorWritableRootsMayBeAnywhere) {
  dir_.Dir("cache");
  dir_.Dir("ws/build");
  Operator("version: 1\nwritable: [../cache]\n");
  Repo("version: 1\nwritable: [build]\n");
  ResolvedPolicy p = MustResolve();
  EXPECT_EQ(p.writable_roots, (std::vector<fs::path>{dir_.path() / "cache", ws_ / "build"}));
  EXPECT_EQ(p.sources.at("writable"),
            Expand("{dir}/etc/policy.yaml:2:11, {dir}/ws/.ptybox.yaml:2:11", dir_.path()));
}

TEST_F(ResolverTest, RepositoryPassesOnlyNamesTheOperatorPasses) {
  Repo("version: 1\nenv:\n  pass: [PATH, AWS_SECRET_ACCESS_KEY]\n");
  ExpectError(ErrorKind::kPolicyDenied,
              "{dir}/ws/.ptybox.yaml:3:16: env.pass: `AWS_SECRET_ACCESS_KEY` is not passed by "
              "the operator policy (the built-in default; no operator policy sets it); a "
              "repository policy may pass only names the operator passes: PATH, HOME, LANG, "
              "LANGUAGE, LC_ALL, LC_CTYPE, TZ, USER, LOGNAME. Remove it");
  Operator("version: 1\nenv:\n  pass: [PATH, TERM, SSH_AUTH_SOCK]\n");
  Repo("version: 1\nenv:\n  pass: [TERM, PATH]\n");
  ResolvedPolicy p = MustResolve();
  EXPECT_EQ(p.env.pass, (std::vector<std::string>{"TERM", "PATH"}));
  EXPECT_EQ(p.sources.at("env.pass"), Expand("{dir}/ws/.ptybox.yaml:3:9", dir_.path()));
}

TEST_F(ResolverTest, RepositoryMayAddVariablesButNotChangeTheOperators) {
  Operator("version: 1\nenv:\n  set: {HTTP_PROXY: \"http://proxy:3128\"}\n");
  Repo("version: 1\nenv:\n  set: {CI: \"1\", HTTP_PROXY: \"\"}\n");
  ExpectError(ErrorKind::kPolicyDenied,
              "{dir}/ws/.ptybox.yaml:3:30: env.set.HTTP_PROXY: the operator policy sets "
              "`HTTP_PROXY` ({dir}/etc/policy.yaml:3:21); a repository policy may add variables "
              "but not change the operator's. Remove it");
  Repo("version: 1\nenv:\n  set: {CI: \"1\"}\n");
  ResolvedPolicy p = MustResolve();
  EXPECT_EQ(p.env.set,
            (std::map<std::string, std::string>{{"CI", "1"}, {"HTTP_PROXY", "http://proxy:3128"}}));
}

TEST_F(ResolverTest, RepositoryMayLowerResourceLimitsButNotRaiseThem) {
  Operator("version: 1\nlimits:\n  maxSessions: 8\n  maxMemoryBytes: 1073741824\n");
  Repo(
      "version: 1\nlimits:\n  maxSessions: 2\n  maxMemoryBytes: 536870912\n"
      "  maxProcesses: 64\n  scrollbackBytes: 65536\n");
  ResolvedPolicy p = MustResolve();
  EXPECT_EQ(p.limits.max_sessions, 2);
  EXPECT_EQ(p.limits.max_memory_bytes, 536870912);
  EXPECT_EQ(p.limits.max_processes, 64);  // the operator left it unset: any value narrows
  EXPECT_EQ(p.limits.scrollback_bytes, 65536);
  EXPECT_EQ(p.sources.at("limits.maxSessions"), Expand("{dir}/ws/.ptybox.yaml:3:16", dir_.path()));

  Repo("version: 1\nlimits:\n  maxSessions: 9\n");
  ExpectError(ErrorKind::kPolicyDenied,
              "{dir}/ws/.ptybox.yaml:3:16: limits.maxSessions: 9 is above the operator's 8 "
              "({dir}/etc/policy.yaml:3:16); a repository policy may lower resource limits, "
              "never raise them. Use at most 8");
  Repo("version: 1\nlimits:\n  maxResultBytes: 1048576\n");
  ExpectError(ErrorKind::kPolicyDenied,
              "{dir}/ws/.ptybox.yaml:3:19: limits.maxResultBytes: 1048576 is above the "
              "operator's 262144 (the built-in default; no operator policy sets it); a "
              "repository policy may lower resource limits, never raise them. Use at most "
              "262144");
}

TEST_F(ResolverTest, EveryLowerOnlyLimitRefusesARaise) {
  for (const LimitSpec& spec : LimitSpecs()) {
    if (spec.rule != LimitRule::kLowerOnly) continue;
    const int64_t op_value = spec.min;  // the repository asks for one more
    Operator("version: 1\nlimits:\n  " + std::string(spec.key) + ": " + std::to_string(op_value) +
             "\n");
    Repo("version: 1\nlimits:\n  " + std::string(spec.key) + ": " + std::to_string(op_value + 1) +
         "\n");
    auto resolved = Resolve(inputs_);
    ASSERT_FALSE(resolved.has_value()) << spec.key;
    EXPECT_EQ(resolved.error().kind, ErrorKind::kPolicyDenied) << spec.key;
  }
}

TEST_F(ResolverTest, RepositoryMaySetReadinessTimingsFreely) {
  Operator("version: 1\nlimits: {timeoutMs: 1000, idleSilenceMs: 100}\n");
  Repo("version: 1\nlimits: {timeoutMs: 600000, idleSilenceMs: 5000, handoffGraceMs: 0}\n");
  ResolvedPolicy p = MustResolve();
  EXPECT_EQ(p.limits.timeout_ms, 600000);
  EXPECT_EQ(p.limits.idle_silence_ms, 5000);
  EXPECT_EQ(p.limits.handoff_grace_ms, 0);
}

TEST_F(ResolverTest, OperatorOnlyKeysInARepositoryFileAreErrors) {
  Repo("version: 1\nceiling: danger-full-access\n");
  ExpectError(ErrorKind::kPolicyError,
              "{dir}/ws/.ptybox.yaml:2:1: ceiling: only the operator policy may set `ceiling`; "
              "a repository policy cannot widen or move the sandbox. Remove it (operators set it "
              "in /etc/ptybox/policy.yaml or the --policy file)"
              ". No session opens in this workspace until its owner fixes or removes "
              "{dir}/ws/.ptybox.yaml (anything running in a workspace-write session can write it)");
}

TEST_F(ResolverTest, OperatorWorkspaceAppliesOnlyWithoutACommandLineWorkspace) {
  dir_.Dir("srv/project");
  Operator("version: 1\nworkspace: ../srv/project\n");
  EXPECT_EQ(MustResolve().workspace_root, ws_);
  inputs_.workspace_from_cli = false;
  ResolvedPolicy p = MustResolve();
  EXPECT_EQ(p.workspace_root, dir_.path() / "srv/project");
  EXPECT_EQ(p.sources.at("workspace"), Expand("{dir}/etc/policy.yaml:2:12", dir_.path()));
  // The repository file then comes from that workspace.
  dir_.File("srv/project/.ptybox.yaml", "version: 1\nmode: read-only\n");
  EXPECT_EQ(MustResolve().mode, Mode::kReadOnly);
}

TEST_F(ResolverTest, TheWorkspaceMustBeAnExistingDirectory) {
  inputs_.workspace = dir_.path() / "nope";
  ExpectError(ErrorKind::kPolicyError,
              "--workspace: {dir}/nope cannot be used as the workspace: No such file or "
              "directory; create it or name an existing directory");
  inputs_.workspace = dir_.File("file", "x");
  ExpectError(ErrorKind::kPolicyError,
              "--workspace: {dir}/file is not a directory; the workspace must be a directory");
  Operator("version: 1\nworkspace: /nonexistent/ptybox-ws\n");
  inputs_.workspace_from_cli = false;
  ExpectError(ErrorKind::kPolicyError,
              "{dir}/etc/policy.yaml:2:12: workspace: /nonexistent/ptybox-ws cannot be used as "
              "the workspace: No such file or directory; create it or name an existing "
              "directory");
}

TEST_F(ResolverTest, TheWorkspaceRootIsCanonical) {
  fs::create_symlink(ws_, dir_.path() / "link");
  inputs_.workspace = dir_.path() / "link/../ws/.";
  EXPECT_EQ(MustResolve().workspace_root, ws_);
}

TEST_F(ResolverTest, ASymlinkedRepositoryFileIsRefused) {
  dir_.File("elsewhere.yaml", "version: 1\n");
  fs::create_symlink(dir_.path() / "elsewhere.yaml", ws_ / ".ptybox.yaml");
  ExpectError(ErrorKind::kPolicyError,
              "cannot read the repository policy: {dir}/ws/.ptybox.yaml: is a symbolic link; a "
              "repository policy must be a regular file in the workspace (replace the link with "
              "the file itself)"
              ". No session opens in this workspace until its owner fixes or removes "
              "{dir}/ws/.ptybox.yaml (anything running in a workspace-write session can write it)");
}

TEST_F(ResolverTest, AHardLinkedRepositoryFileIsRefused) {
  const auto outside = dir_.File("outside.yaml", "root:$6$secret\n");
  fs::create_hard_link(outside, ws_ / ".ptybox.yaml");
  ExpectError(ErrorKind::kPolicyError,
              "cannot read the repository policy: {dir}/ws/.ptybox.yaml: has 2 hard links; a "
              "repository policy must be a file of its own (copy it instead of linking it)"
              ". No session opens in this workspace until its owner fixes or removes "
              "{dir}/ws/.ptybox.yaml (anything running in a workspace-write session can write it)");
}

TEST_F(ResolverTest, ADanglingDefaultOperatorLinkIsAnErrorNotAbsence) {
  dir_.Dir("etc");
  fs::create_symlink(dir_.path() / "etc/gone.yaml", dir_.path() / "etc/policy.yaml");
  ExpectError(ErrorKind::kPolicyError,
              "cannot read the operator policy: {dir}/etc/policy.yaml: is a symbolic link to a "
              "file that does not exist; fix or remove the link");
}

TEST_F(ResolverTest, FilesAreReadAgainOnEveryCall) {
  Repo("version: 1\nmode: read-only\n");
  EXPECT_EQ(MustResolve().mode, Mode::kReadOnly);
  Repo("version: 1\nmode: workspace-write\n");
  EXPECT_EQ(MustResolve().mode, Mode::kWorkspaceWrite);
  fs::remove(ws_ / ".ptybox.yaml");
  Operator("version: 1\nmode: read-only\n");
  EXPECT_EQ(MustResolve().mode, Mode::kReadOnly);
}

TEST_F(ResolverTest, AnOperatorFileInsideTheWorkspaceIsNotReadTwice) {
  inputs_.operator_policy = Repo("version: 1\nceiling: read-only\nmode: read-only\n");
  ResolvedPolicy p = MustResolve();
  EXPECT_EQ(p.ceiling, Mode::kReadOnly);
  EXPECT_EQ(p.policy_files, std::vector<fs::path>{ws_ / ".ptybox.yaml"});
}

TEST_F(ResolverTest, PolicyFilesListsBothCanonically) {
  fs::create_symlink(dir_.path() / "etc", dir_.path() / "etc-link");
  dir_.File("etc/real.yaml", "version: 1\n");
  inputs_.operator_policy = dir_.path() / "etc-link/real.yaml";
  Repo("version: 1\n");
  EXPECT_EQ(MustResolve().policy_files,
            (std::vector<fs::path>{dir_.path() / "etc/real.yaml", ws_ / ".ptybox.yaml"}));
}

class ResolveCwdTest : public ::testing::Test {
 protected:
  ResolveCwdTest() {
    policy_.workspace_root = dir_.Dir("ws");
    dir_.Dir("ws/src/lib");
    dir_.Dir("outside");
    fs::create_symlink(dir_.path() / "outside", dir_.path() / "ws/escape");
  }
  TempDir dir_;
  ResolvedPolicy policy_;
};

TEST_F(ResolveCwdTest, DefaultsToTheWorkspaceRoot) {
  EXPECT_EQ(ResolveCwd(policy_, std::nullopt).value(), dir_.path() / "ws");
}

TEST_F(ResolveCwdTest, RelativeIsRelativeToTheWorkspaceRoot) {
  EXPECT_EQ(ResolveCwd(policy_, "src/lib").value(), dir_.path() / "ws/src/lib");
  EXPECT_EQ(ResolveCwd(policy_, "src/lib/../..").value(), dir_.path() / "ws");
  EXPECT_EQ(ResolveCwd(policy_, (dir_.path() / "ws/src").string()).value(), dir_.path() / "ws/src");
}

TEST_F(ResolveCwdTest, OutsideTheWorkspaceIsDeniedInConfinedModes) {
  for (Mode mode : {Mode::kReadOnly, Mode::kWorkspaceWrite}) {
    policy_.mode = mode;
    for (std::string cwd : {std::string(".."), std::string("escape"), std::string("/tmp"),
                            (dir_.path() / "outside").string()}) {
      auto resolved = ResolveCwd(policy_, cwd);
      ASSERT_FALSE(resolved.has_value()) << cwd;
      EXPECT_EQ(resolved.error().kind, ErrorKind::kPolicyDenied) << cwd;
    }
  }
  policy_.mode = Mode::kWorkspaceWrite;
  auto resolved = ResolveCwd(policy_, "escape");
  EXPECT_EQ(resolved.error().message,
            Expand("cwd escape is not inside the workspace root {dir}/ws; in mode "
                   "`workspace-write` a shell starts inside the workspace. Pick a directory "
                   "inside it, or omit cwd",
                   dir_.path()));
  // A sibling whose name starts with the root's is outside too (no string-prefix matching).
  dir_.Dir("ws2");
  EXPECT_FALSE(ResolveCwd(policy_, (dir_.path() / "ws2").string()).has_value());
}

// The answer for a path outside the workspace says nothing about the host: existing or not, a
// directory or not, reached by name or through a link, it is the same sentence naming only what
// the client sent (docs/security.md, "Every path the daemon resolves on a session's behalf": cwd
// "/proc/self/cwd" once named the daemon's directory).
TEST_F(ResolveCwdTest, OutsideAnswersRevealNothingAboutHostPaths) {
  for (Mode mode : {Mode::kReadOnly, Mode::kWorkspaceWrite}) {
    policy_.mode = mode;
    auto answer = [&](const std::string& cwd) {
      auto resolved = ResolveCwd(policy_, cwd);
      EXPECT_FALSE(resolved.has_value()) << cwd;
      if (resolved.has_value()) return std::string();
      EXPECT_EQ(resolved.error().kind, ErrorKind::kPolicyDenied) << cwd;
      EXPECT_EQ(resolved.error().context, "cwd");
      std::string message = resolved.error().message;
      const size_t at = message.find(cwd);
      EXPECT_EQ(at, 4u) << message;
      if (at == 4u) message.replace(at, cwd.size(), "X");
      return message;
    };
    const std::string exists = answer("/etc");
    EXPECT_EQ(answer("/nonexistent-ptybox-host-path"), exists);
    EXPECT_EQ(answer("/etc/hostname/deeper"), exists);  // below a file
    EXPECT_EQ(answer("/proc/self/cwd"), exists);
    EXPECT_EQ(answer("escape"), exists);  // a link inside the workspace to a host directory
    fs::create_directory_symlink("/nonexistent-ptybox-host-path", dir_.path() / "ws/dangling");
    EXPECT_EQ(answer("dangling"), exists);
    fs::remove(dir_.path() / "ws/dangling");
    EXPECT_EQ(exists.find(fs::current_path().string() + ";"), std::string::npos) << exists;
  }
}

TEST_F(ResolveCwdTest, DangerFullAccessMayStartAnywhere) {
  policy_.mode = Mode::kDangerFullAccess;
  EXPECT_EQ(ResolveCwd(policy_, "escape").value(), dir_.path() / "outside");
  EXPECT_EQ(ResolveCwd(policy_, "/").value(), fs::path("/"));
}

TEST_F(ResolveCwdTest, MustBeAnExistingDirectory) {
  auto missing = ResolveCwd(policy_, "nope");
  ASSERT_FALSE(missing.has_value());
  EXPECT_EQ(missing.error().kind, ErrorKind::kInvalidParams);
  EXPECT_EQ(missing.error().message,
            Expand("cwd nope ({dir}/ws/nope) cannot be used: No such file or directory; name "
                   "an existing directory (relative paths start at the workspace root)",
                   dir_.path()));
  dir_.File("ws/file", "x");
  auto file = ResolveCwd(policy_, "file");
  ASSERT_FALSE(file.has_value());
  EXPECT_EQ(file.error().kind, ErrorKind::kInvalidParams);
  EXPECT_FALSE(ResolveCwd(policy_, "").has_value());
  EXPECT_FALSE(ResolveCwd(policy_, std::string("a\0b", 3)).has_value());
}

}  // namespace
}  // namespace ptybox::policy

namespace ptybox::policy {
namespace {

class NetworkNamesResolverTest : public ResolverTest {};

std::vector<std::string> Patterns(const std::vector<NetworkRule>& rules) {
  std::vector<std::string> out;
  for (const auto& rule : rules) out.push_back(ToString(rule.pattern));
  return out;
}

TEST_F(NetworkNamesResolverTest, TheOperatorListIsTheSessionsWithSources) {
  Operator(
      "version: 1\nnetwork:\n  allow: [registry.npmjs.org, \"*.example.org:8443\"]\n"
      "  deny: [bad.example.org:8443]\n");
  ResolvedPolicy p = MustResolve();
  EXPECT_FALSE(p.network_allowed) << "the session keeps its own network namespace";
  ASSERT_TRUE(p.network_names);
  EXPECT_EQ(Patterns(p.network_names->allow),
            (std::vector<std::string>{"registry.npmjs.org", "*.example.org:8443"}));
  EXPECT_EQ(Patterns(p.network_names->deny), (std::vector<std::string>{"bad.example.org:8443"}));
  EXPECT_EQ(p.network_names->allow[1].where, Expand("{dir}/etc/policy.yaml:3:31", dir_.path()));
  EXPECT_EQ(p.sources.at("network"), Expand("{dir}/etc/policy.yaml:3:3", dir_.path()));
}

TEST_F(NetworkNamesResolverTest, ARepositoryNarrowsButNeverWidens) {
  Operator("version: 1\nnetwork: {allow: [\"*.example.org\", registry.npmjs.org]}\n");
  Repo("version: 1\nnetwork: {allow: [www.example.org], deny: [registry.npmjs.org]}\n");
  ResolvedPolicy p = MustResolve();
  ASSERT_TRUE(p.network_names);
  EXPECT_EQ(Patterns(p.network_names->allow), (std::vector<std::string>{"www.example.org"}));
  EXPECT_EQ(Patterns(p.network_names->deny), (std::vector<std::string>{"registry.npmjs.org"}));
  EXPECT_NE(p.network_names->source.find("narrowed by"), std::string::npos);

  // Only more denies: the operator's allows stay.
  Repo("version: 1\nnetwork: {deny: [www.example.org]}\n");
  p = MustResolve();
  EXPECT_EQ(Patterns(p.network_names->allow),
            (std::vector<std::string>{"*.example.org", "registry.npmjs.org"}));

  Repo("version: 1\nnetwork: {allow: [evil.test, \"localhost\"]}\n");
  ExpectError(ErrorKind::kPolicyDenied,
              "{dir}/ws/.ptybox.yaml:2:19: network.allow: `evil.test` is not permitted: it is "
              "not within the operator's allow list ({dir}/etc/policy.yaml:2:10); a repository "
              "policy may only narrow that list. Remove it from {dir}/ws/.ptybox.yaml, or ask "
              "the operator to allow it (and 1 more problem)");
  Repo("version: 1\nnetwork: allow\n");
  auto resolved = Resolve(inputs_);
  ASSERT_FALSE(resolved);
  EXPECT_NE(resolved.error().message.find("the operator allows only the names listed at"),
            std::string::npos);
  Repo("version: 1\nnetwork: deny\n");
  p = MustResolve();
  EXPECT_FALSE(p.network_names);
  EXPECT_FALSE(p.network_allowed);
}

TEST_F(NetworkNamesResolverTest, UnderADeniedNetworkARepositoryListAllowsNothing) {
  Repo("version: 1\nnetwork: {allow: [registry.npmjs.org]}\n");
  ExpectError(ErrorKind::kPolicyDenied,
              "{dir}/ws/.ptybox.yaml:2:19: network.allow: `registry.npmjs.org` is not "
              "permitted: the operator denies network (the built-in default; no operator policy "
              "sets it); a repository policy may deny network but never allow a name. Remove it "
              "from {dir}/ws/.ptybox.yaml, or ask the operator to allow it");
  Operator("version: 1\nnetwork: allow\n");
  ResolvedPolicy p = MustResolve();
  EXPECT_FALSE(p.network_allowed) << "under `allow` a repository list narrows to its names";
  ASSERT_TRUE(p.network_names);
  EXPECT_EQ(Patterns(p.network_names->allow), (std::vector<std::string>{"registry.npmjs.org"}));
}

TEST_F(NetworkNamesResolverTest, BadPatternsAreReportedWithTheirPlace) {
  Operator("version: 1\nnetwork: {allow: [\"*\", ok.example.org], deny: 3, other: []}\n");
  auto resolved = Resolve(inputs_);
  ASSERT_FALSE(resolved);
  EXPECT_NE(resolved.error().message.find("network.allow[0]: `*`: `*` alone would allow every"),
            std::string::npos)
      << resolved.error().message;
}

}  // namespace
}  // namespace ptybox::policy
