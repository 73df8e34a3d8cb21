// The daemon refuses connections from its own sessions' processes.
#include "runtime/peer_check.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <charconv>
#include <string_view>

#include "common/log.h"
#include "common/unique_fd.h"

#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77  // Linux 6.5
#endif

namespace ptybox::runtime {
namespace {

struct ProcStat {
  pid_t ppid = 0;
  std::string comm;
};

// "pid (comm) S ppid ..." of /proc/<pid>/stat; nullopt when the process is gone.
std::optional<ProcStat> ReadStat(pid_t pid) {
  const std::string path = "/proc/" + std::to_string(pid) + "/stat";
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return std::nullopt;
  char buf[512];
  const ssize_t n = ::read(fd.Get(), buf, sizeof buf - 1);
  if (n <= 0) return std::nullopt;
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
    return std::nullopt;
  }
  return out;
}

}  // namespace

std::optional<std::string> SessionPeerReason(pid_t peer, pid_t daemon) {
  if (peer <= 0) return std::nullopt;  // not in our pid namespace: never one of our sessions
  if (peer == daemon) return std::nullopt;
  const bool daemon_is_pid1 = daemon == 1;
  pid_t p = peer;
  for (int hops = 0; hops < 4096; ++hops) {
    std::optional<ProcStat> stat = ReadStat(p);
    if (!stat) {
      return "its parent chain cannot be read (process " + std::to_string(p) +
             " exited meanwhile); refusing rather than guessing";
    }
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
  // A pidfd pins the peer: after the walk it tells whether the pid still names that process.
  int pidfd = -1;
  length = sizeof pidfd;
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERPIDFD, &pidfd, &length) != 0) pidfd = -1;
  UniqueFd peer_pidfd(pidfd);

  std::optional<std::string> reason = SessionPeerReason(cred.pid, ::getpid());
  if (!reason && peer_pidfd && cred.pid > 0 &&
      ::syscall(SYS_pidfd_send_signal, peer_pidfd.Get(), 0, nullptr, 0) != 0) {
    reason =
        "the connecting process " + std::to_string(cred.pid) + " exited before it could be checked";
  }
  if (!reason) return true;
  LogInfo("refused a socket client: " + *reason);
  static constexpr std::string_view kRefusal =
      "{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32000,\"message\":"
      "\"connection refused: this client runs inside a ptybox session of this daemon, and a "
      "session may not control its own daemon (see docs/security.md)\","
      "\"data\":{\"kind\":\"policy_denied\"}}}\n";
  ssize_t ignored = ::send(fd, kRefusal.data(), kRefusal.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  (void)ignored;
  return false;
}

}  // namespace ptybox::runtime
