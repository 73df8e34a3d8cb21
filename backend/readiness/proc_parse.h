// Pure parsers for the /proc files the foreground inspector reads (stat, status, schedstat,
// syscall, children, epoll fdinfo) and the syscall table that says which blocking calls read
// input. No I/O here: every function takes text or bytes and is unit-tested on its own.
#pragma once

#include <sys/types.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "common/proc_stat.h"

namespace ptybox::backend::proc {

// /proc/<pid>/stat has one parser for the daemon and ptybox-init alike (common/proc_stat.h).
using ::ptybox::proc::ParseStat;
using ::ptybox::proc::StatFields;

// /proc/<pid>/task/<tid>/syscall: "running", "-1 sp pc" (blocked outside any syscall), or
// "nr a1 a2 a3 a4 a5 a6 sp pc" (nr decimal, the rest 0x-prefixed hex).
enum class SyscallState { kRunning, kOutsideSyscall, kInSyscall };
struct SyscallLine {
  SyscallState state = SyscallState::kRunning;
  long nr = -1;
  std::array<uint64_t, 6> args{};
  uint64_t sp = 0;
  uint64_t pc = 0;
};
[[nodiscard]] std::optional<SyscallLine> ParseSyscall(std::string_view text);

// First field of /proc/<pid>/task/<tid>/schedstat: nanoseconds spent on a CPU.
[[nodiscard]] std::optional<uint64_t> ParseSchedstatRunNs(std::string_view text);

// All of /proc/<pid>/task/<tid>/schedstat: "run_ns wait_ns timeslices", the last the number of
// times the task was put on a CPU (it grows by one at least whenever a sleeping task wakes).
struct SchedstatFields {
  uint64_t run_ns = 0;
  uint64_t timeslices = 0;
};
[[nodiscard]] std::optional<SchedstatFields> ParseSchedstat(std::string_view text);

// The "State:" letter and "voluntary_ctxt_switches:" of /proc/<pid>/task/<tid>/status.
struct StatusFields {
  char state = '?';
  uint64_t voluntary_switches = 0;
};
[[nodiscard]] std::optional<StatusFields> ParseStatus(std::string_view text);

// Space-separated pids (/proc/<pid>/task/<tid>/children). Appends to `out`; false when a
// token is not a positive pid.
[[nodiscard]] bool ParsePidList(std::string_view text, std::vector<pid_t>& out);

// One "tfd: N events: HEX data: HEX pos:N ino:HEX sdev:HEX" line of an epoll fd's fdinfo.
// `sdev` is converted from the kernel's internal encoding to a userspace dev_t (makedev), so
// it compares with st_dev.
struct EpollTarget {
  int tfd = -1;
  uint32_t events = 0;
  uint64_t ino = 0;
  dev_t sdev = 0;
};
// Every target of an epoll fdinfo file; nullopt when a "tfd:" line is malformed.
[[nodiscard]] std::optional<std::vector<EpollTarget>> ParseEpollFdinfo(std::string_view text);

// What a task blocked in a syscall may be waiting for, by syscall number (native ABI only).
enum class WaitCall {
  kOther,       // a syscall that reads no input: not waiting on the terminal
  kRead,        // read/readv/pread64/preadv/preadv2: fd = arg 0
  kSelect,      // select/pselect6: nfds = arg 0, readfds = arg 1
  kPoll,        // poll/ppoll: fds = arg 0, nfds = arg 1
  kEpoll,       // epoll_wait/epoll_pwait/epoll_pwait2: epfd = arg 0
  kUndecidable  // restart_syscall (the original call's arguments are gone) or a foreign ABI
                // (x32, or a 32-bit compat task whose numbers mean other calls)
};
[[nodiscard]] WaitCall ClassifySyscall(const SyscallLine& line);

// Whether bit `fd` is set in an fd_set image read from a process (native long words).
[[nodiscard]] bool FdSetHas(std::span<const std::byte> set, int fd);

// One struct pollfd of an array image read from a process.
struct PollEntry {
  int fd = -1;
  short events = 0;
};
inline constexpr size_t kPollFdSize = 8;  // sizeof(struct pollfd) on every Linux ABI we build for
[[nodiscard]] PollEntry PollEntryAt(std::span<const std::byte> array, size_t index);

// poll/epoll event masks that mean "tell me when there is input".
[[nodiscard]] bool PollWantsInput(uint32_t events);

}  // namespace ptybox::backend::proc
