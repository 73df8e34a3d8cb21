// Race-free binds: while a process keeps swapping a writable root `sub` with a relative symbolic
// link to a host directory (renameat2 RENAME_EXCHANGE, bounded in time), many sessions are
// opened with a repository policy `writable: [sub]`. No session ever sees, let alone writes,
// the host directory through `sub`, nor `sub` at the host directory's path. Also: shared host
// directories are refused as roots (`--workspace /tmp`), with a message that says why.
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

#include "tests/escape/escape_support.h"
#include "tests/sandbox/process_runner.h"

namespace ptybox::testing {
namespace {

namespace fs = std::filesystem;
using sandbox::testing::RunProcess;
using sandbox::testing::RunResult;

// (mode, warm pool on): with the pool, each open also launches the next pre-started shell, so
// a victim's single ordinary open meets the race as often as two opens would.
class BindRaceTest : public ::testing::TestWithParam<std::tuple<std::string, bool>> {};

TEST_P(BindRaceTest, SwappingAWritableRootWithALinkNeverBindsTheHostDirectory) {
  const std::string mode = std::get<0>(GetParam());
  const bool pool = std::get<1>(GetParam());
  TempDir policy_dir;
  const fs::path operator_policy = policy_dir.path() / "operator.yaml";
  std::ofstream(operator_policy) << "version: 1\nlimits:\n  warmShells: " << (pool ? 1 : 0) << "\n";
  Daemon daemon(Daemon::Options{.extra_args = {"--policy", operator_policy.string()}, .env = {}});
  const fs::path ws = daemon.workspace();
  TempDir host;                                  // the directory the attacker wants bound
  fs::permissions(host.path(), fs::perms::all);  // anyone could write it, were it bound
  std::ofstream(host.path() / "host-marker") << "host\n";
  fs::create_directories(ws / "sub");
  std::ofstream(ws / "sub" / "real-marker") << "real\n";
  std::ofstream(ws / ".ptybox.yaml") << "version: 1\nwritable: [sub]\n";
  // Relative, as an attacker would plant it (`../../../usr/local/bin`): resolved from wherever
  // a launcher meets it. The destination of a nested root is never resolved by path (a root
  // inside the workspace is not bound again; what is, is composed by descriptor), so no session
  // may see `sub` at the link's target, and no session may write there.
  const fs::path relative_target = host.path().lexically_relative(ws);
  ASSERT_FALSE(relative_target.empty());
  fs::create_directory_symlink(relative_target, ws / "swap");

  std::atomic<bool> stop{false};
  std::atomic<long> swaps{0};
  const std::string sub = (ws / "sub").string();
  const std::string swap = (ws / "swap").string();
  std::thread swapper([&] {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    // `sub` is the link for a moment, then the directory again for a millisecond: most opens
    // resolve the policy fine, and some of them meet the link later, while binding.
    while (!stop && std::chrono::steady_clock::now() < deadline) {
      for (int i = 0; i < 2; ++i) {
        if (::renameat2(AT_FDCWD, sub.c_str(), AT_FDCWD, swap.c_str(), RENAME_EXCHANGE) == 0) {
          ++swaps;
        }
        std::this_thread::sleep_for(std::chrono::microseconds(i == 0 ? 300 : 700));
      }
    }
  });

  RpcClient client(daemon.socket());
  // The policy resolves only while `sub` is the directory: retried (no ASSERT while the thread
  // runs).
  bool mode_set = false;
  for (int i = 0; i < 50 && !mode_set; ++i) {
    mode_set = client.Call("policy_set_mode", Json{{"mode", mode}}).contains("result");
  }
  EXPECT_TRUE(mode_set);
  int opened = 0;
  int refused = 0;
  int attempts = 0;
  // At least 16 opens; more (up to 96) while none has got through the race yet, so that a
  // busy machine where every early open met the link still checks a session.
  for (int i = 0; i < 96 && (i < 16 || opened == 0); ++i) {
    ++attempts;
    Json reply = client.Call("terminal_open", Json::object());
    if (!reply.contains("result")) {
      ++refused;
      std::cout << "  observed [" << mode << "] open " << i
                << " refused: " << reply["error"].value("message", std::string()).substr(0, 160)
                << "\n";
      // The next open after the swapper has moved on: on a busy machine its thread can sleep
      // through dozens of opens that all meet the link (pacing only; nothing is timed).
      const long seen = swaps;
      for (int w = 0; w < 2000 && swaps == seen && !stop; ++w) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      continue;
    }
    ++opened;
    const std::string id = reply["result"]["sessionId"];
    Observed o = RunInSession(client, id, mode, "race-" + std::to_string(i),
                              "ls sub/host-marker 2>/dev/null && echo HOST-VISIBLE; "
                              "ls " +
                                  Quote(host.path() / "real-marker") +
                                  " 2>/dev/null && echo SUB-AT-TARGET; "
                                  "touch sub/probe-" +
                                  std::to_string(i) + " 2>/dev/null; echo done");
    EXPECT_FALSE(o.Says("HOST-VISIBLE")) << o.Show();
    EXPECT_FALSE(o.Says("SUB-AT-TARGET")) << o.Show();
    client.Call("terminal_close", Json{{"sessionId", id}});
  }
  stop = true;
  swapper.join();
  std::cout << "  observed [" << mode << "] " << swaps << " swaps, " << opened << " opened, "
            << refused << " refused\n";
  EXPECT_GT(swaps, 0);
  EXPECT_EQ(opened + refused, attempts);
  EXPECT_GT(opened, 0) << "no session opened: nothing was checked";
  for (const auto& entry : fs::directory_iterator(host.path())) {
    EXPECT_EQ(entry.path().filename(), "host-marker") << "a session wrote the host directory";
  }
}

INSTANTIATE_TEST_SUITE_P(
    Modes, BindRaceTest,
    ::testing::Combine(::testing::Values("read-only", "workspace-write"), ::testing::Bool()),
    [](const ::testing::TestParamInfo<std::tuple<std::string, bool>>& param_info) {
      std::string name = std::get<0>(param_info.param);
      std::erase(name, '-');
      return name + (std::get<1>(param_info.param) ? "_pool" : "");
    });

TEST(SharedRootTest, SharedHostDirectoriesAreRefusedAsRoots) {
  for (const char* shared : {"/tmp", "/var/tmp", "/dev/shm", "/run"}) {
    if (!fs::is_directory(shared)) continue;
    for (const char* mode : {"read-only", "workspace-write"}) {
      RunResult run = RunProcess({PtyboxBinary().string(), "run", "--workspace", shared, "--mode",
                                  mode, "--", "/bin/sh", "-c", "echo ran"});
      std::cout << "  observed [" << mode << "] --workspace " << shared << ": exit "
                << run.exit_code << ", " << run.err;
      EXPECT_EQ(run.exit_code, 125) << run.Describe();
      EXPECT_EQ(run.out, "") << "the command ran with " << shared << " as its workspace";
      EXPECT_NE(run.err.find("cannot be sandboxed") == std::string::npos
                    ? run.err.find("shared by every process")
                    : 0,
                std::string::npos)
          << run.Describe();
    }
  }
  // A directory of its own under /tmp stays a valid workspace.
  TempDir own;
  fs::permissions(own.path(), fs::perms::owner_all | fs::perms::others_exec);
  RunResult ok = RunProcess({PtyboxBinary().string(), "run", "--workspace", own.path().string(),
                             "--", "/bin/sh", "-c", "echo ran"});
  EXPECT_EQ(ok.exit_code, 0) << ok.Describe();
  EXPECT_EQ(ok.out, "ran\n") << ok.Describe();
}

}  // namespace
}  // namespace ptybox::testing
