// The local terminal provider: the PTY master one session's ptybox-init handed over, the write
// queue, foreground facts from /proc, signals to the verified foreground group, hangup. The
// processes behind it (launch, init messages, termination, orphans) are its InitSession's.
#pragma once

#include <sys/types.h>

#include <asio/io_context.hpp>
#include <asio/posix/stream_descriptor.hpp>
#include <asio/steady_timer.hpp>
#include <chrono>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend/child_reaper.h"
#include "backend/contract_types.h"
#include "backend/init_session.h"
#include "backend/readiness/foreground_inspector.h"
#include "backend/readiness/signal_follow.h"
#include "backend/readiness/terminal_handle.h"
#include "common/error.h"
#include "sandbox/launcher.h"

namespace ptybox::backend {

class LocalTerminal final : public TerminalHandle, private InitSession::Listener {
 public:
  class Listener {
   public:
    virtual ~Listener() = default;
    // The terminal is up: the shell runs on it. Before this, only OnStartFailed can come.
    virtual void OnTerminalReady() = 0;
    // Setup failed before the shell ran (spawn_failed or sandbox_unavailable).
    virtual void OnStartFailed(Error error) = 0;
    virtual void OnOutput(std::string_view bytes) = 0;
    // The top-level shell exited (its output up to then has been delivered).
    virtual void OnShellExit(SessionStatus status) = 0;
    // Network by name: the session's proxy listener (InitSession::Listener::OnProxyListener).
    virtual void OnProxyListener(UniqueFd /*listener*/) {}
  };

  // `cgroups`: the host setup the session's cgroup is made in (InitSession).
  LocalTerminal(asio::io_context& io, ChildReaper& reaper, Listener& listener,
                std::shared_ptr<const sandbox::CgroupHost> cgroups);
  LocalTerminal(const LocalTerminal&) = delete;
  LocalTerminal& operator=(const LocalTerminal&) = delete;
  ~LocalTerminal() override;

  // Launches init; the outcome arrives through the listener.
  void Start(const sandbox::LaunchSpec& spec);
  // What the launch protected as repositories (InitSession::repositories).
  [[nodiscard]] const sandbox::LaunchRepositories& repositories() const {
    return init_.repositories();
  }
  [[nodiscard]] const std::shared_ptr<SessionGits>& gits() const { return init_.gits(); }

  // TerminalHandle.
  void Inspect(std::function<void(ForegroundFacts)> done) override;
  void InspectSince(const ForegroundFacts& verified,
                    std::function<void(ForegroundFacts)> done) override;
  std::optional<pid_t> ForegroundPgid() override;
  std::optional<size_t> UnreadInput() override;
  bool ReassertNoEcho() override;
  void DiscardUnreadInput() override;
  [[nodiscard]] bool LineDiscardIsInert() const override;
  void Write(std::string bytes, std::function<void(Result<size_t>)> done) override;
  bool AbortWrite() override;
  void SignalForeground(int signal, SignalFollowLimit limit,
                        std::function<void(Result<SignalResult>)> done) override;
  void EndSignalFollow() override;

  // Sets the terminal's size (TIOCSWINSZ on the master): the kernel sends SIGWINCH to the
  // foreground process group when the size changed.
  Result<void> Resize(int rows, int columns);
  // Bytes for the shell ahead of queued input (the nonce line at the start), written as is.
  void WriteReply(std::string bytes);
  // Answers the emulator owes a program (cursor reports, device attributes): held until a
  // reader of the group that was in the foreground when they were asked waits on the terminal,
  // then written ahead of queued input; dropped when whoever reads next did not ask, above all
  // the shell's own line editor (DecideReply, backend/reply_gate.h).
  void AnswerQueries(std::string replies);
  // Decodes what the master already holds, within one turn's budget (kDecodeTurnBudget of the
  // reactor's time): true when everything was decoded (the master said EAGAIN, or the output
  // ended), false when the budget ran out first (the rest follows on later turns).
  bool DrainOutput();
  // Decodes what the master holds, within the same budget: a deadline looks at what arrived
  // without letting a flooding session hold the reactor.
  void ReadPendingOutput();

  // Hangs the terminal up and ends every process of the session (InitSession::Terminate):
  // `done` gets success once nothing of the session runs, or cleanup_failed. Idempotent.
  void Terminate(std::chrono::milliseconds grace, std::function<void(Result<void>)> done);

  struct DeliveredSignal {
    std::chrono::steady_clock::time_point at;
    pid_t pgid = 0;
    int signal = 0;
  };
  // The last signal delivered to a foreground group (by SignalForeground).
  [[nodiscard]] const std::optional<DeliveredSignal>& last_signal() const { return last_signal_; }

  [[nodiscard]] bool ready() const { return master_.has_value(); }
  [[nodiscard]] pid_t shell_pid() const { return shell_pid_; }  // host pid, 0 before ready
  [[nodiscard]] const SessionStatus& status() const { return status_; }
  [[nodiscard]] bool quiet() const { return init_.quiet(); }
  [[nodiscard]] std::optional<size_t> SessionTasks() const { return init_.SessionTasks(); }
  // What bwrap/init printed on their stderr (bounded), for diagnosing a failed start.
  std::string Diagnostics() { return init_.Diagnostics(); }

 private:
  struct PendingWrite {
    std::string bytes;
    size_t offset = 0;
    bool reply = false;
    std::function<void(Result<size_t>)> done;
  };

  // InitSession::Listener.
  void OnReady(const sandbox::ReadyMessage& ready, UniqueFd master) override;
  void OnStartFailed(Error error) override;
  void OnProgramExit(SessionStatus status) override;
  void OnInitExit(int wait_status) override;
  void OnProxyListener(uint16_t port, UniqueFd listener) override;

  // Delivers facts read just now, after decoding the output the terminal holds.
  void Deliver(ForegroundFacts facts, std::function<void(ForegroundFacts)> done);
  void ArmRead();
  enum class ReadOutcome { kDrained, kBudgetSpent, kEnded };
  // Reads the master and hands the bytes to the listener in slices whose decoding cost is
  // bounded (SliceEnd: a line feed or an escape sequence may touch every cell of the screen),
  // until EAGAIN, the end of output, or kDecodeTurnBudget of time; bytes read and not yet
  // handed over wait in `unfed_` for the next call (a posted one: ContinueLater).
  ReadOutcome ReadAvailable();
  void ContinueLater();
  // Runs `then` once the master is drained (or the output ended), decoding turn by turn: at
  // once when one turn's budget suffices.
  void AfterOutputDrained(std::function<void()> then);
  void PumpForWaiters();
  void Flush();
  void FailWrites(const Error& error);
  void Hangup();
  Result<pid_t> VerifiedForegroundGroup();
  // After a signal went to the shell's own group, or to a job whose leader ran the shell's image
  // (forked, not yet exec'd): the follow's looks (SignalFollow, backend/readiness/signal_follow.h)
  // until it is over or EndSignalFollow (the send settled); then `done` runs once
  // (docs/readiness.md, "Cancellation").
  void StartSignalFollow(std::function<void(Result<SignalResult>)> done);
  void LookAgain(uint64_t generation);
  // What the leader of `pgid` runs: the shell's executable (the same file), another, or unknown.
  [[nodiscard]] LeaderImage LeaderImageOf(pid_t pgid) const;
  void FinishSignalFollow(Result<SignalResult> outcome);
  // Decides what happens to the held replies now (one inspection), and arms the next look.
  void ServeHeldReplies();

  asio::io_context& io_;
  Listener& listener_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
  // A signal being followed (StartSignalFollow): the probe that reads and sends for its decisions,
  // the decisions, the timer of the next look, and `done`.
  class FollowProbe final : public SignalFollowProbe {
   public:
    FollowProbe(LocalTerminal& terminal, int signal) : terminal_(terminal), signal_(signal) {}
    std::optional<pid_t> ForegroundGroup() override;
    LeaderImage ImageOf(pid_t pgid) override { return terminal_.LeaderImageOf(pgid); }
    bool Deliver(pid_t pgid) override;

   private:
    LocalTerminal& terminal_;
    int signal_;
  };
  struct FollowedSignal {
    FollowedSignal(LocalTerminal& terminal, int signal, SignalFollowLimit limit)
        : probe(terminal, signal), follow(probe, terminal.shell_pid_, limit) {}
    FollowProbe probe;
    SignalFollow follow;
    std::unique_ptr<asio::steady_timer> timer;
    std::function<void(Result<SignalResult>)> done;
    uint64_t generation = 0;  // tells a stale timer's wake-up from this follow's
  };
  std::unique_ptr<FollowedSignal> follow_;
  uint64_t follow_generation_ = 0;

  InitSession init_;
  std::optional<asio::posix::stream_descriptor> master_;
  std::optional<ForegroundInspector> inspector_;
  UniqueFd slave_;  // our own view of the slave (TIOCGPTPEER), only to count unread input
  pid_t shell_pid_ = 0;
  bool output_ended_ = false;
  bool reading_ = false;
  std::string unfed_;    // read from the master, not yet handed to the listener
  size_t unfed_at_ = 0;  // how much of unfed_ was handed over
  bool continue_posted_ = false;
  size_t screen_cells_ = 0;  // rows x columns: what one line feed may cost the decoder
  std::vector<std::function<void()>> drained_waiters_;
  std::chrono::steady_clock::time_point drain_deadline_;
  uint64_t bytes_fed_ = 0;         // handed to the listener, in all
  uint64_t drain_held_until_ = 0;  // bytes_fed_ once what the terminal held at the exit is fed
  bool exit_pending_ = false;      // OnProgramExit's report waits for the output before it

  std::deque<PendingWrite> writes_;
  bool write_waiting_ = false;
  uint64_t writes_done_ = 0;  // write() calls that put bytes into the terminal's input

  SessionStatus status_;
  std::optional<DeliveredSignal> last_signal_;
  bool exit_reported_ = false;

  struct HeldReplies {
    std::string bytes;
    pid_t asked_pgid = 0;
    int looks = 0;
  };
  std::optional<HeldReplies> held_replies_;
  asio::steady_timer reply_timer_;
  // When answers last made the daemon inspect the session (a /proc walk over the foreground
  // group): a program flooding queries gets one look per kAnswerLookInterval, not one per chunk.
  std::chrono::steady_clock::time_point last_answer_look_{};
  bool answer_look_pending_ = false;
  asio::steady_timer answer_look_timer_;
};

}  // namespace ptybox::backend
