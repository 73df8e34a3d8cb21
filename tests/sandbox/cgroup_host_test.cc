// The cgroup host setup as a value (sandbox/cgroup_host.h): nothing exists before SetUp, the
// doctor's Inspect creates nothing and arrives at SetUp's plan, the directories go with the
// value, and a session cgroup's removal never waits: a busy cgroup is an EBUSY error at once,
// taken up again by a later call (the caller's timer). Real cgroups beneath this process's own;
// where this user may create none, the cases that need them skip and say why.
#include "sandbox/cgroup_host.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <set>
#include <string>

#include "sandbox/cgroup.h"
#include "sandbox/cgroup_file.h"

namespace ptybox::sandbox {
namespace {

namespace fs = std::filesystem;

// Every entry beneath this process's own cgroups whose name is one of ours.
std::set<fs::path> OurDirectories() {
  const auto memberships = cgroups::ParseProcCgroup(cgroups::ReadText("/proc/self/cgroup"));
  const auto mounts = cgroups::ParseCgroupMounts(cgroups::ReadText("/proc/self/mountinfo"));
  const std::string prefix = "ptybox-" + std::to_string(::getpid()) + "-";
  std::set<fs::path> found;
  for (std::string_view h : {"", "pids", "memory", "cpu"}) {
    const std::optional<fs::path> own = cgroups::OwnDirectory(memberships, mounts, h);
    if (!own) continue;
    std::error_code ec;
    for (fs::directory_iterator it(*own, ec), end; !ec && it != end; it.increment(ec)) {
      if (it->path().filename().string().starts_with(prefix)) found.insert(it->path());
    }
  }
  return found;
}

TEST(CgroupHostTest, InspectCreatesNothingAndPlansAsSetUpDoes) {
  ASSERT_TRUE(OurDirectories().empty()) << "a directory of ours existed before any setup";
  const CleanupSupport inspected = CgroupHost::Inspect();
  EXPECT_TRUE(OurDirectories().empty()) << "Inspect created a cgroup directory";
  std::shared_ptr<const CgroupHost> host = CgroupHost::SetUp();
  const CleanupSupport& set_up = host->support();
  std::cout << "  observed: inspected " << inspected.detail << "\n  observed: set up "
            << set_up.detail << "\n";
  EXPECT_EQ(inspected.cgroups, set_up.cgroups);
  EXPECT_EQ(inspected.plan.mechanism, set_up.plan.mechanism);
  EXPECT_EQ(inspected.plan.kill_v2, set_up.plan.kill_v2);
  EXPECT_EQ(inspected.plan.detail, set_up.plan.detail);
  if (set_up.cgroups) {
    EXPECT_FALSE(OurDirectories().empty()) << "SetUp made no directory though it has cgroups";
    EXPECT_EQ(set_up.directory.parent_path(), inspected.directory);
  }
  host.reset();
  EXPECT_TRUE(OurDirectories().empty()) << "the directories outlived their host value";
}

TEST(CgroupHostTest, ABusyCgroupIsReportedAtOnceAndRemovedOnALaterCall) {
  std::shared_ptr<const CgroupHost> host = CgroupHost::SetUp();
  if (!host->support().cgroups) {
    GTEST_SKIP() << "no session cgroups for this user here: " << host->support().detail;
  }
  Result<SessionCgroup> cgroup = SessionCgroup::Create(*host, "s-busy");
  ASSERT_TRUE(cgroup) << cgroup.error().message;
  // A cgroup with a child cgroup cannot be removed (EBUSY), as a v1 one still listing a
  // member the kernel is tearing down cannot.
  const fs::path child = cgroup->path() / "held";
  ASSERT_EQ(::mkdir(child.c_str(), 0755), 0) << std::strerror(errno);
  Result<void> busy = cgroup->Remove();
  ASSERT_FALSE(busy);
  EXPECT_EQ(busy.error().sys_errno, EBUSY) << busy.error().message;
  EXPECT_NE(busy.error().message.find(cgroup->path().string()), std::string::npos)
      << busy.error().message;
  ASSERT_EQ(::rmdir(child.c_str()), 0) << std::strerror(errno);
  Result<void> removed = cgroup->Remove();
  EXPECT_TRUE(removed) << removed.error().message;
  std::error_code ec;
  EXPECT_FALSE(fs::exists(cgroup->path(), ec)) << cgroup->path();
}

}  // namespace
}  // namespace ptybox::sandbox
