// The daemon refuses connections from sessions (its own and any daemon's) and from other user
// namespaces.
#include "runtime/peer_check.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <string_view>

#include "common/log.h"
#include "common/unique_fd.h"
#include "runtime/params.h"

#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77  // Linux 6.5
#endif

namespace ptybox::runtime {
namespace {

struct ProcStat {
  pid_t ppid = 0;
  std::string comm;
};

// PIDFD_GET_USER_NAMESPACE (Linux 6.11), missing from older headers.
constexpr unsigned long kPidfdGetUserNamespace = _IO(0xFF, 9);

// How a reason starts when the chain could not be read (not known to be a session's).
constexpr std::string_view kUnreadableChain = "its parent chain cannot be read";
// How it starts when /proc refused the daemon (another user's process under a /proc mounted
// with hidepid): not an exit, and connecting again will not help.
constexpr std::string_view kNoPermission = "the daemon may not read";

// "pid (comm) S ppid ..." of /proc/<pid>/stat; nullopt when it cannot be read, with errno of
// the failure (ENOENT: the process is gone; EACCES or EPERM: /proc refuses this uid).
std::optional<ProcStat> ReadStat(pid_t pid) {
  const std::string path = "/proc/" + std::to_string(pid) + "/stat";
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return std::nullopt;
  char buf[512];
  const ssize_t n = ::read(fd.Get(), buf, sizeof buf - 1);
  if (n <= 0) {
    if (n == 0) errno = ESRCH;
    return std::nullopt;
  }
  const std::string_view stat(buf, static_cast<size_t>(n));
  const size_t open = stat.find('(');
  const size_t close = stat.rfind(')');
  if (open == std::string_view::npos || close == std::string_view::npos ||
      close + 4 >= stat.size()) {
    return std::nullopt;
  }
  ProcStat out;
  out.comm = std::string(stat.substr(open + 1, close - open - 1));
  const std::string_view rest = stat.substr(close + 4);
  if (std::from_chars(rest.data(), rest.data() + rest.size(), out.ppid).ec != std::errc()) {
    errno = EINVAL;
    return std::nullopt;
  }
  return out;
}

// Why ReadStat(`pid`) failed with `error`, as a reason that starts with kNoPermission (the
// daemon's uid may not read it) or kUnreadableChain (gone meanwhile, or unparsable).
std::string UnreadableReason(pid_t pid, int error) {
  if (error == EACCES || error == EPERM) {
    return std::string(kNoPermission) + " /proc/" + std::to_string(pid) + "/stat (" +
           std::strerror(error) + ": /proc hides other users' processes from uid " +
           std::to_string(::geteuid()) + ", as with hidepid)";
  }
  return std::string(kUnreadableChain) + " (process " + std::to_string(pid) +
         " exited meanwhile); refusing rather than guessing";
}

// The refusal for a reason of UnreadableReason, or nullopt for any other reason.
std::optional<PeerRefusal> UnreadableRefusal(const std::string& reason, std::string_view see) {
  if (reason.starts_with(kNoPermission)) {
    return PeerRefusal{"connection refused: the daemon cannot check this client, since " + reason +
                           "; run the client as the daemon's user (uid " +
                           std::to_string(::geteuid()) + ")" + std::string(see),
                       reason};
  }
  if (reason.starts_with(kUnreadableChain)) {
    // Not known to be a session: say what failed rather than claim one.
    return PeerRefusal{"connection refused: the daemon cannot check this client (" + reason +
                           "); connect again" + std::string(see),
                       reason};
  }
  return std::nullopt;
}

// The whole of a small /proc file (a uid_map holds at most 340 lines); nullopt with errno set.
std::optional<std::string> ReadSmall(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return std::nullopt;
  std::string text;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(fd.Get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return std::nullopt;
    if (n == 0) return text;
    text.append(buf, static_cast<size_t>(n));
    if (text.size() > 65536) return text;
  }
}

}  // namespace

NamespaceCheck CompareUserNamespace(pid_t peer) {
  using Verdict = NamespaceCheck::Verdict;
  const std::string proc = "/proc/" + std::to_string(peer);
  struct stat mine {};
  struct stat theirs {};
  if (::stat("/proc/self/ns/user", &mine) != 0) {
    return {Verdict::kUnknown, std::string("reading /proc/self/ns/user: ") + std::strerror(errno)};
  }
  if (::stat((proc + "/ns/user").c_str(), &theirs) == 0) {
    if (mine.st_dev == theirs.st_dev && mine.st_ino == theirs.st_ino) return {Verdict::kSame, ""};
    return {Verdict::kOther, "process " + std::to_string(peer) + " is in user namespace " +
                                 std::to_string(theirs.st_ino) + ", the daemon in " +
                                 std::to_string(mine.st_ino)};
  }
  const int err = errno;
  if (err != EACCES && err != EPERM) {
    return {Verdict::kUnknown,
            "reading " + proc + "/ns/user: " + std::strerror(err) + " (the process exited?)"};
  }
  // Another user's or a non-dumpable process: its maps are readable by anyone.
  for (const char* map : {"uid_map", "gid_map"}) {
    std::optional<std::string> own = ReadSmall(std::string("/proc/self/") + map);
    std::optional<std::string> other = ReadSmall(proc + "/" + map);
    if (!own || !other) {
      return {Verdict::kUnknown, "reading " + proc + "/ns/user: " + std::strerror(err) +
                                     ", and its " + map + " cannot be read either"};
    }
    if (*own != *other) {
      return {Verdict::kOther,
              "process " + std::to_string(peer) + " has another " + map + " than the daemon's"};
    }
  }
  return {Verdict::kSame, ""};
}

std::optional<std::string> AnySessionPeerReason(pid_t peer) {
  if (peer <= 0) return std::nullopt;
  std::optional<ProcStat> self = ReadStat(peer);
  if (!self) return UnreadableReason(peer, errno);
  pid_t p = self->ppid;
  for (int hops = 0; hops < 4096 && p > 1; ++hops) {
    std::optional<ProcStat> stat = ReadStat(p);
    if (!stat) return UnreadableReason(p, errno);
    if (stat->comm == "ptybox-init") {
      return "process " + std::to_string(peer) + " runs under ptybox-init " + std::to_string(p) +
             " (a session of some ptybox daemon)";
    }
    // A daemon (a subreaper) adopts the processes of a session whose ptybox-init was killed,
    // until it ends them: they still count as that session's.
    if (stat->comm == "ptybox") {
      return "process " + std::to_string(peer) + " runs under the ptybox process " +
             std::to_string(p) + " (a session whose ptybox-init is gone, adopted by its daemon)";
    }
    p = stat->ppid;
  }
  if (p > 1) return "its parent chain is longer than 4096 processes";
  return std::nullopt;
}

NamespaceCheck CompareUserNamespaceByPidfd(int pidfd) {
  using Verdict = NamespaceCheck::Verdict;
  struct stat mine {};
  if (::stat("/proc/self/ns/user", &mine) != 0) {
    return {Verdict::kUnknown, std::string("reading /proc/self/ns/user: ") + std::strerror(errno)};
  }
  UniqueFd ns(::ioctl(pidfd, kPidfdGetUserNamespace, 0));
  if (!ns) {
    const int err = errno;
    if (err == ENOTTY || err == EINVAL || err == EOPNOTSUPP) {
      return {Verdict::kUnsupported, "this kernel cannot name a process's user namespace by pidfd"};
    }
    return {Verdict::kUnknown,
            std::string("asking the user namespace of the peer's pidfd: ") + std::strerror(err)};
  }
  struct stat theirs {};
  if (::fstat(ns.Get(), &theirs) != 0) {
    return {Verdict::kUnknown,
            std::string("fstat of the peer's user namespace: ") + std::strerror(errno)};
  }
  if (mine.st_dev == theirs.st_dev && mine.st_ino == theirs.st_ino) return {Verdict::kSame, ""};
  return {Verdict::kOther, "the peer is in user namespace " + std::to_string(theirs.st_ino) +
                               ", the daemon in " + std::to_string(mine.st_ino)};
}

std::optional<PeerRefusal> CheckPeer(pid_t peer, pid_t daemon, int pidfd) {
  constexpr std::string_view kSee = " (see docs/security.md, \"Wall 2\")";
  constexpr std::string_view kOtherNamespace =
      "connection refused: this client runs in another user namespace than the "
      "daemon's (a sandbox, such as a ptybox session of any daemon, or a "
      "container), and only processes of the daemon's own user namespace may "
      "control it";
  if (peer <= 0) {
    // A pid namespace above ours (the daemon is a container's entrypoint, the client on the
    // host): no /proc to read, but a pidfd names its user namespace (Linux 6.11+).
    const NamespaceCheck ns =
        pidfd >= 0 ? CompareUserNamespaceByPidfd(pidfd)
                   : NamespaceCheck{NamespaceCheck::Verdict::kUnsupported, "no pidfd for the peer"};
    if (ns.verdict == NamespaceCheck::Verdict::kOther) {
      return PeerRefusal{std::string(kOtherNamespace) + std::string(kSee), ns.detail};
    }
    if (ns.verdict == NamespaceCheck::Verdict::kUnknown) {
      return PeerRefusal{
          "connection refused: the daemon cannot check this client, which runs in "
          "a pid namespace the daemon cannot see (" +
              ns.detail + "); run the client in the daemon's own namespaces" + std::string(kSee),
          ns.detail};
    }
    // Same namespace, or a kernel that cannot tell: admitted as before (docs/security.md).
    return std::nullopt;
  }
  if (std::optional<std::string> own = SessionPeerReason(peer, daemon)) {
    if (std::optional<PeerRefusal> unreadable = UnreadableRefusal(*own, kSee)) return unreadable;
    return PeerRefusal{
        "connection refused: this client runs inside a ptybox session of this "
        "daemon, and a session may not control its own daemon" +
            std::string(kSee),
        *own};
  }
  const NamespaceCheck ns = CompareUserNamespace(peer);
  if (ns.verdict == NamespaceCheck::Verdict::kOther) {
    return PeerRefusal{std::string(kOtherNamespace) + std::string(kSee), ns.detail};
  }
  if (ns.verdict == NamespaceCheck::Verdict::kUnknown) {
    return PeerRefusal{"connection refused: the daemon cannot check this client (" + ns.detail +
                           "); connect as the daemon's user from its own user namespace" +
                           std::string(kSee),
                       ns.detail};
  }
  if (std::optional<std::string> any = AnySessionPeerReason(peer)) {
    if (std::optional<PeerRefusal> unreadable = UnreadableRefusal(*any, kSee)) return unreadable;
    return PeerRefusal{
        "connection refused: this client runs inside a ptybox session (of another "
        "daemon), and no session may control a ptybox daemon" +
            std::string(kSee),
        *any};
  }
  return std::nullopt;
}

std::optional<std::string> SessionPeerReason(pid_t peer, pid_t daemon) {
  if (peer <= 0) return std::nullopt;  // not in our pid namespace: never one of our sessions
  if (peer == daemon) return std::nullopt;
  const bool daemon_is_pid1 = daemon == 1;
  pid_t p = peer;
  for (int hops = 0; hops < 4096; ++hops) {
    std::optional<ProcStat> stat = ReadStat(p);
    if (!stat) return UnreadableReason(p, errno);
    if (stat->ppid == daemon) {
      if (!daemon_is_pid1) {
        return "process " + std::to_string(peer) + " descends from the daemon (through " +
               std::to_string(p) + ", " + stat->comm + ")";
      }
      if (stat->comm == "bwrap" || stat->comm == "ptybox-init") {
        return "process " + std::to_string(peer) + " runs under the session root " +
               std::to_string(p) + " (" + stat->comm + ")";
      }
      return std::nullopt;  // an orphan re-parented to us as pid 1: not a session's
    }
    if (stat->ppid <= 1) return std::nullopt;
    p = stat->ppid;
  }
  return "its parent chain is longer than 4096 processes";
}

bool AdmitPeer(int fd) {
  ucred cred{};
  socklen_t length = sizeof cred;
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &length) != 0) {
    LogError("refusing a socket client: SO_PEERCRED failed");
    return false;
  }
  // A pidfd pins the peer: after the checks it tells whether the pid still names that process.
  // Without SO_PEERPIDFD (before Linux 6.5) one is opened at once, which narrows the window for
  // a reused pid to the time between connect() and here.
  int pidfd = -1;
  length = sizeof pidfd;
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERPIDFD, &pidfd, &length) != 0) pidfd = -1;
  if (pidfd < 0 && cred.pid > 0) {
    pidfd = static_cast<int>(::syscall(SYS_pidfd_open, cred.pid, 0));
  }
  UniqueFd peer_pidfd(pidfd);

  std::optional<PeerRefusal> refusal = CheckPeer(cred.pid, ::getpid(), peer_pidfd.Get());
  if (!refusal && peer_pidfd &&
      ::syscall(SYS_pidfd_send_signal, peer_pidfd.Get(), 0, nullptr, 0) != 0 && errno == ESRCH) {
    refusal =
        PeerRefusal{"connection refused: the connecting process exited before it could be checked",
                    "the connecting process " + std::to_string(cred.pid) +
                        " exited before it could be checked"};
  }
  if (!refusal) return true;
  LogInfo("refused a socket client: " + refusal->detail);
  const std::string line = Dump(Json{{"jsonrpc", "2.0"},
                                     {"id", nullptr},
                                     {"error", Json{{"code", -32000},
                                                    {"message", refusal->message},
                                                    {"data", Json{{"kind", "policy_denied"}}}}}}) +
                           "\n";
  ssize_t ignored = ::send(fd, line.data(), line.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  (void)ignored;
  return false;
}

}  // namespace ptybox::runtime
