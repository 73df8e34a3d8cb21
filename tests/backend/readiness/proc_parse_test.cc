// Unit tests of the pure /proc parsers and the syscall table behind the foreground inspector.
#include "backend/readiness/proc_parse.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/select.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>

#include <cstring>
#include <string>
#include <vector>

namespace ptybox::backend::proc {
namespace {

TEST(ParseSyscallTest, Running) {
  std::optional<SyscallLine> s = ParseSyscall("running\n");
  ASSERT_TRUE(s);
  EXPECT_EQ(s->state, SyscallState::kRunning);
}

TEST(ParseSyscallTest, BlockedOutsideASyscall) {
  std::optional<SyscallLine> s = ParseSyscall("-1 0x7ffd18f06708 0x7f3009daa2ad\n");
  ASSERT_TRUE(s);
  EXPECT_EQ(s->state, SyscallState::kOutsideSyscall);
  EXPECT_EQ(s->sp, 0x7ffd18f06708u);
  EXPECT_EQ(s->pc, 0x7f3009daa2adu);
}

TEST(ParseSyscallTest, InASyscallWithArguments) {
  std::optional<SyscallLine> s = ParseSyscall(
      "270 0x5 0x7ffc1000 0x0 0x0 0x0 0xffffffffffffffff 0x7ffd18f06708 0x7f3009daa2ad\n");
  ASSERT_TRUE(s);
  EXPECT_EQ(s->state, SyscallState::kInSyscall);
  EXPECT_EQ(s->nr, 270);
  EXPECT_EQ(s->args[0], 5u);
  EXPECT_EQ(s->args[1], 0x7ffc1000u);
  EXPECT_EQ(s->args[5], 0xffffffffffffffffu);
  EXPECT_EQ(s->sp, 0x7ffd18f06708u);
  EXPECT_EQ(s->pc, 0x7f3009daa2adu);
}

TEST(ParseSyscallTest, RejectsMalformedLines) {
  EXPECT_FALSE(ParseSyscall(""));
  EXPECT_FALSE(ParseSyscall("runnin"));
  EXPECT_FALSE(ParseSyscall("running 0x1"));
  EXPECT_FALSE(ParseSyscall("0 0x1 0x2"));                              // too few arguments
  EXPECT_FALSE(ParseSyscall("0 0x1 0x2 0x3 0x4 0x5 0x6 0x7 0x8 0x9"));  // too many
  EXPECT_FALSE(ParseSyscall("0 0x1 0x2 0x3 0x4 0x5 0xZ 0x7 0x8"));
  EXPECT_FALSE(ParseSyscall("-2 0x1 0x2"));
  EXPECT_FALSE(ParseSyscall("-1 0x1"));
}

TEST(ParseSyscallTest, ReadsThisProcessesOwnFileFormat) {
  // Our own syscall file, read by ourselves, shows the read(2) in progress.
  FILE* f = std::fopen("/proc/self/syscall", "re");
  ASSERT_NE(f, nullptr);
  char buf[256] = {};
  size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  std::fclose(f);
  std::optional<SyscallLine> s = ParseSyscall(std::string_view(buf, n));
  ASSERT_TRUE(s) << buf;
  EXPECT_EQ(s->state, SyscallState::kInSyscall) << buf;
}

TEST(ParseSchedstatTest, FirstFieldIsRunTime) {
  EXPECT_EQ(ParseSchedstatRunNs("214448471 10091936 392\n"), 214448471u);
  EXPECT_FALSE(ParseSchedstatRunNs(""));
  EXPECT_FALSE(ParseSchedstatRunNs("x 1 2"));
}

TEST(ParseSchedstatTest, AllThreeFieldsOrNothing) {
  auto f = ParseSchedstat("214448471 10091936 392\n");
  ASSERT_TRUE(f);
  EXPECT_EQ(f->run_ns, 214448471u);
  EXPECT_EQ(f->timeslices, 392u);
  EXPECT_FALSE(ParseSchedstat("214448471 10091936\n"));  // no count of runs: not this file
  EXPECT_FALSE(ParseSchedstat("214448471 10091936 x"));
  EXPECT_FALSE(ParseSchedstat(""));
}

TEST(ParseStatusTest, StateAndVoluntarySwitches) {
  const std::string status =
      "Name:\tcat\nUmask:\t0022\nState:\tS (sleeping)\nTgid:\t1\n"
      "voluntary_ctxt_switches:\t42\nnonvoluntary_ctxt_switches:\t7\n";
  std::optional<StatusFields> f = ParseStatus(status);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->state, 'S');
  EXPECT_EQ(f->voluntary_switches, 42u);
  // Only the non-voluntary counter: not a match for the voluntary one.
  EXPECT_FALSE(ParseStatus("State:\tR (running)\nnonvoluntary_ctxt_switches:\t7\n"));
  EXPECT_FALSE(ParseStatus("voluntary_ctxt_switches:\t7\n"));
  // A process named "State:" cannot fake its state.
  std::optional<StatusFields> g =
      ParseStatus("Name:\tState: R\nState:\tT (stopped)\nvoluntary_ctxt_switches:\t1\n");
  ASSERT_TRUE(g);
  EXPECT_EQ(g->state, 'T');
}

TEST(ParsePidListTest, ChildrenFiles) {
  std::vector<pid_t> pids;
  EXPECT_TRUE(ParsePidList("", pids));
  EXPECT_TRUE(ParsePidList("12 345 ", pids));
  EXPECT_EQ(pids, (std::vector<pid_t>{12, 345}));
  EXPECT_FALSE(ParsePidList("12 x", pids));
  EXPECT_FALSE(ParsePidList("0", pids));
  EXPECT_FALSE(ParsePidList("-3", pids));
}

TEST(ParseEpollFdinfoTest, TargetsWithKernelDevEncoding) {
  const std::string text =
      "pos:\t0\nflags:\t02000002\nmnt_id:\t15\nino:\t1057\n"
      "tfd:        0 events:       19 data:                0  pos:0 ino:3 sdev:1a\n"
      "tfd:      200 events:        4 data:       7fff00000001  pos:0 ino:4cc sdev:800003\n";
  std::optional<std::vector<EpollTarget>> targets = ParseEpollFdinfo(text);
  ASSERT_TRUE(targets);
  ASSERT_EQ(targets->size(), 2u);
  EXPECT_EQ((*targets)[0].tfd, 0);
  EXPECT_EQ((*targets)[0].events, 0x19u);
  EXPECT_EQ((*targets)[0].ino, 3u);
  EXPECT_EQ((*targets)[0].sdev, makedev(0, 0x1a));
  EXPECT_EQ((*targets)[1].tfd, 200);
  EXPECT_EQ((*targets)[1].events, 4u);
  EXPECT_EQ((*targets)[1].ino, 0x4ccu);
  EXPECT_EQ((*targets)[1].sdev, makedev(8, 3));  // kernel (8 << 20 | 3)
  EXPECT_TRUE(ParseEpollFdinfo("pos:\t0\nflags:\t02\n")->empty());
  EXPECT_FALSE(ParseEpollFdinfo("tfd: 1 events: zz data: 0 pos:0 ino:1 sdev:1\n"));
  EXPECT_FALSE(ParseEpollFdinfo("tfd: 1 events: 1 data: 0 pos:0\n"));
}

SyscallLine InSyscall(long nr, uint64_t sp = 0x7ffd18f06708) {
  SyscallLine line;
  line.state = SyscallState::kInSyscall;
  line.nr = nr;
  line.sp = sp;
  return line;
}

TEST(ClassifySyscallTest, NativeInputWaits) {
  EXPECT_EQ(ClassifySyscall(InSyscall(SYS_read)), WaitCall::kRead);
  EXPECT_EQ(ClassifySyscall(InSyscall(SYS_readv)), WaitCall::kRead);
  EXPECT_EQ(ClassifySyscall(InSyscall(SYS_pread64)), WaitCall::kRead);
  EXPECT_EQ(ClassifySyscall(InSyscall(SYS_preadv)), WaitCall::kRead);
  EXPECT_EQ(ClassifySyscall(InSyscall(SYS_pselect6)), WaitCall::kSelect);
  EXPECT_EQ(ClassifySyscall(InSyscall(SYS_ppoll)), WaitCall::kPoll);
  EXPECT_EQ(ClassifySyscall(InSyscall(SYS_epoll_pwait)), WaitCall::kEpoll);
  EXPECT_EQ(ClassifySyscall(InSyscall(441)), WaitCall::kEpoll);  // epoll_pwait2
#if defined(__x86_64__)
  EXPECT_EQ(ClassifySyscall(InSyscall(0)), WaitCall::kRead);
  EXPECT_EQ(ClassifySyscall(InSyscall(19)), WaitCall::kRead);
  EXPECT_EQ(ClassifySyscall(InSyscall(327)), WaitCall::kRead);
  EXPECT_EQ(ClassifySyscall(InSyscall(23)), WaitCall::kSelect);
  EXPECT_EQ(ClassifySyscall(InSyscall(270)), WaitCall::kSelect);
  EXPECT_EQ(ClassifySyscall(InSyscall(7)), WaitCall::kPoll);
  EXPECT_EQ(ClassifySyscall(InSyscall(271)), WaitCall::kPoll);
  EXPECT_EQ(ClassifySyscall(InSyscall(232)), WaitCall::kEpoll);
  EXPECT_EQ(ClassifySyscall(InSyscall(281)), WaitCall::kEpoll);
  EXPECT_EQ(ClassifySyscall(InSyscall(0x40000000)), WaitCall::kUndecidable);  // x32 read
#endif
}

TEST(ClassifySyscallTest, OtherCallsAndStatesAreNotInputWaits) {
  EXPECT_EQ(ClassifySyscall(InSyscall(SYS_wait4)), WaitCall::kOther);
  EXPECT_EQ(ClassifySyscall(InSyscall(SYS_nanosleep)), WaitCall::kOther);
  EXPECT_EQ(ClassifySyscall(InSyscall(SYS_futex)), WaitCall::kOther);
  SyscallLine running;
  EXPECT_EQ(ClassifySyscall(running), WaitCall::kOther);
}

TEST(ClassifySyscallTest, LostArgumentsAndForeignAbisAreUndecidable) {
  EXPECT_EQ(ClassifySyscall(InSyscall(SYS_restart_syscall)), WaitCall::kUndecidable);
  // A 32-bit compat task (stack below 4 GiB): its numbers mean other calls.
  EXPECT_EQ(ClassifySyscall(InSyscall(SYS_read, 0xffd0e000)), WaitCall::kUndecidable);
  EXPECT_EQ(ClassifySyscall(InSyscall(SYS_wait4, 0xffd0e000)), WaitCall::kUndecidable);
}

TEST(FdSetTest, BitsAcrossWords) {
  fd_set set;
  FD_ZERO(&set);
  FD_SET(0, &set);
  FD_SET(63, &set);
  FD_SET(200, &set);
  std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(&set), sizeof set);
  for (int fd = 0; fd < FD_SETSIZE; ++fd) {
    EXPECT_EQ(FdSetHas(bytes, fd), fd == 0 || fd == 63 || fd == 200) << fd;
  }
  // Only as many words as were read: fd 200 lies beyond the first 8 bytes.
  EXPECT_FALSE(FdSetHas(bytes.first(8), 200));
  EXPECT_TRUE(FdSetHas(bytes.first(8), 63));
  EXPECT_FALSE(FdSetHas(bytes, -1));
}

TEST(PollEntryTest, ReadsEntriesAndInputMasks) {
  struct pollfd fds[3] = {{5, POLLOUT, 0}, {0, POLLIN, 0}, {-1, POLLIN, 0}};
  std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(fds), sizeof fds);
  EXPECT_EQ(PollEntryAt(bytes, 0).fd, 5);
  EXPECT_FALSE(PollWantsInput(static_cast<uint16_t>(PollEntryAt(bytes, 0).events)));
  EXPECT_EQ(PollEntryAt(bytes, 1).fd, 0);
  EXPECT_TRUE(PollWantsInput(static_cast<uint16_t>(PollEntryAt(bytes, 1).events)));
  EXPECT_EQ(PollEntryAt(bytes, 2).fd, -1);
  EXPECT_EQ(PollEntryAt(bytes, 3).fd, -1);  // beyond the image: an ignored entry
  EXPECT_TRUE(PollWantsInput(POLLPRI));
  EXPECT_TRUE(PollWantsInput(POLLRDNORM));
  EXPECT_FALSE(PollWantsInput(POLLOUT | POLLERR | POLLHUP));
}

}  // namespace
}  // namespace ptybox::backend::proc
