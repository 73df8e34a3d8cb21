// sandbox/cgroup_signal.h with injected process operations: a pid is signalled only through
// its pidfd and only while it is still a member of the session's cgroup (v1 and v2 lines of
// /proc/<pid>/cgroup); a pid that cannot be opened, one reused by a process outside the
// session, and this process itself are skipped.
#include "sandbox/cgroup_signal.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <map>

#include "sandbox/cgroup_layout.h"

namespace ptybox::sandbox::cgroups {
namespace {

constexpr std::string_view kHybridMember =
    "9:name=systemd:/\n8:pids:/ptybox-10-ab12cd34/s1\n4:memory:/api/x/ptybox-10-ab12cd34/s1\n"
    "1:cpu:/ptybox-10-ab12cd34/s1\n0::/ptybox-10-ab12cd34/s1\n";
constexpr std::string_view kHybridStranger =
    "9:name=systemd:/\n8:pids:/\n4:memory:/api/x\n1:cpu:/\n0::/\n";

// A fake system: which pids open, what each one's /proc/<pid>/cgroup says, what was signalled.
struct FakeSystem {
  std::map<pid_t, std::string> cgroup_of;  // pids that open; their membership text
  std::map<int, pid_t> open_fds;
  std::vector<std::pair<pid_t, int>> sent;  // (pid behind the fd, signal)
  std::vector<std::string> calls;           // "open 5", "read 5", "send 5", "close 5"
  bool exits_after_read = false;            // the pinned process is reaped before the signal

  ProcessOps Ops() {
    return ProcessOps{
        .open =
            [this](pid_t pid) {
              calls.push_back("open " + std::to_string(pid));
              if (!cgroup_of.contains(pid)) return -1;
              const int fd = 100 + static_cast<int>(open_fds.size());
              open_fds[fd] = pid;
              return fd;
            },
        .read_cgroup = [this](pid_t pid) -> std::optional<std::string> {
          calls.push_back("read " + std::to_string(pid));
          auto it = cgroup_of.find(pid);
          if (it == cgroup_of.end()) return std::nullopt;
          return it->second;
        },
        .send =
            [this](int fd, int signal) {
              calls.push_back("send " + std::to_string(open_fds.at(fd)));
              if (exits_after_read) return false;
              sent.emplace_back(open_fds.at(fd), signal);
              return true;
            },
        .close = [this](int fd) { calls.push_back("close " + std::to_string(open_fds.at(fd))); },
        .pidfds_available = {},
        .kill = {},
    };
  }
};

TEST(CgroupSignalTest, IsMemberReadsTheRightHierarchyAndAcceptsDescendants) {
  const MembershipTarget pids{"pids", "/ptybox-10-ab12cd34/s1"};
  const MembershipTarget v2{"", "/ptybox-10-ab12cd34/s1"};
  const MembershipTarget memory{"memory", "/api/x/ptybox-10-ab12cd34/s1"};
  EXPECT_TRUE(IsMember(kHybridMember, pids));
  EXPECT_TRUE(IsMember(kHybridMember, v2));
  EXPECT_TRUE(IsMember(kHybridMember, memory));
  EXPECT_FALSE(IsMember(kHybridStranger, pids));
  EXPECT_FALSE(IsMember(kHybridStranger, v2));
  EXPECT_FALSE(IsMember(kHybridStranger, memory));
  // Beneath the target counts; a sibling whose name only starts the same does not.
  EXPECT_TRUE(IsMember("0::/ptybox-10-ab12cd34/s1/inner\n", v2));
  EXPECT_FALSE(IsMember("0::/ptybox-10-ab12cd34/s10\n", v2));
  // The v1 line of another controller does not answer for pids; a v1 line never for v2.
  EXPECT_FALSE(IsMember("4:memory:/ptybox-10-ab12cd34/s1\n", pids));
  EXPECT_FALSE(IsMember("8:pids:/ptybox-10-ab12cd34/s1\n", v2));
  // A combined v1 hierarchy ("cpu,cpuacct") answers for each of its controllers.
  EXPECT_TRUE(
      IsMember("3:cpu,cpuacct:/ptybox-10-ab12cd34/s1\n", {"cpuacct", "/ptybox-10-ab12cd34/s1"}));
  // Nothing is a member of an empty or relative target; garbage is no membership.
  EXPECT_FALSE(IsMember(kHybridMember, {"pids", ""}));
  EXPECT_FALSE(IsMember(kHybridMember, {"pids", "ptybox-10-ab12cd34/s1"}));
  EXPECT_FALSE(IsMember("garbage", v2));
}

TEST(CgroupSignalTest, ChildCgroupPathJoinsFromTheRootAndBelowIt) {
  EXPECT_EQ(ChildCgroupPath("/", "ptybox-1-ab/s1"), "/ptybox-1-ab/s1");
  EXPECT_EQ(ChildCgroupPath("/a/b", "ptybox-1-ab"), "/a/b/ptybox-1-ab");
  EXPECT_EQ(ChildCgroupPath("/a/b/", "/s2"), "/a/b/s2");
}

TEST(CgroupSignalTest, SignalsOnlyMembersThroughTheirPidfdAfterTheMembershipCheck) {
  FakeSystem sys;
  sys.cgroup_of[11] = std::string(kHybridMember);    // a member
  sys.cgroup_of[12] = std::string(kHybridStranger);  // pid 12 reused by a process outside
  // pid 13: gone (cannot be opened)
  const SignalTally tally =
      SignalMembers({11, 12, 13}, {"pids", "/ptybox-10-ab12cd34/s1"}, SIGKILL, sys.Ops());
  EXPECT_EQ(tally.signalled, std::vector<pid_t>{11});
  EXPECT_EQ(tally.not_members, std::vector<pid_t>{12});
  EXPECT_EQ(tally.unopened, std::vector<pid_t>{13});
  ASSERT_EQ(sys.sent.size(), 1u);
  EXPECT_EQ(sys.sent[0], std::make_pair(pid_t{11}, SIGKILL));
  // Order: the pidfd first, the membership read after it, the signal through the pidfd last;
  // a pid never opened is never read or signalled; every opened pidfd is closed.
  const std::vector<std::string> expected = {"open 11", "read 11", "send 11",  "close 11",
                                             "open 12", "read 12", "close 12", "open 13"};
  EXPECT_EQ(sys.calls, expected);
}

// No pidfds (a kernel before 5.3, or a container profile that refuses pidfd_open): members are
// still ended, with kill() after the same membership check, never left running.
TEST(CgroupSignalTest, WithoutPidfdsMembersAreKilledAfterTheMembershipCheck) {
  FakeSystem sys;
  sys.cgroup_of[11] = std::string(kHybridMember);
  sys.cgroup_of[12] = std::string(kHybridStranger);
  ProcessOps ops = sys.Ops();
  std::vector<std::pair<pid_t, int>> killed;
  ops.pidfds_available = [] { return false; };
  ops.kill = [&](pid_t pid, int signal) {
    killed.emplace_back(pid, signal);
    return true;
  };
  const SignalTally tally =
      SignalMembers({11, 12, 13}, {"pids", "/ptybox-10-ab12cd34/s1"}, SIGKILL, ops);
  EXPECT_EQ(tally.signalled, std::vector<pid_t>{11});
  EXPECT_EQ(tally.not_members, (std::vector<pid_t>{12, 13}));
  ASSERT_EQ(killed.size(), 1u);
  EXPECT_EQ(killed[0], std::make_pair(pid_t{11}, SIGKILL));
  const std::vector<std::string> expected = {"read 11", "read 12", "read 13"};
  EXPECT_EQ(sys.calls, expected) << "no pidfd is opened where there are none";
}

TEST(CgroupSignalTest, SkipsThisProcessAndNonPositivePids) {
  FakeSystem sys;
  sys.cgroup_of[::getpid()] = std::string(kHybridMember);
  const SignalTally tally =
      SignalMembers({::getpid(), 0, -1}, {"", "/ptybox-10-ab12cd34/s1"}, SIGKILL, sys.Ops());
  EXPECT_TRUE(tally.signalled.empty());
  EXPECT_TRUE(sys.calls.empty());
}

TEST(CgroupSignalTest, AV2MemberIsSignalledAndAV1OnlyLineIsNot) {
  // A pure v2 host (no cgroup.kill, Linux < 5.14): the "0::" line decides.
  FakeSystem sys;
  sys.cgroup_of[21] = "0::/user.slice/ptybox.service/ptybox-7-0a0b0c0d/s3\n";
  sys.cgroup_of[22] = "0::/user.slice/ptybox.service\n";
  const SignalTally tally = SignalMembers(
      {21, 22}, {"", "/user.slice/ptybox.service/ptybox-7-0a0b0c0d/s3"}, SIGKILL, sys.Ops());
  EXPECT_EQ(tally.signalled, std::vector<pid_t>{21});
  EXPECT_EQ(tally.not_members, std::vector<pid_t>{22});
}

TEST(CgroupSignalTest, AProcessReapedAfterTheReadIsNotCountedAsSignalled) {
  FakeSystem sys;
  sys.cgroup_of[31] = std::string(kHybridMember);
  sys.exits_after_read = true;
  const SignalTally tally =
      SignalMembers({31}, {"pids", "/ptybox-10-ab12cd34/s1"}, SIGKILL, sys.Ops());
  EXPECT_TRUE(tally.signalled.empty());
  EXPECT_EQ(tally.unopened, std::vector<pid_t>{31});
}

TEST(CgroupSignalTest, RealOpsSignalAChildThroughItsPidfdAndSkipAStranger) {
  // The real operations: a child of ours in our own cgroup is a member of it (signal 0 only);
  // against a target it is not in, it is skipped.
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::pause();
    ::_exit(0);
  }
  const std::optional<std::string> own = RealProcessOps().read_cgroup(::getpid());
  ASSERT_TRUE(own);
  const std::vector<Membership> lines = ParseProcCgroup(*own);
  ASSERT_FALSE(lines.empty());
  const std::string controller =
      lines.front().controllers.empty() ? "" : lines.front().controllers.front();
  const MembershipTarget target{controller, lines.front().path};
  const SignalTally ours = SignalMembers({child}, target, 0);
  const SignalTally elsewhere =
      SignalMembers({child}, {controller, "/no-such-cgroup-of-ptybox"}, 0);
  ::kill(child, SIGKILL);
  int status = 0;
  ::waitpid(child, &status, 0);
  EXPECT_EQ(ours.signalled, std::vector<pid_t>{child});
  EXPECT_EQ(elsewhere.not_members, std::vector<pid_t>{child});
  // Reaped: the pid no longer opens.
  EXPECT_EQ(SignalMembers({child}, target, 0).unopened, std::vector<pid_t>{child});
}

}  // namespace
}  // namespace ptybox::sandbox::cgroups
