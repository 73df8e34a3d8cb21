// Per-session cgroups: the processes of one session are placed in cgroups of their own when
// they are launched, before they execute anything, held there by the session's limits (tasks,
// memory, CPU) and ended through them at close (cgroup v2 `cgroup.kill`, else pids.max 0 and
// SIGKILL to every member until none is left), whatever happened to ptybox-init, so nothing a
// session started outlives its close, however it detached (setsid, double fork, a killed init).
//
// One cgroup per session in each hierarchy used: the v2 one where the daemon has a delegated
// subtree, the v1 `pids`, `memory` and `cpu` hierarchies (hybrid or v1 hosts) for each
// controller v2 does not provide. They live beneath the daemon's own cgroup in that hierarchy,
// in a directory of this daemon (`<daemon's cgroup>/ptybox-<pid>-<random>/s<N>`, set up by
// CgroupHost, sandbox/cgroup_host.h, and removed with it); nothing is ever written to the
// daemon's own cgroup or a hierarchy's root files, so the host's accounting of the daemon stays
// as it was. Which hierarchy enforces what is decided by cgroups::ChoosePlan
// (sandbox/cgroup_layout.h) from what the host setup found.
//
// Where the daemon may create no cgroup at all, it falls back to the subreaper rule
// (backend/child_reaper.h) and rlimits (backend/init_session.cc).
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/unique_fd.h"
#include "sandbox/cgroup_host.h"
#include "sandbox/cgroup_layout.h"
#include "sandbox/cgroup_signal.h"

namespace ptybox::sandbox {

class SessionCgroup final {
 public:
  // Creates `<directory>/<name>` in every hierarchy of `host` and writes `limits` there
  // (cgroups::RenderLimits); a limit that cannot be written fails the whole creation.
  [[nodiscard]] static Result<SessionCgroup> Create(const CgroupHost& host, const std::string& name,
                                                    const cgroups::SessionLimits& limits = {});
  SessionCgroup(SessionCgroup&& other) noexcept;
  SessionCgroup& operator=(SessionCgroup&& other) noexcept;
  SessionCgroup(const SessionCgroup&) = delete;
  SessionCgroup& operator=(const SessionCgroup&) = delete;
  ~SessionCgroup();  // removes the directory if it is empty (best effort)

  // Opens `cgroup.procs` of the session's cgroup in every hierarchy (O_WRONLY, close-on-exec)
  // for the launched child to place itself: it writes "0" to each after fork, before it
  // executes anything (sandbox/launcher.cc), so the session starts inside its caps and the
  // daemon never becomes a member of a session cgroup (its CPU quota, its memory charge).
  Result<std::vector<UniqueFd>> OpenPlacement() const;

  // SIGKILL to every process in the cgroup: cgroup.kill on v2; on v1 pids.max 0 (no new task
  // can start) and SIGKILL to every member through a pidfd, only while it is still a member
  // (sandbox/cgroup_signal.h), repeated while members are left (bounded).
  Result<void> Kill();
  // Whether any process (not counting zombies) is still in the cgroup.
  Result<bool> Populated() const;
  // The pids in the cgroup, for a cleanup_failed message.
  std::string Members() const;
  // Every task (thread) charged to the session's pids cgroup: live ones, and those that exited
  // and are not reaped yet (`pids.current`, one counter the kernel keeps). nullopt where no
  // hierarchy of the session has the pids controller.
  [[nodiscard]] std::optional<size_t> Tasks() const;
  // rmdir in every hierarchy, once, without waiting: succeeds only once the cgroup is empty.
  // A v1 hierarchy may still list a member the kernel is tearing down a moment after v2
  // reported the session empty: then the error carries EBUSY (sys_errno) and the caller
  // retries from its own schedule (a timer on the reactor); what was removed stays removed.
  Result<void> Remove();

  // The first directory (v2 when used), for messages.
  [[nodiscard]] const std::filesystem::path& path() const { return path_; }

 private:
  struct Member {
    std::vector<std::string> controllers;  // empty for v2
    std::filesystem::path path;            // the session's cgroup in this hierarchy
    cgroups::MembershipTarget target;      // the same, as /proc/<pid>/cgroup names it
  };
  SessionCgroup(std::vector<Member> members, bool kill_v2)
      : path_(members.empty() ? std::filesystem::path() : members.front().path),
        members_(std::move(members)),
        kill_v2_(kill_v2) {}
  [[nodiscard]] std::vector<pid_t> Pids() const;

  std::filesystem::path path_;
  std::vector<Member> members_;  // those not removed yet
  bool kill_v2_ = false;         // the host's plan ends a session with cgroup.kill
  bool removed_ = false;
};

}  // namespace ptybox::sandbox
