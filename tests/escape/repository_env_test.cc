// Repository files and the environment, attacked through the real binary (docs/security.md,
// "Repository files and environment"):
//  - a hostile `.ptybox.yaml` (written by a confined session, or checked in) naming LD_PRELOAD,
//    TMOUT, NODE_OPTIONS never reaches a danger-full-access session, and confined sessions
//    refuse it;
//  - the operator alone extends trust (repository.trustInDangerFullAccess, repository.envSet);
//  - a client's env cannot smuggle variables through a NUL or set the shell's own names
//    or in the names policy files refuse;
//  - a `.ptybox.yaml` symlink or broken file refuses opens with a message naming the file and
//    who can fix it, and an explicit danger-full-access request does not read it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "tests/support/daemon_fixture.h"
#include "tests/support/error_kind.h"

namespace ptybox::testing {
namespace {

namespace fs = std::filesystem;

constexpr char kUnset[] = "[unset][unset][unset][unset]";
constexpr char kShowHostile[] =
    "echo \"[${LD_PRELOAD-unset}][${TMOUT-unset}][${NODE_OPTIONS-unset}][${REPO_MARK-unset}]\"\n";

void WriteFile(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

std::string HostilePolicy(const fs::path& workspace) {
  return "version: 1\nenv:\n  set:\n    LD_PRELOAD: " + (workspace / "evil.so").string() +
         "\n    TMOUT: \"1\"\n    NODE_OPTIONS: \"--require ./evil.js\"\n    REPO_MARK: repo\n";
}

Json OpenIn(RpcClient& client, const std::string& mode, Json params = Json::object()) {
  Json set = client.Call("policy_set_mode", Json{{"mode", mode}});
  EXPECT_TRUE(set.contains("result")) << set.dump();
  return client.Call("terminal_open", std::move(params));
}

// The answer to asking for `mode` and opening: policy_set_mode already refuses a mode whose
// policy does not resolve; otherwise terminal_open answers.
Json TryOpenIn(RpcClient& client, const std::string& mode) {
  Json set = client.Call("policy_set_mode", Json{{"mode", mode}});
  if (set.contains("error")) return set;
  return client.Call("terminal_open", Json::object());
}

class RepositoryEnvEscapeTest : public ::testing::TestWithParam<std::string> {
 protected:
  const std::string& Mode() const { return GetParam(); }
  fs::path RepoFile() const { return daemon_.workspace() / ".ptybox.yaml"; }

  // A danger-full-access session of a fresh owner: none of the hostile variables is set.
  void ExpectDangerFullAccessUntouched() {
    RpcClient client(daemon_.socket());
    Json opened = OpenIn(client, "danger-full-access");
    ASSERT_TRUE(opened.contains("result")) << opened.dump();
    Json r = Send(client, opened["result"]["sessionId"], kShowHostile);
    EXPECT_EQ(r["viewport"], kUnset) << r.dump();
    EXPECT_EQ(r["exitCode"], 0) << "TMOUT did not end the shell: " << r.dump();
  }

  // A confined open of a fresh owner refuses the file, naming the first hostile variable.
  void ExpectConfinedOpenRefused() {
    RpcClient client(daemon_.socket());
    Json opened = TryOpenIn(client, Mode());
    ASSERT_TRUE(opened.contains("error")) << opened.dump();
    EXPECT_ERROR_KIND(opened, ErrorKind::kPolicyDenied);
    const std::string message = opened["error"]["message"];
    EXPECT_NE(message.find(".ptybox.yaml"), std::string::npos) << message;
    EXPECT_NE(message.find("env.set.LD_PRELOAD: `LD_PRELOAD` can make a program load or run code"),
              std::string::npos)
        << message;
  }

  Daemon daemon_;
};

// The attack on the next session: a confined session writes the file for the next session.
TEST_P(RepositoryEnvEscapeTest, AFileWrittenByAConfinedSessionNeverReachesAnotherSession) {
  RpcClient attacker(daemon_.socket());
  Json opened = OpenIn(attacker, Mode());
  ASSERT_TRUE(opened.contains("result")) << opened.dump();
  const std::string write =
      "printf '%s' '" + HostilePolicy(daemon_.workspace()) + "' > .ptybox.yaml; echo written=$?\n";
  Json r = Send(attacker, opened["result"]["sessionId"], write);
  ASSERT_EQ(r["waitReason"], "stdin_read") << r.dump();
  if (Mode() == "read-only") {
    EXPECT_FALSE(fs::exists(RepoFile())) << "a read-only session wrote the workspace";
  }
  if (fs::exists(RepoFile())) {
    ExpectConfinedOpenRefused();
  }
  ExpectDangerFullAccessUntouched();
}

// The same file checked in by a hostile repository (whatever the session could write).
TEST_P(RepositoryEnvEscapeTest, AHostileCheckedInFileIsRefusedConfinedAndIgnoredUnconfined) {
  WriteFile(RepoFile(), HostilePolicy(daemon_.workspace()));
  ExpectConfinedOpenRefused();
  ExpectDangerFullAccessUntouched();
  // Allowed names (the default list) still apply in confined sessions, and not beyond.
  WriteFile(RepoFile(), "version: 1\nenv:\n  set: {NO_COLOR: \"1\"}\n");
  RpcClient client(daemon_.socket());
  Json opened = OpenIn(client, Mode());
  ASSERT_TRUE(opened.contains("result")) << opened.dump();
  Json r = Send(client, opened["result"]["sessionId"], "echo \"[${NO_COLOR-unset}]\"\n");
  EXPECT_EQ(r["viewport"], "[1]") << r.dump();
}

// The session plants a symlink (or garbage) as the repository file.
TEST_P(RepositoryEnvEscapeTest, APlantedSymlinkRefusesOpensNamingTheFileAndTheFix) {
  RpcClient attacker(daemon_.socket());
  Json opened = OpenIn(attacker, Mode());
  ASSERT_TRUE(opened.contains("result")) << opened.dump();
  Send(attacker, opened["result"]["sessionId"], "ln -s /etc/passwd .ptybox.yaml\n");
  if (!fs::is_symlink(RepoFile())) {
    EXPECT_EQ(Mode(), "read-only") << "workspace-write sessions can write the workspace";
    fs::create_symlink("/etc/passwd", RepoFile());  // as a hostile checkout would
  }
  RpcClient client(daemon_.socket());
  Json refused = TryOpenIn(client, Mode());
  ASSERT_TRUE(refused.contains("error")) << refused.dump();
  EXPECT_ERROR_KIND(refused, ErrorKind::kPolicyError);
  const std::string message = refused["error"]["message"];
  EXPECT_NE(message.find(RepoFile().string() + ": is a symbolic link"), std::string::npos)
      << message;
  EXPECT_NE(message.find("No session opens in this workspace until its owner fixes or removes " +
                         RepoFile().string()),
            std::string::npos)
      << message;
  EXPECT_EQ(message.find("root:"), std::string::npos) << "the link's target was read: " << message;
  // An explicit danger-full-access request does not read a repository file at all.
  RpcClient unconfined(daemon_.socket());
  Json wide = OpenIn(unconfined, "danger-full-access");
  EXPECT_TRUE(wide.contains("result")) << wide.dump();
  // Repaired by the workspace's owner: opens work again.
  fs::remove(RepoFile());
  RpcClient again(daemon_.socket());
  Json fixed = OpenIn(again, Mode());
  EXPECT_TRUE(fixed.contains("result")) << fixed.dump();
}

INSTANTIATE_TEST_SUITE_P(Confined, RepositoryEnvEscapeTest,
                         ::testing::Values("read-only", "workspace-write"), ModeTestName);

// Only the operator extends trust to repository files, by name.
TEST(RepositoryTrustTest, TheOperatorMayLetRepositoryFilesReachDangerFullAccess) {
  TempDir config;
  const fs::path op = config.path() / "operator.yaml";
  WriteFile(op,
            "version: 1\nrepository:\n  envSet: [REPO_MARK]\n  trustInDangerFullAccess: true\n");
  Daemon daemon(Daemon::Options{{"--policy", op.string()}, {}});
  WriteFile(daemon.workspace() / ".ptybox.yaml", "version: 1\nenv:\n  set: {REPO_MARK: repo}\n");
  for (const char* mode : {"workspace-write", "danger-full-access"}) {
    RpcClient client(daemon.socket());
    Json opened = OpenIn(client, mode);
    ASSERT_TRUE(opened.contains("result")) << opened.dump();
    Json r = Send(client, opened["result"]["sessionId"], "echo \"[${REPO_MARK-unset}]\"\n");
    EXPECT_EQ(r["viewport"], "[repo]") << mode << r.dump();
  }
  // Trust never covers a loader variable: the operator file itself is refused.
  WriteFile(op, "version: 1\nrepository:\n  envSet: [LD_PRELOAD]\n");
  RpcClient client(daemon.socket());
  Json refused = client.Call("terminal_open", Json::object());
  ASSERT_TRUE(refused.contains("error")) << refused.dump();
  EXPECT_NE(refused["error"]["message"].get<std::string>().find(
                "repository.envSet[0]: `LD_PRELOAD` can make a program load or run code"),
            std::string::npos)
      << refused.dump();
}

// A client's env is held to the policy's rules: no NUL, no reserved name, bounded.
TEST(ClientEnvTest, NulSmugglingAndReservedNamesAreRefusedBeforeAnythingRuns) {
  Daemon daemon;
  RpcClient client(daemon.socket());
  const fs::path marker = daemon.workspace() / "smuggled-ran";
  // The NUL-joined block would have read this as three variables.
  const std::string smuggled = std::string("x") + '\0' + "PROMPT_COMMAND=touch " + marker.string() +
                               '\0' + "PS0=$(touch " + marker.string() + ")";
  for (const char* mode : {"read-only", "workspace-write", "danger-full-access"}) {
    Json refused = OpenIn(client, mode, Json{{"env", Json{{"ZZZ", smuggled}}}});
    ASSERT_TRUE(refused.contains("error")) << mode << refused.dump();
    EXPECT_ERROR_KIND(refused, ErrorKind::kInvalidParams);
    EXPECT_NE(refused["error"]["message"].get<std::string>().find(
                  "env.ZZZ: the value contains a NUL character at byte 1"),
              std::string::npos)
        << refused.dump();
  }
  // The names policy files refuse, terminal_open refuses too.
  const std::string long_name(129, 'A');
  for (const std::string& name :
       {std::string("SHELLOPTS"), std::string("BASHOPTS"), std::string("BASH_XTRACEFD"),
        std::string("PROMPT_COMMAND"), std::string("TERM"), std::string("PTYBOX_X"), long_name,
        std::string("A") + '\0' + "B"}) {
    Json refused = client.Call("terminal_open", Json{{"env", Json{{name, "xtrace"}}}});
    ASSERT_TRUE(refused.contains("error")) << refused.dump();
    EXPECT_ERROR_KIND(refused, ErrorKind::kInvalidParams);
    EXPECT_EQ(refused["error"]["message"].get<std::string>().rfind("env: `", 0), 0u)
        << refused.dump();
  }
  Json too_many_env = Json::object();
  for (int i = 0; i < 257; ++i) too_many_env["V" + std::to_string(i)] = "x";
  Json refused = client.Call("terminal_open", Json{{"env", too_many_env}});
  EXPECT_ERROR_KIND(refused, ErrorKind::kInvalidParams);
  EXPECT_FALSE(fs::exists(marker)) << "a smuggled hook ran";

  // The control: an ordinary variable reaches the shell.
  Json opened = client.Call("terminal_open", Json{{"env", Json{{"OK_NAME", "v a l"}}}});
  ASSERT_TRUE(opened.contains("result")) << opened.dump();
  Json r = Send(client, opened["result"]["sessionId"], "echo \"[$OK_NAME]\"\n");
  EXPECT_EQ(r["viewport"], "[v a l]") << r.dump();
  EXPECT_EQ(r["exitCode"], 0) << r.dump();
  EXPECT_FALSE(fs::exists(marker));
}

}  // namespace
}  // namespace ptybox::testing
