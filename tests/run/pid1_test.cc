// ptybox as a container's entrypoint: PID 1 of a new pid namespace (`unshare --pid --fork`).
// Orphans that re-parent to it are reaped (no zombies), and SIGTERM closes every session
// gracefully and exits 0.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "tests/run/child_process.h"
#include "tests/support/daemon_fixture.h"
#include "tests/support/files.h"

namespace ptybox::testing {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// Fields 3 (state) and 4 (ppid) of /proc/<pid>/stat; nullopt once the pid is gone entirely.
struct Stat {
  char state = '?';
  pid_t ppid = 0;
};
std::optional<Stat> ReadStat(pid_t pid) {
  std::string text = ReadFile("/proc/" + std::to_string(pid) + "/stat");
  size_t paren = text.rfind(')');
  if (text.empty() || paren == std::string::npos) return std::nullopt;
  std::istringstream rest(text.substr(paren + 2));
  Stat s;
  rest >> s.state >> s.ppid;
  return s;
}

// Zombie children of `parent` (exited, not reaped).
std::vector<pid_t> ZombieChildren(pid_t parent) {
  std::vector<pid_t> zombies;
  for (const auto& entry : fs::directory_iterator("/proc")) {
    pid_t pid = static_cast<pid_t>(std::atoi(entry.path().filename().c_str()));
    if (pid <= 0) continue;
    std::optional<Stat> s = ReadStat(pid);
    if (s && s->ppid == parent && s->state == 'Z') zombies.push_back(pid);
  }
  return zombies;
}

// The pids of `pid` in each namespace, outermost first ("NSpid:" of /proc/<pid>/status).
std::vector<pid_t> NamespacePids(pid_t pid) {
  std::istringstream status(ReadFile("/proc/" + std::to_string(pid) + "/status"));
  std::string line;
  std::vector<pid_t> pids;
  while (std::getline(status, line)) {
    if (!line.starts_with("NSpid:")) continue;
    std::istringstream fields(line.substr(6));
    pid_t p;
    while (fields >> p) pids.push_back(p);
  }
  return pids;
}

template <typename Predicate>
bool WaitFor(Predicate done, std::chrono::seconds guard = std::chrono::seconds(60)) {
  const auto deadline = Clock::now() + guard;
  while (!done()) {
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

TEST(Pid1Test, ReapsInheritedOrphansAndExitsZeroOnSigtermAfterClosingSessions) {
  if (::access("/usr/bin/unshare", X_OK) != 0 || ::access("/usr/bin/nsenter", X_OK) != 0) {
    GTEST_SKIP() << "unshare/nsenter (util-linux) are not installed";
  }
  if (std::system("unshare --pid --fork --mount-proc true 2>/dev/null") != 0) {
    GTEST_SKIP() << "this host does not let us create a pid namespace (needs root or user "
                    "namespaces): unshare --pid --fork --mount-proc true failed";
  }
  TempDir state;
  TempDir workspace;
  const fs::path socket = state.path() / "ptybox.sock";
  ChildProcess::Options o;
  o.argv = {"/usr/bin/unshare",
            "--pid",
            "--fork",
            "--mount-proc",
            PtyboxBinary().string(),
            "serve",
            "--socket",
            socket.string(),
            "--workspace",
            workspace.path().string()};
  o.env = TestEnvironment(state.path() / "no-operator-policy.yaml", {"PTYBOX_LOG=info"});
  o.stderr_file = state.path() / "daemon.log";
  ChildProcess unshare(std::move(o));
  unshare.CloseStdin();

  // ptybox is unshare's one child, and PID 1 of the new namespace.
  pid_t daemon = -1;
  ASSERT_TRUE(WaitFor([&] {
    std::string kids = ReadFile("/proc/" + std::to_string(unshare.pid()) + "/task/" +
                                std::to_string(unshare.pid()) + "/children");
    daemon = static_cast<pid_t>(std::atoi(kids.c_str()));
    return daemon > 0 && ReadFile("/proc/" + std::to_string(daemon) + "/comm") == "ptybox\n";
  })) << "ptybox did not start under unshare";
  std::vector<pid_t> ns_pids = NamespacePids(daemon);
  ASSERT_EQ(ns_pids.size(), 2u);
  EXPECT_EQ(ns_pids.back(), 1) << "ptybox is PID 1 of its namespace";

  ASSERT_TRUE(WaitFor([&] { return fs::exists(socket); })) << ReadFile(state.path() / "daemon.log");
  RpcClient client(socket);
  const std::string session_mark = NewMarker();
  std::string id =
      OpenSession(client, "workspace-write", Json{{"env", Json{{"RUNTEST_MARK", session_mark}}}});
  ASSERT_FALSE(id.empty());
  // The shell leaves a file when it exits by itself on the hang-up of a graceful close; a
  // SIGKILL (what PID 1's exit would do to a session it did not close) runs no trap.
  Json r = Send(client, id, "trap 'echo bye > closed-gracefully' EXIT; echo ready\n");
  ASSERT_EQ(r["viewport"], "ready") << r.dump();
  ASSERT_FALSE(ProcessesWithEnv(session_mark).empty());

  // Orphans, as `docker exec` leaves them: a process in the namespace whose parent exits.
  const std::string orphan_mark = NewMarker();
  const std::string enter = "nsenter --target " + std::to_string(daemon) +
                            " --pid -- sh -c 'env RUNTEST_MARK=" + orphan_mark +
                            " sleep 3 & env RUNTEST_MARK=" + orphan_mark +
                            " sleep 4 & sh -c \"exit 7\" & exit 0'";
  ASSERT_EQ(std::system(enter.c_str()), 0);
  // The backgrounded `env` may not have exec'ed `sleep` yet when the shell has exited.
  std::vector<pid_t> orphans;
  WaitFor([&] {
    orphans = ProcessesWithEnv(orphan_mark);
    return orphans.size() == 2u;
  });
  ASSERT_EQ(orphans.size(), 2u) << "the orphaned sleeps are running";
  for (pid_t pid : orphans) {
    std::optional<Stat> s = ReadStat(pid);
    ASSERT_TRUE(s);
    EXPECT_EQ(s->ppid, daemon) << "orphan " << pid << " re-parented to ptybox (PID 1)";
  }
  for (pid_t pid : orphans) {
    EXPECT_TRUE(WaitFor([&] { return !ReadStat(pid); }))
        << "orphan " << pid << " was not reaped (state " << ReadStat(pid).value_or(Stat{}).state
        << ")";
  }
  EXPECT_TRUE(WaitFor([&] { return ZombieChildren(daemon).empty(); }))
      << "zombies left under PID 1: " << ::testing::PrintToString(ZombieChildren(daemon));
  // The daemon still serves after reaping processes it never started.
  r = Send(client, id, "echo still\n");
  EXPECT_EQ(r["viewport"], "still") << r.dump();

  // SIGTERM: every session is closed (the shell is hung up, not killed), then exit 0.
  ::kill(daemon, SIGTERM);
  ChildProcess::Exit e = unshare.Wait();
  EXPECT_TRUE(e.exited);
  EXPECT_EQ(e.code, 0) << ReadFile(state.path() / "daemon.log");
  EXPECT_EQ(ReadFile(workspace.path() / "closed-gracefully"), "bye\n")
      << "the session was closed gracefully before exit";
  EXPECT_NE(ReadFile(state.path() / "daemon.log").find("received SIGTERM"), std::string::npos);
  EXPECT_EQ(ProcessesWithEnv(session_mark), std::vector<pid_t>{});
}

}  // namespace
}  // namespace ptybox::testing
