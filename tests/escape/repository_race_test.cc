// The rename race during a launch: while a process keeps moving a nested repository between two
// large directories of the workspace (as a concurrent session can), sessions are opened. A
// launch's walk for repositories reads a live tree, so it can miss the repository (moved into a
// directory it had already read); the launch walks again once the session's mounts are composed
// and refuses itself when a repository older than the launch was missed or moved
// (docs/security.md, "Protected paths"). So every session that opens finds the repository's
// config read-only wherever it is, and the host's config never changes.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdio.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <thread>
#include <tuple>
#include <vector>

#include "tests/escape/escape_support.h"
#include "tests/support/error_kind.h"
#include "tests/support/files.h"

namespace ptybox::testing {
namespace {

namespace fs = std::filesystem;

// Pooled shells whose start was decided (ready, or refused by the check once ready).
int PoolStartsDecided(const std::string& log) {
  return static_cast<int>(Count(log, "a pre-started shell is ready") +
                          Count(log, "a pre-started shell failed to start"));
}

// (mode, warm pool on): with the pool, each open also launches the next pre-started shell.
class RepositoryRaceTest : public ::testing::TestWithParam<std::tuple<std::string, bool>> {};

TEST_P(RepositoryRaceTest, ARepositoryMovedDuringALaunchIsNeverWritable) {
  const std::string mode = std::get<0>(GetParam());
  const bool pool = std::get<1>(GetParam());
  TempDir policy_dir;
  const fs::path operator_policy = policy_dir.path() / "operator.yaml";
  std::ofstream(operator_policy) << "version: 1\nlimits:\n  warmShells: " << (pool ? 1 : 0) << "\n";
  Daemon daemon(Daemon::Options{.extra_args = {"--policy", operator_policy.string()},
                                .env = {"PTYBOX_LOG=info"}});
  const fs::path ws = daemon.workspace();
  // Two directories the walk spends a while in, the repository in one of them.
  for (const char* dir : {"left", "right"}) {
    fs::create_directories(ws / dir);
    for (int i = 0; i < 4000; ++i) std::ofstream(ws / dir / ("f" + std::to_string(i)));
  }
  fs::create_directories(ws / "left" / "lib" / ".git");
  const std::string config_text = "[core]\n\tbare = false\n";
  std::ofstream(ws / "left" / "lib" / ".git" / "config") << config_text;

  std::atomic<bool> stop{false};
  std::atomic<long> moves{0};
  const std::string left = (ws / "left" / "lib").string();
  const std::string right = (ws / "right" / "lib").string();
  std::thread mover([&] {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(90);
    bool at_left = true;
    // Bursts of a move every 0.5 ms, with pauses between them in which a launch can get
    // through (pacing only; nothing is timed).
    while (!stop && std::chrono::steady_clock::now() < deadline) {
      for (int i = 0; i < 200 && !stop; ++i) {
        const std::string& from = at_left ? left : right;
        const std::string& to = at_left ? right : left;
        if (::rename(from.c_str(), to.c_str()) == 0) {
          at_left = !at_left;
          ++moves;
        }
        std::this_thread::sleep_for(std::chrono::microseconds(500));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(150));
    }
  });

  RpcClient client(daemon.socket());
  EXPECT_TRUE(client.Call("policy_set_mode", Json{{"mode", mode}}).contains("result"));
  int opened = 0;
  int refused = 0;
  int attempts = 0;
  // At least 12 opens; more (up to 60) while none got through. A busy machine may refuse every
  // open met by the mover: after 40 the mover stops, so that a session is always checked.
  int opened_while_moving = 0;
  for (int i = 0; i < 60 && (i < 12 || opened == 0); ++i) {
    if (i == 40) stop = true;
    if (pool) {
      // Each open that was served refilled the pool: wait (hang guard only) until that shell's
      // start is decided, so that this open claims a shell launched while the repository moved
      // and the claim's check is what protects it (docs/security.md, "The warm pool").
      const auto guard = std::chrono::steady_clock::now() + std::chrono::seconds(60);
      while (PoolStartsDecided(daemon.Log()) < opened && std::chrono::steady_clock::now() < guard) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    }
    ++attempts;
    Json reply = client.Call("terminal_open", Json::object());
    if (!reply.contains("result")) {
      ++refused;
      const std::string message = reply["error"].value("message", std::string());
      std::cout << "  observed [" << mode << "] open " << i
                << " refused: " << message.substr(0, 200) << "\n";
      // Refused by the check after the launch (a repository it does not protect, or arrivals
      // that kept the walk from seeing the tree whole), or by the launcher, whose checks of a
      // protected path that moved between its open and its mount refuse in their own words.
      // Any refusal is safe; it must still be one of these kinds, with a message.
      const bool denied = IsErrorKind(reply, ErrorKind::kPolicyDenied);
      EXPECT_TRUE(denied || IsErrorKind(reply, ErrorKind::kSpawnFailed) ||
                  IsErrorKind(reply, ErrorKind::kSandboxUnavailable))
          << reply.dump();
      EXPECT_FALSE(message.empty()) << reply.dump();
      if (denied) {
        EXPECT_TRUE(message.find("the repository ") != std::string::npos ||
                    message.find("directories kept arriving") != std::string::npos)
            << reply.dump();
      }
      continue;
    }
    ++opened;
    if (!stop) ++opened_while_moving;
    const std::string id = reply["result"]["sessionId"];
    // Wherever the repository is now (the mover keeps going), its config is read-only.
    Observed o = RunInSession(client, id, mode, "race-" + std::to_string(i),
                              "for d in left right left right; do "
                              "echo '\tfsmonitor = touch SESSION-WROTE' >> $d/lib/.git/config "
                              "2>/dev/null && echo WROTE-$d; done; echo done");
    EXPECT_FALSE(o.Says("WROTE-")) << o.Show();
    EXPECT_TRUE(o.Says("done")) << o.Show();
    client.Call("terminal_close", Json{{"sessionId", id}});
  }
  stop = true;
  mover.join();
  std::cout << "  observed [" << mode << "] " << moves << " moves, " << opened << " opened ("
            << opened_while_moving << " while moving), " << refused << " refused";
  if (pool) {
    const std::string log = daemon.Log();
    std::cout << "; claims: " << Count(log, "served by a pre-started shell") << " served, "
              << Count(log, "a pre-started shell was not used") << " refused";
  }
  std::cout << "\n";
  EXPECT_GT(moves, 0);
  EXPECT_EQ(opened + refused, attempts);
  EXPECT_GT(opened, 0) << "no session opened: nothing was checked";
  const fs::path config = (fs::exists(left) ? fs::path(left) : fs::path(right)) / ".git" / "config";
  EXPECT_EQ(ReadFile(config), config_text) << "a session wrote the repository's config";
}

// A root daemon's check after a launch watches with fanotify (one mark per filesystem), so a
// workspace with more directories than the inotify budget opens workspace-write, and a nested
// repository in it is still read-only inside. The budget is lowered for the daemon
// (PTYBOX_INOTIFY_WATCH_BUDGET), never the machine's sysctl. The same daemon made to watch with
// inotify (as where fanotify fails, which it logs), and an ordinary user's daemon (which has no
// fanotify filesystem marks), refuse the launch naming the budget.
TEST(RepositoryCheckWatchTest, ARootDaemonChecksMoreDirectoriesThanTheInotifyBudget) {
  const bool host_root = ::geteuid() == 0;
  for (const bool inotify : {false, true}) {
    SCOPED_TRACE(inotify ? "forced onto inotify" : "as the daemon chooses");
    std::vector<std::string> env = {"PTYBOX_INOTIFY_WATCH_BUDGET=64"};
    if (inotify) env.emplace_back("PTYBOX_TREE_WATCH=inotify");
    Daemon daemon(Daemon::Options{.extra_args = {}, .env = env});
    const fs::path ws = daemon.workspace();
    for (int i = 0; i < 200; ++i)
      fs::create_directories(ws / "deps" / std::to_string(i % 20) / std::to_string(i));
    fs::create_directories(ws / "deps" / "7" / "lib" / ".git");
    const std::string config_text = "[core]\n\tbare = false\n";
    const fs::path config = ws / "deps" / "7" / "lib" / ".git" / "config";
    std::ofstream(config) << config_text;
    RpcClient client(daemon.socket());
    ASSERT_TRUE(
        client.Call("policy_set_mode", Json{{"mode", "workspace-write"}}).contains("result"));
    Json reply = client.Call("terminal_open", Json::object());
    if (!host_root || inotify) {
      ASSERT_FALSE(reply.contains("result")) << reply.dump();
      const std::string message = reply["error"].value("message", std::string());
      EXPECT_NE(message.find("watch budget (64"), std::string::npos) << reply.dump();
      EXPECT_EQ(host_root, daemon.Log().find("watches with inotify") != std::string::npos)
          << daemon.Log();
      continue;
    }
    ASSERT_TRUE(reply.contains("result")) << reply.dump();
    EXPECT_EQ(daemon.Log().find("watches with inotify"), std::string::npos) << daemon.Log();
    const std::string id = reply["result"]["sessionId"];
    Observed o = RunInSession(client, id, "workspace-write", "nested-config",
                              "echo '\tfsmonitor = touch SESSION-WROTE' >> deps/7/lib/.git/config "
                              "2>/dev/null && echo WRO''TE; touch deps/0/0/made && echo MA''DE");
    EXPECT_FALSE(o.Says("WROTE")) << o.Show();
    EXPECT_TRUE(o.Says("MADE")) << o.Show();  // the workspace itself is writable
    EXPECT_EQ(ReadFile(config), config_text) << "a session wrote the nested repository's config";
  }
}

INSTANTIATE_TEST_SUITE_P(
    Modes, RepositoryRaceTest,
    ::testing::Combine(::testing::Values("read-only", "workspace-write"), ::testing::Bool()),
    [](const ::testing::TestParamInfo<std::tuple<std::string, bool>>& param_info) {
      std::string name = std::get<0>(param_info.param);
      std::erase(name, '-');
      return name + (std::get<1>(param_info.param) ? "_pool" : "");
    });

}  // namespace
}  // namespace ptybox::testing
