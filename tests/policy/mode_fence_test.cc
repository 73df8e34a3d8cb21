// The per-owner mode fence: a table of interleavings of spawns, closes and mode changes, then
// thousands of random sequences checked against a reference model and the safety property
// (every open or starting session runs in the owner's current effective mode).
#include "policy/mode_fence.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

namespace ptybox::policy {
namespace {

constexpr Mode kRO = Mode::kReadOnly;
constexpr Mode kWW = Mode::kWorkspaceWrite;
constexpr Mode kDFA = Mode::kDangerFullAccess;
constexpr Mode kPolicyDefault = kWW;  // what the files say when the owner chose nothing

enum class Op { kBegin, kPublished, kFailed, kClose, kSet };

struct Step {
  Op op;
  Mode mode = kWW;  // kSet: the requested mode
  bool ok = true;   // kSet: expected to succeed
};

struct Interleaving {
  const char* name;
  std::vector<Step> steps;
};

Mode Effective(const ModeFence& fence) { return fence.requested_mode().value_or(kPolicyDefault); }

const Interleaving kInterleavings[] = {
    {"SetWithNothingOpen", {{Op::kSet, kRO}, {Op::kSet, kDFA}, {Op::kSet, kWW}}},
    {"SpawnBegunThenSet", {{Op::kBegin}, {Op::kSet, kRO, false}}},
    {"SpawnBegunThenSetSame", {{Op::kBegin}, {Op::kSet, kWW}}},
    {"SetThenSpawn", {{Op::kSet, kRO}, {Op::kBegin}, {Op::kPublished}, {Op::kSet, kWW, false}}},
    {"SpawnFailedThenSet", {{Op::kBegin}, {Op::kFailed}, {Op::kSet, kRO}}},
    {"SpawnPublishedThenSet", {{Op::kBegin}, {Op::kPublished}, {Op::kSet, kDFA, false}}},
    {"PublishedClosedThenSet", {{Op::kBegin}, {Op::kPublished}, {Op::kClose}, {Op::kSet, kDFA}}},
    {"SetDuringSpawnThenAfterFailure",
     {{Op::kBegin}, {Op::kSet, kRO, false}, {Op::kFailed}, {Op::kSet, kRO}}},
    {"TwoSpawnsOneFails",
     {{Op::kBegin},
      {Op::kBegin},
      {Op::kFailed},
      {Op::kSet, kRO, false},
      {Op::kPublished},
      {Op::kSet, kRO, false},
      {Op::kClose},
      {Op::kSet, kRO}}},
    {"TwoSessionsCloseOneAtATime",
     {{Op::kBegin},
      {Op::kPublished},
      {Op::kBegin},
      {Op::kPublished},
      {Op::kClose},
      {Op::kSet, kRO, false},
      {Op::kClose},
      {Op::kSet, kRO}}},
    {"SessionOpenAndSpawnInProgress",
     {{Op::kBegin},
      {Op::kPublished},
      {Op::kBegin},
      {Op::kClose},
      {Op::kSet, kDFA, false},
      {Op::kFailed},
      {Op::kSet, kDFA}}},
    {"SameModeAlwaysAllowed",
     {{Op::kSet, kRO},
      {Op::kBegin},
      {Op::kPublished},
      {Op::kSet, kRO},
      {Op::kSet, kWW, false},
      {Op::kSet, kRO}}},
    {"DowngradeWaitsForTheWideSession",
     {{Op::kSet, kDFA},
      {Op::kBegin},
      {Op::kPublished},
      {Op::kSet, kRO, false},
      {Op::kSet, kWW, false},
      {Op::kClose},
      {Op::kSet, kRO},
      {Op::kBegin},
      {Op::kPublished},
      {Op::kSet, kDFA, false}}},
};

void PrintTo(const Interleaving& i, std::ostream* out) { *out << i.name; }

class FenceInterleavingTest : public ::testing::TestWithParam<Interleaving> {};

TEST_P(FenceInterleavingTest, FollowsTheTable) {
  ModeFence fence;
  int step_number = 0;
  for (const Step& step : GetParam().steps) {
    ++step_number;
    switch (step.op) {
      case Op::kBegin:
        fence.BeginSpawn();
        break;
      case Op::kPublished:
        fence.EndSpawn(true);
        break;
      case Op::kFailed:
        fence.EndSpawn(false);
        break;
      case Op::kClose:
        fence.SessionClosed();
        break;
      case Op::kSet: {
        const Mode before = Effective(fence);
        Result<void> result = fence.SetMode(step.mode, before);
        EXPECT_EQ(result.has_value(), step.ok) << "step " << step_number;
        if (result) {
          EXPECT_EQ(fence.requested_mode(), step.mode) << "step " << step_number;
        } else {
          EXPECT_EQ(result.error().kind, ErrorKind::kModeFenced);
          EXPECT_EQ(Effective(fence), before) << "a refused change must not stick";
        }
        break;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Table, FenceInterleavingTest, ::testing::ValuesIn(kInterleavings),
                         [](const auto& test_info) { return std::string(test_info.param.name); });

TEST(ModeFenceTest, StartsWithTheOwnersChoice) {
  EXPECT_EQ(ModeFence().requested_mode(), std::nullopt);
  EXPECT_EQ(ModeFence(kRO).requested_mode(), kRO);
  ModeFence fence;
  EXPECT_FALSE(fence.fenced());
  EXPECT_EQ(fence.open_sessions(), 0);
  EXPECT_EQ(fence.spawns_in_progress(), 0);
}

TEST(ModeFenceTest, TheRefusalSaysWhatIsOpenAndHowToChangeSafely) {
  ModeFence fence;
  fence.BeginSpawn();
  fence.EndSpawn(true);
  fence.BeginSpawn();
  fence.EndSpawn(true);
  fence.BeginSpawn();
  Result<void> result = fence.SetMode(kRO, kWW);
  ASSERT_FALSE(result.has_value());
  EXPECT_EQ(result.error().kind, ErrorKind::kModeFenced);
  EXPECT_EQ(result.error().message,
            "cannot change the mode from `workspace-write` to `read-only` while this owner has "
            "2 open sessions and 1 spawn in progress: wait for terminal_open to settle, close "
            "the sessions (terminal_close), then change the mode, so no terminal keeps the old "
            "access");
}

TEST(ModeFenceTest, UnbalancedCallsDoNotDriveCountsNegative) {
  ModeFence fence;
  fence.EndSpawn(true);
  fence.SessionClosed();
  EXPECT_EQ(fence.open_sessions(), 0);
  EXPECT_EQ(fence.spawns_in_progress(), 0);
  EXPECT_FALSE(fence.fenced());
  EXPECT_TRUE(fence.SetMode(kDFA, kWW).has_value());
}

// Random sequences against a reference model. Each spawn captures the effective mode when it
// begins (as the daemon does: resolve, BeginSpawn, no await between); the safety property is
// that no open or starting session ever has a mode other than the current effective one.
TEST(ModeFenceTest, RandomSequencesMatchTheReferenceModel) {
  constexpr int kSequences = 2000;
  constexpr int kStepsPerSequence = 50;
  int refused = 0;
  int changed = 0;
  for (int seed = 1; seed <= kSequences; ++seed) {
    std::mt19937 random(static_cast<unsigned>(seed));
    ModeFence fence;
    std::vector<Mode> starting;  // modes of spawns in progress
    std::vector<Mode> open;      // modes of open sessions
    for (int step = 0; step < kStepsPerSequence; ++step) {
      const std::string where = "seed " + std::to_string(seed) + " step " + std::to_string(step);
      switch (random() % 5) {
        case 0:
          fence.BeginSpawn();
          starting.push_back(Effective(fence));
          break;
        case 1:
        case 2:
          if (!starting.empty()) {
            const bool published = random() % 2 == 0;
            const size_t which = random() % starting.size();
            if (published) open.push_back(starting[which]);
            starting.erase(starting.begin() + static_cast<std::ptrdiff_t>(which));
            fence.EndSpawn(published);
          }
          break;
        case 3:
          if (!open.empty()) {
            open.erase(open.begin() + static_cast<std::ptrdiff_t>(random() % open.size()));
            fence.SessionClosed();
          }
          break;
        case 4: {
          const Mode asked = static_cast<Mode>(random() % 3);
          const Mode before = Effective(fence);
          const bool busy = !starting.empty() || !open.empty();
          Result<void> result = fence.SetMode(asked, before);
          if (asked != before && busy) {
            ASSERT_FALSE(result.has_value()) << where;
            EXPECT_EQ(result.error().kind, ErrorKind::kModeFenced);
            ++refused;
          } else {
            ASSERT_TRUE(result.has_value()) << where;
            if (asked != before) ++changed;
          }
          break;
        }
      }
      ASSERT_EQ(fence.open_sessions(), static_cast<int>(open.size())) << where;
      ASSERT_EQ(fence.spawns_in_progress(), static_cast<int>(starting.size())) << where;
      ASSERT_EQ(fence.fenced(), !open.empty() || !starting.empty()) << where;
      for (Mode mode : open) ASSERT_EQ(mode, Effective(fence)) << where;
      for (Mode mode : starting) ASSERT_EQ(mode, Effective(fence)) << where;
    }
  }
  // The generator exercised both outcomes many times.
  EXPECT_GT(refused, 100);
  EXPECT_GT(changed, 100);
}

}  // namespace
}  // namespace ptybox::policy
