// The environment rules and the repository-file rules (docs/security.md, "Repository files and
// environment"): one source for names and values, a repository file's env.set on an allowlist
// with a floor of code-loading names, nothing of a repository file in danger-full-access unless
// the operator trusts it, `policy check` applying the layering a spawn applies.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "policy/layering.h"
#include "policy/report.h"
#include "policy/resolver.h"
#include "policy/schema.h"
#include "tests/policy/temp_dir.h"

namespace ptybox::policy {
namespace {

namespace fs = std::filesystem;
using testing::Expand;
using testing::TempDir;

// ---- One source for names and values.

TEST(EnvRulesTest, OneFunctionJudgesEveryName) {
  EXPECT_EQ(EnvNameProblem("CI", EnvUse::kSet), std::nullopt);
  EXPECT_EQ(EnvNameProblem(std::string(kMaxEnvNameBytes, 'A'), EnvUse::kSet), std::nullopt);
  // terminal_open once accepted these while policy files refused them (docs/security.md,
  // "Repository files and environment").
  for (std::string_view name : {"SHELLOPTS", "BASHOPTS", "BASH_XTRACEFD", "PROMPT_COMMAND", "PS0",
                                "BASH_ENV", "ENV", "PTYBOX_X", "TERM"}) {
    auto problem = EnvNameProblem(name, EnvUse::kSet);
    ASSERT_TRUE(problem.has_value()) << name;
    EXPECT_EQ(problem->find("`" + std::string(name) + "` is reserved: "), 0u) << *problem;
  }
  EXPECT_EQ(*EnvNameProblem(std::string(kMaxEnvNameBytes + 1, 'A'), EnvUse::kSet),
            "`" + std::string(64, 'A') +
                "...` is not a valid variable name; use letters, digits and `_`, not starting with "
                "a digit (at most 128 characters)");
  EXPECT_TRUE(EnvNameProblem(std::string("A\0B", 3), EnvUse::kSet).has_value());
  EXPECT_TRUE(EnvNameProblem("A=B", EnvUse::kPass).has_value());
  // TERM is the terminal's: it may be passed (ptybox run hands on the caller's), never set.
  EXPECT_EQ(EnvNameProblem("TERM", EnvUse::kPass), std::nullopt);
  EXPECT_TRUE(EnvNameProblem("SHELLOPTS", EnvUse::kPass).has_value());
}

TEST(EnvRulesTest, ValuesRefuseNulAndAreBounded) {
  EXPECT_EQ(EnvValueProblem(""), std::nullopt);
  EXPECT_EQ(EnvValueProblem(std::string(kMaxEnvValueBytes, 'x')), std::nullopt);
  // A NUL would end the value and start a smuggled variable (docs/security.md, "Repository
  // files and environment").
  const std::string smuggled("x\0PROMPT_COMMAND=true\0PS0=$(id)", 31);
  EXPECT_EQ(*EnvValueProblem(smuggled),
            "the value contains a NUL character at byte 1; a variable's value cannot hold NUL (it "
            "would end the value and start another variable)");
  EXPECT_EQ(*EnvValueProblem(std::string(kMaxEnvValueBytes + 1, 'x')),
            "the value has 32769 bytes; at most 32768 are allowed");
}

TEST(EnvRulesTest, PatternIsDerivedFromTheNameBound) {
  EXPECT_EQ(EnvNamePattern(), "^[A-Za-z_][A-Za-z0-9_]{0,127}$");
  // The reserved list the MCP schema and docs state is the list the checks use.
  for (EnvUse use : {EnvUse::kPass, EnvUse::kSet}) {
    for (std::string_view name : ReservedEnvNames(use)) {
      EXPECT_TRUE(ReservedEnvReason(name, use).has_value()) << name;
    }
  }
}

TEST(EnvRulesTest, RepositoryDefaultsAreHarmlessAndTheFloorCoversLoaderAndStartupNames) {
  for (std::string_view name : DefaultRepositoryEnvSet()) {
    EXPECT_EQ(EnvNameProblem(name, EnvUse::kSet), std::nullopt) << name;
    EXPECT_EQ(CodeLoadingEnvReason(name), std::nullopt) << name;
  }
  for (std::string_view name : {"LD_PRELOAD",
                                "LD_LIBRARY_PATH",
                                "LD_AUDIT",
                                "BASH_ENV",
                                "ENV",
                                "PROMPT_COMMAND",
                                "PS0",
                                "PS4",
                                "SHELLOPTS",
                                "BASHOPTS",
                                "TMOUT",
                                "IFS",
                                "PATH",
                                "HOME",
                                "GCONV_PATH",
                                "GLIBC_TUNABLES",
                                "PYTHONSTARTUP",
                                "PYTHONPATH",
                                "NODE_OPTIONS",
                                "PERL5OPT",
                                "RUBYOPT",
                                "JAVA_TOOL_OPTIONS",
                                "GIT_SSH_COMMAND",
                                "GIT_CONFIG_GLOBAL",
                                "EDITOR",
                                "PAGER",
                                "LESSOPEN",
                                "MAKEFLAGS",
                                "XDG_CONFIG_HOME",
                                "CC",
                                "CFLAGS",
                                "RUSTC_WRAPPER",
                                "CARGO_BUILD_RUSTC_WRAPPER",
                                "npm_config_script_shell",
                                "MAILPATH",
                                "LC_ALL"}) {
    EXPECT_TRUE(CodeLoadingEnvReason(name).has_value()) << name;
  }
}

// ---- Layering of repository files.

class RepositoryEnvTest : public ::testing::Test {
 protected:
  RepositoryEnvTest() : ws_(dir_.Dir("ws")) {
    inputs_.default_operator_policy = dir_.path() / "etc/policy.yaml";
    inputs_.workspace = ws_;
  }
  void Operator(const std::string& text) {
    dir_.File("etc/policy.yaml", Expand(text, dir_.path()));
  }
  void Repo(const std::string& text) { dir_.File("ws/.ptybox.yaml", Expand(text, dir_.path())); }
  std::string ErrorOf() {
    auto resolved = Resolve(inputs_);
    if (resolved) return "(resolved)";
    return resolved.error().message;
  }

  TempDir dir_;
  fs::path ws_;
  ResolveInputs inputs_;
};

// The message names the operator file where this daemon would read one (the inputs' default
// path, as PTYBOX_OPERATOR_POLICY moves it), not a path written into the layering.
TEST_F(RepositoryEnvTest, LoaderVariablesAreRefused) {
  Repo("version: 1\nenv:\n  set: {LD_PRELOAD: /w/evil.so}\n");
  EXPECT_EQ(ErrorOf(),
            Expand("{dir}/ws/.ptybox.yaml:3:21: env.set.LD_PRELOAD: `LD_PRELOAD` can make a "
                   "program load or run code, or read its startup or configuration files from "
                   "elsewhere; a repository file can be written by anything that runs in the "
                   "workspace, so it may never set it. Remove it (an operator can set it in the "
                   "operator policy's `env.set`, {dir}/etc/policy.yaml)",
                   dir_.path()));
}

TEST_F(RepositoryEnvTest, NamesOffTheAllowlistAreRefusedAndTheAllowlistIsTheOperators) {
  Repo("version: 1\nenv:\n  set: {MY_FLAG: \"1\"}\n");
  EXPECT_NE(ErrorOf().find("env.set.MY_FLAG: `MY_FLAG` is not among the names a repository "
                           "policy may set (the built-in default; no operator policy sets it): "
                           "CI, CLICOLOR,"),
            std::string::npos)
      << ErrorOf();
  EXPECT_NE(ErrorOf().find("ask the operator to list it under `repository.envSet`"),
            std::string::npos);
  Operator("version: 1\nrepository:\n  envSet: [MY_FLAG]\n");
  auto resolved = Resolve(inputs_);
  ASSERT_TRUE(resolved.has_value()) << resolved.error().message;
  EXPECT_EQ(resolved->env.set.at("MY_FLAG"), "1");
  // The operator's list replaces the default one.
  Repo("version: 1\nenv:\n  set: {CI: \"1\"}\n");
  EXPECT_NE(ErrorOf().find("`CI` is not among the names"), std::string::npos) << ErrorOf();
}

TEST_F(RepositoryEnvTest, TheOperatorCannotDelegateCodeLoadingNames) {
  Operator("version: 1\nrepository:\n  envSet: [CI, LD_PRELOAD, TMOUT]\n");
  EXPECT_EQ(ErrorOf(),
            Expand("{dir}/etc/policy.yaml:3:16: repository.envSet[1]: `LD_PRELOAD` can make a "
                   "program load or run code, or read its startup or configuration files from "
                   "elsewhere; a repository file can be written by anything that runs in the "
                   "workspace, so it may never set it. Remove it; if sessions need it, set it in "
                   "this file's own `env.set` (and 1 more problem; run `ptybox policy check "
                   "{dir}/etc/policy.yaml` to list them)",
                   dir_.path()));
  // The operator's own env.set may still set anything but the backend's names.
  Operator("version: 1\nenv:\n  set: {LD_LIBRARY_PATH: /opt/lib}\n");
  EXPECT_EQ(ErrorOf(), "(resolved)");
}

TEST_F(RepositoryEnvTest, RepositoryKeyIsOperatorOnlyAndChecked) {
  Repo("version: 1\nrepository: {trustInDangerFullAccess: true}\n");
  EXPECT_NE(ErrorOf().find("repository: only the operator policy may set `repository`"),
            std::string::npos)
      << ErrorOf();
  dir_.File("ws/.ptybox.yaml", "version: 1\n");
  Operator("version: 1\nrepository: {trustInDangerFullAccess: yes, envSett: []}\n");
  auto file = CheckPolicyFile(dir_.path() / "etc/policy.yaml", PolicyRole::kOperator);
  ASSERT_EQ(file.size(), 2u);
  EXPECT_NE(file[0].message.find("repository.trustInDangerFullAccess: expected `true` or "
                                 "`false`, got `yes`"),
            std::string::npos)
      << file[0].message;
  EXPECT_NE(file[1].message.find("repository.envSett: unknown key; did you mean `envSet`?"),
            std::string::npos)
      << file[1].message;
}

TEST_F(RepositoryEnvTest, NothingOfARepositoryFileReachesDangerFullAccess) {
  Repo("version: 1\nenv:\n  set: {CI: \"repo\"}\nlimits: {maxSessions: 1}\n");
  inputs_.requested_mode = Mode::kDangerFullAccess;
  auto resolved = Resolve(inputs_);
  ASSERT_TRUE(resolved.has_value()) << resolved.error().message;
  EXPECT_EQ(resolved->mode, Mode::kDangerFullAccess);
  EXPECT_FALSE(resolved->env.set.contains("CI"));
  EXPECT_EQ(resolved->limits.max_sessions, Limits{}.max_sessions);
  EXPECT_EQ(resolved->ignored_repository_file, ws_ / ".ptybox.yaml");
  EXPECT_TRUE(resolved->policy_files.empty());
  EXPECT_NE(FormatResolved(*resolved).find("ignored: " + (ws_ / ".ptybox.yaml").string()),
            std::string::npos);

  // Not even read: a broken file cannot refuse an explicit danger-full-access request.
  Repo("version: 1\nbogus: [\n");
  EXPECT_TRUE(Resolve(inputs_).has_value());

  // The operator's own mode danger-full-access: the file's mode still narrows (and then the
  // whole file applies); without a mode it is ignored.
  inputs_.requested_mode.reset();
  Operator("version: 1\nmode: danger-full-access\n");
  Repo("version: 1\nenv:\n  set: {CI: \"repo\"}\n");
  resolved = Resolve(inputs_);
  ASSERT_TRUE(resolved.has_value()) << resolved.error().message;
  EXPECT_EQ(resolved->mode, Mode::kDangerFullAccess);
  EXPECT_FALSE(resolved->env.set.contains("CI"));
  Repo("version: 1\nmode: read-only\nenv:\n  set: {CI: \"repo\"}\n");
  resolved = Resolve(inputs_);
  ASSERT_TRUE(resolved.has_value()) << resolved.error().message;
  EXPECT_EQ(resolved->mode, Mode::kReadOnly);
  EXPECT_EQ(resolved->env.set.at("CI"), "repo");
  EXPECT_FALSE(resolved->ignored_repository_file.has_value());
}

TEST_F(RepositoryEnvTest, AnOperatorMayTrustRepositoryFilesInDangerFullAccess) {
  Operator("version: 1\nrepository: {trustInDangerFullAccess: true}\n");
  Repo("version: 1\nenv:\n  set: {CI: \"repo\"}\n");
  inputs_.requested_mode = Mode::kDangerFullAccess;
  auto resolved = Resolve(inputs_);
  ASSERT_TRUE(resolved.has_value()) << resolved.error().message;
  EXPECT_EQ(resolved->env.set.at("CI"), "repo");
  EXPECT_FALSE(resolved->ignored_repository_file.has_value());
  // Trusted or not, the allowlist and the floor hold.
  Repo("version: 1\nenv:\n  set: {LD_PRELOAD: /w/evil.so}\n");
  EXPECT_NE(ErrorOf().find("env.set.LD_PRELOAD"), std::string::npos) << ErrorOf();
}

// The error suggests requesting the mode; a request then works (docs/policy.md).
TEST_F(RepositoryEnvTest, ARequestedModeReplacesARepositoryModeThatWasDenied) {
  Repo("version: 1\nmode: danger-full-access\n");
  EXPECT_NE(ErrorOf().find("or request the mode explicitly (--mode or policy_set_mode"),
            std::string::npos)
      << ErrorOf();
  inputs_.requested_mode = Mode::kDangerFullAccess;
  EXPECT_EQ(ErrorOf(), "(resolved)");
  inputs_.requested_mode = Mode::kReadOnly;
  auto resolved = Resolve(inputs_);
  ASSERT_TRUE(resolved.has_value()) << resolved.error().message;
  EXPECT_EQ(resolved->mode, Mode::kReadOnly);
}

// A broken or linked repository file refuses, naming the file and the fix (docs/security.md,
// "Repository files and environment").
TEST_F(RepositoryEnvTest, ABrokenRepositoryFileRefusesWithWhoCanFixIt) {
  fs::create_symlink("/etc/hostname", ws_ / ".ptybox.yaml");
  const std::string tail = Expand(
      ". No session opens in this workspace until its owner fixes or removes "
      "{dir}/ws/.ptybox.yaml (anything running in a workspace-write session can write it)",
      dir_.path());
  EXPECT_EQ(ErrorOf(), Expand("cannot read the repository policy: {dir}/ws/.ptybox.yaml: is a "
                              "symbolic link; a repository policy must be a regular file in the "
                              "workspace (replace the link with the file itself)",
                              dir_.path()) +
                           tail);
  fs::remove(ws_ / ".ptybox.yaml");
  Repo("version: 1\nmode: [\n");
  EXPECT_TRUE(ErrorOf().ends_with(tail)) << ErrorOf();
}

// ---- `ptybox policy check` applies layering (docs/policy.md).

TEST(CheckLayeringTest, RepositoryFilesAreLayeredOnTheOperatorTheyWouldMeet) {
  TempDir dir;
  const fs::path repo = dir.File("ws/.ptybox.yaml",
                                 "version: 1\nnetwork: allow\nmode: danger-full-access\n"
                                 "env:\n  pass: [AWS_SECRET_ACCESS_KEY]\n  set: {LD_PRELOAD: x}\n"
                                 "limits: {maxSessions: 9}\n");
  const fs::path none = dir.path() / "etc/absent.yaml";
  // No operator file anywhere: the built-in defaults are the operator layer.
  std::vector<LayeringCheck> checks = CheckLayering({repo}, none);
  ASSERT_EQ(checks.size(), 1u);
  EXPECT_EQ(checks[0].layered_on, "the built-in defaults");
  std::vector<std::string> keys;
  for (const Error& e : checks[0].problems) {
    EXPECT_EQ(e.kind, ErrorKind::kPolicyDenied);
    keys.push_back(e.message.substr(e.message.find(": ") + 2));
    keys.back() = keys.back().substr(0, keys.back().find(':'));
  }
  EXPECT_EQ(keys, (std::vector<std::string>{"mode", "network", "env.pass", "env.set.LD_PRELOAD"}));

  // The operator file given: its limits count.
  const fs::path op = dir.File("op.yaml", "version: 1\nnetwork: allow\nlimits: {maxSessions: 8}\n");
  dir.File("ws/.ptybox.yaml", "version: 1\nlimits: {maxSessions: 9}\n");
  checks = CheckLayering({op, repo}, none);
  ASSERT_EQ(checks.size(), 1u);
  EXPECT_EQ(checks[0].layered_on, op.string());
  ASSERT_EQ(checks[0].problems.size(), 1u);
  EXPECT_NE(checks[0].problems[0].message.find("limits.maxSessions: 9 is above the operator's 8"),
            std::string::npos);

  // At its default place, found without being named.
  checks = CheckLayering({repo}, op);
  ASSERT_EQ(checks.size(), 1u);
  EXPECT_EQ(checks[0].layered_on, op.string());
  EXPECT_EQ(checks[0].problems.size(), 1u);

  dir.File("ws/.ptybox.yaml", "version: 1\nlimits: {maxSessions: 2}\n");
  checks = CheckLayering({repo}, op);
  ASSERT_EQ(checks.size(), 1u);
  EXPECT_TRUE(checks[0].problems.empty());
}

}  // namespace
}  // namespace ptybox::policy
