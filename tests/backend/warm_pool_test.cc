// The warm pool's state machine against fake shells: what is claimed, what is discarded and
// why, bounds, drain; and the shell backend's refusal once shut down. The real shells are tested
// through the daemon (tests/escape/pool_walls_test.cc).
#include "backend/warm_pool.h"

#include <gtest/gtest.h>

#include <asio/io_context.hpp>
#include <memory>
#include <optional>
#include <vector>

#include "backend/child_reaper.h"
#include "backend/shell_session.h"

namespace ptybox::backend {
namespace {

struct FakeShell final : PooledShell {
  bool pristine = true;
  bool matches = true;
  bool discarded = false;
  std::string discard_reason;
  std::function<void(bool)> settled;
  std::function<void()> discard_done;
  [[nodiscard]] bool Pristine() const override { return pristine; }
  [[nodiscard]] bool Matches(const SpawnSpec&) const override { return matches; }
  void Discard(std::string reason, std::function<void()> done) override {
    discarded = true;
    discard_reason = std::move(reason);
    discard_done = std::move(done);
  }
};

class WarmPoolTest : public ::testing::Test {
 protected:
  std::shared_ptr<WarmPool> MakePool(WarmPoolOptions options = {}) {
    return std::make_shared<WarmPool>(
        io,
        [this](const SpawnSpec& spec, std::function<void(bool)> settled) {
          auto shell = std::make_shared<FakeShell>();
          shell->settled = std::move(settled);
          started.push_back(shell);
          started_specs.push_back(spec);
          return shell;
        },
        options);
  }
  // Says the last started shell is ready (or failed) and lets the pool see it.
  void Settle(size_t index, bool ok) {
    started.at(index)->settled(ok);
    io.restart();
    io.poll();
  }
  static SpawnSpec Spec(const std::string& workspace, int64_t warm = 1) {
    SpawnSpec spec;
    spec.policy.mode = policy::Mode::kWorkspaceWrite;
    spec.policy.workspace_root = workspace;
    spec.policy.limits.warm_shells = warm;
    spec.cwd = workspace;
    return spec;
  }

  asio::io_context io;
  std::vector<std::shared_ptr<FakeShell>> started;
  std::vector<SpawnSpec> started_specs;
};

TEST(PoolKeyTest, EveryLaunchInputTakesPart) {
  SpawnSpec base;
  base.policy.workspace_root = "/w";
  base.cwd = "/w";
  const PoolKey key = PoolKeyOf(base);
  EXPECT_EQ(PoolKeyOf(base), key);
  auto differs = [&](auto change) {
    SpawnSpec other = base;
    change(other);
    return !(PoolKeyOf(other) == key);
  };
  EXPECT_TRUE(differs([](SpawnSpec& s) { s.policy.mode = policy::Mode::kReadOnly; }));
  EXPECT_TRUE(differs([](SpawnSpec& s) { s.policy.workspace_root = "/v"; }));
  EXPECT_TRUE(differs([](SpawnSpec& s) { s.policy.writable_roots.push_back("/x"); }));
  EXPECT_TRUE(differs([](SpawnSpec& s) { s.policy.network_allowed = true; }));
  EXPECT_TRUE(differs([](SpawnSpec& s) { s.policy.env.set["A"] = "1"; }));
  EXPECT_TRUE(differs([](SpawnSpec& s) { s.policy.env.pass.push_back("HOME"); }));
  EXPECT_TRUE(differs([](SpawnSpec& s) { s.policy.limits.max_tasks = 7; }));
  EXPECT_TRUE(differs([](SpawnSpec& s) { s.policy.limits.max_memory_bytes = 1 << 30; }));
  EXPECT_TRUE(differs([](SpawnSpec& s) { s.policy.limits.idle_silence_ms = 5; }));
  EXPECT_TRUE(differs([](SpawnSpec& s) { s.policy.session_uids.first = policy::SessionUid(5); }));
  EXPECT_TRUE(differs([](SpawnSpec& s) { s.policy.hidden.push_back("~/.x"); }));
  EXPECT_TRUE(differs([](SpawnSpec& s) { s.policy.policy_files.push_back("/w/.ptybox.yaml"); }));
  EXPECT_TRUE(differs([](SpawnSpec& s) { s.policy.sources["mode"] = "/w/.ptybox.yaml:1:7"; }));
  EXPECT_TRUE(differs([](SpawnSpec& s) { s.cwd = "/w/sub"; }));
  EXPECT_TRUE(differs([](SpawnSpec& s) { s.env["A"] = "1"; }));
  EXPECT_TRUE(differs([](SpawnSpec& s) { s.rows = 41; }));
  EXPECT_TRUE(differs([](SpawnSpec& s) { s.columns = 81; }));
  // What belongs to one open alone is not part of the launch.
  EXPECT_FALSE(differs([](SpawnSpec& s) { s.name = "build"; }));
  EXPECT_FALSE(differs([](SpawnSpec& s) { s.timeout_ms = 5; }));
}

TEST(PoolKeyTest, PoolSpecDropsWhatBelongsToOneOpen) {
  SpawnSpec spec;
  spec.name = "n";
  spec.timeout_ms = 9;
  spec.output_tap = [](std::string_view) {};
  spec.env["A"] = "1";
  const SpawnSpec pooled = PoolSpecOf(spec);
  EXPECT_TRUE(pooled.name.empty());
  EXPECT_FALSE(pooled.timeout_ms.has_value());
  EXPECT_FALSE(static_cast<bool>(pooled.output_tap));
  EXPECT_EQ(pooled.env, spec.env);
}

TEST_F(WarmPoolTest, RefillStartsOneAndClaimTakesItOnceReady) {
  auto pool = MakePool();
  const SpawnSpec spec = Spec("/w");
  EXPECT_EQ(pool->Claim(spec), nullptr);
  pool->Refill(spec);
  ASSERT_EQ(started.size(), 1u);
  pool->Refill(spec);  // already has its one shell (starting)
  EXPECT_EQ(started.size(), 1u);
  EXPECT_EQ(pool->Claim(spec), nullptr) << "a starting shell is never handed out";
  Settle(0, true);
  std::shared_ptr<PooledShell> claimed = pool->Claim(spec);
  EXPECT_EQ(claimed, started[0]);
  EXPECT_EQ(pool->Claim(spec), nullptr) << "a shell serves one session only";
  EXPECT_FALSE(started[0]->discarded);
  EXPECT_EQ(pool->counters().claimed, 1u);
}

TEST_F(WarmPoolTest, AnOpenWithItsOwnEnvironmentIsNeverPooled) {
  auto pool = MakePool();
  SpawnSpec spec = Spec("/w");
  spec.env["SECRET_TOKEN"] = "of-one-session";
  pool->Refill(spec);
  EXPECT_TRUE(started.empty()) << "a client's env would outlive its session in a pooled shell";
  EXPECT_EQ(pool->Claim(spec), nullptr);
}

TEST_F(WarmPoolTest, ZeroStartsNothingAndDiscardsTheKeysShells) {
  auto pool = MakePool();
  pool->Refill(Spec("/w", 0));
  EXPECT_TRUE(started.empty());
  pool->Refill(Spec("/w", 1));
  Settle(0, true);
  pool->Refill(Spec("/w", 0));
  EXPECT_TRUE(started[0]->discarded);
  EXPECT_EQ(pool->Claim(Spec("/w", 0)), nullptr);
}

TEST_F(WarmPoolTest, AnotherKeyNeverGetsTheShell) {
  auto pool = MakePool();
  pool->Refill(Spec("/w"));
  Settle(0, true);
  SpawnSpec read_only = Spec("/w");
  read_only.policy.mode = policy::Mode::kReadOnly;
  EXPECT_EQ(pool->Claim(read_only), nullptr);
  SpawnSpec other_env = Spec("/w");
  other_env.env["X"] = "2";
  EXPECT_EQ(pool->Claim(other_env), nullptr);
  EXPECT_EQ(pool->Claim(Spec("/v")), nullptr);
  EXPECT_EQ(pool->Claim(Spec("/w")), started[0]);
}

TEST_F(WarmPoolTest, ChangedPolicyOfTheSameWorkspaceDiscardsTheStaleShell) {
  auto pool = MakePool();
  pool->Refill(Spec("/w"));
  Settle(0, true);
  SpawnSpec changed = Spec("/w");
  changed.policy.env.set["FOO"] = "new";
  EXPECT_EQ(pool->Claim(changed), nullptr);
  EXPECT_TRUE(started[0]->discarded);
  EXPECT_EQ(started[0]->discard_reason, "the policy of its workspace changed");
}

TEST_F(WarmPoolTest, NotPristineOrNotMatchingIsDiscardedNeverHandedOut) {
  auto pool = MakePool();
  pool->Refill(Spec("/w"));
  Settle(0, true);
  started[0]->pristine = false;  // printed something, exited, was touched
  EXPECT_EQ(pool->Claim(Spec("/w")), nullptr);
  EXPECT_TRUE(started[0]->discarded);

  pool->Refill(Spec("/w"));
  ASSERT_EQ(started.size(), 2u);
  Settle(1, true);
  started[1]->matches = false;  // a host fact of its launch changed (a new .git, a hidden path)
  EXPECT_EQ(pool->Claim(Spec("/w")), nullptr);
  EXPECT_TRUE(started[1]->discarded);
}

TEST_F(WarmPoolTest, FailedStartLeavesThePool) {
  auto pool = MakePool();
  pool->Refill(Spec("/w"));
  Settle(0, false);
  EXPECT_EQ(pool->counters().starting + pool->counters().ready, 0u);
  pool->Refill(Spec("/w"));
  EXPECT_EQ(started.size(), 2u);
}

TEST_F(WarmPoolTest, HeadroomBoundsTheFillAndAnOpenNearTheLimitEndsPooledShells) {
  size_t headroom = 1;
  auto pool = MakePool(WarmPoolOptions{
      .max_keys = 4, .idle = std::chrono::minutes(1), .headroom = [&] { return headroom; }});
  pool->Refill(Spec("/w", 2));
  EXPECT_EQ(started.size(), 1u) << "one slot of room, one shell";
  Settle(0, true);
  headroom = 0;
  EXPECT_EQ(pool->Claim(Spec("/v")), nullptr);
  EXPECT_TRUE(started[0]->discarded);
}

TEST_F(WarmPoolTest, KeysBeyondTheBoundEvictTheLeastRecentlyUsed) {
  auto pool =
      MakePool(WarmPoolOptions{.max_keys = 2, .idle = std::chrono::minutes(1), .headroom = {}});
  pool->Refill(Spec("/a"));
  pool->Refill(Spec("/b"));
  pool->Refill(Spec("/c"));
  ASSERT_EQ(started.size(), 3u);
  EXPECT_TRUE(started[0]->discarded);
  EXPECT_FALSE(started[1]->discarded);
  EXPECT_FALSE(started[2]->discarded);
}

TEST_F(WarmPoolTest, IdleShellsExpire) {
  auto pool = MakePool(
      WarmPoolOptions{.max_keys = 4, .idle = std::chrono::milliseconds(1), .headroom = {}});
  pool->Refill(Spec("/w"));
  Settle(0, true);
  io.restart();
  while (!started[0]->discarded && io.run_one() > 0) {
  }
  EXPECT_TRUE(started[0]->discarded);
  EXPECT_EQ(started[0]->discard_reason, "it stayed unclaimed (idle)");
}

TEST_F(WarmPoolTest, DrainEndsEverythingAndRefusesRefills) {
  auto pool = MakePool();
  pool->Refill(Spec("/w"));
  Settle(0, true);
  pool->Refill(Spec("/v"));  // still starting
  bool drained = false;
  pool->Drain([&] { drained = true; });
  EXPECT_TRUE(started[0]->discarded);
  EXPECT_TRUE(started[1]->discarded);
  io.restart();
  io.poll();
  EXPECT_FALSE(drained) << "done only once every shell's processes are gone";
  started[0]->discard_done();
  started[1]->discard_done();
  io.restart();
  io.poll();
  EXPECT_TRUE(drained);
  pool->Refill(Spec("/w"));
  EXPECT_EQ(started.size(), 2u);
  EXPECT_EQ(pool->Claim(Spec("/w")), nullptr);
}

// A claimed shell that its open did not take (its claim's check refused it, or the open was
// canceled) is ended through the pool, and the daemon's shutdown waits for it: before, the
// shutdown could finish while that shell still closed, and its session outlived the reactor.
TEST_F(WarmPoolTest, DrainAwaitsAClaimedShellThatWasNotTaken) {
  auto pool = MakePool();
  pool->Refill(Spec("/w"));
  Settle(0, true);
  std::shared_ptr<PooledShell> claimed = pool->Claim(Spec("/w"));
  ASSERT_EQ(claimed, started[0]);
  pool->DiscardClaimed(std::move(claimed), "it changed while its claim was checked");
  EXPECT_TRUE(started[0]->discarded);
  EXPECT_EQ(started[0]->discard_reason, "it changed while its claim was checked");
  EXPECT_EQ(pool->counters().discarding, 1u);
  bool drained = false;
  pool->Drain([&] { drained = true; });
  io.restart();
  io.poll();
  EXPECT_FALSE(drained) << "the claimed shell's processes are not gone yet";
  started[0]->discard_done();
  io.restart();
  io.poll();
  EXPECT_TRUE(drained);
  EXPECT_EQ(pool->counters().discarding, 0u);
}

// Once the backend's shutdown began, a spawn starts nothing: the pool's drain would not await
// it and its shell would outlive the reactor.
TEST(ShellBackendTest, ASpawnAfterShutdownIsRefusedAndStartsNothing) {
  asio::io_context io;
  ChildReaper reaper(io);
  ShellBackend backend(io, reaper, ShellBackendOptions{});
  bool shut = false;
  backend.Shutdown([&] { shut = true; });
  std::optional<Result<std::shared_ptr<BackendSession>>> answer;
  std::shared_ptr<PendingSpawn> pending =
      backend.Spawn(SpawnSpec{}, [&](auto spawned) { answer = std::move(spawned); });
  ASSERT_NE(pending, nullptr);
  EXPECT_FALSE(answer.has_value()) << "answered off the call, as every spawn is";
  // The reaper's SIGCHLD wait never ends: run what is ready until nothing is.
  for (int i = 0; i < 1000 && io.poll() > 0; ++i) io.restart();
  EXPECT_TRUE(shut);
  ASSERT_TRUE(answer.has_value());
  ASSERT_FALSE(*answer);
  EXPECT_EQ(answer->error().kind, ErrorKind::kClosed);
  EXPECT_EQ(answer->error().message, "the daemon is shutting down; no shell starts any more");
  EXPECT_EQ(backend.pool_counters().discarding, 0u);
}

}  // namespace
}  // namespace ptybox::backend
