// ParsePolicyText on a table of files: valid ones yield the values written, invalid ones
// yield exactly the expected messages (position, key path, what was expected, suggestion).
#include "policy/policy_file.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/policy/temp_dir.h"

namespace ptybox::policy {
namespace {

using testing::Expand;
using testing::TempDir;

struct BadCase {
  const char* name;
  PolicyRole role;
  const char* text;
  std::vector<std::string> messages;  // "{dir}": the scratch directory holding p.yaml
  ErrorKind kind = ErrorKind::kPolicyError;
};

const PolicyRole kOp = PolicyRole::kOperator;
const PolicyRole kRepo = PolicyRole::kRepository;

const BadCase kBadCases[] = {
    {"Empty",
     kOp,
     "",
     {"{dir}/p.yaml:1:1: version: the file is empty; a policy needs at least `version: 1`"}},
    {"OnlyComments",
     kOp,
     "# nothing\n\n",
     {"{dir}/p.yaml:1:1: version: the file is empty; a policy needs at least `version: 1`"}},
    {"MissingVersion",
     kOp,
     "mode: read-only\n",
     {"{dir}/p.yaml:1:1: version: missing; add `version: 1` as the first line"}},
    {"VersionTwo",
     kOp,
     "version: 2\n",
     {"{dir}/p.yaml:1:10: version: unsupported version 2; this ptybox reads version 1 files"}},
    {"VersionString",
     kOp,
     "version: \"1\"\n",
     {"{dir}/p.yaml:1:10: version: expected the number 1, got \"1\" (a quoted string)"}},
    {"VersionEmpty",
     kOp,
     "version:\nmode: read-only\n",
     {"{dir}/p.yaml:1:1: version: expected the number 1, got an empty value"}},
    {"TopLevelList",
     kOp,
     "- version: 1\n",
     {"{dir}/p.yaml:1:1: document: expected a mapping of keys such as `version: 1`, got a list"}},
    {"TopLevelScalar",
     kOp,
     "hello\n",
     {"{dir}/p.yaml:1:1: document: expected a mapping of keys such as `version: 1`, got `hello`"}},
    {"TypoTopLevel",
     kOp,
     "version: 1\nnetwrok: deny\n",
     {"{dir}/p.yaml:2:1: netwrok: unknown key; did you mean `network`?"}},
    {"TypoCase",
     kOp,
     "version: 1\nMode: read-only\n",
     {"{dir}/p.yaml:2:1: Mode: unknown key; did you mean `mode`?"}},
    {"UnknownFar",
     kOp,
     "version: 1\nsandbox: strict\n",
     {"{dir}/p.yaml:2:1: sandbox: unknown key; expected one of: version, mode, ceiling, workspace, "
      "writable, network, env, limits, hide, repository, sessionIds, audit"}},
    {"UnknownRepoList",
     kRepo,
     "version: 1\nsandbox: strict\n",
     {"{dir}/p.yaml:2:1: sandbox: unknown key; expected one of: version, mode, writable, network, "
      "env, limits, hide"}},
    {"HideTilde",
     kRepo,
     "version: 1\nhide: [~root/.ssh, \"~/../etc\"]\n",
     {"{dir}/p.yaml:2:8: hide[0]: `~root/.ssh`: `~` must be followed by `/` and a path inside the "
      "home directory, like `~/.ssh` (it stands for every home directory)",
      "{dir}/p.yaml:2:20: hide[1]: `~/../etc`: `~` must be followed by `/` and a path inside the "
      "home directory, like `~/.ssh` (it stands for every home directory)"}},
    {"HideNotAList",
     kOp,
     "version: 1\nhide: ~/.ssh\n",
     {"{dir}/p.yaml:2:7: hide: expected a list of paths, like `hide: [~/.ssh, /etc/secret]`, got "
      "`~/.ssh`"}},
    {"DuplicateKey",
     kOp,
     "version: 1\nmode: read-only\nmode: danger-full-access\n",
     {"{dir}/p.yaml:3:1: mode: duplicate key (first at line 2, column 1); keep only one"}},
    {"ModeTypo",
     kOp,
     "version: 1\nmode: workspace-writ\n",
     {"{dir}/p.yaml:2:7: mode: expected one of read-only, workspace-write, danger-full-access, got "
      "`workspace-writ`; did you mean `workspace-write`?"}},
    {"ModeCase",
     kOp,
     "version: 1\nmode: Read-Only\n",
     {"{dir}/p.yaml:2:7: mode: expected one of read-only, workspace-write, danger-full-access, got "
      "`Read-Only`; did you mean `read-only`?"}},
    {"ModeFar",
     kOp,
     "version: 1\nmode: danger\n",
     {"{dir}/p.yaml:2:7: mode: expected one of read-only, workspace-write, danger-full-access, got "
      "`danger`"}},
    {"ModeList",
     kOp,
     "version: 1\nmode: [read-only]\n",
     {"{dir}/p.yaml:2:7: mode: expected one of read-only, workspace-write, danger-full-access, got "
      "a list"}},
    {"ModeEmpty",
     kOp,
     "version: 1\nmode:\n",
     {"{dir}/p.yaml:2:1: mode: expected one of read-only, workspace-write, danger-full-access, got "
      "an empty value"}},
    {"CeilingTypo",
     kOp,
     "version: 1\nceiling: full\n",
     {"{dir}/p.yaml:2:10: ceiling: expected one of read-only, workspace-write, danger-full-access, "
      "got `full`"}},
    {"ModeAboveOwnCeiling",
     kOp,
     "version: 1\nmode: danger-full-access\nceiling: workspace-write\n",
     {"{dir}/p.yaml:2:7: mode: `danger-full-access` is above the ceiling `workspace-write` set at "
      "{dir}/p.yaml:3:10 in the same file; lower `mode` or raise `ceiling`"},
     ErrorKind::kPolicyDenied},
    {"RepoCeiling",
     kRepo,
     "version: 1\nceiling: read-only\n",
     {"{dir}/p.yaml:2:1: ceiling: only the operator policy may set `ceiling`; a repository policy "
      "cannot widen or move the sandbox. Remove it (operators set it in /etc/ptybox/policy.yaml or "
      "the --policy file)"}},
    {"RepoWorkspace",
     kRepo,
     "version: 1\nworkspace: /tmp\n",
     {"{dir}/p.yaml:2:1: workspace: only the operator policy may set `workspace`; a repository "
      "policy cannot widen or move the sandbox. Remove it (operators set it in "
      "/etc/ptybox/policy.yaml or the --policy file)"}},
    {"WorkspaceEmpty",
     kOp,
     "version: 1\nworkspace: \"\"\n",
     {"{dir}/p.yaml:2:12: workspace: expected a path, got an empty string"}},
    {"NetworkBool",
     kOp,
     "version: 1\nnetwork: false\n",
     {"{dir}/p.yaml:2:10: network: expected `deny` or `allow`, got `false`; write the word `allow` "
      "or `deny`, not a boolean"}},
    {"NetworkTypo",
     kOp,
     "version: 1\nnetwork: alow\n",
     {"{dir}/p.yaml:2:10: network: expected `deny` or `allow`, got `alow`; did you mean `allow`?"}},
    {"WritableScalar",
     kOp,
     "version: 1\nwritable: build\n",
     {"{dir}/p.yaml:2:11: writable: expected a list of directories, like `writable: [build]`, got "
      "`build`"}},
    {"WritableMissing",
     kOp,
     "version: 1\nwritable: [nope, ../gone/x]\n",
     {"{dir}/p.yaml:2:12: writable[0]: {dir}/nope does not exist; create the directory or remove "
      "the entry",
      "{dir}/p.yaml:2:18: writable[1]: {parent}/gone/x does not exist; create the directory or "
      "remove the entry"}},
    {"WritableFile",
     kOp,
     "version: 1\nwritable:\n  - p.yaml\n",
     {"{dir}/p.yaml:3:5: writable[0]: {dir}/p.yaml is not a directory; writable roots are "
      "directories"}},
    {"WritableNested",
     kOp,
     "version: 1\nwritable: [[a]]\n",
     {"{dir}/p.yaml:2:12: writable[0]: expected a path, got a list"}},
    {"EnvNotMap",
     kOp,
     "version: 1\nenv: [PATH]\n",
     {"{dir}/p.yaml:2:6: env: expected a mapping with `pass` and/or `set`, got a list"}},
    {"EnvTypo",
     kOp,
     "version: 1\nenv:\n  pas: [PATH]\n",
     {"{dir}/p.yaml:3:3: env.pas: unknown key; did you mean `pass`?"}},
    {"EnvPassReserved",
     kOp,
     "version: 1\nenv:\n  pass: [PATH, PS1, PROMPT_COMMAND, BASH_ENV, PTYBOX_SOCKET]\n",
     {"{dir}/p.yaml:3:16: env.pass[1]: `PS1` is reserved: the shell backend sets the prompt "
      "variables itself to detect when a command is done; remove it",
      "{dir}/p.yaml:3:21: env.pass[2]: `PROMPT_COMMAND` is reserved: the shell backend sets the "
      "prompt variables itself to detect when a command is done; remove it",
      "{dir}/p.yaml:3:37: env.pass[3]: `BASH_ENV` is reserved: it names a file bash runs at "
      "startup, which the shell backend controls; remove it",
      "{dir}/p.yaml:3:47: env.pass[4]: `PTYBOX_SOCKET` is reserved: the PTYBOX_ prefix is reserved "
      "for ptybox itself; remove it"}},
    {"EnvPassBadName",
     kOp,
     "version: 1\nenv:\n  pass: [\"A-B\", \"1X\", PATH, PATH]\n",
     {"{dir}/p.yaml:3:10: env.pass[0]: `A-B` is not a valid variable name; use letters, digits and "
      "`_`, not starting with a digit (at most 128 characters); remove it",
      "{dir}/p.yaml:3:17: env.pass[1]: `1X` is not a valid variable name; use letters, digits and "
      "`_`, not starting with a digit (at most 128 characters); remove it",
      "{dir}/p.yaml:3:29: env.pass[3]: `PATH` is listed twice (first at line 3); keep one"}},
    {"EnvSetReserved",
     kOp,
     "version: 1\nenv:\n  set:\n    PS4: \"+ \"\n    ENV: /x\n",
     {"{dir}/p.yaml:4:5: env.set.PS4: `PS4` is reserved: the shell backend sets the prompt "
      "variables itself to detect when a command is done; remove it",
      "{dir}/p.yaml:5:5: env.set.ENV: `ENV` is reserved: it names a file bash runs at startup, "
      "which the shell backend controls; remove it"}},
    {"EnvSetNotString",
     kOp,
     "version: 1\nenv:\n  set:\n    A:\n    B: {c: d}\n",
     {"{dir}/p.yaml:4:5: env.set.A: expected a string value (quote it, e.g. `A: \"\"` for empty), "
      "got an empty value",
      "{dir}/p.yaml:5:8: env.set.B: expected a string value (quote it, e.g. `B: \"\"` for empty), "
      "got a mapping"}},
    {"EnvSetNul",
     kOp,
     "version: 1\nenv:\n  set:\n    A: \"x\\0y\"\n",
     {"{dir}/p.yaml:4:8: env.set.A: the value contains a NUL character at byte 1; a variable's "
      "value cannot hold NUL (it would end the value and start another variable)"}},
    {"LimitsNotMap",
     kOp,
     "version: 1\nlimits: 5\n",
     {"{dir}/p.yaml:2:9: limits: expected a mapping like `limits: {timeoutMs: 60000}`, got `5`"}},
    {"LimitTypo",
     kOp,
     "version: 1\nlimits:\n  idleSilenceMS: 100\n  idle_silence_ms: 100\n  timeout: 5\n",
     {"{dir}/p.yaml:3:3: limits.idleSilenceMS: unknown key; did you mean `idleSilenceMs`?",
      "{dir}/p.yaml:4:3: limits.idle_silence_ms: unknown key; did you mean `idleSilenceMs`?",
      "{dir}/p.yaml:5:3: limits.timeout: unknown key; did you mean `timeoutMs`?"}},
    {"LimitBounds",
     kOp,
     "version: 1\nlimits:\n  idleSilenceMs: 0\n  timeoutMs: -5\n  maxSessions: 100000\n  "
     "maxMemoryBytes: 1024\n  pollIntervalMs: 99999999999999999999\n",
     {"{dir}/p.yaml:3:18: limits.idleSilenceMs: expected an integer from 1 to 3600000 "
      "(milliseconds), got `0`",
      "{dir}/p.yaml:4:14: limits.timeoutMs: expected an integer from 1 to 86400000 (milliseconds), "
      "got `-5`",
      "{dir}/p.yaml:5:16: limits.maxSessions: expected an integer from 1 to 1024 (sessions), got "
      "`100000`",
      "{dir}/p.yaml:6:19: limits.maxMemoryBytes: expected an integer from 16777216 to "
      "140737488355328 (bytes), got `1024`",
      "{dir}/p.yaml:7:19: limits.pollIntervalMs: expected an integer from 1 to 10000 "
      "(milliseconds), got `99999999999999999999`"}},
    {"LimitTypes",
     kOp,
     "version: 1\nlimits:\n  maxSessions: \"4\"\n  timeoutMs: 1.5\n  maxProcesses: lots\n  "
     "maxOpenFiles:\n",
     {"{dir}/p.yaml:3:16: limits.maxSessions: expected an integer from 1 to 1024 (sessions), got "
      "\"4\" (a quoted string); remove the quotes",
      "{dir}/p.yaml:4:14: limits.timeoutMs: expected an integer from 1 to 86400000 (milliseconds), "
      "got `1.5`",
      "{dir}/p.yaml:5:17: limits.maxProcesses: expected an integer from 1 to 4194304 (processes), "
      "got `lots`",
      "{dir}/p.yaml:6:3: limits.maxOpenFiles: expected an integer from 16 to 1048576 (files), got "
      "an empty value"}},
    {"SyntaxError",
     kOp,
     "version: 1\nmode: [read-only\n",
     {"{dir}/p.yaml:3:1: yaml: invalid YAML: end of sequence flow not found"}},
    {"BadIndent",
     kOp,
     "version: 1\n  mode: read-only\n",
     {"{dir}/p.yaml:2:7: yaml: invalid YAML: illegal map value"}},
    {"Tab",
     kOp,
     "version: 1\nenv:\n\tpass: [PATH]\n",
     {"{dir}/p.yaml:3:6: yaml: invalid YAML: illegal map value (line 3 is indented with a tab; "
      "YAML indentation must use spaces)"}},
    {"TwoDocuments",
     kOp,
     "version: 1\n---\nversion: 1\n",
     {"{dir}/p.yaml:2:1: yaml: a policy file holds one YAML document; remove the second `---` and "
      "what follows it"}},
    {"ExplicitTag",
     kOp,
     "version: !!int 1\n",
     {"{dir}/p.yaml:1:10: yaml: explicit YAML tags (here `!!int`) are not supported; remove the "
      "tag"}},
    {"ComplexKey",
     kOp,
     "version: 1\n? [a, b]\n: c\n",
     {"{dir}/p.yaml:2:3: yaml: a mapping key must be a plain name, not a list"}},
    {"ControlCharsEscaped",
     kOp,
     "version: 1\n\"a\\e[31mb\": 1\n",
     {"{dir}/p.yaml:2:1: a\\x1b[31mb: unknown key; expected one of: version, mode, ceiling, "
      "workspace, writable, network, env, limits, hide, repository, sessionIds, audit"}},
    {"ManyProblemsAllReported",
     kRepo,
     "mode: root\nceiling: read-only\nnetwork: maybe\nlimits: {maxSessions: 0}\n",
     {"{dir}/p.yaml:1:1: version: missing; add `version: 1` as the first line",
      "{dir}/p.yaml:1:7: mode: expected one of read-only, workspace-write, danger-full-access, got "
      "`root`",
      "{dir}/p.yaml:2:1: ceiling: only the operator policy may set `ceiling`; a repository policy "
      "cannot widen or move the sandbox. Remove it (operators set it in /etc/ptybox/policy.yaml or "
      "the --policy file)",
      "{dir}/p.yaml:3:10: network: expected `deny` or `allow`, got `maybe`",
      "{dir}/p.yaml:4:23: limits.maxSessions: expected an integer from 1 to 1024 (sessions), got "
      "`0`"}},
};

void PrintTo(const BadCase& c, std::ostream* out) { *out << c.name; }

class BadFileTest : public ::testing::TestWithParam<BadCase> {};

TEST_P(BadFileTest, ReportsExactlyTheExpectedProblems) {
  const BadCase& c = GetParam();
  TempDir dir;
  dir.File("p.yaml", "placeholder");  // so `writable: [p.yaml]` names an existing file
  ParsedPolicyFile parsed = ParsePolicyText(c.text, dir.path() / "p.yaml", c.role);
  std::vector<std::string> got;
  for (const Error& error : parsed.errors) got.push_back(error.message);
  std::vector<std::string> want;
  for (const std::string& message : c.messages) {
    want.push_back(Expand(message, dir.path(), dir.path().parent_path()));
  }
  EXPECT_EQ(got, want);
  for (const Error& error : parsed.errors) {
    EXPECT_EQ(error.kind, c.kind) << error.message;
    // The context is the position, and the message starts with it (one CLI line each).
    EXPECT_TRUE(error.message.starts_with(error.context + ": ")) << error.message;
    EXPECT_EQ(error.message.find('\n'), std::string::npos);
  }
}

INSTANTIATE_TEST_SUITE_P(Table, BadFileTest,
                         ::testing::ValuesIn(std::begin(kBadCases), std::end(kBadCases)),
                         [](const auto& test_info) { return std::string(test_info.param.name); });

TEST(PolicyFileTest, NulByteIsRefusedWithItsOffset) {
  const std::string text("version: 1\n\0mode: read-only\n", 28);
  ParsedPolicyFile parsed = ParsePolicyText(text, "/x/p.yaml", kOp);
  ASSERT_EQ(parsed.errors.size(), 1u);
  EXPECT_EQ(parsed.errors[0].message,
            "/x/p.yaml:1:1: file: contains a NUL byte at offset 11; a policy file is UTF-8 text");
}

TEST(PolicyFileTest, MinimalFileHasNoValues) {
  ParsedPolicyFile parsed = ParsePolicyText("version: 1\n", "/x/p.yaml", kOp);
  EXPECT_TRUE(parsed.errors.empty());
  EXPECT_FALSE(parsed.file.mode);
  EXPECT_FALSE(parsed.file.ceiling);
  EXPECT_FALSE(parsed.file.network_allowed);
  EXPECT_FALSE(parsed.file.writable_where);
  EXPECT_FALSE(parsed.file.env_where);
  EXPECT_TRUE(parsed.file.limits.empty());
}

TEST(PolicyFileTest, FullOperatorFileKeepsEveryValueAndPosition) {
  TempDir dir;
  dir.Dir("cache");
  dir.Dir("etc/work");
  const std::string text =
      "version: 1\n"
      "mode: read-only\n"
      "ceiling: workspace-write\n"
      "workspace: work\n"
      "writable: [../cache, /tmp, ../cache/.]\n"
      "network: allow\n"
      "env:\n"
      "  pass: [PATH, HOME, SSH_AUTH_SOCK]\n"
      "  set:\n"
      "    CI: \"1\"\n"
      "    DEBUG: 0\n"
      "    EMPTY: ''\n"
      "limits:\n"
      "  idleSilenceMs: 1500\n"
      "  maxProcesses: +512\n"
      "  maxMemoryBytes: 17179869184\n";
  const auto file = dir.path() / "etc/policy.yaml";
  ParsedPolicyFile parsed = ParsePolicyText(text, file, kOp);
  ASSERT_TRUE(parsed.errors.empty()) << parsed.errors[0].message;
  const PolicyFile& p = parsed.file;
  const std::string at = file.string() + ":";
  EXPECT_EQ(p.mode->value, Mode::kReadOnly);
  EXPECT_EQ(p.mode->where, at + "2:7");
  EXPECT_EQ(p.ceiling->value, Mode::kWorkspaceWrite);
  EXPECT_EQ(p.ceiling->where, at + "3:10");
  EXPECT_EQ(p.workspace->value, dir.path() / "etc/work");  // relative to the file's directory
  ASSERT_EQ(p.writable.size(), 2u);                        // ../cache/. is ../cache again
  EXPECT_EQ(p.writable[0].value, dir.path() / "cache");
  EXPECT_EQ(p.writable[0].where, at + "5:12");
  EXPECT_EQ(p.writable[1].value, std::filesystem::canonical("/tmp"));
  EXPECT_EQ(*p.writable_where, at + "5:11");
  EXPECT_TRUE(p.network_allowed->value);
  ASSERT_EQ(p.env_pass.size(), 3u);
  EXPECT_EQ(p.env_pass[2].value, "SSH_AUTH_SOCK");
  EXPECT_EQ(p.env_set.at("CI").value, "1");
  EXPECT_EQ(p.env_set.at("DEBUG").value, "0");  // plain scalars are strings here
  EXPECT_EQ(p.env_set.at("EMPTY").value, "");
  EXPECT_EQ(p.limits.at("idleSilenceMs").value, 1500);
  EXPECT_EQ(p.limits.at("idleSilenceMs").where, at + "14:18");
  EXPECT_EQ(p.limits.at("maxProcesses").value, 512);
  EXPECT_EQ(p.limits.at("maxMemoryBytes").value, 17179869184);
}

TEST(PolicyFileTest, EveryLimitKeyAcceptsItsBoundsAndRejectsJustOutside) {
  for (const LimitSpec& spec : LimitSpecs()) {
    for (int64_t value : {spec.min, spec.max}) {
      const std::string text =
          "version: 1\nlimits:\n  " + std::string(spec.key) + ": " + std::to_string(value) + "\n";
      ParsedPolicyFile parsed = ParsePolicyText(text, "/x/p.yaml", kRepo);
      EXPECT_TRUE(parsed.errors.empty()) << spec.key << "=" << value;
      EXPECT_EQ(parsed.file.limits.at(std::string(spec.key)).value, value);
    }
    for (int64_t value : {spec.min - 1, spec.max + 1}) {
      const std::string text =
          "version: 1\nlimits:\n  " + std::string(spec.key) + ": " + std::to_string(value) + "\n";
      ParsedPolicyFile parsed = ParsePolicyText(text, "/x/p.yaml", kRepo);
      ASSERT_EQ(parsed.errors.size(), 1u) << spec.key << "=" << value;
      // The bound is in the message.
      EXPECT_NE(parsed.errors[0].message.find("from " + std::to_string(spec.min) + " to " +
                                              std::to_string(spec.max)),
                std::string::npos)
          << parsed.errors[0].message;
    }
  }
}

TEST(PolicyFileTest, DefaultLimitsAreWithinTheirOwnBounds) {
  const Limits defaults;
  for (const LimitSpec& spec : LimitSpecs()) {
    if (auto value = spec.Get(defaults)) {
      EXPECT_GE(*value, spec.min) << spec.key;
      EXPECT_LE(*value, spec.max) << spec.key;
    }
  }
}

TEST(PolicyFileTest, SmallAliasesExpand) {
  const std::string text =
      "version: 1\n"
      "env:\n"
      "  pass: &names [PATH, HOME]\n"
      "x-unused: *names\n";
  ParsedPolicyFile parsed = ParsePolicyText(text, "/x/p.yaml", kOp);
  ASSERT_EQ(parsed.errors.size(), 1u);  // the unknown key, not the alias
  EXPECT_EQ(parsed.errors[0].message,
            "/x/p.yaml:4:1: x-unused: unknown key; expected one of: version, mode, ceiling, "
            "workspace, writable, network, env, limits, hide, repository, sessionIds, audit");
  EXPECT_EQ(parsed.file.env_pass.size(), 2u);
}

TEST(PolicyFileTest, RepositoryRoleAcceptsNarrowingKeys) {
  TempDir dir;
  dir.Dir("build");
  const std::string text =
      "version: 1\nmode: read-only\nwritable: [build]\nnetwork: deny\n"
      "env: {pass: [PATH]}\nlimits: {maxSessions: 2, timeoutMs: 120000}\n";
  ParsedPolicyFile parsed = ParsePolicyText(text, dir.path() / ".ptybox.yaml", kRepo);
  ASSERT_TRUE(parsed.errors.empty()) << parsed.errors[0].message;
  EXPECT_EQ(parsed.file.writable[0].value, dir.path() / "build");
  EXPECT_EQ(parsed.file.limits.at("maxSessions").value, 2);
}

}  // namespace
}  // namespace ptybox::policy

namespace ptybox::policy {
namespace {

// The parser refuses in a repository file exactly the keys the schema's table marks operator
// only: the rule is written once, in that table.
TEST(PolicyFileTest, ARepositoryFileIsRefusedExactlyTheOperatorOnlyKeys) {
  std::vector<std::string> refused;
  for (std::string_view key : TopLevelKeys()) {
    if (key == "version") continue;
    const std::string text = "version: 1\n" + std::string(key) + ": x\n";
    ParsedPolicyFile parsed =
        ParsePolicyText(text, "/nonexistent/.ptybox.yaml", PolicyRole::kRepository);
    for (const Error& error : parsed.errors) {
      if (error.message.find("only the operator policy may set `" + std::string(key) + "`") !=
          std::string::npos) {
        refused.emplace_back(key);
      }
    }
    EXPECT_EQ(IsOperatorOnlyKey(key), !refused.empty() && refused.back() == key) << key;
  }
  EXPECT_EQ(refused, (std::vector<std::string>{"ceiling", "workspace", "repository", "sessionIds",
                                               "audit"}));
}

}  // namespace
}  // namespace ptybox::policy
