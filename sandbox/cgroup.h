// Per-session cgroups: the processes of one session are placed in a cgroup of their own when
// they are launched, and ended through it (cgroup v2 `cgroup.kill`) whatever happened to
// ptybox-init, so nothing a session started outlives its close, however it detached (setsid,
// double fork, a killed init). The cgroups live beneath the daemon's own cgroup, in a
// directory of this daemon (`<daemon's cgroup>/ptybox-<pid>-<random>/s<N>`); nothing is ever
// written to a hierarchy's root or to the daemon's own cgroup.
//
// Available only where the daemon may create cgroups beneath its own (root, or a delegated
// subtree); elsewhere the daemon falls back to the subreaper rule (backend/child_reaper.h).
// Resource limits (pids, memory, cpu) are meant to be set on the same cgroup: SessionCgroup is
// the one place that knows its directory.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <functional>
#include <optional>
#include <string>

#include "common/error.h"

namespace ptybox::sandbox {

// Which mechanism ends a session's processes on this host, and why.
struct CleanupSupport {
  bool cgroups = false;             // per-session cgroups with cgroup.kill are in force
  std::filesystem::path directory;  // this daemon's directory of session cgroups (when cgroups)
  std::string detail;               // one sentence for `ptybox doctor` and the log
};

// Probes once per process (creates this daemon's directory on success; a test cgroup is
// created, joined, left and removed). PTYBOX_SESSION_CGROUPS=0 turns cgroups off (the
// subreaper rule then applies), for hosts where the operator wants the daemon's cgroup left
// alone, and for tests of the fallback.
const CleanupSupport& SessionCleanupSupport();

// Removes this daemon's directory if it is empty (at exit; best effort).
void RemoveCleanupDirectory();

class SessionCgroup final {
 public:
  // Creates `<directory>/<name>`.
  static Result<SessionCgroup> Create(const std::string& name);
  SessionCgroup(SessionCgroup&& other) noexcept;
  SessionCgroup& operator=(SessionCgroup&& other) noexcept;
  SessionCgroup(const SessionCgroup&) = delete;
  SessionCgroup& operator=(const SessionCgroup&) = delete;
  ~SessionCgroup();  // removes the directory if it is empty (best effort)

  // Runs `fork_and_exec` with this process inside the cgroup, then moves it back: whatever it
  // forks starts inside the cgroup, before it executes anything. The daemon is
  // single-threaded, so nothing else of it runs while it is inside. If moving back fails the
  // cgroup is marked unusable (it holds the daemon) and Kill refuses.
  Result<void> RunInside(const std::function<void()>& fork_and_exec);

  // SIGKILL to every process in the cgroup (cgroup.kill); refused while the daemon is inside.
  Result<void> Kill();
  // Whether any process (not counting zombies) is still in the cgroup.
  Result<bool> Populated() const;
  // The pids in the cgroup, for a cleanup_failed message.
  std::string Members() const;
  // rmdir; succeeds only once the cgroup is empty.
  Result<void> Remove();

  [[nodiscard]] const std::filesystem::path& path() const { return path_; }

 private:
  explicit SessionCgroup(std::filesystem::path path) : path_(std::move(path)) {}

  std::filesystem::path path_;
  bool holds_daemon_ = false;
  bool removed_ = false;
};

}  // namespace ptybox::sandbox
