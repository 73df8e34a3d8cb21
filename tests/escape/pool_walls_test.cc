// The warm pool (backend/warm_pool.h) through the real daemon, real bwrap and real bash, in both
// confined modes (docs/security.md, "The warm pool"):
//  - an open is served by a shell that existed before the open (it was pre-started);
//  - a repository policy change, another environment, or another mode between opens takes
//    effect: the stale pooled shell is never handed out (a read-only open never gets a
//    workspace-write shell);
//  - nothing of a previous session reaches the next one (a pooled shell is fresh, never reused);
//  - two opens never share a shell;
//  - warmShells 0 starts nothing beside the sessions;
//  - a pooled shell does not block a mode change;
//  - the daemon's shutdown leaves no process of the pool.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/daemon_fixture.h"
#include "tests/support/files.h"

namespace ptybox::testing {
namespace {

namespace fs = std::filesystem;

// Parent pid from /proc/<pid>/stat (after the command's closing parenthesis).
pid_t ParentOf(pid_t pid) {
  const std::string stat = ReadFile("/proc/" + std::to_string(pid) + "/stat");
  const size_t close = stat.rfind(')');
  if (close == std::string::npos || close + 4 >= stat.size()) return -1;
  // ") S 123 ..."
  size_t start = close + 4;
  return static_cast<pid_t>(std::strtol(stat.c_str() + start, nullptr, 10));
}

// Every live process below `root` (not `root` itself).
std::set<pid_t> Descendants(pid_t root) {
  std::map<pid_t, pid_t> parent;
  std::error_code ec;
  for (const fs::directory_entry& entry : fs::directory_iterator("/proc", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    const pid_t pid = std::stoi(name);
    if (ProcessAlive(pid)) parent[pid] = ParentOf(pid);
  }
  std::set<pid_t> found;
  bool grew = true;
  while (grew) {
    grew = false;
    for (const auto& [pid, ppid] : parent) {
      if (!found.contains(pid) && (ppid == root || found.contains(ppid))) {
        found.insert(pid);
        grew = true;
      }
    }
  }
  return found;
}

// The daemon with the pool's log lines (info) and an operator policy.
Daemon::Options PoolDaemon(const fs::path& operator_policy) {
  Daemon::Options options;
  options.extra_args = {"--policy", operator_policy.string()};
  options.env = {"PTYBOX_LOG=info"};
  return options;
}

class WarmPoolTest : public ::testing::TestWithParam<std::string> {
 protected:
  explicit WarmPoolTest(int warm_shells = 1)
      : policy_file_(WritePolicy(policy_dir_.path(), warm_shells)),
        daemon_(PoolDaemon(policy_file_)) {}

  static fs::path WritePolicy(const fs::path& dir, int warm_shells) {
    const fs::path file = dir / "operator.yaml";
    WriteFile(file, "version: 1\nmode: workspace-write\nlimits:\n  warmShells: " +
                        std::to_string(warm_shells) + "\n");
    return file;
  }
  const std::string& Mode() const { return GetParam(); }

  // Waits (hang guard) until the daemon says `n` pre-started shells in all became ready.
  void AwaitPooled(size_t n) {
    const auto guard = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (Count(daemon_.Log(), "a pre-started shell is ready") < n &&
           std::chrono::steady_clock::now() < guard) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ASSERT_GE(Count(daemon_.Log(), "a pre-started shell is ready"), n) << daemon_.Log();
  }

  // The attack every repository case ends with: the session plants `core.fsmonitor` in the
  // repository at `git` (relative to the workspace); the write must fail and the file stay.
  void ExpectRepositoryUnwritable(RpcClient& client, const Json& session, const std::string& git) {
    Json r = Send(client, session["sessionId"],
                  "{ echo '  fsmonitor = touch /tmp/planted' >> " + git +
                      "/config; } 2>/dev/null; echo status=$?\n");
    EXPECT_EQ(r["viewport"], "status=1") << r.dump();
    EXPECT_EQ(ReadFile(daemon_.workspace() / git / "config"), "[core]\n")
        << "the session wrote the repository at " << git;
  }

  Json Open(RpcClient& client, Json params = Json::object()) {
    Json opened = client.Call("terminal_open", std::move(params));
    EXPECT_TRUE(opened.contains("result")) << opened.dump();
    return opened.value("result", Json::object());
  }
  void Close(RpcClient& client, const Json& session) {
    Json closed = client.Call("terminal_close", Json{{"sessionId", session["sessionId"]}});
    EXPECT_TRUE(closed.contains("result")) << closed.dump();
  }

  TempDir policy_dir_;
  fs::path policy_file_;
  Daemon daemon_;
};

class WarmPoolOffTest : public WarmPoolTest {
 protected:
  WarmPoolOffTest() : WarmPoolTest(0) {}
};

// The second open gets the shell the first one's refill pre-started: its process existed
// before the open was asked for, and it works like any session.
TEST_P(WarmPoolTest, AnOpenClaimsAShellStartedBeforeIt) {
  RpcClient client(daemon_.socket());
  ASSERT_TRUE(client.Call("policy_set_mode", Json{{"mode", Mode()}}).contains("result"));
  Json first = Open(client);
  AwaitPooled(1);
  const std::set<pid_t> before = Descendants(daemon_.pid());
  Json second = Open(client);
  ASSERT_TRUE(second.contains("pid")) << second.dump();
  const pid_t pid = second["pid"].get<pid_t>();
  EXPECT_TRUE(before.contains(pid)) << "the session's shell was not pre-started";
  EXPECT_NE(first["pid"], second["pid"]);
  EXPECT_EQ(second["mode"], Mode());
  EXPECT_NE(daemon_.Log().find("served by a pre-started shell (pid " + std::to_string(pid) + ")"),
            std::string::npos)
      << daemon_.Log();
  Json r = Send(client, second["sessionId"], "echo pooled-$((6*7))\n");
  EXPECT_EQ(r["viewport"], "pooled-42") << r.dump();
  EXPECT_EQ(r["exitCode"], 0);
  EXPECT_EQ(r["waitReason"], "stdin_read");
}

// Attack: the repository policy changes between two opens. The pooled shell was started
// under the old file; the new open must run under the new one.
TEST_P(WarmPoolTest, ARepositoryPolicyChangeBetweenOpensTakesEffect) {
  const fs::path repo = daemon_.workspace() / ".ptybox.yaml";
  WriteFile(repo, "version: 1\nlimits:\n  maxOpenFiles: 200\n");
  RpcClient client(daemon_.socket());
  ASSERT_TRUE(client.Call("policy_set_mode", Json{{"mode", Mode()}}).contains("result"));
  Json first = Open(client);
  EXPECT_EQ(Send(client, first["sessionId"], "echo files=$(ulimit -n)\n")["viewport"], "files=200");
  AwaitPooled(1);
  const std::set<pid_t> pooled = Descendants(daemon_.pid());
  WriteFile(repo, "version: 1\nlimits:\n  maxOpenFiles: 100\n");
  Json second = Open(client);
  EXPECT_FALSE(pooled.contains(second["pid"].get<pid_t>())) << "a stale pooled shell served it";
  Json r = Send(client, second["sessionId"], "echo files=$(ulimit -n)\n");
  EXPECT_EQ(r["viewport"], "files=100") << r.dump();
}

// Attack: a repository appears on the host (a clone, `git init`) while a shell waits in the
// pool. The launch that shell came from protected the repositories of its time; the open after
// the clone must get a shell whose launch protects the new one too, so a session cannot plant
// `core.fsmonitor` in it for the host's next `git status`.
TEST_P(WarmPoolTest, ARepositoryCreatedWhileAShellWaitsIsProtectedInTheSessionThatClaims) {
  RpcClient client(daemon_.socket());
  ASSERT_TRUE(client.Call("policy_set_mode", Json{{"mode", Mode()}}).contains("result"));
  Json first = Open(client);
  AwaitPooled(1);
  const std::set<pid_t> pooled = Descendants(daemon_.pid());
  const fs::path config = daemon_.workspace() / "vendor" / "lib" / ".git" / "config";
  fs::create_directories(config.parent_path());
  WriteFile(config, "[core]\n");
  Json second = Open(client);
  if (Mode() == "workspace-write") {
    EXPECT_FALSE(pooled.contains(second["pid"].get<pid_t>()))
        << "a shell launched before the repository existed served the open";
  }
  ExpectRepositoryUnwritable(client, second, "vendor/lib/.git");
}

// Attack: a repository is re-created at the same path while a shell waits (the host re-clones
// it, or `mv .git` and `git init`). The waiting shell protects the old .git; the claim must see
// that the one there now is another object and launch afresh.
TEST_P(WarmPoolTest, ARepositoryRecreatedAtTheSamePathWhileAShellWaitsIsProtected) {
  const fs::path git = daemon_.workspace() / "vendor" / "lib" / ".git";
  fs::create_directories(git);
  WriteFile(git / "config", "[core]\n");
  RpcClient client(daemon_.socket());
  ASSERT_TRUE(client.Call("policy_set_mode", Json{{"mode", Mode()}}).contains("result"));
  Json first = Open(client);
  AwaitPooled(1);
  const std::set<pid_t> pooled = Descendants(daemon_.pid());
  fs::rename(git, daemon_.workspace() / "old-git");
  fs::create_directories(git);
  WriteFile(git / "config", "[core]\n");
  Json second = Open(client);
  if (Mode() == "workspace-write") {
    EXPECT_FALSE(pooled.contains(second["pid"].get<pid_t>()))
        << "a shell that protects the old .git served the open";
  }
  ExpectRepositoryUnwritable(client, second, "vendor/lib/.git");
}

// Attack: the same object comes back at the same path, but no longer protected in the waiting
// shell. Unlinking a file that is a mount point in another mount namespace detaches that mount
// there; a hard link made first brings the gitfile (same device and inode) back at its path. A
// claim that only compared a new walk with the shell's first one saw the same repositories;
// the claim reads the shell's mounts, as the check once a launch is ready does, so the open gets
// a fresh launch that protects the gitfile.
TEST_P(WarmPoolTest, AGitfileUnmountedUnderAWaitingShellIsProtectedInTheSessionThatClaims) {
  const fs::path git = daemon_.workspace() / "vendor" / "lib" / ".git";
  fs::create_directories(git.parent_path());
  const std::string gitfile = "gitdir: ../../real-git\n";
  WriteFile(git, gitfile);
  RpcClient client(daemon_.socket());
  ASSERT_TRUE(client.Call("policy_set_mode", Json{{"mode", Mode()}}).contains("result"));
  Json first = Open(client);
  AwaitPooled(1);
  const std::set<pid_t> pooled = Descendants(daemon_.pid());
  const fs::path keep = daemon_.workspace() / "kept-gitfile";
  fs::create_hard_link(git, keep);
  fs::remove(git);  // detaches the waiting shell's read-only mount of it
  fs::create_hard_link(keep, git);
  fs::remove(keep);
  Json second = Open(client);
  ASSERT_TRUE(second.contains("pid")) << second.dump();
  if (Mode() == "workspace-write") {
    EXPECT_FALSE(pooled.contains(second["pid"].get<pid_t>()))
        << "a shell whose mount of the gitfile was detached served the open";
    EXPECT_NE(daemon_.Log().find("does not protect the writable roots' repositories"),
              std::string::npos)
        << daemon_.Log();
  }
  Json r = Send(client, second["sessionId"],
                "{ echo 'gitdir: /tmp' > vendor/lib/.git; } 2>/dev/null; echo status=$?\n");
  EXPECT_EQ(r["viewport"], "status=1") << r.dump();
  EXPECT_EQ(ReadFile(git), gitfile) << "the session rewrote the gitfile";
}

// The claim walks the roots off the reactor with a launch's budget: a root of 20,001 entries
// (more than the claim's old on-reactor budget) is served from the pool when nothing changed,
// and a repository created deep inside it while the shell waited still gets a fresh, protecting
// launch.
TEST_P(WarmPoolTest, LargeRootsAreServedFromThePoolAndStillProtectANewRepository) {
  constexpr size_t kFiles = 20'001;
  const fs::path many = daemon_.workspace() / "many";
  fs::create_directories(many);
  for (size_t i = 0; i < kFiles; ++i) std::ofstream(many / ("f" + std::to_string(i)));
  RpcClient client(daemon_.socket());
  ASSERT_TRUE(client.Call("policy_set_mode", Json{{"mode", Mode()}}).contains("result"));
  // Each open walks 20,001 entries (a claim and a fresh launch both, for the third): a
  // deadline for a loaded machine, not the 10 s default.
  const Json slow{{"timeoutMs", 120000}};
  Json first = Open(client, slow);
  AwaitPooled(1);
  std::set<pid_t> pooled = Descendants(daemon_.pid());
  Json second = Open(client, slow);
  ASSERT_TRUE(second.contains("pid")) << second.dump();
  const bool served = pooled.contains(second["pid"].get<pid_t>());
  std::cout << "  observed [" << Mode() << "] " << kFiles
            << " files: second open served from the pool: " << (served ? "yes" : "no") << "\n";
  EXPECT_TRUE(served) << "an unchanged large root was not served from the pool";
  EXPECT_EQ(Send(client, second["sessionId"], "echo ok\n")["viewport"], "ok");

  // A repository appears deep in the large root while the next shell waits.
  AwaitPooled(2);
  pooled = Descendants(daemon_.pid());
  const fs::path git = many / "deep" / "er" / "repo" / ".git";
  fs::create_directories(git);
  WriteFile(git / "config", "[core]\n");
  Json third = Open(client, slow);
  ASSERT_TRUE(third.contains("pid")) << third.dump();
  if (Mode() == "workspace-write") {
    EXPECT_FALSE(pooled.contains(third["pid"].get<pid_t>()))
        << "a shell that does not protect the new repository served the open";
  }
  ExpectRepositoryUnwritable(client, third, "many/deep/er/repo/.git");
}

// Attack: a client's environment differs from the one the pooled shell started with.
TEST_P(WarmPoolTest, AnOpenWithItsOwnEnvironmentIsNeverPooledAndLeavesNothingBehind) {
  RpcClient client(daemon_.socket());
  ASSERT_TRUE(client.Call("policy_set_mode", Json{{"mode", Mode()}}).contains("result"));
  Json first = Open(client);
  AwaitPooled(1);
  const std::set<pid_t> pooled = Descendants(daemon_.pid());
  // The pooled shell has no client env: an open that passes its own never gets it.
  const std::string secret = "pool-secret-" + std::to_string(::getpid());
  Json second = Open(client, Json{{"env", Json{{"POOL_ENV", secret}}}});
  EXPECT_FALSE(pooled.contains(second["pid"].get<pid_t>()));
  EXPECT_EQ(Send(client, second["sessionId"], "echo env=$POOL_ENV\n")["viewport"], "env=" + secret);
  // Nor does it refill: once its session is closed, no process holds the value it passed.
  Close(client, second);
  const auto guard = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!ProcessesWithEnv(secret).empty() && std::chrono::steady_clock::now() < guard) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_TRUE(ProcessesWithEnv(secret).empty()) << "a client's env outlived its session";
  EXPECT_EQ(Count(daemon_.Log(), "a pre-started shell is ready"), 1u) << daemon_.Log();
  // The envless pooled shell is still there for the next envless open.
  Json third = Open(client);
  EXPECT_TRUE(pooled.contains(third["pid"].get<pid_t>()));
}

// Attack: a session leaves state behind (a variable, a file in its /tmp, a background process,
// shell history); the next session, served from the pool, sees none of it.
TEST_P(WarmPoolTest, NothingOfAPreviousSessionReachesTheNext) {
  RpcClient client(daemon_.socket());
  ASSERT_TRUE(client.Call("policy_set_mode", Json{{"mode", Mode()}}).contains("result"));
  Json first = Open(client);
  AwaitPooled(1);
  Send(client, first["sessionId"],
       "export LEFT=behind; echo left > /tmp/pool-left; (sleep 600 &); history -s secret-cmd\n");
  Close(client, first);
  Json second = Open(client);
  Json r =
      Send(client, second["sessionId"],
           "echo \"[$LEFT]\"; test -e /tmp/pool-left; "
           "echo file=$?; pgrep -c -f 'sleep 600' || true; history | grep -c 'secret-[c]md'\n");
  EXPECT_EQ(r["viewport"], "[]\nfile=1\n0\n0") << r.dump();
}

// The checks after launch hold at most a quarter of the user's watch instances at once (32 of
// the default 128), and each gives its slot back only once its fanotify group or inotify
// instance is closed, which for a root daemon's fanotify group now happens on a thread of its
// own after the answer (sandbox/repository_walk.cc, EndWatch). Twice as many workspace-write opens
// at once as there are slots, then as many again: every one becomes ready, so no slot is lost and
// none is given back twice (a lost one would leave the later checks waiting until their open timed
// out).
TEST(WatchSlotsTest, MoreConcurrentOpensThanSlotsAllBecomeReadyTwice) {
  TempDir policy_dir;
  const fs::path policy = policy_dir.path() / "operator.yaml";
  WriteFile(policy,
            "version: 1\nmode: workspace-write\nlimits:\n  warmShells: 0\n  maxSessions: 128\n"
            "  startupTimeoutMs: 120000\n");
  Daemon::Options options;
  options.extra_args = {"--policy", policy.string(), "--max-sessions", "256"};
  Daemon daemon(options);
  RpcClient client(daemon.socket());
  constexpr int kOpens = 64;
  for (int round = 0; round < 2; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    std::vector<int> ids;
    for (int i = 0; i < kOpens; ++i)
      ids.push_back(client.SendRequest("terminal_open", Json::object()));
    std::vector<std::string> sessions;
    for (int id : ids) {
      Json opened = client.WaitResponse(id, std::chrono::seconds(240));
      ASSERT_TRUE(opened.contains("result")) << opened.dump() << daemon.Log();
      EXPECT_EQ(opened["result"]["mode"], "workspace-write");
      sessions.push_back(opened["result"]["sessionId"]);
    }
    for (const std::string& session : sessions) {
      Json closed = client.Call("terminal_close", Json{{"sessionId", session}});
      EXPECT_TRUE(closed.contains("result")) << closed.dump();
    }
  }
}

// Two opens at once: two shells, never one shared.
TEST_P(WarmPoolTest, TwoOpensNeverShareAShell) {
  RpcClient client(daemon_.socket());
  ASSERT_TRUE(client.Call("policy_set_mode", Json{{"mode", Mode()}}).contains("result"));
  Open(client);
  AwaitPooled(1);
  const int a = client.SendRequest("terminal_open", Json::object());
  const int b = client.SendRequest("terminal_open", Json::object());
  Json first = client.WaitResponse(a).value("result", Json::object());
  Json second = client.WaitResponse(b).value("result", Json::object());
  ASSERT_TRUE(first.contains("pid") && second.contains("pid"));
  EXPECT_NE(first["pid"], second["pid"]);
  Send(client, first["sessionId"], "SHARED=first\n");
  EXPECT_EQ(Send(client, second["sessionId"], "echo \"[$SHARED]\"\n")["viewport"], "[]");
}

// A read-only open after workspace-write ones: the mode change is not blocked by the pooled
// (workspace-write) shell, and the read-only session cannot write.
TEST_P(WarmPoolTest, ModeChangeIsNotBlockedAndNeverGetsAnotherModesShell) {
  RpcClient client(daemon_.socket());
  const std::string other = Mode() == "read-only" ? "workspace-write" : "read-only";
  ASSERT_TRUE(client.Call("policy_set_mode", Json{{"mode", other}}).contains("result"));
  Json first = Open(client);
  Close(client, first);
  AwaitPooled(1);
  const std::set<pid_t> pooled = Descendants(daemon_.pid());
  ASSERT_FALSE(pooled.empty()) << "no pooled shell: the test would prove nothing";
  Json set = client.Call("policy_set_mode", Json{{"mode", Mode()}});
  ASSERT_TRUE(set.contains("result")) << "a pooled shell blocked the mode change: " << set.dump();
  Json second = Open(client);
  EXPECT_EQ(second["mode"], Mode());
  EXPECT_FALSE(pooled.contains(second["pid"].get<pid_t>())) << "served by another mode's shell";
  Json r = Send(client, second["sessionId"], "touch pool-probe 2>/dev/null; echo rc=$?\n");
  EXPECT_EQ(r["viewport"], Mode() == "read-only" ? "rc=1" : "rc=0") << r.dump();
}

// The daemon's SIGTERM ends the pooled shells with the sessions.
TEST_P(WarmPoolTest, ShutdownLeavesNoProcess) {
  std::set<pid_t> all;
  {
    RpcClient client(daemon_.socket());
    ASSERT_TRUE(client.Call("policy_set_mode", Json{{"mode", Mode()}}).contains("result"));
    Open(client);
    AwaitPooled(1);
    all = Descendants(daemon_.pid());
    ASSERT_GE(all.size(), 2u);
    daemon_.Stop(SIGTERM);
  }
  for (pid_t pid : all) EXPECT_TRUE(WaitGone(pid)) << "pid " << pid << " outlived the daemon";
}

// warmShells 0: after an open and a send, the only shell below the daemon is the session's;
// after its close, nothing is left.
TEST_P(WarmPoolOffTest, ZeroStartsNothingBesideTheSessions) {
  RpcClient client(daemon_.socket());
  ASSERT_TRUE(client.Call("policy_set_mode", Json{{"mode", Mode()}}).contains("result"));
  Json first = Open(client);
  EXPECT_EQ(Send(client, first["sessionId"], "echo one\n")["viewport"], "one");
  Json second = Open(client);
  EXPECT_EQ(Send(client, second["sessionId"], "echo two\n")["viewport"], "two");
  Close(client, first);
  Close(client, second);
  const auto guard = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!Descendants(daemon_.pid()).empty() && std::chrono::steady_clock::now() < guard) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_TRUE(Descendants(daemon_.pid()).empty());
  EXPECT_EQ(daemon_.Log().find("pre-started"), std::string::npos) << daemon_.Log();
}

INSTANTIATE_TEST_SUITE_P(ConfinedModes, WarmPoolTest,
                         ::testing::Values("read-only", "workspace-write"), ModeTestName);
INSTANTIATE_TEST_SUITE_P(ConfinedModes, WarmPoolOffTest,
                         ::testing::Values("read-only", "workspace-write"), ModeTestName);

}  // namespace
}  // namespace ptybox::testing
