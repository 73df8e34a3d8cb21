// The local terminal provider: one session's ptybox-init (inside bwrap or not), the PTY master it
// handed over, the write queue, foreground facts from /proc, signals to the verified foreground
// group, and complete termination of the session's process tree.
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

#include "backend/child_reaper.h"
#include "backend/foreground_inspector.h"
#include "backend/terminal_handle.h"
#include "backend/types.h"
#include "common/error.h"
#include "sandbox/init_protocol.h"
#include "sandbox/launcher.h"

namespace ptybox::backend {

class LocalTerminal final : public TerminalHandle {
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
  };

  LocalTerminal(asio::io_context& io, ChildReaper& reaper, Listener& listener);
  LocalTerminal(const LocalTerminal&) = delete;
  LocalTerminal& operator=(const LocalTerminal&) = delete;
  ~LocalTerminal() override;

  // Launches init; the outcome arrives through the listener.
  void Start(const sandbox::LaunchSpec& spec);

  // TerminalHandle.
  void Inspect(std::function<void(ForegroundFacts)> done) override;
  std::optional<pid_t> ForegroundPgid() override;
  std::optional<size_t> UnreadInput() override;
  void Write(std::string bytes, std::function<void(Result<size_t>)> done) override;
  bool AbortWrite() override;
  void SignalForeground(int signal, std::function<void(Result<SignalResult>)> done) override;

  // Answers the terminal owes a program (cursor reports): written ahead of queued input.
  void WriteReply(std::string bytes);
  // Decodes what the master already holds, synchronously.
  void DrainOutput();

  // Ends every process of the session: SIGHUP/SIGTERM, `grace`, then SIGKILL, awaited.
  // `done` gets success once nothing of the session runs, or cleanup_failed. Idempotent: a
  // second call while one runs joins it; after success it answers at once.
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
  [[nodiscard]] bool quiet() const { return quiet_; }
  // What bwrap/init printed on their stderr (bounded), for diagnosing a failed start.
  std::string Diagnostics();

 private:
  struct PendingWrite {
    std::string bytes;
    size_t offset = 0;
    bool reply = false;
    std::function<void(Result<size_t>)> done;
  };

  void ReadControl();
  void OnControlMessage(sandbox::ReceivedInitMessage received);
  void OnChildExit(int wait_status);
  void ArmRead();
  bool ReadAvailable(size_t budget);
  void Flush();
  void FailWrites(const Error& error);
  void FinishTermination(Result<void> result);
  void EscalateTermination();
  void Hangup();
  Result<pid_t> VerifiedForegroundGroup();

  asio::io_context& io_;
  ChildReaper& reaper_;
  Listener& listener_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);

  bool confined_ = false;
  std::filesystem::path bwrap_;
  pid_t child_pid_ = -1;  // our direct child: bwrap or init
  bool child_exited_ = false;
  std::optional<asio::posix::stream_descriptor> control_;
  sandbox::LaunchedInit launched_;
  std::optional<asio::posix::stream_descriptor> master_;
  std::optional<ForegroundInspector> inspector_;
  UniqueFd slave_;  // our own view of the slave (TIOCGPTPEER), only to count unread input
  pid_t shell_pid_ = 0;
  bool output_ended_ = false;
  bool reading_ = false;

  std::deque<PendingWrite> writes_;
  bool write_waiting_ = false;
  uint64_t writes_done_ = 0;  // write() calls that put bytes into the terminal's input

  SessionStatus status_;
  std::optional<DeliveredSignal> last_signal_;
  bool exit_reported_ = false;
  bool start_reported_ = false;

  // Termination.
  bool terminating_ = false;
  bool quiet_ = false;
  std::vector<std::function<void(Result<void>)>> terminate_waiters_;
  std::optional<asio::steady_timer> terminate_timer_;
  int escalation_ = 0;
};

}  // namespace ptybox::backend
