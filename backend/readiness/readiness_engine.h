// Decides when one send (or a session's startup) is ready again, and why. A pure state machine:
// it is fed events with their times (the write boundary, output, prompt candidates, foreground
// facts) and never reads a clock or touches a process; the session acts on its decisions.
// Every rule is a sentence of docs/readiness.md ("The rules of the engine").
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>

#include "backend/contract_types.h"
#include "backend/readiness/foreground_inspector.h"

namespace ptybox::backend {

using Clock = std::chrono::steady_clock;
using TimePoint = Clock::time_point;
using Millis = std::chrono::milliseconds;

struct ReadinessTimings {
  Millis idle_silence{3000};
  Millis handoff_grace{500};
  Millis timeout{30000};
  Millis poll_interval{50};
  Millis exact_probe_after{150};
};

class ReadinessEngine final {
 public:
  enum class Purpose {
    kStartup,  // an unpublished session: no write; a fallback needs observed output
    kSend,     // one send: evidence counts only after its write boundary
  };

  // `shell_pgid` is the process group of the top-level shell: only while it is in the
  // foreground does a prompt candidate prove readiness.
  ReadinessEngine(Purpose purpose, ReadinessTimings timings, pid_t shell_pgid, TimePoint start);

  // The foreground facts observed just before the write: the baseline that tells a stdin wait
  // that already existed from one that began after the write.
  void OnPreWriteFacts(const ForegroundFacts& facts);
  // The write boundary: prompt and silence evidence collected before it is discarded.
  void OnWriteStarted(TimePoint now);
  // The write finished (or was cut short); silence is measured from here.
  void OnWriteSettled(TimePoint now);
  // Bytes arrived from the terminal.
  void OnOutput(TimePoint now);
  // The printable tail after an owned marker equals the controlled PS1. `foreground_pgid` is the
  // terminal's foreground group read when the candidate completed (nullopt = unknown);
  // `unread_input` the bytes of input still queued in the terminal (nullopt = unknown). A prompt
  // proves readiness only while the shell is in the foreground and has read all our input, as
  // confirmed by an inspection made after the candidate was decoded (OnProbe): the shell may
  // have printed this prompt and then read more of our input before we decoded it.
  void OnPromptCandidate(TimePoint now, std::optional<pid_t> foreground_pgid,
                         std::optional<size_t> unread_input = size_t{0});
  // Printable output followed the candidate: it is no longer a prompt at the end of the output.
  void OnPromptInvalidated();
  // A cheap re-read of the foreground group and the unread input (no /proc inspection).
  void OnForegroundPgid(TimePoint now, std::optional<pid_t> foreground_pgid,
                        std::optional<size_t> unread_input = size_t{0});
  // A full inspection of the foreground group.
  void OnProbe(TimePoint now, const ForegroundFacts& facts);
  // The top-level shell exited.
  void OnSessionExit();

  struct Decision {
    std::optional<WaitReason> settle;   // set once: the engine is settled from then on
    std::optional<TimePoint> wake_at;   // the next deadline (silence, grace, timeout)
    std::optional<TimePoint> probe_at;  // when the next inspection is due
    bool probe_now = false;             // an inspection is due now: run it, feed OnProbe
  };
  Decision Evaluate(TimePoint now);

  [[nodiscard]] bool settled() const { return settled_.has_value(); }
  // True when the send settled on the verified prompt (so exitCode and cwd are meaningful).
  [[nodiscard]] bool settled_by_prompt() const { return settled_by_prompt_; }
  [[nodiscard]] bool has_candidate() const { return candidate_; }
  [[nodiscard]] bool output_seen() const { return output_seen_; }
  // When the silence fallback (inferred_idle) is due, grace included; nullopt while none is.
  [[nodiscard]] std::optional<TimePoint> FallbackAt() const { return SilenceDeadline(); }
  [[nodiscard]] Millis handoff_grace() const { return timings_.handoff_grace; }
  // The facts of the inspection that confirmed the prompt the engine settled at (the shell
  // blocked reading at its own prompt, nothing unread); nullopt unless settled by the prompt.
  [[nodiscard]] std::optional<ForegroundFacts> verifying_facts() const {
    return settled_by_prompt_ ? verifying_facts_ : std::nullopt;
  }

 private:
  enum class Stage { kBeforeWrite, kWriting, kWaiting };
  struct WaitIdentity {
    uint64_t run_ns = 0;
    uint64_t switches = 0;
  };
  // The waiting tasks of one inspection, to confirm a wait by a second, later look.
  struct WaitSnapshot {
    pid_t pgid = 0;
    TimePoint at{};
    std::map<pid_t, WaitIdentity> waits;  // tid -> identity
    bool outside = false;                 // a waiting task is outside the foreground group
    // A steady loop's wait: its tasks wake every period, so a later look confirms it by the
    // same tasks still in the loop (SteadyLoop holds again), not by unchanged counters.
    bool loop = false;
    [[nodiscard]] bool Same(const WaitSnapshot& other) const;
  };
  static constexpr Millis kConfirmGap{2};
  // The first look after activity (a write settled, output): most programs that print a prompt
  // block on the terminal within microseconds of writing it.
  static constexpr std::chrono::microseconds kFirstProbeStep{500};
  // A reader outside the foreground group may be relaying (a tmux server forwards our input to
  // a pane and waits for the pane's output in the same poll as for the terminal): its wait must
  // hold this long, with no output, before it counts.
  static constexpr Millis kRelayConfirmGap{100};
  // A wait on the terminal whose own timeout is at most this long (every waiting task's) ends by
  // itself: a program's timer (node's setTimeout with the terminal still in its epoll set), an
  // editor telling a lone ESC from a key sequence, a poller's tick. It is a wait for the user
  // only once it is seen to recur as a steady loop (SteadyLoop). Longer waits (and waits with no
  // timeout) count when seen twice: the silence bound would run out before they do.
  static constexpr Millis kLongWait{3000};
  // A steady loop spans at least this long between its two looks, so that two waits a
  // moment apart (an ESC timeout, then the next one) are not one loop.
  static constexpr Millis kMinLoopSpan{100};
  static bool IsTimedWait(const ForegroundFacts& facts);
  // A full-screen program waiting for a key between redraws: the terminal raw, a full screen
  // (alternate, or cursor-addressed since the write) drawn since the write, and every waiting task
  // in a timed wait of at least kMinKeyPollWait (top's refresh, pinentry's poll, htop's). Such a
  // wait is taken as a wait for the user (seen twice) without waiting for it to recur. An editor's
  // ESC timeout (25-100 ms) stays below the bound.
  bool FullScreenWaitsForAKey(const ForegroundFacts& facts) const;
  static constexpr Millis kMinKeyPollWait{250};
  // Tracks the loop mark and answers whether `facts` (a timed wait) closes a steady loop:
  // the same tasks seen waiting on the terminal before, each woken since and back in a wait
  // with a like timeout, at least kMinLoopSpan later, with at most half a core used in
  // between, and no output in between unless the terminal is raw (a key-driven program's
  // redraws). Otherwise it starts a new mark when the facts do not continue the current one.
  bool SteadyLoop(TimePoint now, const ForegroundFacts& facts);
  static WaitSnapshot SnapshotOf(const ForegroundFacts& facts, TimePoint now);
  // A fresh wait that one look proves (no second look needed): an untimed wait inside the
  // group, nothing unread, and a group that is complete (the shell's own, or the one that was
  // in the foreground before the write).
  bool FirstLookProves(const ForegroundFacts& facts, const WaitSnapshot& seen) const;

  void Settle(WaitReason reason, bool by_prompt);
  bool ExactWaitIsFresh(const ForegroundFacts& facts) const;
  bool CandidateVerified() const;
  // The facts show the shell's own task, alone, reading the terminal from its own group: what
  // makes a prompt candidate the shell's prompt rather than a program's imitation of it.
  bool ShellItselfReads(const ForegroundFacts& facts) const;
  void ScheduleProbeAfterActivity(TimePoint activity);
  void AdvanceProbeSchedule(TimePoint now);
  std::optional<TimePoint> SilenceDeadline() const;

  Purpose purpose_;
  ReadinessTimings timings_;
  pid_t shell_pgid_;
  TimePoint deadline_;
  Stage stage_;

  bool output_seen_ = false;                // any output after the boundary (startup: any output)
  std::optional<TimePoint> last_activity_;  // write settled or last output, whichever is later
  bool candidate_ = false;
  std::optional<pid_t> candidate_fg_;  // foreground group last seen while the candidate held
  // An inspection after the candidate saw the shell still at it (not running on).
  bool candidate_confirmed_ = false;
  // The candidate asked for an immediate look that has not run yet.
  bool candidate_probe_due_ = false;
  std::optional<ForegroundFacts> verifying_facts_;  // of the look that confirmed the candidate
  // Our input was still unread when the candidate completed: the shell reads it after this
  // prompt, so this prompt cannot be the end of the send.
  bool candidate_before_input_ = false;
  bool input_drained_ = true;  // no input queued in the terminal when last seen
  bool session_exited_ = false;
  bool exact_wait_ = false;                   // a fresh stdin wait was observed, and confirmed
  std::optional<WaitSnapshot> pending_wait_;  // a fresh wait seen once, awaiting its confirmation

  // Steady-loop bookkeeping: the first look of a possible input loop.
  struct LoopTask {
    uint64_t switches = 0;
    int64_t timeout_ms = 0;
  };
  struct LoopMark {
    pid_t pgid = 0;
    TimePoint at{};
    std::map<pid_t, LoopTask> waits;   // tid -> its timed wait
    std::map<pid_t, uint64_t> run_ns;  // every inspected task's on-CPU time
  };
  std::optional<LoopMark> loop_mark_;
  bool output_since_mark_ = false;

  // Stale-wait bookkeeping.
  bool baseline_known_ = false;
  std::optional<pid_t> baseline_pgid_;
  std::map<pid_t, WaitIdentity> baseline_waits_;  // tid -> identity of its pre-write wait
  std::map<pid_t, bool> left_wait_;               // pgid -> seen outside a wait after the write

  // Probe schedule.
  std::optional<TimePoint> next_probe_;
  TimePoint probe_phase_start_{};
  std::chrono::microseconds probe_step_{kFirstProbeStep};

  std::optional<WaitReason> settled_;
  bool settled_by_prompt_ = false;
};

}  // namespace ptybox::backend
