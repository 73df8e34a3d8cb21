// sandbox/cgroup_layout.h with injected inputs: /proc/self/cgroup and mountinfo of a hybrid
// host (this project's CI), a pure v2 host with a delegated subtree and a container; which
// mechanism the plan picks for each; the files a session's limits become.
#include "sandbox/cgroup_layout.h"

#include <gtest/gtest.h>

namespace ptybox::sandbox::cgroups {
namespace {

constexpr std::string_view kHybridCgroup =
    "9:name=systemd:/\n8:pids:/\n7:blkio:/\n6:freezer:/\n5:devices:/\n"
    "4:memory:/process_api/287260ab\n3:cpuset:/\n2:cpuacct:/\n1:cpu:/\n0::/\n";
constexpr std::string_view kHybridMounts =
    "30 25 0:26 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
    "31 30 0:27 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"
    "32 30 0:28 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct\n"
    "33 30 0:29 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
    "34 30 0:30 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids\n"
    "35 30 0:31 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup "
    "rw,xattr,release_agent=/x,name=systemd\n"
    "36 30 0:32 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n"
    "37 25 8:1 / /home rw shared:1 - ext4 /dev/sda1 rw\n";

TEST(CgroupLayoutTest, ParsesProcSelfCgroupOfAHybridHost) {
  const std::vector<Membership> m = ParseProcCgroup(kHybridCgroup);
  ASSERT_EQ(m.size(), 10u);
  EXPECT_EQ(m[0].id, 9);
  EXPECT_EQ(m[0].controllers, std::vector<std::string>{"name=systemd"});
  EXPECT_EQ(m[5].controllers, std::vector<std::string>{"memory"});
  EXPECT_EQ(m[5].path, "/process_api/287260ab");
  EXPECT_EQ(m[9].id, 0);
  EXPECT_TRUE(m[9].controllers.empty());
  EXPECT_EQ(m[9].path, "/");
}

TEST(CgroupLayoutTest, SkipsMalformedLines) {
  const std::vector<Membership> m =
      ParseProcCgroup("garbage\n:pids:/x\nx:pids:/y\n3:cpu,cpuacct:/a/b\n4:memory:relative\n");
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0].controllers, (std::vector<std::string>{"cpu", "cpuacct"}));
  EXPECT_EQ(m[0].path, "/a/b");
}

TEST(CgroupLayoutTest, ParsesCgroupMountsAndTheirControllers) {
  const std::vector<Mount> mounts = ParseCgroupMounts(kHybridMounts);
  ASSERT_EQ(mounts.size(), 6u);  // not the tmpfs, not ext4
  EXPECT_EQ(mounts[0].mountpoint, "/sys/fs/cgroup/cpu");
  EXPECT_EQ(mounts[0].controllers, std::vector<std::string>{"cpu"});
  EXPECT_EQ(mounts[4].controllers, std::vector<std::string>{"name=systemd"});
  EXPECT_TRUE(mounts[5].v2);
  EXPECT_TRUE(mounts[5].controllers.empty());
}

TEST(CgroupLayoutTest, FindsTheOwnDirectoryInEachHierarchy) {
  const auto m = ParseProcCgroup(kHybridCgroup);
  const auto mounts = ParseCgroupMounts(kHybridMounts);
  EXPECT_EQ(OwnDirectory(m, mounts, ""), "/sys/fs/cgroup/unified");
  EXPECT_EQ(OwnDirectory(m, mounts, "pids"), "/sys/fs/cgroup/pids");
  EXPECT_EQ(OwnDirectory(m, mounts, "memory"), "/sys/fs/cgroup/memory/process_api/287260ab");
  EXPECT_EQ(OwnDirectory(m, mounts, "cpu"), "/sys/fs/cgroup/cpu");
  EXPECT_EQ(OwnDirectory(m, mounts, "hugetlb"), std::nullopt);  // not mounted
}

TEST(CgroupLayoutTest, AContainerMountsItsCgroupAsTheRootOfTheMount) {
  // The mount's root is the container's cgroup; the process sits in a child of it.
  const auto m = ParseProcCgroup("0::/docker/abc/app\n");
  const auto mounts = ParseCgroupMounts(
      "40 30 0:40 /docker/abc /sys/fs/cgroup rw - cgroup2 cgroup2 rw,nsdelegate\n");
  EXPECT_EQ(OwnDirectory(m, mounts, ""), "/sys/fs/cgroup/app");
  // A cgroup outside the mount's root is not reachable through it.
  EXPECT_EQ(OwnDirectory(ParseProcCgroup("0::/other\n"), mounts, ""), std::nullopt);
}

TEST(CgroupLayoutTest, HybridHostAsRootUsesV1ControllersAndV2Kill) {
  HostFacts facts;
  facts.root = true;
  facts.v2_own = "/sys/fs/cgroup/unified";
  facts.v2_kill = true;
  facts.v1_own = {{"pids", "/sys/fs/cgroup/pids"},
                  {"memory", "/sys/fs/cgroup/memory/x"},
                  {"cpu", "/sys/fs/cgroup/cpu"}};
  const Plan plan = ChoosePlan(facts);
  EXPECT_TRUE(plan.cgroups);
  EXPECT_TRUE(plan.use_v2);
  EXPECT_TRUE(plan.kill_v2);
  EXPECT_EQ(plan.tasks, Where::kV1);
  EXPECT_EQ(plan.memory, Where::kV1);
  EXPECT_EQ(plan.cpu, Where::kV1);
  EXPECT_EQ(plan.mechanism, "cgroup v1 controllers (+ cgroup v2 cgroup.kill)");
  EXPECT_TRUE(plan.advice.empty()) << plan.advice;
}

TEST(CgroupLayoutTest, DelegatedV2SubtreeHoldsEverythingInV2) {
  HostFacts facts;
  facts.v2_own = "/sys/fs/cgroup/user.slice/ptybox.service";
  facts.v2_kill = true;
  facts.v2_controllers = {"cpu", "memory", "pids"};
  const Plan plan = ChoosePlan(facts);
  EXPECT_EQ(plan.mechanism, "cgroup v2 (delegated)");
  EXPECT_EQ(plan.tasks, Where::kV2);
  EXPECT_EQ(plan.memory, Where::kV2);
  EXPECT_EQ(plan.cpu, Where::kV2);
  EXPECT_TRUE(plan.v1.empty());
  EXPECT_NE(plan.detail.find("cgroup.kill"), std::string::npos);
}

TEST(CgroupLayoutTest, UnprivilegedOnAHybridHostFallsBackToRlimitsAndSaysWhatToChange) {
  HostFacts facts;
  facts.v2_own = "/sys/fs/cgroup/unified";
  facts.v2_problem = "mkdir /sys/fs/cgroup/unified/ptybox-1-aa: Permission denied";
  facts.v1_problems = {{"pids", "mkdir /sys/fs/cgroup/pids/ptybox-1-aa: Permission denied"}};
  const Plan plan = ChoosePlan(facts);
  EXPECT_FALSE(plan.cgroups);
  EXPECT_EQ(plan.tasks, Where::kNone);
  EXPECT_EQ(plan.mechanism, "rlimits (no usable cgroup)");
  EXPECT_NE(plan.advice.find("Delegate=yes"), std::string::npos) << plan.advice;
  EXPECT_NE(plan.advice.find("pids (mkdir /sys/fs/cgroup/pids/ptybox-1-aa: Permission denied)"),
            std::string::npos)
      << plan.advice;
  EXPECT_NE(plan.advice.find("not root"), std::string::npos) << plan.advice;
}

TEST(CgroupLayoutTest, V2WithoutKillOrPidsIsNoUse) {
  HostFacts facts;
  facts.v2_own = "/sys/fs/cgroup";
  facts.v2_kill = false;  // Linux before 5.14
  facts.v2_controllers = {"memory"};
  const Plan plan = ChoosePlan(facts);
  EXPECT_FALSE(plan.cgroups);
  EXPECT_FALSE(plan.use_v2);
}

TEST(CgroupLayoutTest, TurnedOffByTheEnvironment) {
  HostFacts facts;
  facts.disabled = true;
  facts.v2_own = "/sys/fs/cgroup";
  facts.v2_kill = true;
  const Plan plan = ChoosePlan(facts);
  EXPECT_FALSE(plan.cgroups);
  EXPECT_NE(plan.detail.find("PTYBOX_SESSION_CGROUPS=0"), std::string::npos);
}

TEST(CgroupLayoutTest, RendersLimitsForV2) {
  Plan plan;
  plan.tasks = plan.memory = plan.cpu = Where::kV2;
  const SessionLimits limits{.tasks = 1024, .memory_bytes = 268435456, .cpu_millicores = 500};
  const std::vector<LimitFile> expected = {
      {"", "pids.max", "1024"},
      {"", "memory.max", "268435456"},
      {"", "memory.swap.max", "0", true},
      {"", "cpu.max", "50000 100000"},
  };
  EXPECT_EQ(RenderLimits(limits, plan), expected);
}

TEST(CgroupLayoutTest, RendersLimitsForV1) {
  Plan plan;
  plan.tasks = plan.memory = plan.cpu = Where::kV1;
  const SessionLimits limits{.tasks = 64, .memory_bytes = 268435456, .cpu_millicores = 2500};
  const std::vector<LimitFile> expected = {
      {"pids", "pids.max", "64"},
      {"memory", "memory.limit_in_bytes", "268435456"},
      {"memory", "memory.memsw.limit_in_bytes", "268435456", true},
      {"cpu", "cpu.cfs_period_us", "100000"},
      {"cpu", "cpu.cfs_quota_us", "250000"},
  };
  EXPECT_EQ(RenderLimits(limits, plan), expected);
}

TEST(CgroupLayoutTest, RendersNothingForUnsetLimitsOrUnheldControllers) {
  Plan plan;
  plan.tasks = Where::kV1;
  EXPECT_TRUE(RenderLimits(SessionLimits{}, plan).empty());
  // Memory and CPU are held by no cgroup here: nothing to write (rlimits stand in).
  const auto files =
      RenderLimits(SessionLimits{.tasks = 5, .memory_bytes = 1 << 30, .cpu_millicores = 10}, plan);
  ASSERT_EQ(files.size(), 1u);
  EXPECT_EQ(files[0].file, "pids.max");
}

TEST(CgroupLayoutTest, TheSmallestCpuShareIsTheKernelsSmallestQuota) {
  Plan plan;
  plan.cpu = Where::kV2;
  const auto files =
      RenderLimits(SessionLimits{.tasks = {}, .memory_bytes = {}, .cpu_millicores = 10}, plan);
  ASSERT_EQ(files.size(), 1u);
  EXPECT_EQ(files[0].value, "1000 100000");
}

}  // namespace
}  // namespace ptybox::sandbox::cgroups
