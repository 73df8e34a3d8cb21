#include "sandbox/cgroup_signal.h"

#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <functional>

#include "sandbox/cgroup_layout.h"

namespace ptybox::sandbox::cgroups {

bool IsMember(std::string_view proc_cgroup, const MembershipTarget& target) {
  if (target.path.empty() || target.path[0] != '/') return false;
  for (const Membership& m : ParseProcCgroup(proc_cgroup)) {
    const bool hierarchy = target.controller.empty()
                               ? (m.id == 0 && m.controllers.empty())
                               : std::find(m.controllers.begin(), m.controllers.end(),
                                           target.controller) != m.controllers.end();
    if (!hierarchy) continue;
    if (target.path == "/") return true;
    return m.path == target.path || m.path.starts_with(target.path + "/");
  }
  return false;
}

std::string ChildCgroupPath(std::string_view parent, std::string_view relative) {
  std::string path(parent);
  while (!path.empty() && path.back() == '/') path.pop_back();
  std::string_view rest = relative;
  while (!rest.empty() && rest.front() == '/') rest.remove_prefix(1);
  return path + "/" + std::string(rest);
}

const ProcessOps& RealProcessOps() {
  static const ProcessOps ops{
      .open = [](pid_t pid) { return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)); },
      .read_cgroup = [](pid_t pid) -> std::optional<std::string> {
        // POSIX reads: a process that exits mid-read is "no membership", never an exception.
        const std::string path = "/proc/" + std::to_string(pid) + "/cgroup";
        const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
        if (fd < 0) return std::nullopt;
        std::string text;
        char buf[4096];
        for (;;) {
          const ssize_t n = ::read(fd, buf, sizeof(buf));
          if (n < 0 && errno == EINTR) continue;
          if (n < 0) {
            ::close(fd);
            return std::nullopt;
          }
          if (n == 0) break;
          text.append(buf, static_cast<size_t>(n));
        }
        ::close(fd);
        return text;
      },
      .send =
          [](int fd, int signal) {
            return ::syscall(SYS_pidfd_send_signal, fd, signal, nullptr, 0) == 0;
          },
      .close = [](int fd) { ::close(fd); },
      .pidfds_available =
          [] {
            static const bool available = [] {
              const int fd = static_cast<int>(::syscall(SYS_pidfd_open, ::getpid(), 0));
              if (fd < 0) return errno != ENOSYS && errno != EPERM;
              ::close(fd);
              return true;
            }();
            return available;
          },
      .kill = [](pid_t pid, int signal) { return ::kill(pid, signal) == 0; },
  };
  return ops;
}

SignalTally SignalMembers(const std::vector<pid_t>& pids, const MembershipTarget& target,
                          int signal, const ProcessOps& ops) {
  SignalTally tally;
  const pid_t self = ::getpid();
  const bool pidfds = !ops.pidfds_available || ops.pidfds_available() || !ops.kill;
  // The membership check, then `deliver`: through the pidfd, or kill() where there are none.
  auto check_and_signal = [&](pid_t pid, const std::function<bool()>& deliver) {
    const std::optional<std::string> cgroup = ops.read_cgroup(pid);
    if (!cgroup || !IsMember(*cgroup, target)) {
      tally.not_members.push_back(pid);
    } else if (deliver()) {
      tally.signalled.push_back(pid);
    } else {
      tally.unopened.push_back(pid);  // exited between the check and the signal
    }
  };
  for (pid_t pid : pids) {
    if (pid <= 0 || pid == self) continue;
    if (!pidfds) {
      check_and_signal(pid, [&] { return ops.kill(pid, signal); });
      continue;
    }
    const int fd = ops.open(pid);
    if (fd < 0) {
      tally.unopened.push_back(pid);
      continue;
    }
    check_and_signal(pid, [&] { return ops.send(fd, signal); });
    ops.close(fd);
  }
  return tally;
}

}  // namespace ptybox::sandbox::cgroups
