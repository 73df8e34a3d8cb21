// The CLI texts (CheckPolicyFiles, FormatResolved), the example policy files, and the
// documentation artefacts (docs/policy.md, docs/policy.schema.json) against the code's tables.
#include "policy/report.h"

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>

#include "common/join.h"
#include "policy/resolver.h"
#include "policy/schema.h"
#include "tests/policy/temp_dir.h"

namespace ptybox::policy {
namespace {

// The default `hide` list as `ptybox policy resolve` prints it.
std::string DefaultHiddenList() { return Join(DefaultHidden()); }

namespace fs = std::filesystem;
using testing::Expand;
using testing::TempDir;

const fs::path kSource = PTYBOX_SOURCE_DIR;

std::string ReadText(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::vector<std::string> Messages(const std::vector<Error>& errors) {
  std::vector<std::string> out;
  for (const Error& error : errors) out.push_back(error.message);
  return out;
}

TEST(CheckPolicyFilesTest, ListsEveryProblemOfEveryFile) {
  TempDir dir;
  dir.Dir("ws/build");
  const auto op = dir.File("etc/policy.yaml",
                           "version: 1\nmode: danger\nworkspace: /nonexistent/ptybox\n"
                           "limits:\n  maxSessions: 0\n  timeoutMS: 5\n");
  const auto repo = dir.File("ws/.ptybox.yaml",
                             "version: 1\nceiling: read-only\nwritable: [build, ..]\n"
                             "env: {pass: [PS1]}\n");
  const auto missing = dir.path() / "missing.yaml";
  std::vector<std::string> want = {
      "{dir}/etc/policy.yaml:2:7: mode: expected one of read-only, workspace-write, "
      "danger-full-access, got `danger`",
      "{dir}/etc/policy.yaml:5:16: limits.maxSessions: expected an integer from 1 to 1024 "
      "(sessions), got `0`",
      "{dir}/etc/policy.yaml:6:3: limits.timeoutMS: unknown key; did you mean `timeoutMs`?",
      "{dir}/etc/policy.yaml:3:12: workspace: /nonexistent/ptybox is not an existing "
      "directory; create it or fix the path",
      "{dir}/ws/.ptybox.yaml:2:1: ceiling: only the operator policy may set `ceiling`; a "
      "repository policy cannot widen or move the sandbox. Remove it (operators set it in "
      "/etc/ptybox/policy.yaml or the --policy file)",
      "{dir}/ws/.ptybox.yaml:4:14: env.pass[0]: `PS1` is reserved: the shell backend sets the "
      "prompt variables itself to detect when a command is done; remove it",
      "{dir}/ws/.ptybox.yaml:3:19: writable: {dir} is outside the workspace {dir}/ws (symbolic "
      "links and `..` resolved); a repository policy may only name directories inside the "
      "workspace. Remove it",
      "{dir}/missing.yaml: open {dir}/missing.yaml: No such file or directory",
  };
  for (std::string& line : want) line = Expand(line, dir.path());
  std::vector<Error> errors = CheckPolicyFiles({op, repo, missing});
  EXPECT_EQ(Messages(errors), want);
  EXPECT_EQ(errors[6].kind, ErrorKind::kPolicyDenied);
  EXPECT_EQ(errors[7].kind, ErrorKind::kPolicyError);
}

TEST(CheckPolicyFilesTest, ValidFilesHaveNoProblems) {
  TempDir dir;
  const auto op = dir.File("op.yaml", "version: 1\nmode: read-only\n");
  const auto repo = dir.File("r/.ptybox.yaml", "version: 1\n");
  EXPECT_TRUE(CheckPolicyFiles({op, repo}).empty());
  EXPECT_EQ(RoleForPath(repo), PolicyRole::kRepository);
  EXPECT_EQ(RoleForPath(op), PolicyRole::kOperator);
}

TEST(CheckPolicyFilesTest, RelativePathsAreReportedAbsolute) {
  TempDir dir;
  dir.File("p.yaml", "version: 1\nnetwork: on\n");
  const fs::path previous = fs::current_path();
  fs::current_path(dir.path());
  std::vector<Error> errors = CheckPolicyFiles({"p.yaml"});
  fs::current_path(previous);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].message,
            (dir.path() / "p.yaml").string() +
                ":2:10: network: expected `deny` or `allow`, got `on`; write the word `allow` or "
                "`deny`, not a boolean");
}

TEST(FormatResolvedTest, ListsEveryValueWithItsSource) {
  TempDir dir;
  dir.Dir("ws/build");
  ResolveInputs inputs;
  inputs.operator_policy = dir.File("op.yaml",
                                    "version: 1\nceiling: workspace-write\n"
                                    "env:\n  set: {CI: \"1\"}\n");
  inputs.workspace = dir.path() / "ws";
  dir.File("ws/.ptybox.yaml",
           "version: 1\nmode: read-only\nwritable: [build]\nlimits: {maxProcesses: 64}\n");
  auto resolved = Resolve(inputs);
  ASSERT_TRUE(resolved.has_value()) << resolved.error().message;
  const std::string want = Expand(
      "mode: read-only  # {dir}/ws/.ptybox.yaml:2:7\n"
      "ceiling: workspace-write  # {dir}/op.yaml:2:10\n"
      "workspace: {dir}/ws  # command line\n"
      "writable: [{dir}/ws/build]  # {dir}/ws/.ptybox.yaml:3:11\n"
      "network: deny  # default\n"
      "hide: [" +
          DefaultHiddenList() +
          "]  # default\n"
          "env.pass: [PATH, HOME, LANG, LANGUAGE, LC_ALL, LC_CTYPE, TZ, USER, LOGNAME]  # default\n"
          "env.set: {CI: \"1\"}  # {dir}/op.yaml:4:8\n"
          "limits.idleSilenceMs: 3000  # default\n"
          "limits.handoffGraceMs: 500  # default\n"
          "limits.timeoutMs: 30000  # default\n"
          "limits.startupTimeoutMs: 10000  # default\n"
          "limits.pollIntervalMs: 50  # default\n"
          "limits.exactProbeAfterMs: 150  # default\n"
          "limits.scrollbackLines: 10000  # default\n"
          "limits.scrollbackBytes: 4194304  # default\n"
          "limits.maxReadBytes: 262144  # default\n"
          "limits.maxResultBytes: 262144  # default\n"
          "limits.disposeGraceMs: 3000  # default\n"
          "limits.maxSessions: 16  # default\n"
          "limits.detachGraceMs: 0  # default\n"
          "limits.maxProcesses: 64  # {dir}/ws/.ptybox.yaml:4:24\n"
          "limits.maxOpenFiles: inherit  # default\n"
          "limits.maxMemoryBytes: inherit  # default\n"
          "limits.maxFileBytes: inherit  # default\n"
          "limits.maxCpuSeconds: inherit  # default\n"
          "limits.maxTasks: 1024  # default\n"
          "limits.maxCpuMillicores: inherit  # default\n"
          "limits.warmShells: 1  # default\n"
          "policy files: [{dir}/op.yaml, {dir}/ws/.ptybox.yaml]\n",
      dir.path());
  EXPECT_EQ(FormatResolved(*resolved), want);
}

TEST(FormatResolvedTest, EscapesControlCharactersInValues) {
  ResolvedPolicy policy;
  policy.workspace_root = "/w";
  policy.env.set["X"] = "a\x1b[2Jb\n";
  const std::string text = FormatResolved(policy);
  EXPECT_NE(text.find("env.set: {X: \"a\\x1b[2Jb\\x0a\"}"), std::string::npos) << text;
  EXPECT_EQ(text.find('\x1b'), std::string::npos);
}

// The examples, installed where they belong in a scratch tree, check clean and resolve.
TEST(ExamplesTest, OperatorAndRepositoryExamplesResolveTogether) {
  TempDir dir;
  std::string op_text = ReadText(kSource / "examples/operator-policy.yaml");
  ASSERT_FALSE(op_text.empty());
  // As its comments say: the directories created, their lines uncommented.
  for (const auto& [commented, live] : std::vector<std::pair<std::string, std::string>>{
           {"# workspace: ", "workspace: "}, {"# writable:\n#   - ", "writable:\n  - "}}) {
    const size_t at = op_text.find(commented);
    ASSERT_NE(at, std::string::npos) << commented;
    op_text.replace(at, commented.size(), live);
  }
  // Point the example's absolute paths into the scratch tree.
  const std::string from = "/srv/ptybox";
  const std::string to = (dir.path() / "srv/ptybox").string();
  for (size_t at = op_text.find(from); at != std::string::npos; at = op_text.find(from, at)) {
    op_text.replace(at, from.size(), to);
    at += to.size();
  }
  dir.Dir("srv/ptybox/cache");
  dir.Dir("srv/ptybox/workspace/build");
  const auto op = dir.File("etc/ptybox/policy.yaml", op_text);
  std::string repo_text = ReadText(kSource / "examples/repo-policy.yaml");
  const std::string repo_commented = "# writable:\n#   - build";
  const size_t repo_at = repo_text.find(repo_commented);
  ASSERT_NE(repo_at, std::string::npos);
  repo_text.replace(repo_at, repo_commented.size(), "writable:\n  - build");
  const auto repo = dir.File("srv/ptybox/workspace/.ptybox.yaml", repo_text);
  EXPECT_EQ(Messages(CheckPolicyFiles({op, repo})), std::vector<std::string>{});

  ResolveInputs inputs;
  inputs.default_operator_policy = op;
  inputs.workspace_from_cli = false;  // the operator's `workspace` applies
  auto resolved = Resolve(inputs);
  ASSERT_TRUE(resolved.has_value()) << resolved.error().message;
  EXPECT_EQ(resolved->workspace_root, dir.path() / "srv/ptybox/workspace");
  EXPECT_EQ(resolved->mode, Mode::kWorkspaceWrite);
  EXPECT_EQ(resolved->ceiling, Mode::kWorkspaceWrite);
  EXPECT_EQ(resolved->writable_roots,
            (std::vector<fs::path>{dir.path() / "srv/ptybox/cache",
                                   dir.path() / "srv/ptybox/workspace/build"}));
  EXPECT_EQ(resolved->env.pass, (std::vector<std::string>{"PATH", "HOME", "LANG", "TZ"}))
      << "the repository example passes a subset of the operator's list";
  EXPECT_EQ(resolved->env.set.at("CI"), "true");
  EXPECT_EQ(resolved->limits.max_sessions, 4);
  EXPECT_EQ(resolved->limits.timeout_ms, 300000);
  EXPECT_EQ(resolved->limits.max_memory_bytes, 8589934592);
}

// The JSON Schema must say what the parser enforces: same keys, same bounds, same names.
TEST(SchemaDocTest, JsonSchemaMatchesTheParserTables) {
  const nlohmann::json schema =
      nlohmann::json::parse(ReadText(kSource / "docs/policy.schema.json"));
  EXPECT_EQ(schema.at("$schema"), "https://json-schema.org/draft/2020-12/schema");
  std::set<std::string> top;
  for (const auto& [key, value] : schema.at("properties").items()) top.insert(key);
  EXPECT_EQ(top, std::set<std::string>(TopLevelKeys().begin(), TopLevelKeys().end()));
  EXPECT_EQ(schema.at("additionalProperties"), false);

  const nlohmann::json& limits = schema.at("properties").at("limits").at("properties");
  EXPECT_EQ(limits.size(), LimitSpecs().size());
  const Limits defaults;
  for (const LimitSpec& spec : LimitSpecs()) {
    const nlohmann::json& entry = limits.at(std::string(spec.key));
    EXPECT_EQ(entry.at("minimum").get<int64_t>(), spec.min) << spec.key;
    EXPECT_EQ(entry.at("maximum").get<int64_t>(), spec.max) << spec.key;
    if (auto value = spec.Get(defaults)) {
      EXPECT_EQ(entry.at("default").get<int64_t>(), *value) << spec.key;
    } else {
      EXPECT_FALSE(entry.contains("default")) << spec.key;
    }
    const bool lower_only =
        entry.at("description").get<std::string>().find("only lower") != std::string::npos;
    EXPECT_EQ(lower_only, spec.rule == LimitRule::kLowerOnly) << spec.key;
  }

  const nlohmann::json& env_name = schema.at("$defs").at("envName");
  for (const auto& name : env_name.at("not").at("anyOf").at(0).at("enum")) {
    EXPECT_TRUE(ReservedEnvReason(name.get<std::string>()).has_value()) << name;
  }
  for (std::string_view name :
       {"PROMPT_COMMAND", "PS0", "PS1", "PS2", "PS4", "BASH_ENV", "ENV", "SHELLOPTS", "BASHOPTS"}) {
    EXPECT_NE(std::find(env_name.at("not").at("anyOf").at(0).at("enum").begin(),
                        env_name.at("not").at("anyOf").at(0).at("enum").end(), std::string(name)),
              env_name.at("not").at("anyOf").at(0).at("enum").end())
        << name;
  }
  std::vector<std::string> pass = schema.at("properties")
                                      .at("env")
                                      .at("properties")
                                      .at("pass")
                                      .at("default")
                                      .get<std::vector<std::string>>();
  EXPECT_EQ(pass, std::vector<std::string>(DefaultEnvPass().begin(), DefaultEnvPass().end()));
  const nlohmann::json& repository = schema.at("$defs").at("repository");
  EXPECT_EQ(repository.at("properties").at("ceiling"), false);
  EXPECT_EQ(repository.at("properties").at("workspace"), false);
  EXPECT_EQ(repository.at("properties").at("repository"), false);

  // The environment rules: one list of reserved names, the repository allowlist and keys.
  EXPECT_EQ(env_name.at("pattern"), EnvNamePattern());
  EXPECT_EQ(env_name.at("not").at("anyOf").at(0).at("enum").get<std::vector<std::string>>(),
            std::vector<std::string>(ReservedEnvNames(EnvUse::kPass).begin(),
                                     ReservedEnvNames(EnvUse::kPass).end()));
  const nlohmann::json& operator_repository = schema.at("properties").at("repository");
  std::set<std::string> repository_keys;
  for (const auto& [key, value] : operator_repository.at("properties").items()) {
    repository_keys.insert(key);
  }
  EXPECT_EQ(repository_keys,
            std::set<std::string>(RepositoryKeys().begin(), RepositoryKeys().end()));
  EXPECT_EQ(operator_repository.at("properties").at("envSet").at("default"),
            nlohmann::json(std::vector<std::string>(DefaultRepositoryEnvSet().begin(),
                                                    DefaultRepositoryEnvSet().end())));
}

// docs/policy.md has a row for every limit, with its default and both bounds.
TEST(SchemaDocTest, PolicyDocumentationListsEveryLimitWithItsBounds) {
  const std::string doc = ReadText(kSource / "docs/policy.md");
  ASSERT_FALSE(doc.empty());
  const Limits defaults;
  for (const LimitSpec& spec : LimitSpecs()) {
    const std::string marker = "| `" + std::string(spec.key) + "` |";
    const size_t at = doc.find(marker);
    ASSERT_NE(at, std::string::npos) << spec.key;
    const std::string row = doc.substr(at, doc.find('\n', at) - at);
    EXPECT_NE(row.find(" " + std::to_string(spec.min) + " "), std::string::npos) << row;
    EXPECT_NE(row.find(" " + std::to_string(spec.max) + " "), std::string::npos) << row;
    const auto value = spec.Get(defaults);
    EXPECT_NE(row.find(value ? std::to_string(*value) : std::string("inherit")), std::string::npos)
        << row;
    const char* rule = spec.rule == LimitRule::kLowerOnly      ? "lower only"
                       : spec.rule == LimitRule::kOperatorOnly ? "operator only"
                                                               : "free";
    EXPECT_NE(row.find(rule), std::string::npos) << row;
    if (spec.repository_min > 0) {
      EXPECT_NE(row.find("at least " + std::to_string(spec.repository_min)), std::string::npos)
          << row;
    }
  }
}

}  // namespace
}  // namespace ptybox::policy
