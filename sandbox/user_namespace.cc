// User namespaces for idmapped mounts, and the session uid range check. CreateUserNamespace
// clones a helper into a new user namespace (sharing our memory: no fork of the daemon), writes
// its maps from here, keeps /proc/PID/ns/user open and reaps the helper before returning.
#include "sandbox/user_namespace.h"

#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <sstream>
#include <vector>

#include "common/propagate.h"

namespace ptybox::sandbox {
namespace {

Result<void> WriteProcFile(pid_t pid, const char* name, const std::string& text) {
  const std::string path = "/proc/" + std::to_string(pid) + "/" + name;
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CLOEXEC));
  if (!fd) return std::unexpected(Error::FromErrno(ErrorKind::kSandboxUnavailable, "open", path));
  if (::write(fd.Get(), text.data(), text.size()) != static_cast<ssize_t>(text.size())) {
    return std::unexpected(Error::FromErrno(ErrorKind::kSandboxUnavailable, "write", path));
  }
  return {};
}

struct IdSpan {
  uint64_t first;
  uint64_t count;
};

// Ids named by a colon-separated file: field `id_field` of passwd/group lines (count 1), or
// "name:first:count" of subuid/subgid lines.
std::vector<IdSpan> Spans(std::string_view text, bool ranges) {
  std::vector<IdSpan> spans;
  std::istringstream in{std::string(text)};
  for (std::string line; std::getline(in, line);) {
    std::vector<std::string> fields;
    std::istringstream fs(line);
    for (std::string f; std::getline(fs, f, ':');) fields.push_back(f);
    try {
      if (ranges && fields.size() >= 3) {
        spans.push_back({std::stoull(fields[1]), std::stoull(fields[2])});
      } else if (!ranges && fields.size() >= 3) {
        spans.push_back({std::stoull(fields[2]), 1});
      }
    } catch (const std::exception&) {
      // A malformed line names no id.
    }
  }
  return spans;
}

std::string ReadSmallFile(const char* path) {
  std::ifstream in(path);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

}  // namespace

bool RunsAsHostRoot() {
  if (::geteuid() != 0) return false;
  // The initial user namespace maps every id to itself: "0 0 4294967295".
  std::istringstream in(ReadSmallFile("/proc/self/uid_map"));
  std::string inside, outside, count, extra;
  in >> inside >> outside >> count;
  return inside == "0" && outside == "0" && count == "4294967295" && !(in >> extra);
}

std::string IdMapLine(uint32_t inside, uint32_t outside, uint32_t count) {
  return std::to_string(inside) + " " + std::to_string(outside) + " " + std::to_string(count) +
         "\n";
}

RootIdMap RootIdMapFor(uid_t owner_uid, gid_t owner_gid, policy::SessionUid session_uid) {
  return {IdMapLine(owner_uid, session_uid.value(), 1),
          IdMapLine(owner_gid, session_uid.value(), 1)};
}

namespace {

// The two ends of the pipe that keeps the helper alive while its maps are written.
struct HoldPipe {
  int read_end;
  int write_end;
};

// The helper's whole life: it drops its copy of the write end, waits until the parent lets go
// (end of file), then returns, and clone's code exits the task with a raw exit system call. It
// shares the daemon's memory (CLONE_VM), so it only makes system calls, on its own small stack.
// It also shares the calling thread's thread-local state (no TLS of its own), so nothing of it is
// instrumented and its calls are raw system calls: under AddressSanitizer its frame took its
// local from that thread's fake stack while the thread itself allocated there too (a
// stack-buffer-overflow report in WriteProcFile, once in a CI run), and libc's wrappers and the
// sanitizers' interceptors touch thread-local state.
__attribute__((no_sanitize_address, no_sanitize_undefined)) int HoldNamespace(void* arg) {
  const HoldPipe* hold = static_cast<const HoldPipe*>(arg);
  ::syscall(SYS_close, hold->write_end);
  char ignored = 0;
  (void)::syscall(SYS_read, hold->read_end, &ignored, 1);
  return 0;
}

constexpr size_t kHelperStack = 64 * 1024;

}  // namespace

Result<UniqueFd> CreateUserNamespace(const RootIdMap& maps) {
  int hold[2];
  if (::pipe2(hold, O_CLOEXEC) != 0) {
    return std::unexpected(Error::FromErrno(ErrorKind::kSandboxUnavailable, "pipe2"));
  }
  UniqueFd hold_read(hold[0]), hold_write(hold[1]);
  void* stack = ::mmap(nullptr, kHelperStack, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
  if (stack == MAP_FAILED) {
    return std::unexpected(Error::FromErrno(ErrorKind::kSandboxUnavailable, "mmap"));
  }
  // Born in the new user namespace: its maps can be written as soon as clone returns, without
  // waiting for the helper to be scheduled. CLONE_VM: no copy of the daemon's page tables (a
  // fork of a daemon holding hundreds of sessions costs milliseconds).
  HoldPipe ends{hold_read.Get(), hold_write.Get()};
  // Born with every signal blocked, so the helper, which shares our memory, never runs one of
  // the daemon's handlers on its stack (a SIGINT to the daemon's process group reaches it too).
  sigset_t all;
  sigset_t saved;
  ::sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &saved);
  const pid_t pid = ::clone(HoldNamespace, static_cast<char*>(stack) + kHelperStack,
                            CLONE_VM | CLONE_NEWUSER | SIGCHLD, &ends);
  const int clone_errno = errno;
  ::pthread_sigmask(SIG_SETMASK, &saved, nullptr);
  if (pid < 0) {
    Error error =
        Error::FromErrno(ErrorKind::kSandboxUnavailable, "clone(CLONE_NEWUSER)", {}, clone_errno);
    error.message +=
        " (cannot create a user namespace for the session's idmapped mounts): check "
        "user.max_user_namespaces and any seccomp profile around the daemon (ptybox doctor)";
    ::munmap(stack, kHelperStack);
    return std::unexpected(std::move(error));
  }
  Result<void> written = WriteProcFile(pid, "uid_map", maps.uid_map);
  if (written) written = WriteProcFile(pid, "gid_map", maps.gid_map);
  UniqueFd ns;
  if (written) {
    const std::string path = "/proc/" + std::to_string(pid) + "/ns/user";
    ns.Reset(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!ns)
      written = std::unexpected(Error::FromErrno(ErrorKind::kSandboxUnavailable, "open", path));
  }
  hold_write.Reset();
  int wait_status = 0;
  pid_t waited;
  do {
    waited = ::waitpid(pid, &wait_status, 0);
  } while (waited < 0 && errno == EINTR);
  // Its stack is ours again only once it is gone; otherwise it is left mapped (64 KiB).
  if (waited == pid) ::munmap(stack, kHelperStack);
  if (!written) return Propagate(written);
  return ns;
}

std::optional<std::string> SessionUidRangeConflict(const policy::SessionUidRange& range,
                                                   std::string_view passwd, std::string_view group,
                                                   std::string_view subuid,
                                                   std::string_view subgid) {
  const uint64_t first = range.first.value();
  const uint64_t end = range.End();  // exclusive
  auto inside = [&](uint64_t id) { return id >= first && id < end; };
  const std::string where =
      "the session uid range " + std::to_string(first) + "-" + std::to_string(end - 1);
  if (range.count == 0) return where + " is empty (count 0)";
  for (uint64_t reserved : {uint64_t{0}, uint64_t{65534}, uint64_t{4294967295}}) {
    if (inside(reserved)) {
      return where + " contains " + std::to_string(reserved) +
             " (root, nobody or the invalid id -1)";
    }
  }
  if (end > 4294967295ULL) return where + " goes past the largest id 4294967294";
  struct Source {
    std::string_view text;
    bool ranges;
    const char* file;
  };
  for (const Source& s :
       {Source{passwd, false, "/etc/passwd"}, Source{group, false, "/etc/group"},
        Source{subuid, true, "/etc/subuid"}, Source{subgid, true, "/etc/subgid"}}) {
    for (const IdSpan& span : Spans(s.text, s.ranges)) {
      if (span.count == 0) continue;
      if (span.first < end && first < span.first + span.count) {
        return where + " overlaps ids " + std::to_string(span.first) +
               (span.count > 1 ? "-" + std::to_string(span.first + span.count - 1) : "") + " of " +
               s.file + ": choose another `sessionIds` range in the operator policy";
      }
    }
  }
  return std::nullopt;
}

std::optional<std::string> SessionUidRangeConflictOnHost(const policy::SessionUidRange& range) {
  return SessionUidRangeConflict(range, ReadSmallFile("/etc/passwd"), ReadSmallFile("/etc/group"),
                                 ReadSmallFile("/etc/subuid"), ReadSmallFile("/etc/subgid"));
}

}  // namespace ptybox::sandbox
