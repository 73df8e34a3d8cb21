#include "backend/local_terminal.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <asio/post.hpp>
#include <cerrno>
#include <charconv>
#include <dirent.h>

#include "common/log.h"
#include "sandbox/host_probe.h"
#include "sandbox/init_protocol.h"

namespace ptybox::backend {
namespace {

constexpr size_t kReadChunk = 64 * 1024;
constexpr size_t kReadBudgetPerWakeup = 256 * 1024;
constexpr std::chrono::milliseconds kKillWait{5000};

SessionStatus StatusFromWait(int wait_status) {
  SessionStatus status;
  status.exited = true;
  if (WIFEXITED(wait_status)) status.exit_code = WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status)) status.signal = WTERMSIG(wait_status);
  return status;
}

// Field `index` (1-based, after the comm field) of /proc/<pid>/stat, or nullopt.
std::optional<long> StatField(pid_t pid, int index) {
  std::string path = "/proc/" + std::to_string(pid) + "/stat";
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return std::nullopt;
  char buf[1024];
  ssize_t n = ::read(fd.Get(), buf, sizeof(buf) - 1);
  if (n <= 0) return std::nullopt;
  std::string_view stat(buf, static_cast<size_t>(n));
  size_t close_paren = stat.rfind(')');
  if (close_paren == std::string_view::npos) return std::nullopt;
  // After ") ": field 3 is the state; fields are counted from 3.
  std::string_view rest = stat.substr(close_paren + 2);
  for (int field = 3; field < index; ++field) {
    size_t space = rest.find(' ');
    if (space == std::string_view::npos) return std::nullopt;
    rest.remove_prefix(space + 1);
  }
  long value = 0;
  auto [end, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), value);
  (void)end;
  if (ec != std::errc()) return std::nullopt;
  return value;
}

// Processes that are descendants of `root` (by parent links) or members of session `sid`.
std::vector<pid_t> ProcessesOf(pid_t root, pid_t sid) {
  std::vector<std::pair<pid_t, pid_t>> parent_links;
  std::vector<pid_t> result;
  DIR* dir = ::opendir("/proc");
  if (dir == nullptr) return result;
  while (dirent* entry = ::readdir(dir)) {
    pid_t pid = 0;
    std::string_view name(entry->d_name);
    auto [end, ec] = std::from_chars(name.data(), name.data() + name.size(), pid);
    if (ec != std::errc() || end != name.data() + name.size()) continue;
    std::optional<long> ppid = StatField(pid, 4);
    std::optional<long> session = StatField(pid, 6);
    if (!ppid) continue;
    if (sid > 0 && session && *session == sid) result.push_back(pid);
    parent_links.emplace_back(pid, static_cast<pid_t>(*ppid));
  }
  ::closedir(dir);
  // Breadth-first over parent links from `root`.
  std::vector<pid_t> frontier = {root};
  for (size_t i = 0; i < frontier.size() && frontier.size() < 65536; ++i) {
    for (const auto& [pid, ppid] : parent_links) {
      if (ppid == frontier[i]) {
        frontier.push_back(pid);
        result.push_back(pid);
      }
    }
  }
  return result;
}

}  // namespace

LocalTerminal::LocalTerminal(asio::io_context& io, ChildReaper& reaper, Listener& listener)
    : io_(io), reaper_(reaper), listener_(listener) {}

LocalTerminal::~LocalTerminal() {
  *alive_ = false;
  if (child_pid_ > 0 && !child_exited_) {
    // Last resort; the session normally terminates before it is destroyed.
    if (!confined_) {
      for (pid_t pid : ProcessesOf(child_pid_, shell_pid_)) ::kill(pid, SIGKILL);
    }
    ::kill(child_pid_, SIGKILL);
  }
}

void LocalTerminal::Start(const sandbox::LaunchSpec& spec) {
  confined_ = policy::IsConfined(spec.mode);
  bwrap_ = spec.bwrap;
  Result<sandbox::LaunchedInit> launched = sandbox::LaunchInit(spec);
  if (!launched) {
    Error error = launched.error();
    std::weak_ptr<bool> alive = alive_;
    start_reported_ = true;
    asio::post(io_, [this, alive, error] {
      if (!alive.expired()) listener_.OnStartFailed(error);
    });
    return;
  }
  launched_ = std::move(*launched);
  child_pid_ = launched_.pid;
  if (launched_.diagnostics) {
    ::fcntl(launched_.diagnostics.Get(), F_SETFL, O_NONBLOCK);
  }
  std::weak_ptr<bool> alive = alive_;
  reaper_.Watch(child_pid_, [this, alive](int wait_status) {
    if (!alive.expired()) OnChildExit(wait_status);
  });
  control_.emplace(io_, launched_.control.Release());
  control_->non_blocking(true);
  ReadControl();
}

void LocalTerminal::ReadControl() {
  if (!control_) return;
  std::weak_ptr<bool> alive = alive_;
  control_->async_wait(asio::posix::stream_descriptor::wait_read,
                       [this, alive](const std::error_code& ec) {
                         if (alive.expired() || ec || !control_) return;
                         for (;;) {
                           Result<std::optional<sandbox::ReceivedInitMessage>> received =
                               sandbox::ReceiveInitMessage(control_->native_handle());
                           if (!received) {
                             if (errno == EAGAIN || errno == EWOULDBLOCK) break;
                             LogWarn("control socket: " + received.error().message);
                             control_.reset();
                             return;
                           }
                           if (!*received) {  // init is gone
                             control_.reset();
                             return;
                           }
                           OnControlMessage(std::move(**received));
                           if (alive.expired() || !control_) return;
                         }
                         ReadControl();
                       });
}

void LocalTerminal::OnControlMessage(sandbox::ReceivedInitMessage received) {
  using sandbox::InitMessageType;
  const sandbox::InitMessage& m = received.message;
  switch (m.type) {
    case InitMessageType::kReady: {
      if (master_ || !received.fd) return;
      int fd = received.fd.Release();
      pid_t sid = 0;
      if (::ioctl(fd, TIOCGSID, &sid) != 0) sid = 0;
      shell_pid_ = sid;
      master_.emplace(io_, fd);
      master_->non_blocking(true);
      // A descriptor of the slave from the master itself (no path lookup in the sandbox's
      // devpts): FIONREAD on it says how much input is still unread.
      slave_.Reset(::ioctl(fd, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC | O_NONBLOCK));
      TerminalIdentity identity;
      identity.slave_dev = static_cast<dev_t>(m.c);
      identity.slave_rdev = static_cast<dev_t>(m.d);
      identity.session_id = shell_pid_;
      // Group members are searched below our direct child (bwrap or init), so a member that
      // was orphaned out of the shell's tree is still found.
      inspector_.emplace(fd, identity, child_pid_);
      start_reported_ = true;
      ArmRead();
      listener_.OnTerminalReady();
      return;
    }
    case InitMessageType::kFailed: {
      if (start_reported_) {
        LogWarn("ptybox-init: " + m.payload);
        return;
      }
      start_reported_ = true;
      listener_.OnStartFailed(Error{ErrorKind::kSpawnFailed, "the shell could not start: " + m.payload, {}});
      return;
    }
    case InitMessageType::kExited: {
      SessionStatus status;
      status.exited = true;
      if (m.a >= 0) status.exit_code = m.a;
      if (m.b > 0) status.signal = static_cast<int>(m.b);
      status_ = status;
      if (exit_reported_) return;
      DrainOutput();
      exit_reported_ = true;
      listener_.OnShellExit(status_);
      return;
    }
    case InitMessageType::kQuiet:
      quiet_ = true;
      return;
    default:
      LogWarn("ptybox-init sent an unknown message type " +
              std::to_string(static_cast<uint32_t>(m.type)));
      return;
  }
}

void LocalTerminal::OnChildExit(int wait_status) {
  child_exited_ = true;
  std::weak_ptr<bool> alive = alive_;
  if (!start_reported_) {
    start_reported_ = true;
    std::string diagnostics = Diagnostics();
    Error error;
    if (confined_) {
      error = sandbox::DiagnoseSandboxFailure(bwrap_, diagnostics);
    } else {
      error = Error{ErrorKind::kSpawnFailed,
                    "ptybox-init exited before the shell started" +
                        (diagnostics.empty() ? std::string() : ": " + diagnostics),
                    {}};
    }
    listener_.OnStartFailed(std::move(error));
    if (alive.expired()) return;
  }
  if (!confined_ && !quiet_) {
    // init went away without reporting quiet (killed from inside the session): its orphans
    // re-parented to us; end whatever is left of the session.
    for (pid_t pid : ProcessesOf(child_pid_, shell_pid_)) ::kill(pid, SIGKILL);
  }
  quiet_ = true;
  if (master_) DrainOutput();
  if (alive.expired()) return;
  if (!exit_reported_ && master_) {
    if (!status_.exited) status_ = StatusFromWait(wait_status);
    exit_reported_ = true;
    listener_.OnShellExit(status_);
    if (alive.expired()) return;
  }
  FailWrites(Error{ErrorKind::kClosed, "the session has ended", {}});
  if (terminating_) FinishTermination({});
}

void LocalTerminal::ArmRead() {
  if (!master_ || output_ended_ || reading_) return;
  reading_ = true;
  std::weak_ptr<bool> alive = alive_;
  master_->async_wait(asio::posix::stream_descriptor::wait_read,
                      [this, alive](const std::error_code& ec) {
                        if (alive.expired()) return;
                        reading_ = false;
                        if (ec || !master_) return;
                        if (ReadAvailable(kReadBudgetPerWakeup) && !alive.expired()) ArmRead();
                      });
}

bool LocalTerminal::ReadAvailable(size_t budget) {
  if (!master_ || output_ended_) return false;
  std::weak_ptr<bool> alive = alive_;
  char buf[kReadChunk];
  size_t total = 0;
  while (total < budget) {
    ssize_t n = ::read(master_->native_handle(), buf, sizeof(buf));
    if (n > 0) {
      total += static_cast<size_t>(n);
      listener_.OnOutput(std::string_view(buf, static_cast<size_t>(n)));
      if (alive.expired()) return false;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    // EIO (or EOF): every slave descriptor is closed; nothing more will come.
    output_ended_ = true;
    return false;
  }
  return true;
}

void LocalTerminal::DrainOutput() { ReadAvailable(SIZE_MAX); }

std::optional<pid_t> LocalTerminal::ForegroundPgid() {
  if (!inspector_) return std::nullopt;
  return inspector_->ForegroundPgid();
}

std::optional<size_t> LocalTerminal::UnreadInput() {
  int queued = 0;
  if (!slave_ || ::ioctl(slave_.Get(), FIONREAD, &queued) != 0 || queued < 0) return std::nullopt;
  return static_cast<size_t>(queued);
}

void LocalTerminal::Inspect(std::function<void(ForegroundFacts)> done) {
  ForegroundFacts facts;
  if (inspector_ && !status_.exited) {
    facts = inspector_->Inspect();
    facts.unread_input = UnreadInput();
  }
  const uint64_t writes_before = writes_done_;
  std::weak_ptr<bool> alive = alive_;
  asio::post(io_, [this, alive, writes_before, facts = std::move(facts),
                   done = std::move(done)]() mutable {
    if (alive.expired()) return;
    // Output the terminal held when the facts were read is decoded before the facts count.
    DrainOutput();
    if (alive.expired()) return;
    // Input written since the facts were read (an answer to a cursor position query decoded
    // just now, typically) may wake the reader they saw waiting: the wait is stale.
    if (writes_done_ != writes_before) facts.waiting_for_input = Tri::kUnknown;
    done(std::move(facts));
  });
}

void LocalTerminal::Write(std::string bytes, std::function<void(Result<size_t>)> done) {
  writes_.push_back(PendingWrite{std::move(bytes), 0, false, std::move(done)});
  Flush();
}

void LocalTerminal::WriteReply(std::string bytes) {
  auto at = writes_.begin();
  if (at != writes_.end() && at->offset > 0) ++at;  // never split a write already started
  writes_.insert(at, PendingWrite{std::move(bytes), 0, true, nullptr});
  Flush();
}

bool LocalTerminal::AbortWrite() {
  for (auto it = writes_.begin(); it != writes_.end(); ++it) {
    if (it->reply) continue;
    size_t written = it->offset;
    const bool dropped = written < it->bytes.size();
    std::function<void(Result<size_t>)> done = std::move(it->done);
    writes_.erase(it);
    std::weak_ptr<bool> alive = alive_;
    asio::post(io_, [alive, done = std::move(done), written] {
      if (!alive.expired() && done) done(written);
    });
    return dropped;
  }
  return false;
}

void LocalTerminal::Flush() {
  std::weak_ptr<bool> alive = alive_;
  if (!master_ || status_.exited) {
    if (!writes_.empty() && (status_.exited || output_ended_)) {
      FailWrites(Error{ErrorKind::kClosed, "the session has ended", {}});
    }
    return;
  }
  // At most this much per turn of the reactor: a reader that keeps up with a huge input must not
  // hold the reactor (and every deadline, this send's own included) inside this loop.
  constexpr size_t kWriteBytesPerTurn = 64 * 1024;
  size_t written_this_turn = 0;
  while (!writes_.empty()) {
    PendingWrite& w = writes_.front();
    if (w.offset < w.bytes.size() && written_this_turn >= kWriteBytesPerTurn) {
      if (write_waiting_) return;
      write_waiting_ = true;
      asio::post(io_, [this, alive] {
        if (alive.expired()) return;
        write_waiting_ = false;
        Flush();
      });
      return;
    }
    if (w.offset < w.bytes.size()) {
      ssize_t n = ::write(master_->native_handle(), w.bytes.data() + w.offset,
                          w.bytes.size() - w.offset);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        if (write_waiting_) return;
        write_waiting_ = true;
        master_->async_wait(asio::posix::stream_descriptor::wait_write,
                            [this, alive](const std::error_code& ec) {
                              if (alive.expired()) return;
                              write_waiting_ = false;
                              if (!ec) Flush();
                            });
        return;
      }
      if (n < 0) {
        FailWrites(Error::FromErrno(ErrorKind::kClosed, "write", "the terminal"));
        return;
      }
      w.offset += static_cast<size_t>(n);
      written_this_turn += static_cast<size_t>(n);
      ++writes_done_;
      if (w.offset < w.bytes.size()) continue;
    }
    size_t written = w.offset;
    std::function<void(Result<size_t>)> done = std::move(w.done);
    writes_.pop_front();
    if (done) {
      asio::post(io_, [alive, done = std::move(done), written] {
        if (!alive.expired()) done(written);
      });
    }
  }
}

void LocalTerminal::FailWrites(const Error& error) {
  std::weak_ptr<bool> alive = alive_;
  while (!writes_.empty()) {
    std::function<void(Result<size_t>)> done = std::move(writes_.front().done);
    writes_.pop_front();
    if (!done) continue;
    asio::post(io_, [alive, done = std::move(done), error] {
      if (!alive.expired()) done(std::unexpected(error));
    });
  }
}

Result<pid_t> LocalTerminal::VerifiedForegroundGroup() {
  if (!master_) return Fail(ErrorKind::kClosed, "the terminal is not open");
  pid_t pgid = 0;
  if (::ioctl(master_->native_handle(), TIOCGPGRP, &pgid) != 0 || pgid <= 0) {
    return std::unexpected(
        Error::FromErrno(ErrorKind::kClosed, "ioctl TIOCGPGRP", "the session's terminal"));
  }
  // The kernel only reports a group of this terminal's session; check the leader still belongs
  // to it, so a recycled pid never receives our signal.
  // (A leader being reaped reads session 0: it is going, not foreign; kill() decides.)
  if (std::optional<long> session = StatField(pgid, 6);
      session && *session != 0 && *session != shell_pid_) {
    return Fail(ErrorKind::kClosed, "the foreground process group " + std::to_string(pgid) +
                                        " no longer belongs to this session");
  }
  return pgid;
}

void LocalTerminal::SignalForeground(int signal, std::function<void(Result<SignalResult>)> done) {
  // As the terminal driver does for a typed ^C, ^\ or ^Z (unless NOFLSH is set): input that no
  // program has read yet is discarded, so the unread tail of a canceled line never runs as a
  // command of its own after the signal cut the reading short.
  termios tio{};
  if ((signal == SIGINT || signal == SIGQUIT || signal == SIGTSTP) && slave_ &&
      ::tcgetattr(slave_.Get(), &tio) == 0 && (tio.c_lflag & NOFLSH) == 0) {
    ::tcflush(slave_.Get(), TCIFLUSH);
  }
  Result<SignalResult> outcome = [&]() -> Result<SignalResult> {
    pid_t vanished = 0;
    for (int attempt = 0; attempt < 2; ++attempt) {
      Result<pid_t> pgid = VerifiedForegroundGroup();
      if (!pgid) return std::unexpected(pgid.error());
      vanished = *pgid;
      if (::kill(-*pgid, signal) == 0) {
        last_signal_ = DeliveredSignal{std::chrono::steady_clock::now(), *pgid, signal};
        return SignalResult{true, *pgid};
      }
      if (errno != ESRCH) {
        return std::unexpected(Error::FromErrno(ErrorKind::kClosed, "kill",
                                                "process group " + std::to_string(*pgid)));
      }
    }
    // The foreground job ended on its own just now and the shell has not taken the terminal
    // back yet (the terminal still names the empty group): nothing is left to signal. Not a
    // transport failure; a cancellation racing the job's natural end settles normally.
    return SignalResult{false, vanished};
  }();
  std::weak_ptr<bool> alive = alive_;
  asio::post(io_, [alive, done = std::move(done), outcome = std::move(outcome)] {
    if (!alive.expired()) done(outcome);
  });
}

void LocalTerminal::Terminate(std::chrono::milliseconds grace,
                              std::function<void(Result<void>)> done) {
  std::weak_ptr<bool> alive = alive_;
  if (child_pid_ <= 0 || child_exited_) {
    // Never started, or already gone (with its whole tree).
    asio::post(io_, [alive, done = std::move(done)] {
      if (!alive.expired()) done({});
    });
    return;
  }
  terminate_waiters_.push_back(std::move(done));
  if (terminating_) return;
  terminating_ = true;
  escalation_ = 0;
  bool asked = false;
  if (control_) {
    sandbox::InitMessage terminate;
    terminate.type = sandbox::InitMessageType::kTerminate;
    terminate.b = grace.count();
    asked = static_cast<bool>(sandbox::SendInitMessage(control_->native_handle(), terminate));
  }
  // A real hangup, as when a terminal window closes: with the master closed the kernel hangs
  // up the slave, so a shell that missed its SIGHUP still sees end of input and exits.
  Hangup();
  terminate_timer_.emplace(io_);
  // init needs `grace` plus the SIGKILL round; give it a little more before stepping in.
  terminate_timer_->expires_after(asked ? grace + std::chrono::milliseconds(2000)
                                        : std::chrono::milliseconds(0));
  terminate_timer_->async_wait([this, alive](const std::error_code& ec) {
    if (!alive.expired() && !ec) EscalateTermination();
  });
}

void LocalTerminal::Hangup() {
  if (master_) {
    DrainOutput();
    std::error_code ignored;
    master_->close(ignored);
    master_.reset();
  }
  inspector_.reset();
  slave_.Reset();
  FailWrites(Error{ErrorKind::kClosed, "the session is closing", {}});
}

void LocalTerminal::EscalateTermination() {
  if (child_exited_) return;
  std::weak_ptr<bool> alive = alive_;
  if (escalation_ == 0) {
    escalation_ = 1;
    LogWarn("session did not end on request; killing its process tree");
    if (!confined_) {
      for (pid_t pid : ProcessesOf(child_pid_, shell_pid_)) ::kill(pid, SIGKILL);
    }
    // Confined: bwrap's --die-with-parent chain takes the whole pid namespace down with it.
    ::kill(child_pid_, SIGKILL);
    terminate_timer_->expires_after(kKillWait);
    terminate_timer_->async_wait([this, alive](const std::error_code& ec) {
      if (!alive.expired() && !ec) EscalateTermination();
    });
    return;
  }
  // Still there after SIGKILL: stuck in the kernel (D state). Report; a retry may succeed.
  std::string left;
  for (pid_t pid : ProcessesOf(child_pid_, confined_ ? 0 : shell_pid_)) {
    left += (left.empty() ? "" : ", ") + std::to_string(pid);
  }
  terminating_ = false;
  FinishTermination(Fail(ErrorKind::kCleanupFailed,
                         "the session's processes did not end after SIGKILL (pid " +
                             std::to_string(child_pid_) + (left.empty() ? "" : "; " + left) +
                             "); they may be stuck in the kernel. Retry terminal_close."));
}

void LocalTerminal::FinishTermination(Result<void> result) {
  if (result) {
    terminating_ = false;
    if (terminate_timer_) terminate_timer_->cancel();
    // Everything of the session has ended: release the terminal.
    master_.reset();
    inspector_.reset();
    slave_.Reset();
    control_.reset();
  }
  std::vector<std::function<void(Result<void>)>> waiters;
  waiters.swap(terminate_waiters_);
  std::weak_ptr<bool> alive = alive_;
  for (auto& waiter : waiters) {
    asio::post(io_, [alive, waiter = std::move(waiter), result] {
      if (!alive.expired()) waiter(result);
    });
  }
}

std::string LocalTerminal::Diagnostics() {
  std::string text;
  if (!launched_.diagnostics) return text;
  char buf[4096];
  while (text.size() < 64 * 1024) {
    ssize_t n = ::read(launched_.diagnostics.Get(), buf, sizeof(buf));
    if (n <= 0) break;
    text.append(buf, static_cast<size_t>(n));
  }
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  return text;
}

}  // namespace ptybox::backend
