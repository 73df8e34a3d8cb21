// Foreground inspection from the host's /proc: finds the foreground group's members among the
// shell's descendants, then reads each task's state, syscall, fds and wait sets. Only open
// descriptors of /proc files are kept across calls (ProcFileCache), never what was read; every
// read that fails makes the answer unknown, never idle.
#include "backend/readiness/foreground_inspector.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <expected>
#include <string>
#include <string_view>

#include "backend/readiness/proc_parse.h"
#include "common/log.h"
#include "common/unique_fd.h"

namespace ptybox::backend {
namespace {

// Bounds on one inspection, so a group of thousands of tasks cannot stall the caller: past
// any of them the answer is unknown (the readiness engine then falls back to silence).
constexpr size_t kMaxProcesses = 1024;    // descendants visited per inspection
constexpr size_t kMaxTasks = 256;         // tasks of the foreground group inspected
constexpr size_t kMaxOutsideTasks = 256;  // tasks outside the group looked at (outside scan)
constexpr auto kTimeBudget = std::chrono::milliseconds(20);
constexpr uint32_t kMaxSelectFds = 1 << 16;   // nfds of a select we read (8 KiB of fd_set)
constexpr uint32_t kMaxPollFds = 4096;        // entries of a poll array we read (32 KiB)
constexpr int kMaxFdChecks = 1024;            // fd identities stat'ed per task
constexpr size_t kMaxFileBytes = 256 * 1024;  // largest /proc file read (an epoll fdinfo)
constexpr int kMaxEpollDepth = 4;             // epoll sets nested in epoll sets
const dev_t kDevTty = makedev(5, 0);          // /dev/tty: "my controlling terminal"

// A /proc path built on the stack, without printf: an inspection builds a dozen of them, and
// snprintf's formatting was about a tenth of a send's daemon instructions (callgrind).
struct ProcPath {
  char text[96];
  size_t size = 0;
  const char* c_str() const { return text; }
  ProcPath& Add(std::string_view part) {
    const size_t n = std::min(part.size(), sizeof text - 1 - size);
    std::memcpy(text + size, part.data(), n);
    size += n;
    text[size] = '\0';
    return *this;
  }
  ProcPath& Add(long long number) {
    char digits[24];
    size_t n = 0;
    const bool negative = number < 0;
    unsigned long long value = negative ? 0ULL - static_cast<unsigned long long>(number)
                                        : static_cast<unsigned long long>(number);
    do {
      digits[sizeof digits - 1 - n++] = static_cast<char>('0' + value % 10);
      value /= 10;
    } while (value != 0 && n < sizeof digits - 1);
    if (negative) digits[sizeof digits - 1 - n++] = '-';
    return Add(std::string_view(digits + sizeof digits - n, n));
  }
};

ProcPath TaskPath(pid_t pid, pid_t tid, const char* leaf) {
  ProcPath p;
  p.Add("/proc/").Add(pid).Add("/task/").Add(tid).Add("/").Add(leaf);
  return p;
}

ProcPath TaskFdPath(pid_t pid, pid_t tid, const char* dir, int fd) {
  ProcPath p;
  p.Add("/proc/").Add(pid).Add("/task/").Add(tid).Add("/").Add(dir).Add("/").Add(fd);
  return p;
}

ProcPath ProcessPath(pid_t pid, const char* leaf) {
  ProcPath p;
  p.Add("/proc/").Add(pid).Add("/").Add(leaf);
  return p;
}

bool IsDenied(int err) { return err == EACCES || err == EPERM; }

// Permission problems are a deployment issue, not churn: say so once, loudly.
void WarnDeniedOnce(const char* what, const char* path, int err) {
  static std::atomic<bool> warned{false};
  if (!IsDenied(err) || warned.exchange(true)) return;
  LogWarn(std::string("foreground inspection: ") + what + " " + path + ": " + std::strerror(err) +
          "; stdin waits are reported unknown. Run ptybox as root or as the uid that owns the "
          "session's processes (ptrace access to them is required).");
}

void DebugUnknown(const char* what, const char* path, int err) {
  WarnDeniedOnce(what, path, err);
  if (!LogEnabled(LogLevel::kDebug)) return;
  LogDebug(std::string("foreground inspection unknown: ") + what + " " + path + ": " +
           std::strerror(err));
}

Finding AnyOf(Finding accumulated, Finding next) {
  if (accumulated == Finding::kYes || next == Finding::kYes) return Finding::kYes;
  if (accumulated == Finding::kUnknown || next == Finding::kUnknown) return Finding::kUnknown;
  return Finding::kNo;
}

// A string of `size` bytes whose contents are left as they are (not zeroed).
std::string UninitializedBuffer(size_t size) {
  std::string buffer;
  buffer.resize_and_overwrite(size, [](char*, size_t n) { return n; });
  return buffer;
}

// Reads a whole /proc file from `fd` into `buf` (grown up to kMaxFileBytes, never zeroed),
// from its start: a pread at offset 0 makes a seq_file generate its text afresh, so a kept
// descriptor reads what opening the path now would. Fails with errno.
std::expected<std::string_view, int> ReadWhole(int fd, std::string& buf) {
  size_t used = 0;
  while (true) {
    if (used == buf.size()) {
      if (buf.size() >= kMaxFileBytes) return std::unexpected(EFBIG);
      buf.resize_and_overwrite(std::min(buf.size() * 2, kMaxFileBytes),
                               [](char*, size_t n) { return n; });
    }
    ssize_t n = ::pread(fd, buf.data() + used, buf.size() - used, static_cast<off_t>(used));
    if (n < 0) {
      if (errno == EINTR) continue;
      return std::unexpected(errno);
    }
    if (n == 0) break;
    used += static_cast<size_t>(n);
    // /proc files are seq_files: a read stops short only at the end of the content.
    if (used < buf.size()) break;
  }
  return std::string_view(buf.data(), used);
}

// The files a look may read through a kept descriptor: those whose read fails once their task
// has been reaped (proc_single_show: ESRCH) and whose every access check is made at the read
// (mode 0444). Not `syscall` (0400: a task that makes itself non-dumpable inside a user
// namespace the daemon owns stays readable through a descriptor opened before, where a fresh
// open is refused), nor `children` (a gone task's reads empty, which would look like a task
// without children), nor `mem` (it follows an address space, which a vfork child shares with
// its parent, not a task), nor anything under fd/ or fdinfo/ (outside review 13).
enum class ProcLeaf : uint8_t { kStat, kStatus, kSchedstat };

const char* LeafName(ProcLeaf leaf) {
  switch (leaf) {
    case ProcLeaf::kStat:
      return "stat";
    case ProcLeaf::kStatus:
      return "status";
    case ProcLeaf::kSchedstat:
      return "schedstat";
  }
  return "stat";
}

// The path of a leaf: the process's own (/proc/<pid>/<leaf>) when `tid` is 0, else the task's.
ProcPath LeafPath(pid_t pid, pid_t tid, ProcLeaf leaf) {
  return tid == 0 ? ProcessPath(pid, LeafName(leaf)) : TaskPath(pid, tid, LeafName(leaf));
}

std::atomic<size_t> proc_file_budget{1024};
std::atomic<size_t> proc_files_kept{0};

}  // namespace

// The /proc files the last look read, open. A descriptor names its task for good: once the task
// is reaped a read through it fails, and a pid the kernel hands to a new process is not this
// descriptor's, so a read answers what opening the path would, or fails, and a failed read is
// retried on the path (ReadProc). What a look did not read is closed when it ends (EndLook):
// the cache holds one look's files at most, kProcFilesPerSession of them, and every session's
// together stay within the budget the daemon sets from its descriptor limit. It saves a path
// walk, an open and a close per file (docs/benchmarks.md, "Where an echo hi send's time goes").
class ProcFileCache final {
 public:
  ProcFileCache() = default;
  ProcFileCache(const ProcFileCache&) = delete;
  ProcFileCache& operator=(const ProcFileCache&) = delete;
  ~ProcFileCache() { proc_files_kept -= entries_.size(); }

  // The kept descriptor of the file, marked as read by this look; -1 when there is none.
  int Find(pid_t pid, pid_t tid, ProcLeaf leaf) {
    for (Entry& e : entries_) {
      if (e.pid == pid && e.tid == tid && e.leaf == leaf) {
        e.used = true;
        return e.fd.Get();
      }
    }
    return -1;
  }

  // Keeps `fd` when there is room here and in the budget; otherwise it is closed.
  void Keep(pid_t pid, pid_t tid, ProcLeaf leaf, UniqueFd fd) {
    if (entries_.size() >= kProcFilesPerSession) return;
    size_t kept = proc_files_kept.load();
    do {
      if (kept >= proc_file_budget.load()) return;
    } while (!proc_files_kept.compare_exchange_weak(kept, kept + 1));
    entries_.push_back(Entry{pid, tid, leaf, std::move(fd), true});
  }

  void Forget(pid_t pid, pid_t tid, ProcLeaf leaf) {
    std::erase_if(entries_, [&](const Entry& e) {
      const bool match = e.pid == pid && e.tid == tid && e.leaf == leaf;
      if (match) --proc_files_kept;
      return match;
    });
  }

  // Closes what the look that ends now did not read.
  void EndLook() {
    std::erase_if(entries_, [](const Entry& e) {
      if (!e.used) --proc_files_kept;
      return !e.used;
    });
    for (Entry& e : entries_) e.used = false;
  }

 private:
  struct Entry {
    pid_t pid;
    pid_t tid;  // 0: the process's own file
    ProcLeaf leaf;
    UniqueFd fd;
    bool used;
  };
  std::vector<Entry> entries_;
};

void SetProcFileBudget(size_t descriptors) { proc_file_budget = descriptors; }

namespace {

// One inspection: the scratch buffer for /proc files and the per-process state it opened.
class Inspection final {
 public:
  Inspection(const TerminalIdentity& identity, ProcFileCache* files)
      : identity_(identity),
        files_(files),
        deadline_(std::chrono::steady_clock::now() + kTimeBudget) {}

  struct Member {
    pid_t pid = 0;
    pid_t session = 0;
    char state = '?';  // of the thread-group leader, as the walk saw it
    std::vector<pid_t> tids;
    pid_t ppid = 0;
  };

  [[nodiscard]] bool OverBudget() const { return std::chrono::steady_clock::now() > deadline_; }

  // Members of group `pgid` among the descendants of `root` and of the group leader, and the
  // other processes the walk met (`others`). False when the walk could not see everything (a
  // process vanished, a file could not be read).
  bool CollectMembers(pid_t root, pid_t pgid, std::vector<Member>& members,
                      std::vector<Member>& others);

  // Cheap filter for the outside scan: the task is blocked in a call that may wait for input
  // (read, select, poll, epoll). One read of its syscall file.
  bool MayWaitForInput(pid_t pid, pid_t tid);

  // Inspects one task of a member; fills `facts` when the verdict is not kUnknown.
  TaskVerdict InspectTask(const Member& member, pid_t tid, TaskFacts& facts);
  // Whether the task's syscall (a sleep in one) waits on the session's terminal, and how.
  Finding WaitsOnTerminal(const Member& member, pid_t tid, const proc::SyscallLine& call,
                          TtyWait& kind);

 private:
  // Reads a whole file; the view stays valid until the next call. Fails with errno.
  std::expected<std::string_view, int> ReadFile(const char* path);
  // Reads a whole /proc file of `pid` (its own when `tid` is 0, else the task's) through the
  // kept descriptor when there is one, else by its path, keeping the descriptor opened.
  std::expected<std::string_view, int> ReadProc(pid_t pid, pid_t tid, ProcLeaf leaf);
  // Task ids of `pid` (/proc/<pid>/task), appended to `tids`. Fails with errno.
  std::expected<void, int> ListTasks(pid_t pid, std::vector<pid_t>& tids);
  // Walks `start` and its descendants, appending them to `seen` and members to `members`.
  bool WalkTree(pid_t start, pid_t pgid, bool start_is_leader, std::vector<pid_t>& seen,
                std::vector<Member>& members, std::vector<Member>& others);
  // Reads `size` bytes at `address` of the member's memory into mem_buf_.
  std::expected<std::span<const std::byte>, int> ReadMemory(pid_t pid, uint64_t address,
                                                            size_t size);

  Finding FdIsTerminal(pid_t pid, pid_t tid, pid_t session, int fd, struct stat* st_out = nullptr);
  Finding SelectWatches(pid_t pid, pid_t tid, pid_t session, const proc::SyscallLine& call);
  // The timeout a select/poll/epoll call was given: nullopt for none (or unreadable).
  std::optional<int64_t> WaitTimeoutMs(pid_t pid, const proc::SyscallLine& call);
  Finding PollWatches(pid_t pid, pid_t tid, pid_t session, const proc::SyscallLine& call);
  Finding EpollWatches(pid_t pid, pid_t tid, pid_t session, int epfd, int depth);
  // Spends one unit of the per-task fd check budget; false when it is exhausted.
  bool SpendFdCheck() { return fd_checks_left_-- > 0; }

  const TerminalIdentity& identity_;
  ProcFileCache* const files_;  // null: nothing is kept
  const std::chrono::steady_clock::time_point deadline_;
  // Read buffer for /proc files. Sized without zero-filling: read(2) writes what is used, and a
  // look reads several files, so zeroing 16 KiB each time was a fifth of a send's daemon CPU
  // (docs/benchmarks.md, the profile).
  std::string buf_ = UninitializedBuffer(16 * 1024);
  std::vector<std::byte> mem_buf_;
  pid_t mem_pid_ = 0;
  UniqueFd mem_fd_;
  int fd_checks_left_ = kMaxFdChecks;
};

std::expected<std::string_view, int> Inspection::ReadFile(const char* path) {
  UniqueFd fd(::open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY));
  if (!fd) return std::unexpected(errno);
  return ReadWhole(fd.Get(), buf_);
}

std::expected<std::string_view, int> Inspection::ReadProc(pid_t pid, pid_t tid, ProcLeaf leaf) {
  if (files_ != nullptr) {
    if (const int kept = files_->Find(pid, tid, leaf); kept >= 0) {
      auto text = ReadWhole(kept, buf_);
      if (text) return text;
      // Its task is gone (or the read failed otherwise): the path decides, as without a cache.
      files_->Forget(pid, tid, leaf);
    }
  }
  const ProcPath path = LeafPath(pid, tid, leaf);
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY));
  if (!fd) return std::unexpected(errno);
  auto text = ReadWhole(fd.Get(), buf_);
  if (text && files_ != nullptr) files_->Keep(pid, tid, leaf, std::move(fd));
  return text;
}

std::expected<void, int> Inspection::ListTasks(pid_t pid, std::vector<pid_t>& tids) {
  ProcPath path = ProcessPath(pid, "task");
  UniqueFd dir(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!dir) return std::unexpected(errno);
  alignas(dirent64) char entries[4096];
  while (true) {
    ssize_t n = ::getdents64(dir.Get(), entries, sizeof entries);
    if (n < 0) return std::unexpected(errno);
    if (n == 0) return {};
    for (ssize_t at = 0; at < n;) {
      dirent64 entry;
      std::memcpy(&entry, entries + at, offsetof(dirent64, d_name));
      const char* name = entries + at + offsetof(dirent64, d_name);
      at += entry.d_reclen;
      if (name[0] < '1' || name[0] > '9') continue;  // ".", ".."
      pid_t tid = 0;
      for (const char* c = name; *c >= '0' && *c <= '9'; ++c) tid = tid * 10 + (*c - '0');
      tids.push_back(tid);
    }
  }
}

std::expected<std::span<const std::byte>, int> Inspection::ReadMemory(pid_t pid, uint64_t address,
                                                                      size_t size) {
  if (address == 0 || address > static_cast<uint64_t>(INT64_MAX) - size) {
    return std::unexpected(EFAULT);
  }
  if (mem_pid_ != pid || !mem_fd_) {
    ProcPath path = ProcessPath(pid, "mem");
    mem_fd_.Reset(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    mem_pid_ = pid;
    if (!mem_fd_) {
      int err = errno;
      DebugUnknown("open", path.c_str(), err);
      return std::unexpected(err);
    }
  }
  mem_buf_.resize(size);
  size_t done = 0;
  while (done < size) {
    ssize_t n = ::pread(mem_fd_.Get(), mem_buf_.data() + done, size - done,
                        static_cast<off_t>(address + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int err = n < 0 ? errno : EIO;
      DebugUnknown("pread", ProcessPath(pid, "mem").c_str(), err);
      return std::unexpected(err);
    }
    done += static_cast<size_t>(n);
  }
  return std::span<const std::byte>(mem_buf_.data(), size);
}

bool Inspection::CollectMembers(pid_t root, pid_t pgid, std::vector<Member>& members,
                                std::vector<Member>& others) {
  std::vector<pid_t> seen;
  bool complete = WalkTree(root, pgid, /*start_is_leader=*/false, seen, members, others);
  // The leader of the group may live outside the shell's tree (or be the shell itself).
  if (std::find(seen.begin(), seen.end(), pgid) == seen.end()) {
    complete = WalkTree(pgid, pgid, /*start_is_leader=*/true, seen, members, others) && complete;
  }
  // A process reparented during the walk may have been seen twice.
  std::sort(members.begin(), members.end(),
            [](const Member& a, const Member& b) { return a.pid < b.pid; });
  members.erase(std::unique(members.begin(), members.end(),
                            [](const Member& a, const Member& b) { return a.pid == b.pid; }),
                members.end());
  // One running task settles the answer (kNo): look first where the walk saw one.
  std::stable_partition(members.begin(), members.end(),
                        [](const Member& m) { return m.state == 'R'; });
  return complete;
}

bool Inspection::WalkTree(pid_t start, pid_t pgid, bool start_is_leader, std::vector<pid_t>& seen,
                          std::vector<Member>& members, std::vector<Member>& others) {
  const size_t first = seen.size();
  seen.push_back(start);
  bool complete = true;
  std::vector<pid_t> tids;
  for (size_t i = first; i < seen.size(); ++i) {
    if (i >= kMaxProcesses || OverBudget()) return false;
    const pid_t pid = seen[i];
    const bool is_leader_start = start_is_leader && i == first;
    auto text = ReadProc(pid, 0, ProcLeaf::kStat);
    if (!text) {
      // The leader may have exited while the rest of its group lives on: that is not a gap.
      if (!(is_leader_start && (text.error() == ENOENT || text.error() == ESRCH))) {
        DebugUnknown("read", LeafPath(pid, 0, ProcLeaf::kStat).c_str(), text.error());
        complete = false;
      }
      continue;
    }
    std::optional<proc::StatFields> stat = proc::ParseStat(*text);
    if (!stat) {
      DebugUnknown("parse", LeafPath(pid, 0, ProcLeaf::kStat).c_str(), EINVAL);
      complete = false;
      continue;
    }
    if (is_leader_start && stat->pgrp != pgid) continue;  // not a member: nothing to walk
    tids.clear();
    if (stat->num_threads == 1 && stat->state != 'Z' && stat->state != 'X') {
      tids.push_back(pid);
    } else if (auto listed = ListTasks(pid, tids); !listed) {
      DebugUnknown("getdents64", ProcessPath(pid, "task").c_str(), listed.error());
      complete = false;
      continue;
    }
    // A child hangs off the thread that forked it: read every task's children.
    for (pid_t tid : tids) {
      ProcPath children_path = TaskPath(pid, tid, "children");
      auto children = ReadFile(children_path.c_str());
      if (!children || !proc::ParsePidList(*children, seen)) {
        DebugUnknown("read", children_path.c_str(), children ? EINVAL : children.error());
        complete = false;
      }
    }
    if (stat->pgrp == pgid) {
      members.push_back(Member{pid, stat->session, stat->state, tids, stat->ppid});
    } else {
      others.push_back(Member{pid, stat->session, stat->state, tids, stat->ppid});
    }
  }
  return complete;
}

Finding Inspection::FdIsTerminal(pid_t pid, pid_t tid, pid_t session, int fd, struct stat* st_out) {
  if (fd < 0) return Finding::kNo;
  if (!SpendFdCheck()) return Finding::kUnknown;
  ProcPath path = TaskFdPath(pid, tid, "fd", fd);
  struct stat st;
  // stat() follows the magic link to the open file itself, across mount namespaces. A missing
  // fd means another thread closed it while this one waits on the file: we cannot tell.
  if (::stat(path.c_str(), &st) != 0) {
    DebugUnknown("stat", path.c_str(), errno);
    return Finding::kUnknown;
  }
  if (st_out != nullptr) *st_out = st;
  if (!S_ISCHR(st.st_mode)) return Finding::kNo;
  if (st.st_dev == identity_.slave_dev && st.st_rdev == identity_.slave_rdev) return Finding::kYes;
  if (st.st_rdev == kDevTty && session == identity_.session_leader) return Finding::kYes;
  return Finding::kNo;
}

Finding Inspection::SelectWatches(pid_t pid, pid_t tid, pid_t session,
                                  const proc::SyscallLine& call) {
  // The kernel takes nfds as an int; the register's upper half is not part of it.
  const int nfds = static_cast<int>(static_cast<uint32_t>(call.args[0]));
  const uint64_t readfds = call.args[1];
  if (nfds <= 0 || readfds == 0) return Finding::kNo;  // no read set: a sleep, not a wait for input
  if (static_cast<uint32_t>(nfds) > kMaxSelectFds) return Finding::kUnknown;
  constexpr size_t kWordBits = 8 * sizeof(unsigned long);
  const size_t bytes =
      (static_cast<size_t>(nfds) + kWordBits - 1) / kWordBits * sizeof(unsigned long);
  auto bits = ReadMemory(pid, readfds, bytes);  // FdIsTerminal leaves mem_buf_ alone
  if (!bits) return Finding::kUnknown;
  Finding result = Finding::kNo;
  for (int fd = 0; fd < nfds; ++fd) {
    if (!proc::FdSetHas(*bits, fd)) continue;
    result = AnyOf(result, FdIsTerminal(pid, tid, session, fd));
    if (result == Finding::kYes) break;
  }
  return result;
}

std::optional<int64_t> Inspection::WaitTimeoutMs(pid_t pid, const proc::SyscallLine& call) {
  // A struct timeval or timespec at `address` in the process: two native longs.
  auto read_pair = [&](uint64_t address, int64_t fraction_per_ms) -> std::optional<int64_t> {
    if (address == 0) return std::nullopt;  // NULL: no timeout
    auto bytes = ReadMemory(pid, address, 2 * sizeof(long));
    if (!bytes) return std::nullopt;
    long pair[2];
    std::memcpy(pair, bytes->data(), sizeof(pair));
    if (pair[0] < 0 || pair[1] < 0) return std::nullopt;
    return static_cast<int64_t>(pair[0]) * 1000 + static_cast<int64_t>(pair[1]) / fraction_per_ms;
  };
  auto millis = [](uint64_t arg) -> std::optional<int64_t> {
    const int timeout = static_cast<int>(static_cast<uint32_t>(arg));
    if (timeout < 0) return std::nullopt;  // negative: no timeout
    return timeout;
  };
  switch (call.nr) {
#ifdef SYS_select
    case SYS_select:
      return read_pair(call.args[4], 1000);  // struct timeval
#endif
    case SYS_pselect6:
      return read_pair(call.args[4], 1000000);  // struct timespec
#ifdef SYS_poll
    case SYS_poll:
      return millis(call.args[2]);
#endif
    case SYS_ppoll:
      return read_pair(call.args[2], 1000000);
#ifdef SYS_epoll_wait
    case SYS_epoll_wait:
      return millis(call.args[3]);
#endif
    case SYS_epoll_pwait:
      return millis(call.args[3]);
#ifdef SYS_epoll_pwait2
    case SYS_epoll_pwait2:
      return read_pair(call.args[3], 1000000);
#endif
    default:
      return std::nullopt;
  }
}

Finding Inspection::PollWatches(pid_t pid, pid_t tid, pid_t session,
                                const proc::SyscallLine& call) {
  const uint64_t fds = call.args[0];
  const uint32_t nfds = static_cast<uint32_t>(call.args[1]);
  if (nfds == 0) return Finding::kNo;
  if (nfds > kMaxPollFds) return Finding::kUnknown;
  auto entries = ReadMemory(pid, fds, nfds * proc::kPollFdSize);
  if (!entries) return Finding::kUnknown;
  Finding result = Finding::kNo;
  for (uint32_t i = 0; i < nfds && result != Finding::kYes; ++i) {
    proc::PollEntry entry = proc::PollEntryAt(*entries, i);
    if (entry.fd < 0 || !proc::PollWantsInput(static_cast<uint16_t>(entry.events))) continue;
    result = AnyOf(result, FdIsTerminal(pid, tid, session, entry.fd));
  }
  return result;
}

Finding Inspection::EpollWatches(pid_t pid, pid_t tid, pid_t session, int epfd, int depth) {
  ProcPath path = TaskFdPath(pid, tid, "fdinfo", epfd);
  auto text = ReadFile(path.c_str());
  if (!text) {
    DebugUnknown("read", path.c_str(), text.error());
    return Finding::kUnknown;
  }
  std::optional<std::vector<proc::EpollTarget>> targets = proc::ParseEpollFdinfo(*text);
  if (!targets) {
    DebugUnknown("parse", path.c_str(), EINVAL);
    return Finding::kUnknown;
  }
  Finding result = Finding::kNo;
  for (const proc::EpollTarget& target : *targets) {
    if (!proc::PollWantsInput(target.events)) continue;
    struct stat st {};
    Finding is_terminal = FdIsTerminal(pid, tid, session, target.tfd, &st);
    // tfd is the number the file had when it was added; if that fd now names another file,
    // the watched file is out of sight.
    if (is_terminal != Finding::kUnknown && (st.st_ino != target.ino || st.st_dev != target.sdev)) {
      is_terminal = Finding::kUnknown;
    }
    if (is_terminal == Finding::kNo && (st.st_mode & S_IFMT) == 0) {
      // An anonymous inode: an epoll set inside this one may watch the terminal.
      char link[64];
      ProcPath fd_path = TaskFdPath(pid, tid, "fd", target.tfd);
      ssize_t n = ::readlink(fd_path.c_str(), link, sizeof link - 1);
      if (n < 0) {
        is_terminal = Finding::kUnknown;
      } else if (std::string_view(link, static_cast<size_t>(n)) == "anon_inode:[eventpoll]") {
        is_terminal = depth + 1 < kMaxEpollDepth
                          ? EpollWatches(pid, tid, session, target.tfd, depth + 1)
                          : Finding::kUnknown;
      }
    }
    result = AnyOf(result, is_terminal);
    if (result == Finding::kYes) break;
  }
  return result;
}

bool Inspection::MayWaitForInput(pid_t pid, pid_t tid) {
  ProcPath path = TaskPath(pid, tid, "syscall");
  auto text = ReadFile(path.c_str());
  if (!text) return false;
  std::optional<proc::SyscallLine> call = proc::ParseSyscall(*text);
  if (!call || call->state != proc::SyscallState::kInSyscall) return false;
  switch (proc::ClassifySyscall(*call)) {
    case proc::WaitCall::kRead:
    case proc::WaitCall::kSelect:
    case proc::WaitCall::kPoll:
    case proc::WaitCall::kEpoll:
      return true;
    case proc::WaitCall::kOther:
    case proc::WaitCall::kUndecidable:
      return false;
  }
  return false;
}

TaskVerdict Inspection::InspectTask(const Member& member, pid_t tid, TaskFacts& facts) {
  const pid_t pid = member.pid;
  fd_checks_left_ = kMaxFdChecks;
  facts = TaskFacts{};
  facts.pid = pid;
  facts.tid = tid;

  // schedstat is read before and after the syscall evidence: if the task ran in between, the
  // evidence may be stale and the task counts as running. Its third field counts the task's
  // wake-ups, and its state is the one of its stat (the walk's, for the leader): `status`, a
  // costly file, is read only on a kernel without schedstat (its runs then read as 0).
  auto read_schedstat = [&]() -> std::optional<proc::SchedstatFields> {
    auto text = ReadProc(pid, tid, ProcLeaf::kSchedstat);
    return text ? proc::ParseSchedstat(*text) : std::nullopt;
  };
  const std::optional<proc::SchedstatFields> before = read_schedstat();
  char state = '?';
  if (before) {
    facts.run_ns = before->run_ns;
    facts.switches = before->timeslices;
    if (tid == pid) {
      state = member.state;
    } else {
      auto stat_text = ReadProc(pid, tid, ProcLeaf::kStat);
      if (!stat_text) {
        DebugUnknown("read", LeafPath(pid, tid, ProcLeaf::kStat).c_str(), stat_text.error());
        return TaskVerdict::kUnknown;
      }
      std::optional<proc::StatFields> stat = proc::ParseStat(*stat_text);
      if (!stat) {
        DebugUnknown("parse", LeafPath(pid, tid, ProcLeaf::kStat).c_str(), EINVAL);
        return TaskVerdict::kUnknown;
      }
      state = stat->state;
    }
  } else {
    auto status_text = ReadProc(pid, tid, ProcLeaf::kStatus);
    if (!status_text) {
      DebugUnknown("read", LeafPath(pid, tid, ProcLeaf::kStatus).c_str(), status_text.error());
      return TaskVerdict::kUnknown;
    }
    std::optional<proc::StatusFields> status = proc::ParseStatus(*status_text);
    if (!status) {
      DebugUnknown("parse", LeafPath(pid, tid, ProcLeaf::kStatus).c_str(), EINVAL);
      return TaskVerdict::kUnknown;
    }
    facts.switches = status->voluntary_switches;
    state = status->state;
  }
  TaskVerdict verdict = TaskVerdict::kAsleepElsewhere;
  switch (state) {
    case 'R':
      facts.running = true;
      return TaskVerdict::kRunning;
    case 'T':  // stopped by a signal
    case 't':  // stopped by a tracer
    case 'Z':  // exited, not yet reaped
    case 'X':
      return TaskVerdict::kAsleepElsewhere;
    default:
      break;
  }

  ProcPath syscall_path = TaskPath(pid, tid, "syscall");
  auto syscall_text = ReadFile(syscall_path.c_str());
  if (!syscall_text) {
    DebugUnknown("read", syscall_path.c_str(), syscall_text.error());
    return TaskVerdict::kUnknown;
  }
  std::optional<proc::SyscallLine> call = proc::ParseSyscall(*syscall_text);
  if (!call) {
    DebugUnknown("parse", syscall_path.c_str(), EINVAL);
    return TaskVerdict::kUnknown;
  }
  if (call->state != proc::SyscallState::kInSyscall) {
    facts.running = true;  // "running", or interrupted outside any syscall
    return TaskVerdict::kRunning;
  }

  TtyWait kind = TtyWait::kNone;
  const Finding waits = WaitsOnTerminal(member, tid, *call, kind);
  if (waits == Finding::kUnknown) return TaskVerdict::kUnknown;
  if (waits == Finding::kYes) {
    facts.tty_wait = kind;
    if (kind != TtyWait::kRead) facts.wait_timeout_ms = WaitTimeoutMs(pid, *call);
    verdict = TaskVerdict::kWaitsOnTerminal;
  }

  const std::optional<proc::SchedstatFields> after = read_schedstat();
  if (before && after && before->run_ns != after->run_ns) {
    facts.running = true;
    facts.tty_wait = TtyWait::kNone;
    facts.run_ns = after->run_ns;
    return TaskVerdict::kRunning;
  }
  return verdict;
}

Finding Inspection::WaitsOnTerminal(const Member& member, pid_t tid, const proc::SyscallLine& call,
                                    TtyWait& kind) {
  const pid_t pid = member.pid;
  Finding waits = Finding::kNo;
  kind = TtyWait::kNone;
  switch (proc::ClassifySyscall(call)) {
    case proc::WaitCall::kOther:
      break;
    case proc::WaitCall::kUndecidable:
      waits = Finding::kUnknown;
      break;
    case proc::WaitCall::kRead:
      kind = TtyWait::kRead;
      waits = FdIsTerminal(pid, tid, member.session,
                           static_cast<int>(static_cast<uint32_t>(call.args[0])));
      break;
    case proc::WaitCall::kSelect:
      kind = TtyWait::kSelect;
      waits = SelectWatches(pid, tid, member.session, call);
      break;
    case proc::WaitCall::kPoll:
      kind = TtyWait::kPoll;
      waits = PollWatches(pid, tid, member.session, call);
      break;
    case proc::WaitCall::kEpoll:
      kind = TtyWait::kEpoll;
      waits = EpollWatches(pid, tid, member.session,
                           static_cast<int>(static_cast<uint32_t>(call.args[0])), 0);
      break;
  }
  return waits;
}

}  // namespace

std::optional<size_t> UnreadTerminalInput(int slave_fd) {
  if (slave_fd < 0) return std::nullopt;
  // Only for its side effect: with nothing readable yet, n_tty_poll flushes the tty's pending
  // input work, so the count below cannot miss bytes a write to the master has queued.
  pollfd flush{slave_fd, POLLIN, 0};
  while (::poll(&flush, 1, 0) < 0 && errno == EINTR) {
  }
  int queued = 0;
  if (::ioctl(slave_fd, FIONREAD, &queued) != 0 || queued < 0) return std::nullopt;
  return static_cast<size_t>(queued);
}

Finding CombineTaskVerdicts(const std::vector<TaskVerdict>& verdicts, bool members_complete) {
  bool unknown = !members_complete || verdicts.empty();
  bool waits = false;
  for (TaskVerdict v : verdicts) {
    if (v == TaskVerdict::kRunning) return Finding::kNo;
    unknown = unknown || v == TaskVerdict::kUnknown;
    waits = waits || v == TaskVerdict::kWaitsOnTerminal;
  }
  if (unknown) return Finding::kUnknown;
  return waits ? Finding::kYes : Finding::kNo;
}

ForegroundInspector::ForegroundInspector(int master_fd, TerminalIdentity identity, pid_t shell_pid)
    : master_fd_(master_fd),
      identity_(identity),
      shell_pid_(shell_pid),
      files_(std::make_unique<ProcFileCache>()) {}

ForegroundInspector::~ForegroundInspector() = default;
ForegroundInspector::ForegroundInspector(ForegroundInspector&&) noexcept = default;
ForegroundInspector& ForegroundInspector::operator=(ForegroundInspector&&) noexcept = default;

std::optional<pid_t> ForegroundInspector::ForegroundPgid() const {
  pid_t pgid = 0;
  if (::ioctl(master_fd_, TIOCGPGRP, &pgid) != 0 || pgid <= 0) return std::nullopt;
  return pgid;
}

bool ForegroundInspector::StillAsVerified(const ForegroundFacts& verified) const {
  if (verified.waiting_for_input != Finding::kYes || verified.tasks.empty() ||
      !verified.foreground_pgid || ForegroundPgid() != verified.foreground_pgid) {
    return false;
  }
  char buffer[128];
  for (const TaskFacts& task : verified.tasks) {
    // A kernel without schedstat reads 0 for every task: nothing to compare, so no shortcut.
    if (task.run_ns == 0 || task.running) return false;
    // Through the descriptor the look kept when there is one: its task is still the one seen,
    // or the read fails, and then that task is gone (whatever holds its pid now is another).
    ssize_t n = -1;
    if (const int kept = files_ ? files_->Find(task.pid, task.tid, ProcLeaf::kSchedstat) : -1;
        kept >= 0) {
      n = ::pread(kept, buffer, sizeof buffer, 0);
      if (n <= 0) {
        files_->Forget(task.pid, task.tid, ProcLeaf::kSchedstat);
        return false;
      }
    } else {
      ProcPath path = TaskPath(task.pid, task.tid, "schedstat");
      UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY));
      if (!fd) return false;
      n = ::read(fd.Get(), buffer, sizeof buffer);
    }
    if (n <= 0) return false;
    std::optional<uint64_t> run_ns =
        proc::ParseSchedstatRunNs(std::string_view(buffer, static_cast<size_t>(n)));
    // The task has not been on a CPU since: it cannot have left the wait it was seen in.
    if (!run_ns || *run_ns != task.run_ns) return false;
  }
  // And no other process of the session handed the terminal to another group meanwhile.
  return ForegroundPgid() == verified.foreground_pgid;
}

namespace {

// The live processes of the walk that are neither members of the foreground group nor the
// shell's ancestors (bwrap, ptybox-init: the launch chain from the session's root); `chain`
// gets the number of those ancestors the walk met, plus one for the shell.
size_t CountOtherProcesses(const std::vector<Inspection::Member>& members,
                           const std::vector<Inspection::Member>& others, pid_t shell,
                           size_t& chain) {
  std::vector<pid_t> ancestors;
  pid_t at = shell;
  for (size_t hops = 0; hops < others.size() + members.size() + 1; ++hops) {
    pid_t parent = 0;
    for (const auto* list : {&members, &others}) {
      for (const Inspection::Member& m : *list) {
        if (m.pid == at) parent = m.ppid;
      }
    }
    if (parent <= 0) break;
    ancestors.push_back(parent);
    at = parent;
  }
  // The chain in the session: the shell and those ancestors the walk met (the topmost one's
  // parent, the daemon, is outside it).
  chain = 1;
  for (pid_t ancestor : ancestors) {
    for (const auto* list : {&members, &others}) {
      for (const Inspection::Member& m : *list) {
        if (m.pid == ancestor && m.state != 'Z' && m.state != 'X') ++chain;
      }
    }
  }
  size_t count = 0;
  for (const Inspection::Member& other : others) {
    if (other.state == 'Z' || other.state == 'X') continue;  // runs no code, holds no descriptor
    if (std::find(ancestors.begin(), ancestors.end(), other.pid) == ancestors.end()) ++count;
  }
  return count;
}

}  // namespace

ForegroundFacts ForegroundInspector::Inspect() const {
  ForegroundFacts facts;
  facts.foreground_pgid = ForegroundPgid();
  if (!facts.foreground_pgid) return facts;
  const pid_t pgid = *facts.foreground_pgid;

  struct termios tio {};
  if (::tcgetattr(master_fd_, &tio) == 0) facts.canonical = (tio.c_lflag & ICANON) != 0;

  Inspection inspection(identity_, files_.get());
  std::vector<Inspection::Member> members;
  std::vector<Inspection::Member> others;
  bool complete = inspection.CollectMembers(shell_pid_, pgid, members, others);

  std::vector<TaskVerdict> verdicts;
  bool running = false;
  bool truncated = false;
  for (const Inspection::Member& member : members) {
    for (pid_t tid : member.tids) {
      truncated = verdicts.size() >= kMaxTasks || inspection.OverBudget();
      if (truncated) break;
      TaskFacts task;
      TaskVerdict verdict = inspection.InspectTask(member, tid, task);
      verdicts.push_back(verdict);
      if (verdict != TaskVerdict::kUnknown) facts.tasks.push_back(task);
      // A running task already decides kNo; the rest of the group need not be read.
      running = verdict == TaskVerdict::kRunning;
      if (running) break;
    }
    if (running || truncated) break;
  }
  complete = complete && !truncated;
  // The whole group is asleep, and not on this terminal (a tmux client waiting on its server,
  // gpg waiting on its agent): another process of the session may be the one reading the
  // terminal (the tmux server, pinentry). Within a sandbox every process of the walk is the
  // session's; a reader found there is a wait for the user like a member's. Unknowns here stay
  // out of the answer: without a reader the group's kNo stands.
  const bool asleep_elsewhere = complete && !verdicts.empty() &&
                                std::all_of(verdicts.begin(), verdicts.end(), [](TaskVerdict v) {
                                  return v == TaskVerdict::kAsleepElsewhere;
                                });
  if (asleep_elsewhere) {
    for (const Inspection::Member& other : others) {
      if (other.state == 'Z' || other.state == 'X' || other.state == 'T' || other.state == 't') {
        continue;
      }
      for (pid_t tid : other.tids) {
        if (facts.outside_scanned >= kMaxOutsideTasks || inspection.OverBudget()) break;
        ++facts.outside_scanned;
        if (!inspection.MayWaitForInput(other.pid, tid)) continue;
        TaskFacts task;
        if (inspection.InspectTask(other, tid, task) != TaskVerdict::kWaitsOnTerminal) continue;
        task.outside_group = true;
        facts.tasks.push_back(task);
        verdicts.push_back(TaskVerdict::kWaitsOnTerminal);
      }
    }
  }
  // The group handed the terminal on while we looked: what we saw is about a former group.
  if (ForegroundPgid() != facts.foreground_pgid) complete = false;
  if (complete) {
    size_t chain = 0;
    facts.other_processes = CountOtherProcesses(members, others, identity_.session_leader, chain);
    facts.chain_processes = chain;
  }
  facts.waiting_for_input = CombineTaskVerdicts(verdicts, complete);
  if (files_) files_->EndLook();
  return facts;
}

}  // namespace ptybox::backend
