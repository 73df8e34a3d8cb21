#include "backend/local_terminal.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <asio/post.hpp>
#include <asio/steady_timer.hpp>
#include <cerrno>
#include <chrono>
#include <string_view>

#include "backend/reply_gate.h"
#include "backend/terminal/screen.h"
#include "common/log.h"
#include "common/proc_stat.h"
#include "common/propagate.h"

namespace ptybox::backend {
namespace {

constexpr size_t kReadChunk = 64 * 1024;
// What one reactor turn spends decoding one session's output, at most (past one slice): a
// session writing faster than it decodes (a full-screen program scrolling a 500x1000 screen
// costs about 1 ms per line feed) gets its turn again after everyone else's, and its writer
// blocks on the full terminal meanwhile (outside review 9: `printf '\e[?1049h'; yes` froze the
// daemon for every owner, SIGTERM included).
constexpr std::chrono::microseconds kDecodeTurnBudget{4000};
// A slice's cost bound, in screen cells: a byte that may move every cell of the screen (a line
// feed, the start of an escape sequence) counts the screen's size, any other byte one.
constexpr size_t kSliceCostCells = 1u << 20;
// An exit is reported once the output before it is decoded, turn by turn. What the terminal
// held at the exit is bounded by its buffers (well under kExitHeldBytes) and always decoded
// first, however long that takes (outside review 12: at 500x1000, 10,000 line feeds and a last
// line before `exit 7` took longer than a flat 2 s cap, and the last line was lost); past it, a
// writer the shell left behind that keeps the terminal full delays the report kExitDrainMax.
constexpr std::chrono::seconds kExitDrainMax{2};
constexpr size_t kExitHeldBytes = 1024 * 1024;

// The bytes that may move every cell of the screen: a line feed (and VT, FF, NEL), the start
// of an escape or control sequence (ESC, CSI, RI). A table, as SliceEnd looks at every byte of
// every session's output (a chain of comparisons there was a fifth of the daemon's CPU under a
// flood of output).
constexpr std::array<bool, 256> kTouchesTheWholeScreen = [] {
  std::array<bool, 256> heavy{};
  for (unsigned char c : {'\n', '\v', '\f', '\x1b', '\x85', '\x9b', '\x8d'}) heavy[c] = true;
  return heavy;
}();

// The end of the slice of `bytes` from `from` whose decoding cost stays within
// kSliceCostCells (at least one byte).
size_t SliceEnd(std::string_view bytes, size_t from, size_t screen_cells) {
  const size_t heavy = std::max<size_t>(screen_cells, 1);
  size_t cost = 0;
  size_t at = from;
  while (at < bytes.size()) {
    cost += kTouchesTheWholeScreen[static_cast<unsigned char>(bytes[at])] ? heavy : 1;
    ++at;
    if (cost >= kSliceCostCells) break;
  }
  return at;
}

SessionStatus StatusFromWait(int wait_status) {
  SessionStatus status;
  status.exited = true;
  if (WIFEXITED(wait_status)) status.exit_code = WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status)) status.signal = WTERMSIG(wait_status);
  return status;
}

}  // namespace

LocalTerminal::LocalTerminal(asio::io_context& io, ChildReaper& reaper, Listener& listener,
                             std::shared_ptr<const sandbox::CgroupHost> cgroups)
    : io_(io),
      listener_(listener),
      init_(io, reaper, *this, "the shell", std::move(cgroups)),
      reply_timer_(io),
      answer_look_timer_(io) {}

LocalTerminal::~LocalTerminal() { *alive_ = false; }

void LocalTerminal::Start(const sandbox::LaunchSpec& spec) {
  screen_cells_ =
      static_cast<size_t>(std::max(spec.rows, 1)) * static_cast<size_t>(std::max(spec.columns, 1));
  init_.Start(spec);
}

void LocalTerminal::OnReady(const sandbox::ReadyMessage& ready, UniqueFd master) {
  if (master_ || !master) return;
  int fd = master.Release();
  pid_t leader = 0;
  if (::ioctl(fd, TIOCGSID, &leader) != 0) leader = 0;
  shell_pid_ = leader;
  init_.set_program_session_leader(leader);
  master_.emplace(io_, fd);
  master_->non_blocking(true);
  // A descriptor of the slave from the master itself (no path lookup in the sandbox's
  // devpts): FIONREAD on it says how much input is still unread.
  slave_.Reset(::ioctl(fd, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC | O_NONBLOCK));
  TerminalIdentity identity;
  identity.slave_dev = ready.slave_dev;
  identity.slave_rdev = ready.slave_rdev;
  identity.session_leader = shell_pid_;
  // Group members are searched below our direct child (bwrap or init), so a member that
  // was orphaned out of the shell's tree is still found.
  inspector_.emplace(fd, identity, init_.child_pid());
  ArmRead();
  listener_.OnTerminalReady();
}

void LocalTerminal::OnProxyListener(uint16_t /*port*/, UniqueFd listener) {
  listener_.OnProxyListener(std::move(listener));
}

void LocalTerminal::OnStartFailed(Error error) { listener_.OnStartFailed(std::move(error)); }

void LocalTerminal::OnProgramExit(SessionStatus status) {
  status_ = status;
  if (exit_reported_ || exit_pending_) return;
  exit_pending_ = true;
  // The exit is reported after the output the shell left (OnShellExit's promise).
  AfterOutputDrained([this] {
    if (exit_reported_) return;
    exit_reported_ = true;
    listener_.OnShellExit(status_);
  });
}

void LocalTerminal::OnInitExit(int wait_status) {
  AfterOutputDrained([this, wait_status] {
    std::weak_ptr<bool> alive = alive_;
    if (!exit_reported_ && master_) {
      if (!status_.exited) status_ = StatusFromWait(wait_status);
      exit_reported_ = true;
      listener_.OnShellExit(status_);
      if (alive.expired()) return;
    }
    FailWrites(Error{ErrorKind::kClosed, "the session has ended", {}});
  });
}

void LocalTerminal::AfterOutputDrained(std::function<void()> then) {
  if (drained_waiters_.empty()) {
    drain_deadline_ = std::chrono::steady_clock::now() + kExitDrainMax;
    drain_held_until_ = bytes_fed_ + (unfed_.size() - unfed_at_) + kExitHeldBytes;
  }
  drained_waiters_.push_back(std::move(then));
  PumpForWaiters();
}

void LocalTerminal::PumpForWaiters() {
  const ReadOutcome outcome = master_ ? ReadAvailable() : ReadOutcome::kEnded;
  // Spent: ReadAvailable posted its continuation, which comes back here. What the terminal held
  // is decoded whole; a writer that never stops (a background job flooding after the shell
  // left) delays the report kExitDrainMax past that.
  if (outcome == ReadOutcome::kBudgetSpent &&
      (bytes_fed_ < drain_held_until_ || std::chrono::steady_clock::now() < drain_deadline_)) {
    return;
  }
  std::weak_ptr<bool> alive = alive_;
  std::vector<std::function<void()>> waiters;
  waiters.swap(drained_waiters_);
  for (std::function<void()>& waiter : waiters) {
    waiter();
    if (alive.expired()) return;
  }
}

Result<void> LocalTerminal::Resize(int rows, int columns) {
  if (!master_ || status_.exited) return Fail(ErrorKind::kClosed, "the terminal is not open");
  struct winsize size {};
  size.ws_row = static_cast<unsigned short>(rows);
  size.ws_col = static_cast<unsigned short>(columns);
  if (::ioctl(master_->native_handle(), TIOCSWINSZ, &size) != 0) {
    return std::unexpected(Error::FromErrno(ErrorKind::kInternal, "ioctl(TIOCSWINSZ)"));
  }
  screen_cells_ =
      static_cast<size_t>(std::max(rows, 1)) * static_cast<size_t>(std::max(columns, 1));
  return {};
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
                        if (ReadAvailable() != ReadOutcome::kEnded && !alive.expired()) ArmRead();
                      });
}

LocalTerminal::ReadOutcome LocalTerminal::ReadAvailable() {
  if (!master_ || output_ended_) return ReadOutcome::kEnded;
  std::weak_ptr<bool> alive = alive_;
  const auto deadline = std::chrono::steady_clock::now() + kDecodeTurnBudget;
  char buf[kReadChunk];
  for (;;) {
    if (unfed_at_ == unfed_.size()) {
      unfed_.clear();
      unfed_at_ = 0;
      ssize_t n = ::read(master_->native_handle(), buf, sizeof(buf));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return ReadOutcome::kDrained;
      if (n <= 0) {
        // EIO (or EOF): every slave descriptor is closed; nothing more will come.
        output_ended_ = true;
        return ReadOutcome::kEnded;
      }
      unfed_.assign(buf, static_cast<size_t>(n));
    }
    while (unfed_at_ < unfed_.size()) {
      const size_t end = SliceEnd(unfed_, unfed_at_, screen_cells_);
      const std::string_view slice = std::string_view(unfed_).substr(unfed_at_, end - unfed_at_);
      unfed_at_ = end;
      bytes_fed_ += slice.size();
      listener_.OnOutput(slice);
      if (alive.expired()) return ReadOutcome::kEnded;
      if (!master_) return ReadOutcome::kEnded;
      if (std::chrono::steady_clock::now() >= deadline) {
        ContinueLater();
        return ReadOutcome::kBudgetSpent;
      }
    }
  }
}

void LocalTerminal::ContinueLater() {
  if (continue_posted_) return;
  continue_posted_ = true;
  std::weak_ptr<bool> alive = alive_;
  // Behind every handler already queued: the other sessions and clients get their turns first.
  asio::post(io_, [this, alive] {
    if (alive.expired()) return;
    continue_posted_ = false;
    if (!drained_waiters_.empty()) {
      PumpForWaiters();
    } else {
      ReadAvailable();
    }
  });
}

bool LocalTerminal::DrainOutput() { return ReadAvailable() != ReadOutcome::kBudgetSpent; }

void LocalTerminal::ReadPendingOutput() { ReadAvailable(); }

std::optional<pid_t> LocalTerminal::ForegroundPgid() {
  if (!inspector_) return std::nullopt;
  return inspector_->ForegroundPgid();
}

std::optional<size_t> LocalTerminal::UnreadInput() {
  if (!slave_) return std::nullopt;
  return UnreadTerminalInput(slave_.Get());
}

bool LocalTerminal::ReassertNoEcho() {
  // Through our own view of the slave: the settings are the terminal's, whoever set them. A
  // failure changes nothing: the send's echo is still recognised and left out of its output.
  termios tio{};
  if (!slave_ || ::tcgetattr(slave_.Get(), &tio) != 0) return false;
  const auto echo = static_cast<tcflag_t>(ECHO | ECHONL);
  if ((tio.c_lflag & echo) == 0) return false;
  tio.c_lflag &= ~echo;
  return ::tcsetattr(slave_.Get(), TCSANOW, &tio) == 0;
}

void LocalTerminal::DiscardUnreadInput() {
  if (slave_) ::tcflush(slave_.Get(), TCIFLUSH);
}

bool LocalTerminal::LineDiscardIsInert() const {
  termios tio{};
  if (!slave_ || ::tcgetattr(slave_.Get(), &tio) != 0) return false;
  constexpr cc_t kKill = 0x15;  // ^U
  if (tio.c_cc[VKILL] != kKill) return false;
  for (const int special : {VINTR, VQUIT, VSUSP, VEOF, VEOL, VEOL2, VLNEXT, VSTART, VSTOP, VDISCARD,
                            VREPRINT, VERASE, VWERASE}) {
    const cc_t c = tio.c_cc[special];
    if (c == kKill || c == static_cast<cc_t>(' ')) return false;
  }
  return true;
}

void LocalTerminal::Inspect(std::function<void(ForegroundFacts)> done) {
  ForegroundFacts facts;
  if (inspector_ && !status_.exited) {
    // Unread input is counted before the walk: a reader the walk then sees waiting had nothing
    // left to read. Counted after it, input written just before (an answer the reply gate
    // released a moment earlier) and consumed during the walk read as 0 while the walk had
    // seen the reader still waiting for it: a wait that was already over.
    const std::optional<size_t> unread = UnreadInput();
    facts = inspector_->Inspect();
    facts.unread_input = unread;
  }
  Deliver(std::move(facts), std::move(done));
}

void LocalTerminal::InspectSince(const ForegroundFacts& verified,
                                 std::function<void(ForegroundFacts)> done) {
  if (inspector_ && !status_.exited && UnreadInput() == size_t{0} &&
      inspector_->StillAsVerified(verified)) {
    ForegroundFacts facts = verified;
    facts.unread_input = 0;
    Deliver(std::move(facts), std::move(done));
    return;
  }
  Inspect(std::move(done));
}

void LocalTerminal::Deliver(ForegroundFacts facts, std::function<void(ForegroundFacts)> done) {
  const uint64_t writes_before = writes_done_;
  std::weak_ptr<bool> alive = alive_;
  asio::post(io_, [this, alive, writes_before, facts = std::move(facts),
                   done = std::move(done)]() mutable {
    if (alive.expired()) return;
    // Output the terminal held when the facts were read is decoded before the facts count.
    // Output still coming after a turn's budget (a flood) makes them stale: the program is
    // writing, and the next look decides.
    if (!DrainOutput()) facts.waiting_for_input = Finding::kUnknown;
    if (alive.expired()) return;
    // A reply still owed to a program: someone is about to get input, the wait is not the
    // user's. Served (written or dropped) first, on a look of its own.
    if (held_replies_) {
      ServeHeldReplies();
      if (held_replies_) facts.waiting_for_input = Finding::kUnknown;
    }
    // Input written since the facts were read (an answer to a cursor position query decoded
    // just now, typically) may wake the reader they saw waiting: the wait is stale.
    if (writes_done_ != writes_before) facts.waiting_for_input = Finding::kUnknown;
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

void LocalTerminal::AnswerQueries(std::string replies) {
  if (replies.empty()) return;
  if (!inspector_ || status_.exited) return;
  const std::optional<pid_t> foreground = inspector_->ForegroundPgid();
  if (held_replies_ && foreground != held_replies_->asked_pgid) {
    // Asked by a group that has left the foreground meanwhile: whoever reads next did not ask.
    held_replies_.reset();
  }
  if (!foreground) return;
  if (!held_replies_) held_replies_ = HeldReplies{{}, *foreground, 0};
  // Bounded as the screen bounds them: a program flooding queries loses the excess.
  if (held_replies_->bytes.size() + replies.size() <= Screen::kMaxReplyBytes) {
    held_replies_->bytes += replies;
  }
  // A look inspects the whole foreground group: one per interval, whatever the program prints
  // (a flood of queries from a group of a thousand tasks stalled every owner for seconds).
  const auto now = std::chrono::steady_clock::now();
  if (now - last_answer_look_ >= kAnswerLookInterval) {
    last_answer_look_ = now;
    ServeHeldReplies();
    return;
  }
  if (answer_look_pending_) return;
  answer_look_pending_ = true;
  answer_look_timer_.expires_at(last_answer_look_ + kAnswerLookInterval);
  std::weak_ptr<bool> alive = alive_;
  answer_look_timer_.async_wait([this, alive](const std::error_code& ec) {
    if (ec || alive.expired()) return;
    answer_look_pending_ = false;
    last_answer_look_ = std::chrono::steady_clock::now();
    ServeHeldReplies();
  });
}

void LocalTerminal::ServeHeldReplies() {
  if (!held_replies_) return;
  ReplyFacts facts;
  facts.asked_pgid = held_replies_->asked_pgid;
  facts.shell_pid = shell_pid_;
  if (inspector_ && !status_.exited) {
    ForegroundFacts now = inspector_->Inspect();
    facts.foreground_pgid = now.foreground_pgid;
    facts.tasks = std::move(now.tasks);
    facts.group_gone =
        facts.foreground_pgid && ::kill(-*facts.foreground_pgid, 0) != 0 && errno == ESRCH;
  }
  switch (DecideReply(facts)) {
    case ReplyAction::kWrite: {
      std::string bytes = std::move(held_replies_->bytes);
      held_replies_.reset();
      reply_timer_.cancel();
      WriteReply(std::move(bytes));
      return;
    }
    case ReplyAction::kDrop:
      held_replies_.reset();
      reply_timer_.cancel();
      return;
    case ReplyAction::kHold:
      break;
  }
  // Nobody of the asking group reads yet: look again a little later (no sleeping here). After
  // the timed looks, the readiness inspections and further answers look.
  if (held_replies_->looks >= kTimedReplyLooks) return;
  reply_timer_.expires_after(ReplyRetryDelay(held_replies_->looks++));
  std::weak_ptr<bool> alive = alive_;
  reply_timer_.async_wait([this, alive](const std::error_code& ec) {
    if (ec || alive.expired()) return;
    ServeHeldReplies();
  });
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
      ssize_t n =
          ::write(master_->native_handle(), w.bytes.data() + w.offset, w.bytes.size() - w.offset);
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
  // (A leader being reaped reads session 0, or -1 in state X, parent 0, while it is released:
  // it is going, not foreign; kill() decides.)
  if (std::optional<::ptybox::proc::StatFields> stat = ::ptybox::proc::ReadStat(pgid);
      stat && stat->session > 0 && stat->state != 'X' && stat->session != shell_pid_) {
    return Fail(ErrorKind::kClosed,
                "the foreground process group " + std::to_string(pgid) +
                    " no longer belongs to this session (its leader is in session " +
                    std::to_string(stat->session) + ", state " + std::string(1, stat->state) +
                    ", parent " + std::to_string(stat->ppid) + "; the shell is " +
                    std::to_string(shell_pid_) + ")");
  }
  return pgid;
}

void LocalTerminal::SignalForeground(int signal, SignalFollowLimit limit,
                                     std::function<void(Result<SignalResult>)> done) {
  EndSignalFollow();  // one signal followed at a time: an earlier one settles as it stands
  // As the terminal driver does for a typed ^C, ^\ or ^Z (unless NOFLSH is set): input that no
  // program has read yet is discarded, so the unread tail of a canceled line never runs as a
  // command of its own after the signal cut the reading short.
  termios tio{};
  if ((signal == SIGINT || signal == SIGQUIT || signal == SIGTSTP) && slave_ &&
      ::tcgetattr(slave_.Get(), &tio) == 0 && (tio.c_lflag & NOFLSH) == 0) {
    ::tcflush(slave_.Get(), TCIFLUSH);
  }
  // A typed key reaches whatever group holds the terminal when it is typed; a signal sent by
  // pid can miss the job of the line the shell runs: the shell itself held the terminal (the
  // job was forked, not yet in the foreground), or the job's leader was still the shell's own
  // image (forked, not yet exec'd), whose copy of the shell's handler took the signal. Such a
  // signal is followed (docs/readiness.md, "Cancellation").
  const bool followed = signal == SIGINT || signal == SIGQUIT || signal == SIGTSTP;
  auto follow = std::make_unique<FollowedSignal>(*this, signal, limit);
  Result<SignalResult> outcome = [&]() -> Result<SignalResult> {
    pid_t vanished = 0;
    for (int attempt = 0; attempt < 2; ++attempt) {
      Result<pid_t> pgid = VerifiedForegroundGroup();
      if (!pgid) return Propagate(pgid);
      vanished = *pgid;
      // Read before the signal: exec is one-way, so a leader that runs its own program now
      // takes the signal with that program's dispositions.
      const LeaderImage before =
          !followed || *pgid == shell_pid_ ? LeaderImage::kShell : LeaderImageOf(*pgid);
      if (::kill(-*pgid, signal) == 0) {
        last_signal_ = DeliveredSignal{std::chrono::steady_clock::now(), *pgid, signal};
        if (followed) follow->follow.Delivered(*pgid, before);
        return SignalResult{true, *pgid};
      }
      if (errno != ESRCH) {
        return std::unexpected(
            Error::FromErrno(ErrorKind::kClosed, "kill", "process group " + std::to_string(*pgid)));
      }
    }
    // The foreground job ended on its own just now and the shell has not taken the terminal
    // back yet (the terminal still names the empty group): nothing is left to signal. Not a
    // transport failure; a cancellation racing the job's natural end settles normally.
    return SignalResult{false, vanished};
  }();
  if (outcome && outcome->delivered && followed && follow->follow.following()) {
    follow_ = std::move(follow);
    StartSignalFollow(std::move(done));
    return;
  }
  if (outcome && outcome->delivered && followed) outcome = follow->follow.result();
  std::weak_ptr<bool> alive = alive_;
  asio::post(io_, [alive, done = std::move(done), outcome = std::move(outcome)] {
    if (!alive.expired()) done(outcome);
  });
}

LeaderImage LocalTerminal::LeaderImageOf(pid_t pgid) const {
  struct stat shell {};
  struct stat leader {};
  if (::stat(("/proc/" + std::to_string(shell_pid_) + "/exe").c_str(), &shell) != 0 ||
      ::stat(("/proc/" + std::to_string(pgid) + "/exe").c_str(), &leader) != 0) {
    return LeaderImage::kUnknown;  // gone (a zombie has no executable) or unreadable
  }
  return shell.st_dev == leader.st_dev && shell.st_ino == leader.st_ino ? LeaderImage::kShell
                                                                        : LeaderImage::kOther;
}

std::optional<pid_t> LocalTerminal::FollowProbe::ForegroundGroup() {
  Result<pid_t> pgid = terminal_.VerifiedForegroundGroup();
  if (!pgid) return std::nullopt;
  return *pgid;
}

bool LocalTerminal::FollowProbe::Deliver(pid_t pgid) {
  if (::kill(-pgid, signal_) != 0) return false;  // gone already: what was sent stands
  terminal_.last_signal_ = DeliveredSignal{std::chrono::steady_clock::now(), pgid, signal_};
  return true;
}

void LocalTerminal::StartSignalFollow(std::function<void(Result<SignalResult>)> done) {
  follow_->timer = std::make_unique<asio::steady_timer>(io_);
  follow_->done = std::move(done);
  follow_->generation = ++follow_generation_;
  LookAgain(follow_->generation);
}

void LocalTerminal::LookAgain(uint64_t generation) {
  if (!follow_ || follow_->generation != generation) return;
  std::optional<std::chrono::milliseconds> next = follow_->follow.Look();
  if (!next) return FinishSignalFollow(follow_->follow.result());
  // A canceled send's follow has no time limit of its own: its settlement (the prompt, silence
  // or the deadline) ends it (EndSignalFollow).
  follow_->timer->expires_after(*next);
  std::weak_ptr<bool> alive = alive_;
  follow_->timer->async_wait([this, alive, generation](const std::error_code& ec) {
    if (alive.expired() || ec) return;
    LookAgain(generation);
  });
}

void LocalTerminal::FinishSignalFollow(Result<SignalResult> outcome) {
  if (!follow_) return;
  std::function<void(Result<SignalResult>)> done = std::move(follow_->done);
  std::unique_ptr<FollowedSignal> ended = std::move(follow_);
  ended->timer->cancel();
  std::weak_ptr<bool> alive = alive_;
  asio::post(io_, [alive, done = std::move(done), outcome = std::move(outcome)] {
    if (!alive.expired()) done(outcome);
  });
}

void LocalTerminal::EndSignalFollow() {
  if (follow_) FinishSignalFollow(follow_->follow.result());
}

void LocalTerminal::Terminate(std::chrono::milliseconds grace,
                              std::function<void(Result<void>)> done) {
  // A real hangup, as when a terminal window closes: with the master closed the kernel hangs
  // up the slave, so a shell that missed its SIGHUP still sees end of input and exits.
  if (init_.started() && !init_.init_exited()) Hangup();
  std::weak_ptr<bool> alive = alive_;
  init_.Terminate(grace, [this, alive, done = std::move(done)](Result<void> result) {
    if (alive.expired()) return;
    if (result) {
      // Everything of the session has ended: release the terminal.
      master_.reset();
      inspector_.reset();
      slave_.Reset();
    }
    done(std::move(result));
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
  held_replies_.reset();
  reply_timer_.cancel();
  FailWrites(Error{ErrorKind::kClosed, "the session is closing", {}});
}

}  // namespace ptybox::backend
