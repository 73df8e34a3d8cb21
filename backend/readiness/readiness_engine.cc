#include "backend/readiness/readiness_engine.h"

#include <algorithm>

namespace ptybox::backend {

ReadinessEngine::ReadinessEngine(Purpose purpose, ReadinessTimings timings, pid_t shell_pgid,
                                 TimePoint start)
    : purpose_(purpose),
      timings_(timings),
      shell_pgid_(shell_pgid),
      deadline_(start + timings.timeout),
      stage_(purpose == Purpose::kStartup ? Stage::kWaiting : Stage::kBeforeWrite) {
  if (purpose_ == Purpose::kStartup) ScheduleProbeAfterActivity(start);
}

void ReadinessEngine::OnPreWriteFacts(const ForegroundFacts& facts) {
  if (stage_ != Stage::kBeforeWrite) return;
  baseline_known_ = facts.foreground_pgid.has_value();
  baseline_pgid_ = facts.foreground_pgid;
  baseline_waits_.clear();
  for (const TaskFacts& task : facts.tasks) {
    if (task.tty_wait != TtyWait::kNone) {
      baseline_waits_[task.tid] = WaitIdentity{task.run_ns, task.switches};
    }
  }
}

void ReadinessEngine::OnWriteStarted(TimePoint /*now*/) {
  if (settled()) return;
  // The write boundary: whatever was seen before it says nothing about this send.
  stage_ = Stage::kWriting;
  candidate_ = false;
  candidate_confirmed_ = false;
  candidate_probe_due_ = false;
  verifying_facts_.reset();
  candidate_fg_.reset();
  output_seen_ = false;
  last_activity_.reset();
  exact_wait_ = false;
  pending_wait_.reset();
  loop_mark_.reset();
  output_since_mark_ = false;
  left_wait_.clear();
  next_probe_.reset();
}

void ReadinessEngine::OnWriteSettled(TimePoint now) {
  if (settled() || stage_ != Stage::kWriting) return;
  stage_ = Stage::kWaiting;
  last_activity_ = last_activity_ ? std::max(*last_activity_, now) : now;
  ScheduleProbeAfterActivity(now);
}

void ReadinessEngine::OnOutput(TimePoint now) {
  if (settled() || stage_ == Stage::kBeforeWrite) return;
  pending_wait_.reset();  // a wait seen before this output is not confirmed by a later look
  output_since_mark_ = true;
  output_seen_ = true;
  last_activity_ = now;
  if (stage_ != Stage::kWaiting) return;
  const std::optional<TimePoint> due = next_probe_;
  ScheduleProbeAfterActivity(now);
  // The look a complete prompt candidate asked for is not pushed back by output that follows
  // it (a CSI after PS1 keeps the candidate; printable text drops it, and OnPromptInvalidated
  // then returns to the activity schedule).
  if (candidate_probe_due_ && due) next_probe_ = std::min(*next_probe_, *due);
}

void ReadinessEngine::OnPromptCandidate(TimePoint now, std::optional<pid_t> foreground_pgid,
                                        std::optional<size_t> unread_input) {
  if (settled() || stage_ == Stage::kBeforeWrite) return;
  candidate_ = true;
  candidate_confirmed_ = false;
  candidate_probe_due_ = false;
  candidate_fg_ = foreground_pgid;
  // Unknown counts as drained: the check guards multi-line input, it is not evidence itself.
  input_drained_ = unread_input.value_or(0) == 0;
  candidate_before_input_ = !input_drained_;
  // Readline blocks in read() right after printing PS1: confirm at once, not a poll step later.
  if (stage_ == Stage::kWaiting && !candidate_before_input_) {
    next_probe_ = now;
    candidate_probe_due_ = true;
  }
}

bool ReadinessEngine::CandidateVerified() const {
  return candidate_ && candidate_confirmed_ && !candidate_before_input_ &&
         candidate_fg_ == shell_pgid_ && input_drained_;
}

bool ReadinessEngine::ShellItselfReads(const ForegroundFacts& facts) const {
  // A program can print a marker too (a child that read the nonce, or one that joined the
  // shell's process group and took the terminal), then wait in read() while the shell waits
  // for it. Only the shell's own reading is its prompt: the shell's main task (its pid is the
  // session id, and its process group) waits on the terminal, its group is the foreground
  // group, and no other task, of the group or elsewhere, waits on the terminal.
  if (facts.foreground_pgid != shell_pgid_) return false;
  bool shell_reads = false;
  for (const TaskFacts& task : facts.tasks) {
    if (task.tty_wait == TtyWait::kNone) continue;
    if (task.outside_group || task.pid != shell_pgid_ || task.tid != shell_pgid_) return false;
    shell_reads = true;
  }
  return shell_reads;
}

void ReadinessEngine::OnPromptInvalidated() {
  candidate_ = false;
  candidate_confirmed_ = false;
  candidate_fg_.reset();
  if (candidate_probe_due_) {
    // The look asked for the candidate is not needed any more: back to the activity schedule.
    candidate_probe_due_ = false;
    if (stage_ == Stage::kWaiting && last_activity_) ScheduleProbeAfterActivity(*last_activity_);
  }
}

void ReadinessEngine::OnForegroundPgid(TimePoint /*now*/, std::optional<pid_t> foreground_pgid,
                                       std::optional<size_t> unread_input) {
  if (!candidate_) return;
  candidate_fg_ = foreground_pgid;
  input_drained_ = unread_input.value_or(0) == 0;
}

void ReadinessEngine::OnProbe(TimePoint now, const ForegroundFacts& facts) {
  if (settled()) return;
  candidate_probe_due_ = false;
  const bool drained = facts.unread_input.value_or(0) == 0;
  if (candidate_) {
    candidate_fg_ = facts.foreground_pgid;
    input_drained_ = drained;
    // The facts were read after the candidate was decoded, and output up to them has been
    // decoded since (a later prompt would have replaced the candidate). Only a shell blocked
    // reading the terminal is still at this prompt: one seen running has read more of our
    // input after printing it (multi-line input, typeahead), and unknown (a fork or exit
    // during the walk) proves nothing.
    candidate_confirmed_ = stage_ == Stage::kWaiting && facts.waiting_for_input == Finding::kYes &&
                           ShellItselfReads(facts);
    if (candidate_confirmed_) verifying_facts_ = facts;
  }
  if (stage_ != Stage::kWaiting) return;
  if (facts.foreground_pgid) {
    if (facts.waiting_for_input == Finding::kYes && !drained) {
      // A reader with our input still queued is about to read it: not waiting for more.
    } else if (facts.waiting_for_input == Finding::kYes && IsTimedWait(facts) &&
               !FullScreenWaitsForAKey(facts) && !SteadyLoop(now, facts)) {
      // Waiting with a timeout that runs out before the silence bound (a timer of the program,
      // an editor telling a lone ESC from a key sequence): the program goes on by itself soon,
      // so it is not waiting for the user unless it keeps coming back to this wait.
      pending_wait_.reset();
      AdvanceProbeSchedule(now);
      return;
    } else if (facts.waiting_for_input == Finding::kYes) {
      if (!IsTimedWait(facts)) loop_mark_.reset();
      if (ExactWaitIsFresh(facts)) {
        // Exact evidence is a wait seen twice: the same tasks in the same wait (their
        // scheduler counters unchanged), kConfirmGap apart, with no output in between. A
        // program's last output can still be on its way through the pty when it starts to wait;
        // whatever it leads to (a query answered, a prompt decoded) shows up in between.
        WaitSnapshot seen = SnapshotOf(facts, now);
        // Only a recognised steady loop gets this far with a timed wait, or a full-screen
        // program waiting for a key (confirmed by unchanged counters, like any wait).
        seen.loop = IsTimedWait(facts) && !FullScreenWaitsForAKey(facts);
        const Millis gap = seen.outside ? kRelayConfirmGap : kConfirmGap;
        if (FirstLookProves(facts, seen)) {
          exact_wait_ = true;
        } else if (pending_wait_ && pending_wait_->Same(seen) && now - pending_wait_->at >= gap) {
          exact_wait_ = true;
        } else {
          if (!pending_wait_ || !pending_wait_->Same(seen)) pending_wait_ = std::move(seen);
          // The confirming look comes right at the gap, not at the next step of the backoff.
          next_probe_ = std::max(now + Millis(1), pending_wait_->at + gap);
          return;
        }
      } else {
        pending_wait_.reset();
      }
    } else {
      pending_wait_.reset();
      // The group was seen outside its wait: any later wait of it is new.
      if (facts.waiting_for_input == Finding::kNo) left_wait_[*facts.foreground_pgid] = true;
    }
  } else {
    pending_wait_.reset();
  }
  AdvanceProbeSchedule(now);
}

bool ReadinessEngine::IsTimedWait(const ForegroundFacts& facts) {
  bool any_wait = false;
  for (const TaskFacts& task : facts.tasks) {
    if (task.tty_wait == TtyWait::kNone) continue;
    any_wait = true;
    if (!task.wait_timeout_ms || *task.wait_timeout_ms > kLongWait.count()) return false;
  }
  return any_wait;
}

bool ReadinessEngine::FullScreenWaitsForAKey(const ForegroundFacts& facts) const {
  if (facts.canonical != false || facts.alternate_screen != true || !output_seen_) return false;
  bool any_wait = false;
  for (const TaskFacts& task : facts.tasks) {
    if (task.tty_wait == TtyWait::kNone) continue;
    if (!task.wait_timeout_ms || *task.wait_timeout_ms < kMinKeyPollWait.count()) return false;
    any_wait = true;
  }
  return any_wait;
}

bool ReadinessEngine::SteadyLoop(TimePoint now, const ForegroundFacts& facts) {
  LoopMark seen;
  seen.pgid = facts.foreground_pgid.value_or(0);
  seen.at = now;
  for (const TaskFacts& task : facts.tasks) {
    seen.run_ns[task.tid] = task.run_ns;
    if (task.tty_wait == TtyWait::kNone) continue;
    seen.waits[task.tid] = LoopTask{task.switches, task.wait_timeout_ms.value_or(0)};
  }
  auto restart = [&] {
    loop_mark_ = std::move(seen);
    output_since_mark_ = false;
    return false;
  };
  if (!loop_mark_ || loop_mark_->pgid != seen.pgid ||
      loop_mark_->waits.size() != seen.waits.size()) {
    return restart();
  }
  // Output in between is a redraw only from a program that reads keys (raw or cbreak); in
  // line mode it is news (node printing what its timer computed), and the loop starts over.
  if (output_since_mark_ && facts.canonical != false) return restart();
  bool all_woke = true;
  for (const auto& [tid, now_wait] : seen.waits) {
    auto it = loop_mark_->waits.find(tid);
    if (it == loop_mark_->waits.end()) return restart();
    const int64_t a = it->second.timeout_ms;
    const int64_t b = now_wait.timeout_ms;
    // The same wait again: a like timeout (a poller's period; asyncio's 497, 500, 499 ms),
    // not the next of a series of different waits (vi's 25 ms, then 100 ms, then 4 s).
    if (a <= 0 || b <= 0 || std::max(a, b) > 2 * std::min(a, b)) return restart();
    if (now_wait.switches == it->second.switches) all_woke = false;
  }
  const auto span = now - loop_mark_->at;
  if (!all_woke || span < kMinLoopSpan) return false;  // keep watching from the same mark
  uint64_t cpu_ns = 0;
  for (const auto& [tid, run_ns] : seen.run_ns) {
    auto it = loop_mark_->run_ns.find(tid);
    if (it != loop_mark_->run_ns.end() && run_ns > it->second) cpu_ns += run_ns - it->second;
  }
  const auto span_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(span).count();
  // A loop that works between its waits (a job with a progress poll) is not waiting.
  if (cpu_ns * 2 > static_cast<uint64_t>(span_ns)) return restart();
  return true;
}

ReadinessEngine::WaitSnapshot ReadinessEngine::SnapshotOf(const ForegroundFacts& facts,
                                                          TimePoint now) {
  WaitSnapshot snapshot;
  snapshot.pgid = facts.foreground_pgid.value_or(0);
  snapshot.at = now;
  for (const TaskFacts& task : facts.tasks) {
    if (task.tty_wait == TtyWait::kNone) continue;
    snapshot.waits[task.tid] = WaitIdentity{task.run_ns, task.switches};
    snapshot.outside = snapshot.outside || task.outside_group;
  }
  return snapshot;
}

bool ReadinessEngine::WaitSnapshot::Same(const WaitSnapshot& other) const {
  if (pgid != other.pgid || loop != other.loop || waits.size() != other.waits.size()) {
    return false;
  }
  for (const auto& [tid, identity] : waits) {
    auto it = other.waits.find(tid);
    if (it == other.waits.end()) return false;
    if (loop) continue;  // a loop goes round between looks; SteadyLoop vouched for both
    if (it->second.run_ns != identity.run_ns || it->second.switches != identity.switches) {
      return false;
    }
  }
  return true;
}

void ReadinessEngine::OnSessionExit() { session_exited_ = true; }

bool ReadinessEngine::FirstLookProves(const ForegroundFacts& facts,
                                      const WaitSnapshot& seen) const {
  if (purpose_ != Purpose::kSend) return false;
  // A timed wait counts only as a steady loop, a relay only after its longer gap.
  if (seen.loop || seen.outside) return false;
  // Nothing of our input unread, known (not assumed): the reader has consumed what we wrote.
  if (!facts.unread_input || *facts.unread_input != 0) return false;
  // Every byte the group wrote before the facts were read was decoded before they were
  // applied (the inspector drains the master first, and a read of a pty master flushes what
  // the slave wrote), and a reply the daemon wrote meanwhile made the facts unknown. What the
  // second look still guards is a group the shell is still building: it forks a pipeline's
  // members one after another into a new group, which may be seen waiting before its last
  // member exists. The shell's own group (its `read` builtin, `x=$(cat)`) and a group that was
  // already in the foreground before the write (a REPL, `cat`) are complete: a member added to
  // them now would be forked by a member, and a forking member is seen running.
  const pid_t pgid = *facts.foreground_pgid;
  return pgid == shell_pgid_ || (baseline_known_ && baseline_pgid_ == pgid);
}

bool ReadinessEngine::ExactWaitIsFresh(const ForegroundFacts& facts) const {
  const pid_t pgid = *facts.foreground_pgid;
  if (purpose_ == Purpose::kStartup) return true;  // nothing was written: no stale wait exists
  auto left = left_wait_.find(pgid);
  if (left != left_wait_.end() && left->second) return true;
  // Without a baseline we cannot tell an old wait from a new one: it must be seen left first.
  if (!baseline_known_) return false;
  // A changed foreground group is new evidence.
  if (baseline_pgid_ != pgid) return true;
  // Same group: a waiting task that was not waiting before the write, or that has run since
  // (its scheduler counters moved), left the pre-write wait and entered a new one.
  for (const TaskFacts& task : facts.tasks) {
    if (task.tty_wait == TtyWait::kNone) continue;
    auto before = baseline_waits_.find(task.tid);
    if (before == baseline_waits_.end()) return true;
    if (before->second.run_ns != task.run_ns || before->second.switches != task.switches) {
      return true;
    }
  }
  return false;
}

void ReadinessEngine::ScheduleProbeAfterActivity(TimePoint activity) {
  probe_phase_start_ = activity;
  probe_step_ = kFirstProbeStep;
  next_probe_ = activity + probe_step_;
}

void ReadinessEngine::AdvanceProbeSchedule(TimePoint now) {
  // Fast phase: right after activity, probes back off from 0.5 ms by half a step each time
  // (0.5, 1.25, 2.4, 4.1 … ms) so that an exact wait is seen within milliseconds; after
  // exactProbeAfterMs they continue every pollIntervalMs.
  const std::chrono::microseconds poll = timings_.poll_interval;
  if (now - probe_phase_start_ < timings_.exact_probe_after) {
    probe_step_ = std::min(probe_step_ * 3 / 2, poll);
  } else {
    probe_step_ = poll;
  }
  next_probe_ = now + probe_step_;
}

std::optional<TimePoint> ReadinessEngine::SilenceDeadline() const {
  if (stage_ != Stage::kWaiting || !last_activity_) return std::nullopt;
  // During unpublished startup, zero-output silence never publishes.
  if (purpose_ == Purpose::kStartup && !output_seen_) return std::nullopt;
  TimePoint at = *last_activity_ + timings_.idle_silence;
  // An unverified prompt candidate stays alive past the silence bound so that a coincident
  // return of the shell to the foreground can still win.
  if (candidate_) at += timings_.handoff_grace;
  return at;
}

void ReadinessEngine::Settle(WaitReason reason, bool by_prompt) {
  settled_ = reason;
  settled_by_prompt_ = by_prompt;
  next_probe_.reset();
}

ReadinessEngine::Decision ReadinessEngine::Evaluate(TimePoint now) {
  if (!settled()) {
    std::optional<TimePoint> silence = SilenceDeadline();
    if (session_exited_) {
      Settle(WaitReason::kSessionExit, false);
    } else if (stage_ == Stage::kWaiting && CandidateVerified()) {
      Settle(WaitReason::kStdinRead, true);
    } else if (stage_ == Stage::kWaiting && exact_wait_) {
      Settle(WaitReason::kStdinRead, false);
    } else if (silence && now >= *silence && *silence <= deadline_) {
      Settle(WaitReason::kInferredIdle, false);
    } else if (now >= deadline_) {
      Settle(WaitReason::kTimeout, false);
    }
  }
  Decision decision;
  if (settled()) {
    decision.settle = settled_;
    return decision;
  }
  TimePoint wake = deadline_;
  if (std::optional<TimePoint> silence = SilenceDeadline()) wake = std::min(wake, *silence);
  decision.wake_at = wake;
  if (next_probe_) {
    decision.probe_at = next_probe_;
    decision.probe_now = now >= *next_probe_;
  }
  return decision;
}

}  // namespace ptybox::backend
