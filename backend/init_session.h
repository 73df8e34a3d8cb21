// One sandboxed program and everything it starts, on the reactor: launching ptybox-init (in
// bwrap, or directly in danger-full-access) inside a per-session cgroup when the host has them,
// the typed init messages, and the one termination rule (ask init: SIGHUP/SIGTERM, grace,
// SIGKILL; after grace + kInitQuietSlack, SIGKILL the tree ourselves; cleanup_failed if even
// that does not end it), and the end of orphans whatever happened to init. Every caller uses
// it: a session's terminal (LocalTerminal) and `ptybox run`, as sandbox2's RunAsync /
// AwaitResult / Kill serve every caller of a sandbox.
#pragma once

#include <sys/types.h>

#include <asio/io_context.hpp>
#include <asio/posix/stream_descriptor.hpp>
#include <asio/steady_timer.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend/child_reaper.h"
#include "backend/contract_types.h"
#include "backend/git_copy_back.h"
#include "backend/off_reactor.h"
#include "common/error.h"
#include "common/unique_fd.h"
#include "sandbox/cgroup.h"
#include "sandbox/init/init_protocol.h"
#include "sandbox/launcher.h"

namespace ptybox::backend {

// After the grace of a termination, how long ptybox-init may take to report quiet before we
// SIGKILL it and the session's tree ourselves.
inline constexpr std::chrono::milliseconds kInitQuietSlack{2000};
// After that SIGKILL, how long the processes may take to disappear before cleanup_failed.
inline constexpr std::chrono::milliseconds kKillWait{5000};

class InitSession final {
 public:
  class Listener {
   public:
    virtual ~Listener() = default;
    // The program runs; `master` is the PTY master (invalid without a PTY).
    virtual void OnReady(const sandbox::ReadyMessage& ready, UniqueFd master) = 0;
    // Setup failed before the program ran: init's own report (spawn_failed; sys_errno is
    // execve's errno when the program itself could not be executed), or the sandbox ended
    // first (sandbox_unavailable with the diagnosis, or spawn_failed).
    virtual void OnStartFailed(Error error) = 0;
    // The program ended, as ptybox-init saw it (once).
    virtual void OnProgramExit(SessionStatus status) = 0;
    // ptybox-init (our direct child: bwrap or init) was reaped; `wait_status` is its status.
    // Orphan cleanup is under way or done; Terminate answers once it is done.
    virtual void OnInitExit(int wait_status) = 0;
    // Network by name, before OnReady: the listening socket init bound on the session's own
    // loopback for the proxy (sandbox/init/init_protocol.h, ProxyListenerMessage).
    virtual void OnProxyListener(uint16_t /*port*/, UniqueFd /*listener*/) {}
  };

  // `program` names what init starts in messages ("the shell", "the command"). `cgroups` is
  // the host setup of whoever starts sessions (sandbox/cgroup_host.h); null or one without
  // cgroups: the session's tree is ended by parent links and its limits are rlimits.
  InitSession(asio::io_context& io, ChildReaper& reaper, Listener& listener, std::string program,
              std::shared_ptr<const sandbox::CgroupHost> cgroups);
  InitSession(const InitSession&) = delete;
  InitSession& operator=(const InitSession&) = delete;
  ~InitSession();

  // Launches init; the outcome arrives through the listener (never synchronously). A
  // workspace-write launch first walks its writable roots for repositories
  // (sandbox/repository_walk.h) on a thread of its own, so that a large workspace never stalls
  // the reactor; a Terminate meanwhile ends it before anything is started.
  void Start(const sandbox::LaunchSpec& spec);
  // What the launch protected as repositories (valid once the launch was made).
  [[nodiscard]] const sandbox::LaunchRepositories& repositories() const { return repositories_; }
  // Workspace-write: the private git directories of the session's repositories (git_copy_back.h),
  // copied back by whoever settles a send, and a last time (then removed) once the session ended.
  [[nodiscard]] const std::shared_ptr<SessionGits>& gits() const { return gits_; }

  // Ends every process of the session, by the one rule above. `done` gets success once nothing
  // of the session runs (init reaped, orphans ended, the session cgroup empty and removed), or
  // cleanup_failed. Idempotent: a call while one runs joins it; after success it answers at once.
  void Terminate(std::chrono::milliseconds grace, std::function<void(Result<void>)> done);
  // Skips what is left of the grace: SIGKILL to the tree now (a second ^C to `ptybox run`).
  void KillNow();

  [[nodiscard]] bool started() const { return child_pid_ > 0; }
  [[nodiscard]] bool init_exited() const { return child_exited_; }
  // init reported that every process of the session ended (or init is gone and we did it).
  [[nodiscard]] bool quiet() const { return quiet_; }
  // The tasks the session's cgroup counts (SessionCgroup::Tasks); nullopt without a cgroup.
  [[nodiscard]] std::optional<size_t> SessionTasks() const {
    return cgroup_ ? cgroup_->Tasks() : std::nullopt;
  }
  [[nodiscard]] pid_t child_pid() const { return child_pid_; }
  // The host pid of the program's session (PTY mode), once the caller learned it: its members
  // are swept with the tree when there is no session cgroup.
  void set_program_session_leader(pid_t leader) { program_session_leader_ = leader; }
  // What bwrap/init printed on their stderr (bounded), for diagnosing a failed start.
  std::string Diagnostics();

 private:
  void Launch(const sandbox::LaunchSpec& spec);
  void ReadControl();
  void OnMessage(sandbox::ReceivedInitMessage received);
  // A workspace-write launch's ready message: the session's mounts are composed, so the roots
  // are walked again (off the reactor) and the launch is reported ready only when every
  // repository older than the launch is a mount point of the session
  // (sandbox::CheckRepositoriesAfterLaunch); else it fails.
  void CheckRepositoriesThenReady(sandbox::ReadyMessage ready, UniqueFd master);
  // The check answered (`refused`: why not): reports the start, then what init said or did
  // meanwhile, in order.
  void FinishReadyCheck(std::optional<Error> refused, const sandbox::ReadyMessage& ready,
                        UniqueFd master);
  void OnChildExit(int wait_status);
  void KillTree();
  void AwaitEmpty(int rounds_left);
  void RetryEmpty(int rounds_left);  // AwaitEmpty again after kEmptyCheck, from the timer
  void Escalate();
  void Finish(Result<void> result);
  // Off the reactor, then the private git directories are removed and `then` runs on the
  // reactor. False when there was nothing to copy (or no thread): `then` never runs.
  bool CopyBackLastTime(std::function<void()> then);
  void AnswerWaiters(const Result<void>& result);
  std::vector<pid_t> Leftovers();

  asio::io_context& io_;
  ChildReaper& reaper_;
  Listener& listener_;
  std::string program_;
  std::shared_ptr<const sandbox::CgroupHost> cgroups_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);

  // The walk before the launch runs off the reactor; its result is dropped once this
  // session is gone.
  OffReactor off_reactor_;
  bool abandoned_ = false;  // ended while its walk ran: nothing is launched
  sandbox::LaunchRepositories repositories_;
  std::shared_ptr<SessionGits> gits_ = std::make_shared<SessionGits>();
  sandbox::SandboxSpec walked_sandbox_;  // what the walks search (workspace-write only)
  std::filesystem::path walked_init_;    // its ptybox-init (which hidden directories it covers)
  struct timespec walk_started_ {};      // CLOCK_REALTIME before the first walk
  bool recheck_repositories_ = false;    // a walk was made: check it again at ready
  bool checking_ready_ = false;          // init is ready; the check after it runs
  // What arrived while the check ran: init's later messages, and our child's exit.
  std::vector<sandbox::ReceivedInitMessage> held_messages_;
  std::optional<int> held_exit_;

  bool confined_ = false;
  std::filesystem::path bwrap_;
  std::optional<sandbox::SessionCgroup> cgroup_;
  // Root daemon: the host-wide lease on the session's host id, released only once no process of
  // the session is left (its cgroup empty), so no later session shares the id with a survivor.
  UniqueFd session_uid_lease_;
  pid_t child_pid_ = -1;              // our direct child: bwrap or init
  pid_t program_session_leader_ = 0;  // the program's POSIX session (PTY mode), for the sweep
  bool child_exited_ = false;
  bool start_reported_ = false;
  bool exit_reported_ = false;
  bool quiet_ = false;
  std::optional<asio::posix::stream_descriptor> control_;
  UniqueFd diagnostics_;

  // Termination.
  bool terminating_ = false;
  bool ended_ = false;         // init reaped and every process of the session gone
  bool cleaning_ = false;      // init reaped; waiting for the session's cgroup to empty
  bool copying_back_ = false;  // ended; the last git copy-back runs, the waiters wait for it
  int escalation_ = 0;
  std::optional<asio::steady_timer> timer_;
  std::vector<std::function<void(Result<void>)>> waiters_;
};

}  // namespace ptybox::backend
