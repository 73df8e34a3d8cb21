// Wall 2 of docs/security.md: no way back to the daemon or to host services. A session connects
// to its own daemon's socket and calls policy_set_mode danger-full-access (the attack of issue
// 11). First wall: the socket is not reachable in a confined session (its directory, or the
// file alone, is hidden; /run and /var/run are empty). Second wall: the daemon refuses a
// connection from any process of its own sessions, so even danger-full-access, where the
// socket is visible, fails.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/escape/walls_support.h"

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
    return RunInSession(
        client, session, Mode(), name,
        Walls("rpc " + Quote(socket) + kAskForTheWidestMode));
  }
  // The same attack through the probe copied into `daemon`'s own workspace (PrepareWorkspace
  // and WALLS_PROBE_SCRIPT), for daemons started with a socket path of the test's choosing.
  Observed AttackFromWorkspace(RpcClient& client, const std::string& session,
                               const Daemon& daemon, const std::string& name) {
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

TEST_P(DaemonReachTest, SocketInsideTheWorkspaceIsCovered) {
  // The socket's directory is the workspace, which must stay: the file alone is covered.
  Daemon daemon(Daemon::Options{}, "ptybox.sock");
  PrepareWorkspace(daemon.workspace());
  fs::copy_file(WALLS_PROBE_SCRIPT, daemon.workspace() / ".escape" / "walls_probe.py");
  ASSERT_TRUE(fs::is_socket(daemon.workspace() / "ptybox.sock")) << daemon.Log();
  RpcClient client(daemon.socket());
  const std::string session = OpenSession(client, Mode());
  ASSERT_FALSE(session.empty()) << daemon.Log();
  Observed o = AttackFromWorkspace(client, session, daemon, "rpc-socket-in-workspace");
  ExpectRefused(o, "ECONNREFUSED", daemon);
  if (Mode() == "workspace-write") {
    // The covered path is a mount point: it cannot be moved away or replaced.
    Observed mv = RunInSession(client, session, Mode(), "move-socket", "mv ptybox.sock moved.sock");
    EXPECT_EQ(mv.exit, 1) << mv.Show();
    EXPECT_TRUE(mv.Says("Device or resource busy")) << mv.Show();
  }
  ExpectModeUnchanged(client);
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
