#include "backend/init_session.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <asio/post.hpp>
#include <cerrno>
#include <fstream>
#include <system_error>
#include <variant>

#include "backend/readiness/proc_parse.h"
#include "common/join.h"
#include "common/log.h"
#include "common/proc_stat.h"
#include "sandbox/host_probe.h"

namespace ptybox::backend {
namespace {

constexpr std::chrono::milliseconds kEmptyCheck{10};
constexpr int kEmptyRounds = static_cast<int>(kKillWait / kEmptyCheck);

// Processes that are descendants of `root` (by parent links) or members of the POSIX session led by
// `leader`: a danger-full-access session's tree, when there is no cgroup to end it through.
std::vector<pid_t> ProcessesOf(pid_t root, pid_t leader) {
  const std::vector<::ptybox::proc::StatFields> table = ::ptybox::proc::ReadAllStats();
  std::vector<pid_t> result = ::ptybox::proc::Descendants(table, root);
  if (leader > 0) {
    for (const ::ptybox::proc::StatFields& f : table) {
      if (f.session == leader && std::ranges::find(result, f.pid) == result.end()) {
        result.push_back(f.pid);
      }
    }
  }
  return result;
}

// The last resort for limits no cgroup holds: RLIMIT_AS for memory (per process, and address
// space rather than memory), RLIMIT_NPROC for tasks only where a session runs as a host id of
// its own (a root daemon's confined sessions; elsewhere it would count every process of the
// daemon's user). No rlimit stands for a CPU share.
void AddRlimitFallbacks(const sandbox::cgroups::Plan& plan, sandbox::LaunchSpec& spec) {
  using sandbox::LimitedResource;
  auto add = [&spec](LimitedResource resource, int64_t value) {
    for (const sandbox::ResourceLimit& limit : spec.rlimits) {
      if (limit.resource == resource) return;  // the policy's own rlimit key wins
    }
    spec.rlimits.push_back(sandbox::ResourceLimit{resource, value});
  };
  if (spec.limits.memory_bytes && plan.memory == sandbox::cgroups::Where::kNone) {
    add(LimitedResource::kAddressSpace, *spec.limits.memory_bytes);
  }
  if (spec.limits.tasks && plan.tasks == sandbox::cgroups::Where::kNone && ::geteuid() == 0 &&
      policy::IsConfined(spec.mode)) {
    add(LimitedResource::kProcesses, *spec.limits.tasks);
  }
}

SessionStatus StatusOf(const sandbox::ExitedMessage& exited) {
  SessionStatus status;
  status.exited = true;
  status.exit_code = exited.exit_code;
  status.signal = exited.signal;
  return status;
}

}  // namespace

InitSession::InitSession(asio::io_context& io, ChildReaper& reaper, Listener& listener,
                         std::string program, std::shared_ptr<const sandbox::CgroupHost> cgroups)
    : io_(io),
      reaper_(reaper),
      listener_(listener),
      program_(std::move(program)),
      cgroups_(std::move(cgroups)),
      off_reactor_(io) {}

InitSession::~InitSession() {
  *alive_ = false;
  if (child_pid_ > 0 && !child_exited_) {
    // Last resort; the owner normally terminates before it is destroyed.
    KillTree();
    ::kill(child_pid_, SIGKILL);
  }
}

void InitSession::Start(const sandbox::LaunchSpec& spec) {
  confined_ = policy::IsConfined(spec.mode);
  bwrap_ = spec.bwrap;
  if (!confined_ || spec.sandbox.mode != policy::Mode::kWorkspaceWrite) {
    repositories_ = sandbox::RepositoriesOfLaunch(spec.sandbox);  // nothing to walk
    Launch(spec);
    return;
  }
  walked_sandbox_ = spec.sandbox;
  walked_init_ = spec.init_binary;
  recheck_repositories_ = true;
  ::clock_gettime(CLOCK_REALTIME, &walk_started_);
  Result<void> walking = off_reactor_.Run<sandbox::LaunchRepositories>(
      "searches the writable roots for repositories",
      [sandbox = spec.sandbox] { return sandbox::RepositoriesOfLaunch(sandbox); },
      [this, spec](sandbox::LaunchRepositories found) {
        if (abandoned_) return;
        repositories_ = std::move(found);
        Launch(spec);
      });
  if (!walking) {
    // No thread: nothing was started, and the open says why.
    start_reported_ = true;
    asio::post(io_, [this, alive = std::weak_ptr<bool>(alive_), error = walking.error()] {
      if (!alive.expired()) listener_.OnStartFailed(error);
    });
  }
}

void InitSession::Launch(const sandbox::LaunchSpec& spec) {
  if (cgroups_ && cgroups_->support().cgroups) {
    static uint64_t sessions = 0;
    Result<sandbox::SessionCgroup> cgroup =
        sandbox::SessionCgroup::Create(*cgroups_, "s" + std::to_string(++sessions), spec.limits);
    if (cgroup) {
      cgroup_.emplace(std::move(*cgroup));
    } else {
      LogWarn("no cgroup for this session (" + cgroup.error().message +
              "); its tree is ended by parent links and its limits are rlimits");
    }
  }
  // The child places itself in the session's cgroups (sandbox/launcher.h, cgroup_procs); the
  // daemon never joins them.
  std::vector<UniqueFd> placement;
  if (cgroup_) {
    if (Result<std::vector<UniqueFd>> fds = cgroup_->OpenPlacement(); fds) {
      placement = std::move(*fds);
    } else {
      LogWarn("cannot place the session in its cgroup (" + fds.error().message +
              "); its tree is ended by parent links and its limits are rlimits");
      cgroup_.reset();
    }
  }
  sandbox::LaunchSpec with_fallbacks = spec;
  AddRlimitFallbacks(cgroup_ ? cgroups_->support().plan : sandbox::cgroups::Plan{}, with_fallbacks);
  for (const UniqueFd& fd : placement) with_fallbacks.cgroup_procs.push_back(fd.Get());
  std::optional<Result<sandbox::LaunchedInit>> launched =
      sandbox::LaunchInit(with_fallbacks, repositories_);
  placement.clear();
  if (!*launched) {
    Error error = launched->error();
    start_reported_ = true;
    cgroup_.reset();
    std::weak_ptr<bool> alive = alive_;
    asio::post(io_, [this, alive, error] {
      if (!alive.expired()) listener_.OnStartFailed(error);
    });
    return;
  }
  sandbox::LaunchedInit& init = **launched;
  child_pid_ = init.pid;
  session_uid_lease_ = std::move(init.session_uid_lease);
  {
    std::lock_guard lock(gits_->mutex);
    gits_->any = !init.private_gits.empty();
    gits_->gits = std::move(init.private_gits);
    gits_->left_read_only = init.gits_left_read_only;
  }
  diagnostics_ = std::move(init.diagnostics);
  if (diagnostics_) ::fcntl(diagnostics_.Get(), F_SETFL, O_NONBLOCK);
  std::weak_ptr<bool> alive = alive_;
  reaper_.Watch(child_pid_, [this, alive](int wait_status) {
    if (!alive.expired()) OnChildExit(wait_status);
  });
  control_.emplace(io_, init.control.Release());
  control_->non_blocking(true);
  ReadControl();
}

void InitSession::ReadControl() {
  if (!control_) return;
  std::weak_ptr<bool> alive = alive_;
  control_->async_wait(asio::posix::stream_descriptor::wait_read,
                       [this, alive](const std::error_code& ec) {
                         if (alive.expired() || ec || !control_) return;
                         for (;;) {
                           Result<std::optional<sandbox::ReceivedInitMessage>> received =
                               sandbox::ReceiveInitMessage(control_->native_handle());
                           if (!received) {
                             const int err = received.error().sys_errno;
                             if (err == EAGAIN || err == EWOULDBLOCK) break;
                             // ECONNRESET: init (or bwrap, before init ran) is gone with our start
                             // message unread, as on every failed start; the reaper reports why.
                             // Not worth a warning.
                             if (err == ECONNRESET) {
                               control_.reset();
                               return;
                             }
                             LogWarn("control socket: " + received.error().message);
                             if (err == 0) continue;  // a malformed message: the next may be fine
                             control_.reset();
                             return;
                           }
                           if (!*received) {  // init is gone
                             control_.reset();
                             return;
                           }
                           OnMessage(std::move(**received));
                           if (alive.expired() || !control_) return;
                         }
                         ReadControl();
                       });
}

void InitSession::OnMessage(sandbox::ReceivedInitMessage received) {
  if (checking_ready_) {
    // After the ready message, in order, once the check answered (the shell's exit must not
    // overtake the start that hands over its terminal).
    held_messages_.push_back(std::move(received));
    return;
  }
  std::visit(
      [this, &received](auto& m) {
        using T = std::decay_t<decltype(m)>;
        if constexpr (std::is_same_v<T, sandbox::ReadyMessage>) {
          if (start_reported_ || checking_ready_) return;
          if (recheck_repositories_) {
            checking_ready_ = true;
            CheckRepositoriesThenReady(m, std::move(received.fd));
            return;
          }
          start_reported_ = true;
          listener_.OnReady(m, std::move(received.fd));
        } else if constexpr (std::is_same_v<T, sandbox::FailedMessage>) {
          if (start_reported_) {
            LogWarn("ptybox-init: " + m.reason);
            return;
          }
          start_reported_ = true;
          Error error{ErrorKind::kSpawnFailed, program_ + " could not start: " + m.reason};
          error.sys_errno = m.exec_errno;
          listener_.OnStartFailed(std::move(error));
        } else if constexpr (std::is_same_v<T, sandbox::ExitedMessage>) {
          if (exit_reported_) return;
          exit_reported_ = true;
          listener_.OnProgramExit(StatusOf(m));
        } else if constexpr (std::is_same_v<T, sandbox::QuietMessage>) {
          quiet_ = true;
        } else if constexpr (std::is_same_v<T, sandbox::ProxyListenerMessage>) {
          if (start_reported_ || !received.fd) return;  // only before ready, with its socket
          listener_.OnProxyListener(m.port, std::move(received.fd));
        } else {
          LogWarn("ptybox-init sent a " + std::string(sandbox::InitMessageName(received.message)) +
                  " message, which only the daemon sends");
        }
      },
      received.message);
}

void InitSession::CheckRepositoriesThenReady(sandbox::ReadyMessage ready, UniqueFd master) {
  // Until the check answers, the start is not reported: a failure or exit of init meanwhile is
  // reported as a failed start, as before any ready message, and the check's answer is dropped.
  // A process in the session's mount namespace: the program leading the terminal's session
  // (the shell), or without a terminal (`ptybox run`) bwrap's child, the session's init.
  pid_t program = 0;
  if (!master || ::ioctl(master.Get(), TIOCGSID, &program) != 0) program = 0;
  if (program <= 0 && child_pid_ > 0) {
    std::ifstream children("/proc/" + std::to_string(child_pid_) + "/task/" +
                           std::to_string(child_pid_) + "/children");
    children >> program;
  }
  auto master_fd = std::make_shared<UniqueFd>(std::move(master));
  Result<void> walking = off_reactor_.Run<std::optional<std::string>>(
      "searches the writable roots for repositories again",
      [sandbox = walked_sandbox_, init = walked_init_, started = walk_started_, program] {
        return sandbox::CheckRepositoriesAfterLaunch(sandbox, init, program, started);
      },
      [this, ready, master_fd](std::optional<std::string> moved) {
        FinishReadyCheck(moved
                             ? std::optional<Error>(Error{ErrorKind::kPolicyDenied, *moved,
                                                          walked_sandbox_.workspace_root.string()})
                             : std::nullopt,
                         ready, std::move(*master_fd));
      });
  if (!walking) FinishReadyCheck(walking.error(), ready, UniqueFd());
}

void InitSession::FinishReadyCheck(std::optional<Error> refused, const sandbox::ReadyMessage& ready,
                                   UniqueFd master) {
  checking_ready_ = false;
  std::vector<sandbox::ReceivedInitMessage> held = std::move(held_messages_);
  held_messages_.clear();
  std::optional<int> exit = std::exchange(held_exit_, std::nullopt);
  std::weak_ptr<bool> alive = alive_;
  if (!start_reported_ && !terminating_ && !abandoned_) {
    start_reported_ = true;
    if (refused) {
      listener_.OnStartFailed(std::move(*refused));
      held.clear();  // a refused start hears nothing of its program
    } else {
      listener_.OnReady(ready, std::move(master));
    }
    if (alive.expired()) return;
  }
  for (sandbox::ReceivedInitMessage& message : held) {
    OnMessage(std::move(message));
    if (alive.expired()) return;
  }
  if (exit) OnChildExit(*exit);
}

void InitSession::OnChildExit(int wait_status) {
  if (checking_ready_) {
    held_exit_ = wait_status;  // handled once the check answered, after the held messages
    return;
  }
  child_exited_ = true;
  if (timer_) timer_->cancel();
  std::weak_ptr<bool> alive = alive_;
  if (!start_reported_) {
    start_reported_ = true;
    std::string diagnostics = Diagnostics();
    Error error;
    if (confined_) {
      error = sandbox::DiagnoseSandboxFailure(bwrap_, diagnostics);
    } else {
      error = Error{ErrorKind::kSpawnFailed,
                    "ptybox-init exited before " + program_ + " started" +
                        (diagnostics.empty() ? std::string() : ": " + diagnostics),
                    {}};
    }
    listener_.OnStartFailed(std::move(error));
    if (alive.expired()) return;
  }
  // init went away: whatever of the session is left (init killed from inside the session
  // leaves orphans that re-parented to us) ends now. With a cgroup this is unconditional:
  // nothing the session started can be outside it.
  if (cgroup_ || !quiet_) KillTree();
  quiet_ = true;
  listener_.OnInitExit(wait_status);
  if (alive.expired()) return;
  cleaning_ = true;
  AwaitEmpty(kEmptyRounds);
}

void InitSession::KillTree() {
  if (cgroup_) {
    if (Result<void> killed = cgroup_->Kill(); killed)
      return;
    else
      LogWarn("cgroup.kill: " + killed.error().message);
  }
  // Confined: bwrap's --die-with-parent chain and the pid namespace take the whole session
  // down with init; danger-full-access: its descendants and the program's session members.
  if (!confined_) {
    for (pid_t pid : ProcessesOf(child_pid_, program_session_leader_)) ::kill(pid, SIGKILL);
  }
  reaper_.EndAdopted();
}

void InitSession::AwaitEmpty(int rounds_left) {
  Result<bool> populated = cgroup_ ? cgroup_->Populated() : Result<bool>(false);
  if (populated && !*populated) {
    if (cgroup_) {
      Result<void> removed = cgroup_->Remove();
      // A v1 hierarchy may list a member being torn down a moment longer: retry from the
      // timer below, never by sleeping here on the reactor.
      if (!removed && removed.error().sys_errno == EBUSY && rounds_left > 0) {
        RetryEmpty(rounds_left - 1);
        return;
      }
      if (!removed) LogWarn(removed.error().message);
      cgroup_.reset();
    }
    session_uid_lease_.Reset();  // nothing of the session is left to share the id with
    Finish({});
    return;
  }
  if (rounds_left <= 0) {
    Finish(Fail(ErrorKind::kCleanupFailed,
                "the session's processes did not end after SIGKILL (" + cgroup_->Members() +
                    " in " + cgroup_->path().string() +
                    "); they may be stuck in the kernel. Retry terminal_close."));
    return;
  }
  RetryEmpty(rounds_left - 1);
}

void InitSession::RetryEmpty(int rounds_left) {
  if (!timer_) timer_.emplace(io_);
  timer_->expires_after(kEmptyCheck);
  std::weak_ptr<bool> alive = alive_;
  timer_->async_wait([this, alive, rounds_left](const std::error_code& ec) {
    if (alive.expired() || ec) return;
    KillTree();  // one that forked meanwhile
    AwaitEmpty(rounds_left);
  });
}

void InitSession::Terminate(std::chrono::milliseconds grace,
                            std::function<void(Result<void>)> done) {
  std::weak_ptr<bool> alive = alive_;
  if (ended_ && copying_back_) {
    waiters_.push_back(std::move(done));  // answered once the last copy-back is done
    return;
  }
  if (child_pid_ <= 0 || ended_) {
    // Never started, or already gone with its whole tree. A walk still running launches
    // nothing when it ends.
    if (child_pid_ <= 0) abandoned_ = true;
    asio::post(io_, [alive, done = std::move(done)] {
      if (!alive.expired()) done({});
    });
    return;
  }
  waiters_.push_back(std::move(done));
  if (child_exited_) {
    // init is gone; the cleanup of what it left answers soon (or a retry after a failure).
    if (!cleaning_) {
      cleaning_ = true;
      AwaitEmpty(kEmptyRounds);
    }
    return;
  }
  if (terminating_) return;
  terminating_ = true;
  escalation_ = 0;
  bool asked = false;
  if (control_) {
    asked = static_cast<bool>(
        sandbox::SendInitMessage(control_->native_handle(), sandbox::TerminateMessage{grace}));
  }
  if (!timer_) timer_.emplace(io_);
  // init needs `grace` plus the SIGKILL round; give it a little more before stepping in.
  timer_->expires_after(asked ? grace + kInitQuietSlack : std::chrono::milliseconds(0));
  timer_->async_wait([this, alive](const std::error_code& ec) {
    if (!alive.expired() && !ec) Escalate();
  });
}

void InitSession::KillNow() {
  if (child_pid_ <= 0) abandoned_ = true;
  if (child_pid_ <= 0 || child_exited_ || escalation_ > 0) return;
  terminating_ = true;
  if (timer_) timer_->cancel();
  Escalate();
}

void InitSession::Escalate() {
  if (child_exited_) return;
  std::weak_ptr<bool> alive = alive_;
  if (escalation_ == 0) {
    escalation_ = 1;
    LogWarn("the session did not end on request; killing its process tree");
    KillTree();
    ::kill(child_pid_, SIGKILL);
    if (!timer_) timer_.emplace(io_);
    timer_->expires_after(kKillWait);
    timer_->async_wait([this, alive](const std::error_code& ec) {
      if (!alive.expired() && !ec) Escalate();
    });
    return;
  }
  // Still there after SIGKILL: stuck in the kernel (D state). Report; a retry may succeed.
  std::vector<std::string> pids;
  for (pid_t pid : Leftovers()) pids.push_back(std::to_string(pid));
  const std::string left = Join(pids);
  terminating_ = false;
  escalation_ = 0;
  Finish(Fail(ErrorKind::kCleanupFailed,
              "the session's processes did not end after SIGKILL (pid " +
                  std::to_string(child_pid_) + (left.empty() ? "" : "; " + left) +
                  "); they may be stuck in the kernel. Retry terminal_close."));
}

std::vector<pid_t> InitSession::Leftovers() {
  if (cgroup_) {
    std::vector<pid_t> pids;
    if (!proc::ParsePidList(cgroup_->Members(), pids)) pids.clear();
    return pids;
  }
  return ProcessesOf(child_pid_, confined_ ? 0 : program_session_leader_);
}

void InitSession::Finish(Result<void> result) {
  cleaning_ = false;
  // A second end (a cleanup round that was already on its way) while the last copy-back runs:
  // the waiters are answered once it is done.
  if (copying_back_) return;
  if (result) {
    ended_ = true;
    terminating_ = false;
    if (timer_) timer_->cancel();
    control_.reset();
    // The waiters (a `terminal_close`, `ptybox run`'s exit, the daemon's shutdown) are answered
    // once the session's last git work is back in the host's .git: the person who runs
    // `git log` after them sees every commit.
    if (CopyBackLastTime([this, result] { AnswerWaiters(result); })) return;
  }
  AnswerWaiters(result);
}

void InitSession::AnswerWaiters(const Result<void>& result) {
  copying_back_ = false;
  std::vector<std::function<void(Result<void>)>> waiters;
  waiters.swap(waiters_);
  std::weak_ptr<bool> alive = alive_;
  for (auto& waiter : waiters) {
    asio::post(io_, [alive, waiter = std::move(waiter), result] {
      if (!alive.expired()) waiter(result);
    });
  }
}

bool InitSession::CopyBackLastTime(std::function<void()> then) {
  if (!gits_->any.exchange(false)) return false;
  // Every process of the session has ended: nothing writes the private directories any more.
  // The worker keeps them alive on its own; `then` holds only this session's own pointer, and is
  // dropped with the delivery when the session is destroyed first (off_reactor.h).
  Result<void> started = off_reactor_.Run<int>(
      "copies the session's git work back",
      [gits = gits_] {
        CopyBackSessionGits(*gits, /*last=*/true);
        return 0;
      },
      [then = std::move(then)](int) { then(); });
  if (!started) {
    LogWarn(started.error().message + "; the session's last git work was not copied back");
    std::lock_guard lock(gits_->mutex);
    gits_->gits.clear();
    return false;
  }
  copying_back_ = true;
  return true;
}

std::string InitSession::Diagnostics() {
  std::string text;
  if (!diagnostics_) return text;
  char buf[4096];
  while (text.size() < 64 * 1024) {
    ssize_t n = ::read(diagnostics_.Get(), buf, sizeof(buf));
    if (n <= 0) break;
    text.append(buf, static_cast<size_t>(n));
  }
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  return text;
}

}  // namespace ptybox::backend
