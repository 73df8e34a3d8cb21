// Wall 2 of docs/security.md: no way back to the daemon or to host services. A session connects
// to its own daemon's socket and calls policy_set_mode danger-full-access (the attack of issue
// 11). First wall: the socket is not reachable in a confined session (its directory, or the
// file alone, is hidden; /run and /var/run are empty). Second wall: the daemon refuses a
// connection from any process of its own sessions, so even danger-full-access, where the
// socket is visible, fails.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "tests/escape/walls_support.h"
#include "tests/run/child_process.h"

namespace ptybox::testing {
namespace {

namespace fs = std::filesystem;

class DaemonReachTest : public WallsTest {
 protected:
  static constexpr const char* kAskForTheWidestMode =
      " policy_set_mode '{\"mode\": \"danger-full-access\"}'";

  // The attack, typed into `session` of `client`: connect to `socket`, ask for the widest mode.
  Observed Attack(RpcClient& client, const std::string& session, const fs::path& socket,
                  const std::string& name) {
    return RunInSession(client, session, Mode(), name,
                        Walls("rpc " + Quote(socket) + kAskForTheWidestMode));
  }
  // The same attack through the probe copied into `daemon`'s own workspace (PrepareWorkspace
  // and WALLS_PROBE_SCRIPT), for daemons started with a socket path of the test's choosing.
  Observed AttackFromWorkspace(RpcClient& client, const std::string& session, const Daemon& daemon,
                               const std::string& name) {
    return RunInSession(client, session, Mode(), name,
                        "python3 " + Quote(daemon.workspace() / ".escape" / "walls_probe.py") +
                            " rpc " + Quote(daemon.socket()) + kAskForTheWidestMode);
  }
  // What the attack must see when the first wall holds (`hidden_as`: "ENOENT" when the
  // directory is hidden, "ECONNREFUSED" when the file is covered) and, in danger-full-access,
  // the second wall.
  void ExpectRefused(const Observed& o, const std::string& hidden_as, const Daemon& daemon) {
    EXPECT_EQ(o.exit, 1) << o.Show();
    if (Confined()) {
      EXPECT_TRUE(o.Says("rpc: " + hidden_as)) << o.Show();
    } else {
      EXPECT_TRUE(
          o.Says("rpc: refused connection refused: this client runs inside a ptybox "
                 "session of this daemon"))
          << o.Show();
      EXPECT_NE(daemon.Log().find("refused a socket client"), std::string::npos) << daemon.Log();
    }
  }
  // The mode did not change, and the test process (no session's) is still served.
  void ExpectModeUnchanged(RpcClient& client) {
    Json resolved = client.Call("policy_resolve", Json::object());
    EXPECT_FALSE(resolved.contains("error")) << resolved.dump();
    EXPECT_EQ(resolved.contains("result") ? resolved["result"].value("mode", "") : "", Mode())
        << resolved.dump();
  }
};

TEST_P(DaemonReachTest, RunDirectoriesAreEmpty) {
  // The session's private home (docs/sandbox.md) is the one entry of the sandbox's own /run.
  Observed run = Run("ls-/run",
                     "ls -A /run/ | grep -vx ptybox-home | wc -l; "
                     "ls -A /var/run/ | grep -vx ptybox-home | wc -l");
  if (Confined()) {
    EXPECT_EQ(Words(run.text), (std::vector<std::string>{"0", "0"})) << run.Show();
    // Writable like /tmp, private to the session.
    Observed w = Run("write-/run", "touch /run/ptybox-escape-" + Unique() + " && echo ok");
    EXPECT_EQ(w.text, "ok") << w.Show();
    EXPECT_FALSE(fs::exists("/run/ptybox-escape-" + Unique()));
  } else if (!fs::is_empty("/run")) {
    EXPECT_NE(Words(run.text).front(), "0") << run.Show();
  }
}

TEST_P(DaemonReachTest, SessionCannotCallItsDaemon) {
  // The fixture's socket: a directory of its own under /tmp.
  Observed seen = Run("socket-visible", "test -S " + Quote(daemon_.socket()) + "; echo $?");
  EXPECT_EQ(seen.text, Confined() ? "1" : "0") << seen.Show();
  Observed o = Attack(client_, session_, daemon_.socket(), "rpc-to-own-daemon");
  ExpectRefused(o, "ENOENT", daemon_);
  ExpectModeUnchanged(client_);
}

TEST_P(DaemonReachTest, ASocketInsideTheWorkspaceIsRefusedAtStartup) {
  // A session could rename the socket's directory (locking every new client out) or replace
  // the socket: the daemon does not start there. Mode-independent; run once.
  if (Mode() != "read-only") GTEST_SKIP() << "checked once";
  TempDir state;
  ChildProcess daemon({{PtyboxBinary().string(), "serve", "--socket",
                        (daemon_.workspace() / "run" / "ptybox.sock").string(), "--workspace",
                        daemon_.workspace().string()},
                       TestEnvironment(state.path() / "no-operator-policy.yaml"),
                       {},
                       true,
                       {}});
  ChildProcess::Exit exit = daemon.Wait();
  EXPECT_TRUE(exit.exited && exit.code == 1) << daemon.err();
  EXPECT_NE(daemon.err().find("is inside " + fs::weakly_canonical(daemon_.workspace()).string() +
                              ", a directory sessions may write"),
            std::string::npos)
      << daemon.err();
  EXPECT_FALSE(fs::exists(daemon_.workspace() / "run" / "ptybox.sock"));
}

TEST_P(DaemonReachTest, AnotherDaemonOfTheSameUserRefusesTheSession) {
  // Daemon B of the same user, its socket where this session (of daemon A, the fixture) can
  // reach it: A hides only its own socket. B refuses: a confined session is in another user
  // namespace, a danger-full-access one runs under a ptybox-init. Without that, the session
  // set danger-full-access on B and wrote outside A's roots.
  const fs::path socket = daemon_.workspace() / ("b" + Mode().substr(0, 2) + ".sock");
  Daemon other(Daemon::Options{}, socket);
  ASSERT_TRUE(fs::is_socket(socket)) << other.Log();
  Observed seen = Run("other-socket-visible", "test -S " + Quote(socket) + "; echo $?");
  EXPECT_EQ(seen.text, "0") << seen.Show();
  Observed o = Attack(client_, session_, socket, "rpc-to-another-daemon");
  EXPECT_EQ(o.exit, 1) << o.Show();
  if (Confined()) {
    EXPECT_TRUE(
        o.Says("rpc: refused connection refused: this client runs in another user "
               "namespace than the daemon's"))
        << o.Show();
  } else {
    EXPECT_TRUE(
        o.Says("rpc: refused connection refused: this client runs inside a ptybox "
               "session (of another daemon)"))
        << o.Show();
  }
  EXPECT_NE(other.Log().find("refused a socket client"), std::string::npos) << other.Log();
  RpcClient b(other.socket());
  Json resolved = b.Call("policy_resolve", Json::object());
  EXPECT_EQ(resolved.contains("result") ? resolved["result"].value("mode", "") : "",
            "workspace-write")
      << resolved.dump();
  ExpectModeUnchanged(client_);
}

TEST_P(DaemonReachTest, TheDefaultSocketDirectoryIsHiddenInEverySessionOfTheUser) {
  // `serve` without --socket listens in this user's run-time directory ($XDG_RUNTIME_DIR/ptybox),
  // which every confined session of any of its daemons has hidden. Here XDG_RUNTIME_DIR is a
  // directory in the build tree, visible read-only inside, so the cover is what stops the
  // session (under /run, the usual place, it is hidden with /run).
  if (::geteuid() == 0) GTEST_SKIP() << "root's directory is /run/ptybox: SocketUnderRunIsHidden";
  if (::access(OutsideDir().c_str(), W_OK) != 0) {
    GTEST_SKIP() << OutsideDir() << " is not writable by this user";
  }
  const fs::path runtime = OutsideDir() / ("x" + std::to_string(::getpid()) + Mode().substr(0, 2));
  fs::create_directories(runtime);
  fs::permissions(runtime, fs::perms(0755));
  const fs::path socket = runtime / "ptybox" / "ptybox.sock";
  {
    TempDir workspace;
    TempDir state;
    std::vector<std::string> env = TestEnvironment(state.path() / "no-operator-policy.yaml");
    env.push_back("XDG_RUNTIME_DIR=" + runtime.string());
    ChildProcess other(
        {{PtyboxBinary().string(), "serve", "--workspace", workspace.path().string()},
         env,
         {},
         true,
         state.path() / "other.log"});
    for (int i = 0; i < 3000 && !fs::is_socket(socket); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ASSERT_TRUE(fs::is_socket(socket)) << ReadFile(state.path() / "other.log");
    // A daemon of the same user and run-time directory: its sessions do not see the socket.
    Daemon daemon(Daemon::Options{{}, {"XDG_RUNTIME_DIR=" + runtime.string()}});
    PrepareWorkspace(daemon.workspace());
    fs::copy_file(WALLS_PROBE_SCRIPT, daemon.workspace() / ".escape" / "walls_probe.py");
    RpcClient client(daemon.socket());
    const std::string session = OpenSession(client, Mode());
    ASSERT_FALSE(session.empty()) << daemon.Log();
    Observed seen = RunInSession(client, session, Mode(), "default-socket-visible",
                                 "test -S " + Quote(socket) + "; echo $?");
    EXPECT_EQ(seen.text, Confined() ? "1" : "0") << seen.Show();
    Observed o =
        RunInSession(client, session, Mode(), "rpc-to-default-socket",
                     "python3 " + Quote(daemon.workspace() / ".escape" / "walls_probe.py") +
                         " rpc " + Quote(socket) + kAskForTheWidestMode);
    EXPECT_EQ(o.exit, 1) << o.Show();
    EXPECT_TRUE(o.Says(Confined() ? "rpc: ENOENT"
                                  : "rpc: refused connection refused: this client runs inside a "
                                    "ptybox session (of another daemon)"))
        << o.Show();
    other.Signal(SIGTERM);
    other.Wait();
  }
  std::error_code ec;
  fs::remove_all(runtime, ec);
}

TEST_P(DaemonReachTest, SocketInAVisibleHostDirectoryIsHidden) {
  // A host directory visible (read-only) inside: the build tree.
  if (::access(OutsideDir().c_str(), W_OK) != 0) {
    GTEST_SKIP() << OutsideDir() << " is not writable by this user";
  }
  // Short: a socket path has at most 107 bytes.
  const fs::path dir = OutsideDir() / ("s" + std::to_string(::getpid()) + Mode().substr(0, 2));
  fs::create_directories(dir);
  // Searchable by anyone, so that hiding it is what stops the session (a root daemon's session
  // id could not search a 0700 directory at all: then it needs no cover and gets none).
  fs::permissions(dir, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                           fs::perms::others_read | fs::perms::others_exec);
  {
    Daemon daemon(Daemon::Options{}, dir / "ptybox.sock");
    PrepareWorkspace(daemon.workspace());
    fs::copy_file(WALLS_PROBE_SCRIPT, daemon.workspace() / ".escape" / "walls_probe.py");
    RpcClient client(daemon.socket());
    const std::string session = OpenSession(client, Mode());
    ASSERT_FALSE(session.empty()) << daemon.Log();
    Observed ls =
        RunInSession(client, session, Mode(), "ls-socket-dir", "ls -A " + Quote(dir) + " | wc -l");
    EXPECT_EQ(ls.text, Confined() ? "0" : "1") << ls.Show();
    Observed o = AttackFromWorkspace(client, session, daemon, "rpc-socket-in-host-dir");
    ExpectRefused(o, "ENOENT", daemon);
    ExpectModeUnchanged(client);
  }
  std::error_code ec;
  fs::remove_all(dir, ec);
}

TEST_P(DaemonReachTest, SocketUnderRunIsHidden) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root: creates a directory in the host's /run";
  const fs::path dir = "/run/ptybox-escape-" + Unique();
  fs::create_directories(dir);
  {
    Daemon daemon(Daemon::Options{}, dir / "ptybox.sock");
    PrepareWorkspace(daemon.workspace());
    fs::copy_file(WALLS_PROBE_SCRIPT, daemon.workspace() / ".escape" / "walls_probe.py");
    RpcClient client(daemon.socket());
    const std::string session = OpenSession(client, Mode());
    ASSERT_FALSE(session.empty()) << daemon.Log();
    Observed o = AttackFromWorkspace(client, session, daemon, "rpc-socket-under-/run");
    ExpectRefused(o, "ENOENT", daemon);
    ExpectModeUnchanged(client);
  }
  std::error_code ec;
  fs::remove_all(dir, ec);
}

INSTANTIATE_TEST_SUITE_P(Modes, DaemonReachTest,
                         ::testing::Values("read-only", "workspace-write", "danger-full-access"),
                         ModeTestName);

}  // namespace
}  // namespace ptybox::testing
