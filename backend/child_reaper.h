// The one place that reaps child processes: a SIGCHLD handler on the reactor that waits for
// every exited child and hands each status to whoever watches that pid. Orphans that re-parent
// to us (we are a subreaper, and may be a container's PID 1) are reaped too.
//
// The subreaper rule (where per-session cgroups are unavailable, sandbox/cgroup.h): every
// child we did not launch ourselves is a process a session leaked when its ptybox-init died
// (a live orphan can only reach us that way); it and its whole tree are killed.
#pragma once

#include <sys/types.h>

#include <asio/io_context.hpp>
#include <asio/signal_set.hpp>
#include <functional>
#include <map>

namespace ptybox::backend {

class ChildReaper final {
 public:
  using ExitCallback = std::function<void(int wait_status)>;

  explicit ChildReaper(asio::io_context& io);
  ChildReaper(const ChildReaper&) = delete;
  ChildReaper& operator=(const ChildReaper&) = delete;

  // `callback` runs on the reactor once `pid` has exited (immediately posted if it already has).
  void Watch(pid_t pid, ExitCallback callback);
  void Unwatch(pid_t pid);
  // Reaps now (also called by the SIGCHLD handler).
  void ReapAll();
  // Turns the subreaper rule on: from now on every live child that nobody watches is killed
  // with its descendants, at each SIGCHLD (an orphan re-parents to us as its parent dies).
  void KillAdoptedChildren(bool on) { kill_adopted_ = on; }
  // Kills every unwatched live child and its tree now (when the rule is on); returns how many.
  int EndAdopted();

 private:
  void Arm();

  asio::io_context& io_;
  asio::signal_set sigchld_;
  std::map<pid_t, ExitCallback> watchers_;
  std::map<pid_t, int> unclaimed_;  // exited before anyone watched them (bounded)
  bool kill_adopted_ = false;
};

}  // namespace ptybox::backend
