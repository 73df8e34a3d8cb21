// Pure parsers for /proc text and the per-architecture table of input-waiting syscalls.
#include "backend/readiness/proc_parse.h"

#include <poll.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>

#include <charconv>
#include <cstring>

#include "common/text_scan.h"

namespace ptybox::backend::proc {
namespace {

// Syscall numbers of the calls that can block waiting for input, for the native ABI. Checked
// against the libc headers where those define them; -1 where the architecture lacks the call.
struct SyscallTable {
  long read, readv, pread64, preadv, preadv2;
  long select, pselect6, poll, ppoll;
  long epoll_wait, epoll_pwait, epoll_pwait2;
  long restart_syscall;
};

#if defined(__x86_64__)
constexpr SyscallTable kSyscalls{.read = 0,
                                 .readv = 19,
                                 .pread64 = 17,
                                 .preadv = 295,
                                 .preadv2 = 327,
                                 .select = 23,
                                 .pselect6 = 270,
                                 .poll = 7,
                                 .ppoll = 271,
                                 .epoll_wait = 232,
                                 .epoll_pwait = 281,
                                 .epoll_pwait2 = 441,
                                 .restart_syscall = 219};
static_assert(kSyscalls.select == SYS_select && kSyscalls.poll == SYS_poll &&
              kSyscalls.epoll_wait == SYS_epoll_wait);
// x32 tasks set this bit in every syscall number; their numbering differs from x86_64's.
constexpr long kForeignAbiBit = 0x40000000;
#elif defined(__aarch64__)
constexpr SyscallTable kSyscalls{.read = 63,
                                 .readv = 65,
                                 .pread64 = 67,
                                 .preadv = 69,
                                 .preadv2 = 286,
                                 .select = -1,
                                 .pselect6 = 72,
                                 .poll = -1,
                                 .ppoll = 73,
                                 .epoll_wait = -1,
                                 .epoll_pwait = 22,
                                 .epoll_pwait2 = 441,
                                 .restart_syscall = 128};
constexpr long kForeignAbiBit = 0;
#else
#error "foreground inspection: add this architecture's syscall numbers to proc_parse.cc"
#endif
static_assert(kSyscalls.read == SYS_read && kSyscalls.readv == SYS_readv &&
              kSyscalls.pread64 == SYS_pread64 && kSyscalls.preadv == SYS_preadv &&
              kSyscalls.pselect6 == SYS_pselect6 && kSyscalls.ppoll == SYS_ppoll &&
              kSyscalls.epoll_pwait == SYS_epoll_pwait &&
              kSyscalls.restart_syscall == SYS_restart_syscall);
#ifdef SYS_preadv2
static_assert(kSyscalls.preadv2 == SYS_preadv2);
#endif
#ifdef SYS_epoll_pwait2
static_assert(kSyscalls.epoll_pwait2 == SYS_epoll_pwait2);
#endif

// Native 64-bit tasks keep their stack above 4 GiB; a 32-bit compat task (i386 on x86_64,
// AArch32 on aarch64) cannot, and its syscall numbers mean other calls.
constexpr uint64_t kCompatStackLimit = uint64_t{1} << 32;

using text::IsSpace;
using text::NextToken;
using text::ParseNumber;
using text::SkipSpaces;

bool ParseHex(std::string_view token, uint64_t& out) {
  if (token.starts_with("0x")) token.remove_prefix(2);
  return ParseNumber(token, out, 16);
}

// The value after "\n<key>" (or at the very start) up to the end of its line.
std::optional<std::string_view> FieldValue(std::string_view text, std::string_view key) {
  size_t at = 0;
  while (true) {
    at = text.find(key, at);
    if (at == std::string_view::npos) return std::nullopt;
    if (at == 0 || text[at - 1] == '\n') break;
    at += key.size();
  }
  std::string_view rest = text.substr(at + key.size());
  return SkipSpaces(rest.substr(0, rest.find('\n')));
}

}  // namespace

std::optional<SyscallLine> ParseSyscall(std::string_view text) {
  SyscallLine line;
  std::string_view rest = text;
  std::string_view first = NextToken(rest);
  if (first == "running") {
    if (!SkipSpaces(rest).empty()) return std::nullopt;
    line.state = SyscallState::kRunning;
    return line;
  }
  if (!ParseNumber(first, line.nr)) return std::nullopt;
  if (line.nr == -1) {
    line.state = SyscallState::kOutsideSyscall;
    if (!ParseHex(NextToken(rest), line.sp) || !ParseHex(NextToken(rest), line.pc)) {
      return std::nullopt;
    }
  } else {
    if (line.nr < 0) return std::nullopt;
    line.state = SyscallState::kInSyscall;
    for (uint64_t& arg : line.args) {
      if (!ParseHex(NextToken(rest), arg)) return std::nullopt;
    }
    if (!ParseHex(NextToken(rest), line.sp) || !ParseHex(NextToken(rest), line.pc)) {
      return std::nullopt;
    }
  }
  if (!SkipSpaces(rest).empty()) return std::nullopt;
  return line;
}

std::optional<uint64_t> ParseSchedstatRunNs(std::string_view text) {
  uint64_t run_ns = 0;
  if (!ParseNumber(NextToken(text), run_ns)) return std::nullopt;
  return run_ns;
}

std::optional<SchedstatFields> ParseSchedstat(std::string_view text) {
  SchedstatFields f;
  uint64_t wait_ns = 0;
  if (!ParseNumber(NextToken(text), f.run_ns) || !ParseNumber(NextToken(text), wait_ns) ||
      !ParseNumber(NextToken(text), f.timeslices)) {
    return std::nullopt;
  }
  return f;
}

std::optional<StatusFields> ParseStatus(std::string_view text) {
  StatusFields f;
  std::optional<std::string_view> state = FieldValue(text, "State:");
  std::optional<std::string_view> switches = FieldValue(text, "voluntary_ctxt_switches:");
  if (!state || state->empty() || !switches) return std::nullopt;
  f.state = state->front();
  if (!ParseNumber(*switches, f.voluntary_switches)) return std::nullopt;
  return f;
}

bool ParsePidList(std::string_view text, std::vector<pid_t>& out) {
  while (true) {
    std::string_view token = NextToken(text);
    if (token.empty()) return true;
    pid_t pid = 0;
    if (!ParseNumber(token, pid) || pid <= 0) return false;
    out.push_back(pid);
  }
}

std::optional<std::vector<EpollTarget>> ParseEpollFdinfo(std::string_view text) {
  std::vector<EpollTarget> targets;
  while (!text.empty()) {
    size_t eol = text.find('\n');
    std::string_view line = text.substr(0, eol);
    text.remove_prefix(eol == std::string_view::npos ? text.size() : eol + 1);
    if (!line.starts_with("tfd:")) continue;
    // "tfd: %8d events: %8x data: %16llx  pos:%lli ino:%lx sdev:%x"
    EpollTarget t;
    std::string_view rest = line.substr(4);
    uint64_t events = 0;
    uint64_t data = 0;
    uint64_t sdev = 0;
    if (!ParseNumber(NextToken(rest), t.tfd) || NextToken(rest) != "events:" ||
        !ParseHex(NextToken(rest), events) || NextToken(rest) != "data:" ||
        !ParseHex(NextToken(rest), data)) {
      return std::nullopt;
    }
    bool have_ino = false;
    bool have_sdev = false;
    for (std::string_view token = NextToken(rest); !token.empty(); token = NextToken(rest)) {
      if (token.starts_with("ino:")) have_ino = ParseHex(token.substr(4), t.ino);
      if (token.starts_with("sdev:")) have_sdev = ParseHex(token.substr(5), sdev);
    }
    if (!have_ino || !have_sdev || t.tfd < 0 || events > UINT32_MAX) return std::nullopt;
    t.events = static_cast<uint32_t>(events);
    // The kernel prints its internal dev_t: major in the top 12 bits, minor in the low 20.
    t.sdev = makedev(static_cast<unsigned>(sdev >> 20), static_cast<unsigned>(sdev & 0xfffff));
    targets.push_back(t);
  }
  return targets;
}

WaitCall ClassifySyscall(const SyscallLine& line) {
  if (line.state != SyscallState::kInSyscall) return WaitCall::kOther;
  const long nr = line.nr;
  if ((kForeignAbiBit != 0 && (nr & kForeignAbiBit) != 0) || line.sp < kCompatStackLimit) {
    return WaitCall::kUndecidable;
  }
  const SyscallTable& t = kSyscalls;
  if (nr == t.restart_syscall) return WaitCall::kUndecidable;
  if (nr == t.read || nr == t.readv || nr == t.pread64 || nr == t.preadv || nr == t.preadv2) {
    return WaitCall::kRead;
  }
  if ((t.select >= 0 && nr == t.select) || nr == t.pselect6) return WaitCall::kSelect;
  if ((t.poll >= 0 && nr == t.poll) || nr == t.ppoll) return WaitCall::kPoll;
  if ((t.epoll_wait >= 0 && nr == t.epoll_wait) || nr == t.epoll_pwait || nr == t.epoll_pwait2) {
    return WaitCall::kEpoll;
  }
  return WaitCall::kOther;
}

bool FdSetHas(std::span<const std::byte> set, int fd) {
  if (fd < 0) return false;
  constexpr size_t kBits = 8 * sizeof(unsigned long);
  const size_t word_index = static_cast<size_t>(fd) / kBits;
  if ((word_index + 1) * sizeof(unsigned long) > set.size()) return false;
  unsigned long word = 0;
  std::memcpy(&word, set.data() + word_index * sizeof(unsigned long), sizeof word);
  return (word >> (static_cast<size_t>(fd) % kBits)) & 1UL;
}

PollEntry PollEntryAt(std::span<const std::byte> array, size_t index) {
  static_assert(sizeof(struct pollfd) == kPollFdSize);
  PollEntry entry;
  if ((index + 1) * kPollFdSize > array.size()) return entry;
  struct pollfd raw;
  std::memcpy(&raw, array.data() + index * kPollFdSize, sizeof raw);
  entry.fd = raw.fd;
  entry.events = raw.events;
  return entry;
}

bool PollWantsInput(uint32_t events) {
  // POLLIN/POLLPRI/POLLRDNORM share their values with EPOLLIN/EPOLLPRI/EPOLLRDNORM.
  return (events & (POLLIN | POLLPRI | POLLRDNORM)) != 0;
}

}  // namespace ptybox::backend::proc
