// The decisions of the start-up sweep (sandbox/cgroup_sweep.h) with injected facts: which names
// are candidates at all, when an owner is certainly gone, and that a tree with only invisible
// processes (another pid namespace's) is never touched. The same rules hold for v1 and v2
// directories (the sweep reads the facts per hierarchy); the real sweep through the real
// binary is tests/containment/cgroup_walls_test.cc.
#include "sandbox/cgroup_sweep.h"

#include <gtest/gtest.h>

namespace ptybox::sandbox::cgroups {
namespace {

TEST(CgroupSweepTest, OnlyExactDaemonDirectoryNamesAreCandidates) {
  EXPECT_EQ(StaleCandidateOwner("ptybox-10183-bffc2af4"), 10183);
  EXPECT_EQ(StaleCandidateOwner("ptybox-1-a"), 1);
  for (std::string_view other :
       {"ptybox-limits-test-123", "ptybox-", "ptybox-12", "ptybox-12-", "ptybox--ab",
        "ptybox-12-ABCD", "ptybox-12-zz", "ptybox-12-ab/..", "ptybox-0-ab", "xptybox-12-ab",
        "ptybox-1234567890-ab", "docker", "s1", "ptybox-12-ab-cd", "ptybox-+12-ab"}) {
    EXPECT_EQ(StaleCandidateOwner(other), std::nullopt) << other;
  }
}

TEST(CgroupSweepTest, ALockedDirectoryIsLiveWhateverItsPidSays) {
  // A daemon of this version in another pid namespace: its pid means nothing here.
  OwnerFacts facts;
  facts.locked = true;
  facts.alive = false;
  const Judgement j = JudgeOwner(42, facts, "ptybox");
  EXPECT_FALSE(j.stale);
  EXPECT_NE(j.reason.find("locked"), std::string::npos) << j.reason;
}

TEST(CgroupSweepTest, ThisProcessesOwnDirectoryIsNeverStale) {
  OwnerFacts facts;
  facts.self = true;
  EXPECT_FALSE(JudgeOwner(42, facts, "ptybox").stale);
}

TEST(CgroupSweepTest, AnUnlockedDirectoryOfAGonePidIsStale) {
  OwnerFacts facts;  // unlocked, no such pid
  const Judgement j = JudgeOwner(4242, facts, "ptybox");
  EXPECT_TRUE(j.stale);
  EXPECT_NE(j.reason.find("4242"), std::string::npos) << j.reason;
}

TEST(CgroupSweepTest, ALivePtyboxProcessKeepsItsDirectory) {
  // A daemon of an earlier version (no lock), alive: named ptybox, or named as we are.
  OwnerFacts facts;
  facts.alive = true;
  facts.comm = "ptybox";
  EXPECT_FALSE(JudgeOwner(7, facts, "ptybox").stale);
  facts.comm = "ptybox-dev";
  EXPECT_FALSE(JudgeOwner(7, facts, "ptybox-dev").stale);
}

TEST(CgroupSweepTest, AnUnidentifiableLivePidKeepsItsDirectory) {
  OwnerFacts facts;
  facts.alive = true;  // e.g. another user's process behind hidepid
  EXPECT_FALSE(JudgeOwner(7, facts, "ptybox").stale);
}

TEST(CgroupSweepTest, ALiveProcessWhereTheOwnerRanKeepsItsDirectory) {
  // An in-process user of SessionCgroup (a test binary) is not named ptybox but still lives in
  // the cgroup it created its directory beneath.
  OwnerFacts facts;
  facts.alive = true;
  facts.comm = "backend_test";
  facts.in_parent = true;
  EXPECT_FALSE(JudgeOwner(7, facts, "ptybox").stale);
}

TEST(CgroupSweepTest, AReusedPidOutsideTheOwnersCgroupIsStale) {
  OwnerFacts facts;
  facts.alive = true;
  facts.comm = "nginx";
  facts.in_parent = false;
  const Judgement j = JudgeOwner(7, facts, "ptybox");
  EXPECT_TRUE(j.stale);
  EXPECT_NE(j.reason.find("nginx"), std::string::npos) << j.reason;
}

TEST(CgroupSweepTest, AnInvisiblePopulatedTreeIsForeign) {
  EXPECT_TRUE(ForeignTree(/*populated=*/true, /*visible_members=*/0));
  EXPECT_FALSE(ForeignTree(true, 3));
  EXPECT_FALSE(ForeignTree(false, 0));
}

}  // namespace
}  // namespace ptybox::sandbox::cgroups
