// DropAllCapabilities for real, in forked children: as root in the initial namespace (the CI
// case, where the drop is real), inside a fresh user namespace (what ptybox-init sees), and
// across an execve by uid 0 (nothing comes back).
#include "sandbox/init/capabilities.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/capability.h>
#include <sys/wait.h>
#include <unistd.h>

#include <functional>
#include <string>

#include "tests/sandbox/syscall_probes.h"

namespace ptybox::sandbox {
namespace {

// Runs `body` in a forked child; its returned string (empty = success) comes back through a
// pipe. If `exec_probes` is non-empty, the child then execs the sandbox-probe program with
// them and its stdout is appended.
std::string InChild(const std::function<std::string()>& body,
                    const std::vector<std::string>& exec_probes = {}) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return "pipe2 failed";
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    std::string failure = body();
    if (failure.empty() && !exec_probes.empty()) {
      dup2(fds[1], STDOUT_FILENO);
      std::vector<char*> argv{const_cast<char*>(PTYBOX_SANDBOX_PROBE)};
      for (const auto& probe : exec_probes) argv.push_back(const_cast<char*>(probe.c_str()));
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      failure = "execv " + std::string(argv[0]) + " failed";
    }
    ssize_t ignored = write(fds[1], failure.data(), failure.size());
    (void)ignored;
    _exit(0);
  }
  close(fds[1]);
  std::string out;
  char buffer[4096];
  ssize_t n;
  while ((n = read(fds[0], buffer, sizeof buffer)) > 0) out.append(buffer, static_cast<size_t>(n));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) out += " (child died)";
  return out;
}

std::string DropAndVerify() {
  auto before = HoldsNoCapabilities();
  if (!before) return "HoldsNoCapabilities before: " + before.error().Describe();
  if (*before) return "held no capabilities before the drop: the test proves nothing";
  if (auto dropped = DropAllCapabilities(); !dropped) return dropped.error().Describe();
  auto after = HoldsNoCapabilities();
  if (!after) return "HoldsNoCapabilities after: " + after.error().Describe();
  if (!*after) return "capabilities remain after DropAllCapabilities";
  // Something that needs a capability now fails.
  if (sethostname("ptybox", 6) == 0 || errno != EPERM) return "sethostname still works";
  return {};
}

constexpr const char* kNothingHeld =
    "CapInh=0000000000000000 CapPrm=0000000000000000 CapEff=0000000000000000 "
    "CapBnd=0000000000000000 CapAmb=0000000000000000 NoNewPrivs=1";

TEST(CapabilitiesTest, RootDropsEverythingAndExecGivesNothingBack) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (CI runs as root): the drop must be real";
  const std::string out = InChild(DropAndVerify, {"caps", "ids"});
  const auto lines = testing::ParseProbeLines(out);
  ASSERT_EQ(lines.size(), 2u) << out;
  // After execve as uid 0, every set is still empty and no_new_privs is kept.
  EXPECT_EQ(lines[0].info.substr(0, std::string(kNothingHeld).size()), kNothingHeld) << out;
  EXPECT_NE(lines[1].info.find("uid=0"), std::string::npos) << out;
}

TEST(CapabilitiesTest, DropsEverythingInANewUserNamespace) {
  // What ptybox-init sees inside bwrap's user namespace (works unprivileged too).
  const std::string out = InChild([] {
    if (unshare(CLONE_NEWUSER) != 0) return std::string("unshare(CLONE_NEWUSER) failed");
    return DropAndVerify();
  });
  EXPECT_EQ(out, "");
}

TEST(CapabilitiesTest, DropIsANoOpWhenNothingIsHeldButStillSetsNoNewPrivs) {
  const std::string out = InChild([] {
    if (unshare(CLONE_NEWUSER) != 0) return std::string("unshare(CLONE_NEWUSER) failed");
    if (auto first = DropAllCapabilities(); !first) return first.error().Describe();
    if (auto second = DropAllCapabilities(); !second)
      return "second drop: " + second.error().Describe();
    auto held = HoldsNoCapabilities();
    return held && *held ? std::string() : std::string("not clean after two drops");
  });
  EXPECT_EQ(out, "");
}

TEST(CapabilitiesTest, FailsClearlyWhenTheBoundingSetCannotBeDropped) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to hold bounding capabilities without SETPCAP";
  const std::string out = InChild([] {
    // Keep every capability but CAP_SETPCAP: the bounding set can no longer be emptied.
    cap_t caps = cap_get_proc();
    cap_value_t setpcap = CAP_SETPCAP;
    cap_set_flag(caps, CAP_EFFECTIVE, 1, &setpcap, CAP_CLEAR);
    cap_set_flag(caps, CAP_PERMITTED, 1, &setpcap, CAP_CLEAR);
    cap_set_proc(caps);
    cap_free(caps);
    auto dropped = DropAllCapabilities();
    if (dropped) return std::string("succeeded without CAP_SETPCAP");
    return dropped.error().message;
  });
  EXPECT_NE(out.find("PR_CAPBSET_DROP"), std::string::npos) << out;
  EXPECT_NE(out.find("CAP_SETPCAP"), std::string::npos) << out;
}

TEST(CapabilitiesTest, HoldsNoCapabilitiesSeesRoot) {
  if (geteuid() != 0) GTEST_SKIP() << "an unprivileged test process may legitimately hold none";
  auto held = HoldsNoCapabilities();
  ASSERT_TRUE(held.has_value()) << held.error().Describe();
  EXPECT_FALSE(*held);
}

}  // namespace
}  // namespace ptybox::sandbox
