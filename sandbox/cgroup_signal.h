// Signalling the members of a cgroup without hitting a stranger: the pids in `cgroup.procs`
// are only numbers, and a pid read there may belong to another process by the time a signal
// goes out (the member exited, was reaped, and the pid was reused after a wrap). Each pid is
// therefore opened as a pidfd first, which pins one process; only a process that is still a
// member of the cgroup (or beneath it) after the pidfd was opened is signalled, through the
// pidfd. A pid that cannot be opened, or whose process is no longer a member, is skipped.
//
// The decision is pure over ProcessOps (injectable: tests feed fake membership readers).
// Used by the v1 kill path of SessionCgroup (sandbox/cgroup.cc, no cgroup.kill) and by the
// start-up sweep of stale daemon directories (sandbox/cgroup_sweep.cc).
#pragma once

#include <sys/types.h>

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ptybox::sandbox::cgroups {

// The cgroup a process must be in, or beneath, to be signalled: in the v2 hierarchy
// (controller "", the "0::" line of /proc/<pid>/cgroup) or in the v1 hierarchy carrying
// `controller`; `path` as /proc/<pid>/cgroup spells it (from the reader's cgroup namespace).
struct MembershipTarget {
  std::string controller;
  std::string path;
};

// Whether the /proc/<pid>/cgroup text places the process in `target` or a cgroup beneath it.
bool IsMember(std::string_view proc_cgroup, const MembershipTarget& target);

// A cgroup path below `parent` ("/" or "/a/b"): "/a/b" + "ptybox-1-ab/s1".
std::string ChildCgroupPath(std::string_view parent, std::string_view relative);

// What SignalMembers needs of the system.
struct ProcessOps {
  std::function<int(pid_t)> open;                                // pidfd_open: fd, or -1
  std::function<std::optional<std::string>(pid_t)> read_cgroup;  // /proc/<pid>/cgroup
  std::function<bool(int fd, int signal)> send;                  // pidfd_send_signal
  std::function<void(int fd)> close;
  // Where the kernel has no pidfds (before 5.3) or a container's seccomp profile refuses
  // pidfd_open: false, and members are signalled with kill() after the same membership check
  // (the pre-pidfd race with a reused pid returns there, but nothing is left running). Unset:
  // pidfds are available.
  std::function<bool()> pidfds_available;
  std::function<bool(pid_t, int signal)> kill;  // kill(2), the fallback
};
// pidfd_open, /proc/<pid>/cgroup, pidfd_send_signal, close.
const ProcessOps& RealProcessOps();

struct SignalTally {
  std::vector<pid_t> signalled;    // members, signalled through their pidfd (or kill())
  std::vector<pid_t> unopened;     // gone already (or never ours to open): skipped
  std::vector<pid_t> not_members;  // the pid now names a process outside the target: skipped
};

// For each pid (never this process): pidfd_open, then re-read its membership (after the open,
// so the membership read is of the pinned process or, if that one was reaped meanwhile, the
// signal through its pidfd fails harmlessly), then the signal through the pidfd.
SignalTally SignalMembers(const std::vector<pid_t>& pids, const MembershipTarget& target,
                          int signal, const ProcessOps& ops = RealProcessOps());

}  // namespace ptybox::sandbox::cgroups
