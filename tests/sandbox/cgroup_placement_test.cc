// The launched child places itself (sandbox/launcher.h, LaunchSpec::cgroup_procs): it writes
// "0" to every descriptor it is given before anything else, on v1 and v2 alike (the kernel
// reads "0" as "the writing process" in both), so the daemon never has to join; a write that
// fails ends the child with the cgroup stage's own exit status (sandbox/init/child_exec.h) and a
// line on the diagnostics pipe before it runs anything. A pipe stands in for cgroup.procs here, so
// this holds for any user on any host.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sandbox/cgroup_layout.h"
#include "sandbox/init/child_exec.h"
#include "sandbox/launcher.h"
#include "tests/support/daemon_fixture.h"

namespace ptybox::sandbox {
namespace {

LaunchSpec Spec() {
  LaunchSpec spec;
  spec.mode = policy::Mode::kDangerFullAccess;
  spec.init_binary = ::ptybox::testing::InitBinary();
  spec.command = {"/bin/true"};
  spec.cwd = "/";
  spec.pty = false;
  return spec;
}

TEST(CgroupPlacementTest, TheChildWritesZeroToEveryPlacementDescriptor) {
  int first[2];
  int second[2];
  ASSERT_EQ(::pipe2(first, O_CLOEXEC), 0);
  ASSERT_EQ(::pipe2(second, O_CLOEXEC), 0);
  LaunchSpec spec = Spec();
  spec.cgroup_procs = {first[1], second[1]};
  Result<LaunchedInit> launched = LaunchInit(spec, RepositoriesOfLaunch(spec.sandbox));
  ::close(first[1]);
  ::close(second[1]);
  ASSERT_TRUE(launched) << launched.error().message;
  char a[8] = {};
  char b[8] = {};
  const ssize_t na = ::read(first[0], a, sizeof(a));  // returns once the child wrote or exec'd
  const ssize_t nb = ::read(second[0], b, sizeof(b));
  ::kill(launched->pid, SIGKILL);
  int status = 0;
  ::waitpid(launched->pid, &status, 0);
  ::close(first[0]);
  ::close(second[0]);
  EXPECT_EQ(std::string(a, na > 0 ? na : 0), "0");
  EXPECT_EQ(std::string(b, nb > 0 ? nb : 0), "0");
}

TEST(CgroupPlacementTest, AChildThatCannotPlaceItselfEndsBeforeRunningAnything) {
  const int unwritable = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  ASSERT_GE(unwritable, 0);
  LaunchSpec spec = Spec();
  spec.pty = true;  // the child's stderr is then the diagnostics pipe, read here
  spec.cgroup_procs = {unwritable};
  Result<LaunchedInit> launched = LaunchInit(spec, RepositoriesOfLaunch(spec.sandbox));
  ::close(unwritable);
  ASSERT_TRUE(launched) << launched.error().message;
  int status = 0;
  ASSERT_EQ(::waitpid(launched->pid, &status, 0), launched->pid);
  std::string said;
  char buffer[256];
  ssize_t n = 0;
  while ((n = ::read(launched->diagnostics.Get(), buffer, sizeof(buffer))) > 0) {
    said.append(buffer, static_cast<size_t>(n));
  }
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), ChildExitCode(ChildStage::kCgroup));
  EXPECT_EQ(said, "ptybox: placing the session in its cgroup failed (errno " +
                      std::to_string(EBADF) + ")\n");
}

TEST(CgroupPlacementTest, OwnCgroupPathReadsV2AndV1Lines) {
  using cgroups::OwnCgroupPath;
  using cgroups::ParseProcCgroup;
  const auto hybrid = ParseProcCgroup("8:pids:/a\n4:memory:/api/x\n3:cpu,cpuacct:/c\n0::/u\n");
  EXPECT_EQ(OwnCgroupPath(hybrid, ""), "/u");
  EXPECT_EQ(OwnCgroupPath(hybrid, "pids"), "/a");
  EXPECT_EQ(OwnCgroupPath(hybrid, "memory"), "/api/x");
  EXPECT_EQ(OwnCgroupPath(hybrid, "cpu"), "/c");
  const auto v2_only = ParseProcCgroup("0::/user.slice/ptybox.service\n");
  EXPECT_EQ(OwnCgroupPath(v2_only, ""), "/user.slice/ptybox.service");
  EXPECT_EQ(OwnCgroupPath(v2_only, "pids"), std::nullopt);
}

}  // namespace
}  // namespace ptybox::sandbox
