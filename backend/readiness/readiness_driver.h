// Runs one ReadinessEngine against a live terminal: evaluates after every event, runs the
// inspections the engine asks for (one at a time), and keeps one timer armed for the next
// deadline or probe. Used by a session's startup and by every send.
#pragma once

#include <functional>
#include <memory>
#include <optional>

#include "backend/readiness/readiness_engine.h"
#include "backend/readiness/terminal_handle.h"

namespace ptybox::backend {

// What the driver needs from its owner: time, one timer, the terminal.
class ReadinessHost {
 public:
  virtual ~ReadinessHost() = default;
  virtual TimePoint Now() = 0;
  // One timer per driver; arming again replaces it. The owner calls Pump when it fires.
  virtual void ArmTimer(TimePoint at) = 0;
  virtual void CancelTimer() = 0;
  virtual TerminalHandle& terminal() = 0;
  // Whether the decoded output shows a full screen now (the alternate screen, or cursor
  // addressing since the send's write); nullopt when unknown.
  virtual std::optional<bool> ShowsAlternateScreen() { return std::nullopt; }
};

class ReadinessDriver final {
 public:
  using SettleCallback = std::function<void(WaitReason)>;

  ReadinessDriver(ReadinessHost& host, ReadinessEngine engine, SettleCallback on_settle);
  ReadinessDriver(const ReadinessDriver&) = delete;
  ReadinessDriver& operator=(const ReadinessDriver&) = delete;
  ~ReadinessDriver();

  [[nodiscard]] ReadinessEngine& engine() { return engine_; }
  // Evaluates now and acts: settles, starts an inspection, or arms the timer. Re-entrant calls
  // (from output decoded during an inspection) are folded into the running one.
  void Pump();
  // No more inspections or timers until Resume (close in progress).
  void Stop();
  void Resume();

 private:
  // The silence fallback is due with an unverified prompt candidate, and no inspection has
  // looked at the foreground since the handoff grace began (a grace shorter than the poll
  // interval): one last look decides between stdin_read and inferred_idle.
  [[nodiscard]] bool NeedsLastLook(TimePoint now) const;
  void StartInspection();

  ReadinessHost& host_;
  ReadinessEngine engine_;
  SettleCallback on_settle_;
  bool probe_in_flight_ = false;
  bool stopped_ = false;
  bool in_pump_ = false;
  bool repump_ = false;
  bool settle_reported_ = false;
  // When the latest inspection's facts arrived: a fallback with a prompt candidate first looks
  // at the foreground once within the handoff grace (NeedsLastLook).
  std::optional<TimePoint> last_probe_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace ptybox::backend
