// When the sandbox cannot start, a confined terminal_open fails with sandbox_unavailable
// (cause and fix named) and never runs the shell unconfined; `ptybox doctor` says the same.
// With no policy at all, a plain terminal_open is sandboxed (workspace-write).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <ostream>

#include "sandbox/host_probe.h"
#include "sandbox/init/landlock.h"
#include "tests/escape/escape_support.h"
#include "tests/sandbox/process_runner.h"
#include "tests/support/error_kind.h"

namespace ptybox::testing {
namespace {

namespace fs = std::filesystem;
using sandbox::testing::RunProcess;
using sandbox::testing::RunResult;

void WriteScript(const fs::path& path, const std::string& text) {
  std::ofstream(path) << text;
  // 0755: a root daemon execs bwrap as the session's unprivileged id.
  fs::permissions(path, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                            fs::perms::others_read | fs::perms::others_exec);
}

struct BrokenBwrap {
  std::string name;
  std::vector<std::string> cause;  // what the message must say
  friend void PrintTo(const BrokenBwrap& broken, std::ostream* out) { *out << broken.name; }
};

class SandboxUnavailableTest : public ::testing::TestWithParam<BrokenBwrap> {
 protected:
  // (a) no bwrap at the configured path; (b) a bwrap that fails the way it does on a host whose
  // user namespaces are blocked.
  fs::path Bwrap() {
    if (GetParam().name == "missing") return scripts_.path() / "no-such-dir" / "bwrap";
    // A root daemon execs bwrap as the session's unprivileged id: it must be reachable.
    fs::permissions(scripts_.path(),
                    fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec);
    const fs::path fake = scripts_.path() / "bwrap";
    WriteScript(fake,
                "#!/bin/sh\necho 'bwrap: setting up uid map: Permission denied' >&2\nexit 1\n");
    return fake;
  }

  TempDir scripts_;
  const fs::path bwrap_ = Bwrap();
  Daemon daemon_{Daemon::Options{.extra_args = {}, .env = {"PTYBOX_BWRAP=" + bwrap_.string()}}};
  RpcClient client_{daemon_.socket()};
};

TEST_P(SandboxUnavailableTest, ConfinedOpenFailsAndNeverFallsBack) {
  const std::string marker = "escape" + std::to_string(::getpid()) + GetParam().name;
  // No policy_set_mode: the default mode (workspace-write) is confined.
  Json opened = client_.Call("terminal_open", Json{{"env", {{"ESCAPE_MARK", marker}}}});
  std::cout << "  observed [" << GetParam().name << " bwrap] " << opened.dump() << "\n";
  ASSERT_TRUE(opened.contains("error")) << opened.dump();
  EXPECT_EQ(opened["error"]["code"], -32000);
  EXPECT_ERROR_KIND(opened, ErrorKind::kSandboxUnavailable);
  // PTYBOX_BWRAP was honoured: the error is about that very path.
  EXPECT_EQ(opened["error"]["data"]["context"], bwrap_.string()) << opened.dump();
  const std::string message = opened["error"]["message"];
  for (const std::string& cause : GetParam().cause) {
    EXPECT_NE(message.find(cause), std::string::npos) << "no \"" << cause << "\" in: " << message;
  }
  EXPECT_NE(message.find("Fix: "), std::string::npos) << message;
  EXPECT_NE(message.find("never falls back"), std::string::npos) << message;
  // No shell ran: no process carries the session's environment, no session was published.
  EXPECT_TRUE(ProcessesWithEnv(marker).empty());
  EXPECT_TRUE(client_.Call("terminal_list", Json::object())["result"]["sessions"].empty());

  // The same daemon opens a danger-full-access session (an explicit choice) normally.
  const std::string id = OpenSession(client_, "danger-full-access");
  ASSERT_FALSE(id.empty()) << daemon_.Log();
  Observed echo = RunInSession(client_, id, "danger-full-access", "echo", "echo opened");
  EXPECT_EQ(echo.text, "opened") << echo.Show();
  // And going back to a confined mode fails the same way again.
  client_.Call("terminal_close", Json{{"sessionId", id}});
  ASSERT_TRUE(client_.Call("policy_set_mode", Json{{"mode", "read-only"}}).contains("result"));
  Json again = client_.Call("terminal_open", Json::object());
  EXPECT_ERROR_KIND(again, ErrorKind::kSandboxUnavailable);
}

INSTANTIATE_TEST_SUITE_P(
    Bwrap, SandboxUnavailableTest,
    ::testing::Values(BrokenBwrap{"missing",
                                  {"no bwrap at", "No such file or directory",
                                   "apt-get install bubblewrap", "PTYBOX_BWRAP"}},
                      BrokenBwrap{"failing",
                                  {"setting up uid map: Permission denied", "user namespaces",
                                   "user.max_user_namespaces"}}),
    [](const ::testing::TestParamInfo<BrokenBwrap>& param) { return param.param.name; });

TEST(BwrapFromEnvironmentTest, ThePathInPtyboxBwrapIsTheOneThatRuns) {
  // A wrapper that logs its arguments, then runs the real bwrap: the session works, and the
  // log proves the daemon started the sandbox through PTYBOX_BWRAP.
  TempDir scripts;
  // A root daemon runs bwrap as the session's unprivileged id, which must reach the wrapper and
  // append to its log.
  fs::permissions(scripts.path(), fs::perms::all);
  const fs::path log = scripts.path() / "calls.log";
  const fs::path wrapper = scripts.path() / "bwrap-wrapper";
  WriteScript(wrapper, "#!/bin/sh\necho \"$@\" >> '" + log.string() + "'\nexec '" +
                           sandbox::FindBwrap().string() + "' \"$@\"\n");
  Daemon daemon(Daemon::Options{.extra_args = {}, .env = {"PTYBOX_BWRAP=" + wrapper.string()}});
  RpcClient client(daemon.socket());
  const std::string id = OpenSession(client, "workspace-write");
  ASSERT_FALSE(id.empty()) << daemon.Log();
  Observed o = RunInSession(client, id, "workspace-write", "pid-1", "cat /proc/1/comm");
  // ptybox-init is the sandbox's pid 1 (bwrap --as-pid-1): a new pid namespace, from bwrap.
  EXPECT_EQ(o.text, "ptybox-init") << o.Show();
  const std::string calls = ReadFile(log);
  EXPECT_NE(calls.find("--unshare-all"), std::string::npos) << calls;
  EXPECT_NE(calls.find("--seccomp 4"), std::string::npos) << calls;
}

TEST(DefaultModeTest, WithoutAnyPolicyASessionIsSandboxed) {
  Daemon daemon;
  RpcClient client(daemon.socket());
  Json resolved = client.Call("policy_resolve", Json::object());
  EXPECT_EQ(resolved["result"]["mode"], "workspace-write") << resolved.dump();
  EXPECT_EQ(resolved["result"]["network"], "deny") << resolved.dump();
  // No policy_set_mode before the open.
  Json opened = client.Call("terminal_open", Json::object());
  ASSERT_TRUE(opened.contains("result")) << opened.dump() << daemon.Log();
  EXPECT_EQ(opened["result"]["mode"], "workspace-write");
  const std::string id = opened["result"]["sessionId"];
  // Other pid, network and user namespaces than the host's; pid 1 is bwrap.
  for (const char* ns : {"pid", "net", "user"}) {
    const std::string path = std::string("/proc/self/ns/") + ns;
    Observed o = RunInSession(client, id, "default", std::string("ns-") + ns, "readlink " + path);
    EXPECT_EQ(o.exit, 0) << o.Show();
    EXPECT_TRUE(o.Says(std::string(ns) + ":[")) << o.Show();
    EXPECT_NE(o.text, fs::read_symlink(path).string()) << o.Show();
  }
  Observed pid1 = RunInSession(client, id, "default", "pid-1", "cat /proc/1/comm");
  EXPECT_EQ(pid1.text, "ptybox-init") << pid1.Show();
  Observed seccomp = RunInSession(client, id, "default", "seccomp",
                                  "grep -E '^(Seccomp|NoNewPrivs):' /proc/self/status");
  std::map<std::string, std::string> fields = StatusFields(seccomp.text);
  EXPECT_EQ(fields["Seccomp"], "2") << seccomp.Show();
  EXPECT_EQ(fields["NoNewPrivs"], "1") << seccomp.Show();
}

TEST(DoctorTest, PassesOnThisHostAndNamesEachProbe) {
  RunResult run = RunProcess({PtyboxBinary().string(), "doctor"});
  std::cout << run.out;
  EXPECT_EQ(run.exit_code, 0) << run.Describe();
  for (const char* probe : {"ptybox-init", "bwrap", "user-namespaces", "seccomp", "seccomp-filter",
                            "session-ids", "sandbox-start", "sandbox-pty", "no-host-root"}) {
    EXPECT_NE(run.out.find(std::string("[ ok ] ") + probe + ": "), std::string::npos)
        << probe << " not reported as ok:\n"
        << run.out;
  }
  EXPECT_EQ(run.out.find("FAIL"), std::string::npos) << run.out;
  // The UNIX-socket walls are reported, never a failure: ok with Landlock ABI 9, else a warning
  // that names what stays reachable.
  const bool complete = sandbox::UnixSocketWallsFor(sandbox::LandlockAbi().value_or(0)).Complete();
  EXPECT_NE(run.out.find(complete ? "[ ok ] unix-sockets: Landlock ABI" : "[warn] unix-sockets: "),
            std::string::npos)
      << run.out;
  if (!complete) {
    EXPECT_NE(run.out.find("stays reachable"), std::string::npos) << run.out;
  }
}

TEST(DoctorTest, FailsWithoutBwrapAndNamesThePackage) {
  RunResult run = RunProcess(
      {"/usr/bin/env", "PTYBOX_BWRAP=/nonexistent/bwrap", PtyboxBinary().string(), "doctor"});
  std::cout << run.out;
  EXPECT_NE(run.exit_code, 0) << run.Describe();
  EXPECT_NE(run.exit_code, -1) << run.Describe();
  EXPECT_NE(run.out.find("[FAIL] bwrap: no bwrap at /nonexistent/bwrap"), std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("apt-get install bubblewrap"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("this host cannot sandbox"), std::string::npos) << run.out;
}

}  // namespace
}  // namespace ptybox::testing
