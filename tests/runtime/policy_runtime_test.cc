// Policy through the real binary: SIGHUP keeps sessions and fences, the fence under spawns raced
// against mode changes, the CLI's policy commands.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <fstream>
#include <thread>

#include "tests/support/daemon_fixture.h"
#include "tests/support/error_kind.h"

namespace ptybox::testing {
namespace {

void WriteFile(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
}

TEST(PolicyRuntimeTest, SighupReloadKeepsSessionsAndFences) {
  TempDir config;
  std::filesystem::path policy = config.path() / "operator.yaml";
  WriteFile(policy, "version: 1\nmode: workspace-write\n");
  Daemon daemon(Daemon::Options{{"--policy", policy.string()}, {}});
  RpcClient client(daemon.socket());
  Json opened = client.Call("terminal_open", Json::object());
  ASSERT_TRUE(opened.contains("result")) << opened.dump();
  std::string id = opened["result"]["sessionId"];
  EXPECT_EQ(opened["result"]["mode"], "workspace-write");

  // The operator narrows the default mode and reloads.
  WriteFile(policy, "version: 1\nmode: read-only\n");
  ::kill(daemon.pid(), SIGHUP);
  // The live session is kept and still answers.
  Json r = Send(client, id, "echo still here\n");
  EXPECT_EQ(r["viewport"], "still here") << r.dump();
  // The fence survived: a change away from the session's mode is still fenced.
  Json fenced = client.Call("policy_set_mode", Json{{"mode", "danger-full-access"}});
  EXPECT_ERROR_KIND(fenced, ErrorKind::kModeFenced);
  // New spawns use the reloaded file.
  Json second = client.Call("terminal_open", Json::object());
  ASSERT_TRUE(second.contains("result")) << second.dump();
  EXPECT_EQ(second["result"]["mode"], "read-only");
  EXPECT_TRUE(daemon.Log().find("SIGHUP") != std::string::npos) << daemon.Log();
}

TEST(PolicyRuntimeTest, FenceHoldsWhenSpawnsRaceModeChanges) {
  Daemon daemon;
  RpcClient client(daemon.socket());
  const std::vector<std::string> modes = {"read-only", "workspace-write", "danger-full-access"};
  int fenced_count = 0;
  int changed_count = 0;
  for (int i = 0; i < 60; ++i) {
    const std::string& target = modes[static_cast<size_t>(i) % modes.size()];
    // Both requests leave before either answer arrives, in alternating order: the reactor
    // serializes them, and the check and the change are one step against a spawn starting.
    int open = 0;
    int set = 0;
    if (i % 2 == 0) {
      open = client.SendRequest("terminal_open", Json::object());
      set = client.SendRequest("policy_set_mode", Json{{"mode", target}});
    } else {
      set = client.SendRequest("policy_set_mode", Json{{"mode", target}});
      open = client.SendRequest("terminal_open", Json::object());
    }
    Json set_reply = client.WaitResponse(set);
    Json open_reply = client.WaitResponse(open);
    ASSERT_TRUE(open_reply.contains("result")) << open_reply.dump();
    std::string effective = client.Call("policy_resolve", Json::object())["result"]["mode"];
    // Whatever the order, no session outlives a mode change of its owner.
    EXPECT_EQ(open_reply["result"]["mode"], effective) << "iteration " << i;
    if (set_reply.contains("error")) {
      EXPECT_ERROR_KIND(set_reply, ErrorKind::kModeFenced);
      ++fenced_count;
    } else {
      ++changed_count;
    }
    Json closed =
        client.Call("terminal_close", Json{{"sessionId", open_reply["result"]["sessionId"]}});
    ASSERT_TRUE(closed.contains("result")) << closed.dump();
  }
  std::printf("fence race: %d fenced, %d changed or unchanged\n", fenced_count, changed_count);
  EXPECT_GT(fenced_count, 0);
  EXPECT_GT(changed_count, 0);
}

TEST(PolicyRuntimeTest, RepositoryCannotRaiseItsOwnMode) {
  Daemon daemon;
  WriteFile(daemon.workspace() / ".ptybox.yaml", "version: 1\nmode: danger-full-access\n");
  RpcClient client(daemon.socket());
  Json resolved = client.Call("policy_resolve", Json::object());
  EXPECT_ERROR_KIND(resolved, ErrorKind::kPolicyDenied);
  Json opened = client.Call("terminal_open", Json::object());
  EXPECT_ERROR_KIND(opened, ErrorKind::kPolicyDenied);
}

TEST(PolicyRuntimeTest, TypoInACheckedInPolicyNamesFileLineColumnAndKey) {
  Daemon daemon;
  WriteFile(daemon.workspace() / ".ptybox.yaml", "version: 1\nnetwrok: deny\n");
  RpcClient client(daemon.socket());
  Json opened = client.Call("terminal_open", Json::object());
  ASSERT_ERROR_KIND(opened, ErrorKind::kPolicyError);
  std::string message = opened["error"]["message"];
  EXPECT_NE(message.find(".ptybox.yaml:2:1"), std::string::npos) << message;
  EXPECT_NE(message.find("netwrok"), std::string::npos) << message;
  EXPECT_NE(message.find("network"), std::string::npos) << "suggests the closest key: " << message;
}

// Runs a shell command line; its exit code and everything it printed.
std::pair<int, std::string> Capture(const std::string& command) {
  FILE* pipe = ::popen(command.c_str(), "r");
  std::string out;
  char buf[4096];
  while (size_t n = std::fread(buf, 1, sizeof(buf), pipe)) out.append(buf, n);
  int status = ::pclose(pipe);
  return {WEXITSTATUS(status), out};
}

std::pair<int, std::string> RunCli(const std::vector<std::string>& args) {
  std::string command = PtyboxBinary().string();
  for (const std::string& a : args) command += " '" + a + "'";
  return Capture(command + " 2>&1");
}

TEST(PolicyCliTest, CheckPrintsOneLinePerProblemAndExitsNonZero) {
  TempDir dir;
  std::filesystem::path bad = dir.path() / ".ptybox.yaml";
  WriteFile(bad, "version: 1\nmode: danger\nlimits:\n  idleSilenceMs: -5\n");
  auto [code, out] = RunCli({"policy", "check", bad.string()});
  EXPECT_NE(code, 0);
  EXPECT_NE(out.find(".ptybox.yaml:2:7"), std::string::npos) << out;
  EXPECT_NE(out.find("limits.idleSilenceMs"), std::string::npos) << out;
  std::filesystem::path good = dir.path() / "operator.yaml";
  WriteFile(good, "version: 1\nmode: read-only\nceiling: workspace-write\n");
  auto [ok_code, ok_out] = RunCli({"policy", "check", good.string()});
  EXPECT_EQ(ok_code, 0) << ok_out;
}

TEST(PolicyCliTest, ResolvePrintsEachValueWithItsSource) {
  TempDir dir;
  std::filesystem::path op = dir.path() / "operator.yaml";
  WriteFile(op, "version: 1\nmode: read-only\n");
  auto [code, out] =
      RunCli({"policy", "resolve", "--workspace", dir.path().string(), "--policy", op.string()});
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("read-only"), std::string::npos) << out;
  EXPECT_NE(out.find("operator.yaml:2:7"), std::string::npos) << out;
}

// ---- Layering in `policy check`, requested modes, TERM (docs/policy.md).

// `ptybox <args>` with `env` ("K=V") before it, the operator policy pointed at `op` (which may
// not exist) so the machine's /etc/ptybox/policy.yaml never counts.
std::pair<int, std::string> RunCliWith(const std::filesystem::path& op,
                                       const std::vector<std::string>& args,
                                       const std::vector<std::string>& env = {}) {
  std::vector<std::string> all = {"PTYBOX_OPERATOR_POLICY=" + op.string(),
                                  "PTYBOX_INIT=" + InitBinary().string()};
  all.insert(all.end(), env.begin(), env.end());
  std::string command = "env";
  for (const std::string& kv : all) command += " '" + kv + "'";
  command += " " + PtyboxBinary().string();
  for (const std::string& a : args) command += " '" + a + "'";
  return Capture(command + " 2>&1 </dev/null");
}

TEST(PolicyCliTest, CheckAppliesTheLayeringASpawnApplies) {
  TempDir dir;
  const auto op = dir.path() / "operator.yaml";
  WriteFile(op, "version: 1\nlimits: {maxSessions: 8}\n");
  std::filesystem::create_directory(dir.path() / "ws");
  const auto repo = dir.path() / "ws/.ptybox.yaml";
  WriteFile(repo,
            "version: 1\nnetwork: allow\nenv:\n  pass: [AWS_SECRET_ACCESS_KEY]\n"
            "limits: {maxSessions: 9}\n");
  // The operator file named, and found at its default place: the same three denials.
  for (const auto& args : {std::vector<std::string>{"policy", "check", op.string(), repo.string()},
                           std::vector<std::string>{"policy", "check", repo.string()}}) {
    auto [code, out] = RunCliWith(op, args);
    EXPECT_EQ(code, 1) << out;
    EXPECT_NE(out.find("ws/.ptybox.yaml:2:10: network: `allow` is not permitted"),
              std::string::npos)
        << out;
    EXPECT_NE(out.find("env.pass: `AWS_SECRET_ACCESS_KEY` is not passed by the operator policy"),
              std::string::npos)
        << out;
    EXPECT_NE(out.find("limits.maxSessions: 9 is above the operator's 8"), std::string::npos)
        << out;
  }
  // What a spawn says about the same file.
  auto [run_code, run_out] =
      RunCliWith(op, {"run", "--workspace", (dir.path() / "ws").string(), "--", "true"});
  EXPECT_EQ(run_code, 125) << run_out;
  EXPECT_NE(run_out.find("network: `allow` is not permitted"), std::string::npos) << run_out;

  // With no operator file anywhere the built-in defaults are the operator layer.
  const auto none = dir.path() / "absent.yaml";
  auto [bare_code, bare_out] = RunCliWith(none, {"policy", "check", repo.string()});
  EXPECT_EQ(bare_code, 1) << bare_out;
  EXPECT_NE(bare_out.find("network: `allow` is not permitted"), std::string::npos) << bare_out;

  WriteFile(repo, "version: 1\nlimits: {maxSessions: 2}\n");
  auto [ok_code, ok_out] = RunCliWith(op, {"policy", "check", repo.string()});
  EXPECT_EQ(ok_code, 0) << ok_out;
  EXPECT_NE(ok_out.find(repo.string() + ": ok (layered on " + op.string() + ")"), std::string::npos)
      << ok_out;
}

// The operator file at its default place (here PTYBOX_OPERATOR_POLICY) refuses every spawn
// when it is broken, so a check of a repository file fails on it too; a linked file named on
// the command line is refused and none of its lines is printed.
TEST(PolicyCliTest, CheckFailsOnABrokenOperatorFileAtItsDefaultPlace) {
  TempDir dir;
  const auto op = dir.path() / "operator.yaml";
  WriteFile(op, "version: 1\nmode: sideways\n");
  std::filesystem::create_directory(dir.path() / "ws");
  const auto repo = dir.path() / "ws/.ptybox.yaml";
  WriteFile(repo, "version: 1\n");
  auto [code, out] = RunCliWith(op, {"policy", "check", repo.string()});
  EXPECT_EQ(code, 1) << out;
  EXPECT_NE(out.find(op.string() + ":2:7: mode:"), std::string::npos) << out;
  EXPECT_EQ(out.find(": ok"), std::string::npos) << out;
  // A dangling link at the default place is broken too (a spawn refuses it).
  std::filesystem::remove(op);
  std::filesystem::create_symlink(dir.path() / "nowhere.yaml", op);
  auto [dangling_code, dangling_out] = RunCliWith(op, {"policy", "check"});
  EXPECT_EQ(dangling_code, 1) << dangling_out;
  // What a spawn says about the same operator file.
  auto [run_code, run_out] =
      RunCliWith(op, {"run", "--workspace", (dir.path() / "ws").string(), "--", "true"});
  EXPECT_EQ(run_code, 125) << run_out;

  const auto secret = dir.path() / "shadow";
  WriteFile(secret, "root:$6$SECRET-LINE-ONE:19000:0:99999:7:::\n");
  const auto link = dir.path() / "policy.yaml";
  std::filesystem::create_symlink(secret, link);
  const auto none = dir.path() / "absent.yaml";
  for (const auto& file : {link, secret}) {
    auto [leak_code, leak_out] = RunCliWith(none, {"policy", "check", file.string()});
    EXPECT_EQ(leak_code, 1) << leak_out;
    EXPECT_EQ(leak_out.find("SECRET"), std::string::npos) << leak_out;
  }
}

// policy.md: a mode a repository file was denied can be requested; the error says so.
TEST(PolicyCliTest, ARequestedModeReplacesADeniedRepositoryMode) {
  TempDir dir;
  const auto none = dir.path() / "absent.yaml";
  WriteFile(dir.path() / ".ptybox.yaml", "version: 1\nmode: danger-full-access\n");
  const std::string ws = dir.path().string();
  auto [denied_code, denied_out] = RunCliWith(none, {"run", "--workspace", ws, "--", "true"});
  EXPECT_EQ(denied_code, 125) << denied_out;
  EXPECT_NE(denied_out.find("or request the mode explicitly (--mode or policy_set_mode"),
            std::string::npos)
      << denied_out;
  auto [code, out] = RunCliWith(none, {"run", "--workspace", ws, "--mode", "danger-full-access",
                                       "--", "sh", "-c", "echo requested-ok"});
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("requested-ok"), std::string::npos) << out;
  auto [narrow_code, narrow_out] =
      RunCliWith(none, {"run", "--workspace", ws, "--mode", "read-only", "--", "true"});
  EXPECT_EQ(narrow_code, 0) << narrow_out;
}

// TERM is the terminal's: refused in env.set; passed by name it reaches `ptybox run` (the
// caller's terminal shows the output), while a session keeps xterm-256color (ptybox decodes).
TEST(PolicyCliTest, TermIsReservedInEnvSetAndPassedOnlyToRun) {
  TempDir dir;
  const auto op = dir.path() / "operator.yaml";
  WriteFile(op, "version: 1\nenv:\n  set: {TERM: vt100}\n");
  auto [set_code, set_out] =
      RunCliWith(op, {"run", "--workspace", dir.path().string(), "--", "true"});
  EXPECT_EQ(set_code, 125) << set_out;
  EXPECT_NE(set_out.find("env.set.TERM: `TERM` is reserved: the terminal type is the terminal's"),
            std::string::npos)
      << set_out;

  WriteFile(op, "version: 1\nenv:\n  pass: [PATH, TERM]\n");
  auto [code, out] = RunCliWith(
      op, {"run", "--workspace", dir.path().string(), "--", "sh", "-c", "echo \"term=$TERM\""},
      {"TERM=vt220"});
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("term=vt220"), std::string::npos) << out;

  Daemon daemon(Daemon::Options{{"--policy", op.string()}, {"TERM=vt220"}});
  RpcClient client(daemon.socket());
  Json opened = client.Call("terminal_open", Json::object());
  ASSERT_TRUE(opened.contains("result")) << opened.dump();
  Json r = Send(client, opened["result"]["sessionId"], "echo \"term=$TERM\"\n");
  EXPECT_EQ(r["viewport"], "term=xterm-256color") << r.dump();
}

}  // namespace
}  // namespace ptybox::testing
