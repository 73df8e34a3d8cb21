// One test per sentence of docs/readiness.md ("The rules of the engine"), driven with an injected
// clock and hand-made foreground facts.
#include "backend/readiness/readiness_engine.h"

#include <gtest/gtest.h>

#include <optional>

namespace ptybox::backend {
namespace {

using std::chrono::milliseconds;

constexpr pid_t kShell = 100;
constexpr pid_t kChild = 200;

ReadinessTimings Timings() {
  ReadinessTimings t;
  t.idle_silence = milliseconds(3000);
  t.handoff_grace = milliseconds(500);
  t.timeout = milliseconds(30000);
  t.poll_interval = milliseconds(50);
  t.exact_probe_after = milliseconds(150);
  return t;
}

TaskFacts Task(pid_t tid, TtyWait wait, uint64_t run_ns, bool running = false) {
  TaskFacts t;
  t.pid = tid;
  t.tid = tid;
  t.tty_wait = wait;
  t.run_ns = run_ns;
  t.running = running;
  return t;
}

ForegroundFacts Waiting(pid_t pgid, uint64_t run_ns) {
  ForegroundFacts f;
  f.foreground_pgid = pgid;
  f.waiting_for_input = Finding::kYes;
  f.tasks = {Task(pgid, TtyWait::kRead, run_ns)};
  return f;
}

ForegroundFacts Busy(pid_t pgid) {
  ForegroundFacts f;
  f.foreground_pgid = pgid;
  f.waiting_for_input = Finding::kNo;
  f.tasks = {Task(pgid, TtyWait::kNone, 1, /*running=*/true)};
  return f;
}

// A stdin wait counts once a second look, kConfirmGap later, finds the same wait.
void SeenTwice(ReadinessEngine& e, TimePoint at, const ForegroundFacts& facts) {
  e.OnProbe(at, facts);
  EXPECT_FALSE(e.Evaluate(at).settle) << "one look is not enough";
  e.OnProbe(at + milliseconds(2), facts);
}

class EngineTest : public ::testing::Test {
 protected:
  TimePoint t0_ = TimePoint{} + std::chrono::hours(1);
  TimePoint At(int ms) const { return t0_ + milliseconds(ms); }

  ReadinessEngine SendEngine(ReadinessTimings timings = Timings()) {
    return ReadinessEngine(ReadinessEngine::Purpose::kSend, timings, kShell, t0_);
  }
  // Baseline: the shell at its prompt, blocked reading the terminal.
  static void WriteAt(ReadinessEngine& e, TimePoint t) {
    e.OnPreWriteFacts(Waiting(kShell, 1000));
    e.OnWriteStarted(t);
    e.OnWriteSettled(t);
  }
};

TEST_F(EngineTest, PromptSettlesOnTheFirstInspectionThatFindsTheShellStillAtIt) {
  ReadinessEngine e = SendEngine();
  WriteAt(e, At(0));
  e.OnOutput(At(2));
  e.OnPromptCandidate(At(2), kShell);
  // The shell may have printed this prompt and read more input before it was decoded.
  ReadinessEngine::Decision d = e.Evaluate(At(2));
  EXPECT_FALSE(d.settle);
  ASSERT_TRUE(d.probe_at);
  EXPECT_TRUE(d.probe_now);        // asked for at once
  e.OnProbe(At(2), Busy(kShell));  // readline still setting up: not refuted for good
  EXPECT_FALSE(e.Evaluate(At(3)).settle);
  e.OnProbe(At(5), Waiting(kShell, 1000));
  d = e.Evaluate(At(5));
  ASSERT_TRUE(d.settle);
  EXPECT_EQ(*d.settle, WaitReason::kStdinRead);
  EXPECT_TRUE(e.settled_by_prompt());
}

// A program that joined the shell's group, took the terminal and printed a marker (the forger
// of the security review) waits in read() while the shell waits for it: that is a stdin wait of
// the program, never the shell's prompt, so it carries no exit code.
TEST_F(EngineTest, AForgedPromptWhileAProgramOfTheShellsGroupReadsIsNotThePrompt) {
  ReadinessEngine e = SendEngine();
  WriteAt(e, At(0));
  e.OnOutput(At(2));
  e.OnPromptCandidate(At(2), kShell);
  ForegroundFacts forged;
  forged.foreground_pgid = kShell;
  forged.waiting_for_input = Finding::kYes;
  forged.tasks = {Task(kShell, TtyWait::kNone, 1000), Task(kChild, TtyWait::kRead, 50)};
  e.OnProbe(At(3), forged);
  e.OnProbe(At(6), forged);
  ReadinessEngine::Decision d = e.Evaluate(At(6));
  ASSERT_TRUE(d.settle);  // a stdin wait, as for any program reading the terminal
  EXPECT_EQ(*d.settle, WaitReason::kStdinRead);
  EXPECT_FALSE(e.settled_by_prompt());
  EXPECT_FALSE(e.verifying_facts());
}

TEST_F(EngineTest, APromptNeedsTheShellToBeTheOnlyReader) {
  for (bool outside : {false, true}) {
    ReadinessEngine e = SendEngine();
    WriteAt(e, At(0));
    e.OnOutput(At(2));
    e.OnPromptCandidate(At(2), kShell);
    ForegroundFacts two = Waiting(kShell, 1000);
    TaskFacts other = Task(kChild, TtyWait::kRead, 50);
    other.outside_group = outside;
    two.tasks.push_back(other);
    e.OnProbe(At(3), two);
    ReadinessEngine::Decision d = e.Evaluate(At(3));
    EXPECT_FALSE(d.settle && e.settled_by_prompt()) << "outside " << outside;
  }
  // A reading task of the shell's group that is not the shell's own main task.
  ReadinessEngine e = SendEngine();
  WriteAt(e, At(0));
  e.OnOutput(At(2));
  e.OnPromptCandidate(At(2), kShell);
  ForegroundFacts thread = Waiting(kShell, 1000);
  thread.tasks[0].tid = kShell + 1;
  e.OnProbe(At(3), thread);
  ReadinessEngine::Decision d = e.Evaluate(At(3));
  EXPECT_FALSE(d.settle && e.settled_by_prompt());
  // The shell alone: the prompt.
  ReadinessEngine alone = SendEngine();
  WriteAt(alone, At(0));
  alone.OnOutput(At(2));
  alone.OnPromptCandidate(At(2), kShell);
  alone.OnProbe(At(3), Waiting(kShell, 1000));
  d = alone.Evaluate(At(3));
  ASSERT_TRUE(d.settle);
  EXPECT_TRUE(alone.settled_by_prompt());
}

TEST_F(EngineTest, UnknownStdinFactsDoNotConfirmAPrompt) {
  ReadinessEngine e = SendEngine();
  WriteAt(e, At(0));
  e.OnOutput(At(2));
  e.OnPromptCandidate(At(2), kShell);
  ForegroundFacts unknown;  // e.g. the shell forked `sleep` while it was inspected
  unknown.foreground_pgid = kShell;
  unknown.waiting_for_input = Finding::kUnknown;
  e.OnProbe(At(3), unknown);
  EXPECT_FALSE(e.Evaluate(At(3)).settle);
  e.OnProbe(At(5), Waiting(kShell, 1000));
  ReadinessEngine::Decision d = e.Evaluate(At(5));
  ASSERT_TRUE(d.settle);
  EXPECT_TRUE(e.settled_by_prompt());
}

TEST_F(EngineTest, PromptThatTheShellRanPastIsNotTheEnd) {
  ReadinessEngine e = SendEngine();
  WriteAt(e, At(0));
  // "echo a\necho b\n": the prompt after `echo a` is decoded after bash already read "echo b"
  // (nothing unread any more), and bash is running it.
  e.OnOutput(At(1));
  e.OnPromptCandidate(At(1), kShell, size_t{0});
  e.OnProbe(At(2), Busy(kShell));
  EXPECT_FALSE(e.Evaluate(At(2)).settle);
  e.OnOutput(At(3));  // "b", then the last prompt
  e.OnPromptInvalidated();
  e.OnPromptCandidate(At(3), kShell, size_t{0});
  e.OnProbe(At(4), Waiting(kShell, 4000));
  ReadinessEngine::Decision d = e.Evaluate(At(4));
  ASSERT_TRUE(d.settle);
  EXPECT_TRUE(e.settled_by_prompt());
}

TEST_F(EngineTest, PromptEvidenceBeforeTheWriteIsDiscardedAtTheBoundary) {
  ReadinessEngine e = SendEngine();
  // A candidate reported before the write (the previous prompt) says nothing about this send.
  e.OnPromptCandidate(At(0), kShell);
  EXPECT_FALSE(e.Evaluate(At(1)).settle);
  e.OnWriteStarted(At(1));
  e.OnWriteSettled(At(1));
  EXPECT_FALSE(e.has_candidate());
  EXPECT_FALSE(e.Evaluate(At(2)).settle);
}

TEST_F(EngineTest, CandidateWhilePreWriteInspectionPendingIsDiscarded) {
  ReadinessEngine e = SendEngine();
  // The pre-write inspection has not answered yet; a prompt arrives meanwhile.
  e.OnOutput(At(0));
  e.OnPromptCandidate(At(0), kShell);
  e.OnPreWriteFacts(Waiting(kShell, 5));
  e.OnWriteStarted(At(1));
  e.OnWriteSettled(At(1));
  EXPECT_FALSE(e.Evaluate(At(1)).settle);
  EXPECT_FALSE(e.output_seen());
}

TEST_F(EngineTest, SilenceBeforeTheWriteDoesNotCount) {
  ReadinessEngine e = SendEngine();
  e.OnOutput(At(0));
  // Pre-write inspection takes long; the silence bound passes before the write.
  EXPECT_FALSE(e.Evaluate(At(3500)).settle);
  e.OnPreWriteFacts(Waiting(kShell, 5));
  e.OnWriteStarted(At(3500));
  e.OnWriteSettled(At(3500));
  EXPECT_FALSE(e.Evaluate(At(6499)).settle);
  ReadinessEngine::Decision d = e.Evaluate(At(6500));
  ASSERT_TRUE(d.settle);
  EXPECT_EQ(*d.settle, WaitReason::kInferredIdle);
}

TEST_F(EngineTest, CandidateDuringAnUnfinishedWriteWaitsForTheWrite) {
  ReadinessEngine e = SendEngine();
  e.OnPreWriteFacts(Waiting(kShell, 5));
  e.OnWriteStarted(At(0));
  e.OnOutput(At(1));
  e.OnPromptCandidate(At(1), kShell);
  e.OnProbe(At(2), Waiting(kShell, 5));
  EXPECT_FALSE(e.Evaluate(At(2)).settle);
  e.OnWriteSettled(At(3));
  EXPECT_FALSE(e.Evaluate(At(3)).settle);
  e.OnProbe(At(4), Waiting(kShell, 5));
  ReadinessEngine::Decision d = e.Evaluate(At(4));
  ASSERT_TRUE(d.settle);
  EXPECT_EQ(*d.settle, WaitReason::kStdinRead);
}

TEST_F(EngineTest, PromptWithOurInputStillQueuedIsNotReady) {
  ReadinessEngine e = SendEngine();
  WriteAt(e, At(0));
  e.OnOutput(At(1));
  // "echo a\necho b\n": the prompt after `echo a` while "echo b\n" is still unread.
  e.OnPromptCandidate(At(1), kShell, size_t{7});
  EXPECT_FALSE(e.Evaluate(At(1)).settle);
  ForegroundFacts shell_reading = Waiting(kShell, 5000);
  shell_reading.unread_input = 7;
  e.OnProbe(At(2), shell_reading);
  EXPECT_FALSE(e.Evaluate(At(2)).settle);
  e.OnPromptInvalidated();
  e.OnPromptCandidate(At(3), kShell, size_t{0});  // the prompt after `echo b`
  e.OnProbe(At(4), Waiting(kShell, 6000));
  EXPECT_EQ(*e.Evaluate(At(4)).settle, WaitReason::kStdinRead);
  EXPECT_TRUE(e.settled_by_prompt());
}

TEST_F(EngineTest, PromptPrintedBeforeOurInputWasReadNeverVerifies) {
  ReadinessEngine e = SendEngine();
  WriteAt(e, At(0));
  // Typed ahead while a command ran: its prompt comes while "read x\n" is still unread; bash
  // then reads it and blocks in `read` without printing anything.
  e.OnOutput(At(1));
  e.OnPromptCandidate(At(1), kShell, size_t{7});
  SeenTwice(e, At(2), Waiting(kShell, 6000));  // a wait that began after the write
  ReadinessEngine::Decision d = e.Evaluate(At(4));
  ASSERT_TRUE(d.settle);
  EXPECT_EQ(*d.settle, WaitReason::kStdinRead);
  EXPECT_FALSE(e.settled_by_prompt());  // no exit code of a command that has not finished
}

TEST_F(EngineTest, OutputAfterTheCandidateInvalidatesIt) {
  ReadinessEngine e = SendEngine();
  WriteAt(e, At(0));
  e.OnPromptCandidate(At(1), kChild);  // not verified: a child is in the foreground
  e.OnPromptInvalidated();             // and more output followed it
  e.OnForegroundPgid(At(2), kShell);
  EXPECT_FALSE(e.Evaluate(At(2)).settle);
}

TEST_F(EngineTest, InheritedMarkerOfAChildCannotSettleButItsStdinWaitCan) {
  ReadinessEngine e = SendEngine();
  WriteAt(e, At(0));
  e.OnOutput(At(5));
  e.OnPromptCandidate(At(5), kChild);  // nested bash printed a marker in its own group
  EXPECT_FALSE(e.Evaluate(At(5)).settle);
  SeenTwice(e, At(6), Waiting(kChild, 7));  // the child group waits for input: a changed group
  ReadinessEngine::Decision d = e.Evaluate(At(8));
  ASSERT_TRUE(d.settle);
  EXPECT_EQ(*d.settle, WaitReason::kStdinRead);
  EXPECT_FALSE(e.settled_by_prompt());
}

TEST_F(EngineTest, InheritedMarkerCannotHoldOffInferredIdleUntilTheTimeout) {
  ReadinessEngine e = SendEngine();
  WriteAt(e, At(0));
  e.OnOutput(At(10));
  e.OnPromptCandidate(At(10), kChild);
  // No stdin facts at all (a provider that cannot tell): silence plus grace decides.
  ForegroundFacts unknown;
  unknown.foreground_pgid = kChild;
  unknown.waiting_for_input = Finding::kUnknown;
  e.OnProbe(At(100), unknown);
  EXPECT_FALSE(e.Evaluate(At(3010)).settle);  // the ordinary silence bound: grace still running
  EXPECT_FALSE(e.Evaluate(At(3509)).settle);
  ReadinessEngine::Decision d = e.Evaluate(At(3510));
  ASSERT_TRUE(d.settle);
  EXPECT_EQ(*d.settle, WaitReason::kInferredIdle);
}

TEST_F(EngineTest, HandoffWithinGraceWinsOverSilence) {
  ReadinessEngine e = SendEngine();
  WriteAt(e, At(0));
  e.OnOutput(At(10));
  // bash printed the marker before the terminal reports its return to the foreground
  e.OnPromptCandidate(At(10), kChild);
  EXPECT_FALSE(e.Evaluate(At(3200)).settle);
  e.OnProbe(At(3300), Waiting(kShell, 1000));  // the coincident handoff, inside the grace
  ReadinessEngine::Decision d = e.Evaluate(At(3300));
  ASSERT_TRUE(d.settle);
  EXPECT_EQ(*d.settle, WaitReason::kStdinRead);
  EXPECT_TRUE(e.settled_by_prompt());
}

TEST_F(EngineTest, UnknownForegroundIsNeverAPositiveSignal) {
  ReadinessEngine e = SendEngine();
  WriteAt(e, At(0));
  e.OnOutput(At(1));
  e.OnPromptCandidate(At(1), std::nullopt);
  EXPECT_FALSE(e.Evaluate(At(1)).settle);
  ForegroundFacts unknown;  // no pgid at all
  e.OnProbe(At(50), unknown);
  EXPECT_FALSE(e.Evaluate(At(50)).settle);
  ReadinessEngine::Decision d = e.Evaluate(At(3501));
  ASSERT_TRUE(d.settle);
  EXPECT_EQ(*d.settle, WaitReason::kInferredIdle);
}

TEST_F(EngineTest, PreWriteStdinWaitIsNotPostWriteReadiness) {
  ReadinessEngine e = SendEngine();
  e.OnPreWriteFacts(Waiting(kChild, 500));  // e.g. `cat` already waiting before this send
  e.OnWriteStarted(At(0));
  e.OnWriteSettled(At(0));
  // The same wait, not yet woken by the input: same task, same scheduler counters.
  e.OnProbe(At(1), Waiting(kChild, 500));
  EXPECT_FALSE(e.Evaluate(At(1)).settle);
  e.OnProbe(At(3), Waiting(kChild, 500));
  EXPECT_FALSE(e.Evaluate(At(3)).settle);
}

TEST_F(EngineTest, SameGroupSeenOutsideItsWaitMakesTheNextWaitCount) {
  ReadinessEngine e = SendEngine();
  e.OnPreWriteFacts(Waiting(kChild, 500));
  e.OnWriteStarted(At(0));
  e.OnWriteSettled(At(0));
  e.OnProbe(At(1), Waiting(kChild, 500));
  EXPECT_FALSE(e.Evaluate(At(1)).settle);
  e.OnProbe(At(3), Busy(kChild));  // observed outside the wait
  EXPECT_FALSE(e.Evaluate(At(3)).settle);
  SeenTwice(e, At(7), Waiting(kChild, 500));
  ReadinessEngine::Decision d = e.Evaluate(At(9));
  ASSERT_TRUE(d.settle);
  EXPECT_EQ(*d.settle, WaitReason::kStdinRead);
}

TEST_F(EngineTest, AWaitingTaskThatRanSinceTheBaselineIsInANewWait) {
  ReadinessEngine e = SendEngine();
  e.OnPreWriteFacts(Waiting(kShell, 1000));  // the shell at its prompt
  e.OnWriteStarted(At(0));
  e.OnWriteSettled(At(0));
  // `read x`: the shell consumed the line (it ran) and blocks in the read builtin.
  SeenTwice(e, At(2), Waiting(kShell, 1900));
  ReadinessEngine::Decision d = e.Evaluate(At(4));
  ASSERT_TRUE(d.settle);
  EXPECT_EQ(*d.settle, WaitReason::kStdinRead);
  EXPECT_FALSE(e.settled_by_prompt());
}

TEST_F(EngineTest, ChangedForegroundGroupIsNewEvidence) {
  ReadinessEngine e = SendEngine();
  e.OnPreWriteFacts(Waiting(kShell, 1000));
  e.OnWriteStarted(At(0));
  e.OnWriteSettled(At(0));
  SeenTwice(e, At(4), Waiting(kChild, 3));  // `cat` started and waits
  ReadinessEngine::Decision d = e.Evaluate(At(6));
  ASSERT_TRUE(d.settle);
  EXPECT_EQ(*d.settle, WaitReason::kStdinRead);
}

TEST_F(EngineTest, WithoutABaselineAWaitMustBeSeenLeftFirst) {
  ReadinessEngine e = SendEngine();
  e.OnPreWriteFacts(ForegroundFacts{});  // the pre-write inspection could not tell
  e.OnWriteStarted(At(0));
  e.OnWriteSettled(At(0));
  e.OnProbe(At(2), Waiting(kChild, 9));
  EXPECT_FALSE(e.Evaluate(At(2)).settle);
  e.OnProbe(At(4), Busy(kChild));
  SeenTwice(e, At(8), Waiting(kChild, 9));
  ReadinessEngine::Decision d = e.Evaluate(At(10));
  ASSERT_TRUE(d.settle);
  EXPECT_EQ(*d.settle, WaitReason::kStdinRead);
}

TEST_F(EngineTest, AWaitNeedsASecondLookWithNothingInBetween) {
  ReadinessEngine e = SendEngine();
  WriteAt(e, At(0));
  e.OnProbe(At(4), Waiting(kChild, 3));
  ReadinessEngine::Decision d = e.Evaluate(At(4));
  EXPECT_FALSE(d.settle);
  ASSERT_TRUE(d.probe_at);
  EXPECT_GE(*d.probe_at, At(6)) << "the confirming look comes after the gap";
  // Too early: not yet a confirmation, and not a contradiction either.
  e.OnProbe(At(5), Waiting(kChild, 3));
  EXPECT_FALSE(e.Evaluate(At(5)).settle);
  // Output in between (a reply to a query, the rest of a prompt): start over.
  e.OnOutput(At(5));
  e.OnProbe(At(7), Waiting(kChild, 3));
  EXPECT_FALSE(e.Evaluate(At(7)).settle);
  // The task ran in between (woken by the answer to its query): a different wait, start over.
  e.OnProbe(At(9), Waiting(kChild, 4));
  EXPECT_FALSE(e.Evaluate(At(9)).settle);
  e.OnProbe(At(11), Waiting(kChild, 4));
  EXPECT_EQ(*e.Evaluate(At(11)).settle, WaitReason::kStdinRead);
}

TEST_F(EngineTest, AWaitWithAShortTimeoutIsNotAWaitForTheUser) {
  ReadinessEngine e = SendEngine();
  WriteAt(e, At(0));
  // vi after ESC: select with a 1 s timeout to tell ESC from a key sequence.
  ForegroundFacts esc = Waiting(kChild, 3);
  esc.tasks[0].tty_wait = TtyWait::kSelect;
  esc.tasks[0].wait_timeout_ms = 1000;
  e.OnProbe(At(4), esc);
  e.OnProbe(At(7), esc);
  EXPECT_FALSE(e.Evaluate(At(7)).settle);
  // Then its idle wait (updatetime, 4 s): a wait for the user.
  ForegroundFacts idle = Waiting(kChild, 9);
  idle.tasks[0].tty_wait = TtyWait::kSelect;
  idle.tasks[0].wait_timeout_ms = 4000;
  SeenTwice(e, At(1010), idle);
  EXPECT_EQ(*e.Evaluate(At(1012)).settle, WaitReason::kStdinRead);
}

// A task in a wait on the terminal with a timeout, as select/poll/epoll report it.
ForegroundFacts TimedWait(pid_t pgid, int64_t timeout_ms, uint64_t switches, uint64_t run_ns,
                          std::optional<bool> canonical = false) {
  ForegroundFacts f = Waiting(pgid, run_ns);
  f.tasks[0].tty_wait = TtyWait::kEpoll;
  f.tasks[0].wait_timeout_ms = timeout_ms;
  f.tasks[0].switches = switches;
  f.canonical = canonical;
  return f;
}

TEST_F(EngineTest, ATimerShorterThanTheSilenceBoundIsNotAWaitForTheUser) {
  // node after readline closed: its epoll set still holds the terminal, and a 2.5 s timer is
  // pending. The same wait, looked at again and again, never settles.
  ReadinessEngine e = SendEngine();
  WriteAt(e, At(0));
  for (int ms = 4; ms < 2500; ms += 50) {
    e.OnProbe(At(ms), TimedWait(kChild, 2500, 7, 100, /*canonical=*/true));
    EXPECT_FALSE(e.Evaluate(At(ms)).settle) << ms;
  }
  // The timer fires: node prints, in line mode, and comes back to a like wait. News, not a loop.
  e.OnOutput(At(2501));
  for (int ms = 2510; ms < 2800; ms += 50) {
    e.OnProbe(At(ms), TimedWait(kChild, 2400, 9, 300, /*canonical=*/true));
    EXPECT_FALSE(e.Evaluate(At(ms)).settle) << ms;
  }
}

TEST_F(EngineTest, ASteadyPollerSettlesOnceItsWaitRecurs) {
  // ipython (prompt_toolkit): epoll_wait 500 ms in a loop, nothing printed in between.
  ReadinessEngine e = SendEngine();
  WriteAt(e, At(0));
  e.OnOutput(At(5));  // the result and the next prompt
  e.OnProbe(At(10), TimedWait(kChild, 497, 20, 1000));
  EXPECT_FALSE(e.Evaluate(At(10)).settle) << "one wait with a timeout is not yet a loop";
  e.OnProbe(At(300), TimedWait(kChild, 497, 20, 1000));
  EXPECT_FALSE(e.Evaluate(At(300)).settle) << "still the first wait: it has not recurred";
  // It ran out, the loop went round (a few µs of CPU) and waits again with a like timeout.
  e.OnProbe(At(520), TimedWait(kChild, 500, 24, 1400));
  EXPECT_FALSE(e.Evaluate(At(520)).settle) << "a recurrence is confirmed by a second look";
  e.OnProbe(At(522), TimedWait(kChild, 500, 24, 1400));
  EXPECT_EQ(*e.Evaluate(At(522)).settle, WaitReason::kStdinRead);
}

TEST_F(EngineTest, ARawModeRedrawLoopSettles) {
  // top -d 1: a 1 s wait for a key, a redraw, the same wait again.
  ReadinessEngine e = SendEngine();
  WriteAt(e, At(0));
  e.OnOutput(At(5));
  e.OnProbe(At(20), TimedWait(kChild, 1000, 3, 1000));
  e.OnOutput(At(1010));  // the redraw
  e.OnProbe(At(1030), TimedWait(kChild, 1000, 5, 9'000'000));
  e.OnProbe(At(1032), TimedWait(kChild, 1000, 5, 9'000'000));
  EXPECT_EQ(*e.Evaluate(At(1032)).settle, WaitReason::kStdinRead);
}

// top (3 s refresh), top -d 1: raw, on the alternate screen, its screen drawn, waiting for a
// key with a timer. Seen twice with nothing in between, it settles without waiting a period.
TEST_F(EngineTest, AFullScreenProgramWaitingForAKeySettlesWithoutAPeriod) {
  for (int64_t period : {3000, 1000, 250}) {
    ReadinessEngine e = SendEngine();
    WriteAt(e, At(0));
    e.OnOutput(At(5));  // the first screen
    ForegroundFacts top = TimedWait(kChild, period, 3, 1000);
    top.alternate_screen = true;
    e.OnProbe(At(20), top);
    EXPECT_FALSE(e.Evaluate(At(20)).settle) << period << ": one look is not enough";
    e.OnProbe(At(22), top);
    ReadinessEngine::Decision d = e.Evaluate(At(22));
    ASSERT_TRUE(d.settle) << period;
    EXPECT_EQ(*d.settle, WaitReason::kStdinRead);
    EXPECT_FALSE(e.settled_by_prompt());
  }
}

// What the full-screen rule does not take: an editor's ESC timeout, a timed wait on the normal
// screen (node's REPL awaiting a timer is raw too), line mode, a wait before any screen was
// drawn, a redraw between the two looks.
TEST_F(EngineTest, TheFullScreenRuleNeedsRawAlternateScreenDrawnAndAQuarterSecond) {
  struct Case {
    const char* what;
    int64_t timeout_ms;
    std::optional<bool> canonical;
    std::optional<bool> alternate;
    bool drawn;
  };
  const std::vector<Case> cases = {
      {"vi's ESC timeout", 100, false, true, true},
      {"normal screen (node REPL awaiting)", 2000, false, false, true},
      {"unknown screen", 2000, false, std::nullopt, true},
      {"line mode", 2000, true, true, true},
      {"nothing drawn yet", 2000, false, true, false},
  };
  for (const Case& c : cases) {
    ReadinessEngine e = SendEngine();
    WriteAt(e, At(0));
    if (c.drawn) e.OnOutput(At(5));
    ForegroundFacts f = TimedWait(kChild, c.timeout_ms, 3, 1000, c.canonical);
    f.alternate_screen = c.alternate;
    e.OnProbe(At(20), f);
    e.OnProbe(At(22), f);
    EXPECT_FALSE(e.Evaluate(At(22)).settle) << c.what;
  }
  ReadinessEngine e = SendEngine();
  WriteAt(e, At(0));
  e.OnOutput(At(5));
  ForegroundFacts f = TimedWait(kChild, 1000, 3, 1000);
  f.alternate_screen = true;
  e.OnProbe(At(20), f);
  e.OnOutput(At(21));  // a redraw between the looks starts over
  e.OnProbe(At(22), f);
  EXPECT_FALSE(e.Evaluate(At(22)).settle) << "output between the two looks";
}

TEST_F(EngineTest, OutputInLineModeRestartsTheLoop) {
  ReadinessEngine e = SendEngine();
  WriteAt(e, At(0));
  e.OnProbe(At(20), TimedWait(kChild, 250, 3, 1000, /*canonical=*/true));
  e.OnOutput(At(260));
  e.OnProbe(At(280), TimedWait(kChild, 250, 5, 2000, /*canonical=*/true));
  e.OnProbe(At(282), TimedWait(kChild, 250, 5, 2000, /*canonical=*/true));
  EXPECT_FALSE(e.Evaluate(At(282)).settle) << "line-mode output between the waits is news";
  // Unknown mode counts as line mode.
  e.OnOutput(At(300));
  e.OnProbe(At(540), TimedWait(kChild, 250, 7, 3000, std::nullopt));
  e.OnProbe(At(542), TimedWait(kChild, 250, 7, 3000, std::nullopt));
  EXPECT_FALSE(e.Evaluate(At(542)).settle);
  // A round with nothing new in between closes the loop.
  e.OnProbe(At(800), TimedWait(kChild, 250, 9, 3100, /*canonical=*/true));
  e.OnProbe(At(802), TimedWait(kChild, 250, 9, 3100, /*canonical=*/true));
  EXPECT_EQ(*e.Evaluate(At(802)).settle, WaitReason::kStdinRead);
}

TEST_F(EngineTest, ASeriesOfDifferentShortWaitsIsNotALoop) {
  // vi after ESC: 25 ms to tell ESC from a key sequence, output, 100 ms, output, then its 4 s
  // idle wait. Only the last is a wait for the user.
  ReadinessEngine e = SendEngine();
  WriteAt(e, At(0));
  e.OnProbe(At(2), TimedWait(kChild, 25, 3, 100));
  e.OnOutput(At(28));
  e.OnProbe(At(130), TimedWait(kChild, 100, 4, 200));
  e.OnProbe(At(132), TimedWait(kChild, 100, 4, 200));
  EXPECT_FALSE(e.Evaluate(At(132)).settle) << "25 ms then 100 ms: not the same wait again";
  e.OnOutput(At(135));
  e.OnProbe(At(140), TimedWait(kChild, 4000, 5, 300));
  e.OnProbe(At(142), TimedWait(kChild, 4000, 5, 300));
  EXPECT_EQ(*e.Evaluate(At(142)).settle, WaitReason::kStdinRead);
}

TEST_F(EngineTest, ALoopThatWorksBetweenItsWaitsIsNotWaiting) {
  // A job that polls the terminal for a key between chunks of work (most of its time on a CPU).
  ReadinessEngine e = SendEngine();
  WriteAt(e, At(0));
  e.OnProbe(At(10), TimedWait(kChild, 100, 3, 0, /*canonical=*/true));
  e.OnProbe(At(210), TimedWait(kChild, 100, 5, 150'000'000, /*canonical=*/true));
  e.OnProbe(At(212), TimedWait(kChild, 100, 5, 150'000'000, /*canonical=*/true));
  EXPECT_FALSE(e.Evaluate(At(212)).settle) << "150 ms of CPU in 200 ms";
}

TEST_F(EngineTest, AReaderOutsideTheForegroundGroupIsAWait) {
  // tmux: the client (the foreground group) waits on its server; the server, in its own
  // session, reads the terminal. The inspector reports the server's task as outside_group.
  ReadinessEngine e = SendEngine();
  e.OnPreWriteFacts(Waiting(kShell, 1000));
  e.OnWriteStarted(At(0));
  e.OnWriteSettled(At(0));
  ForegroundFacts f;
  f.foreground_pgid = kChild;
  f.waiting_for_input = Finding::kYes;
  TaskFacts client = Task(kChild, TtyWait::kNone, 10);
  TaskFacts server = Task(kChild + 50, TtyWait::kPoll, 20);
  server.outside_group = true;
  server.wait_timeout_ms = 14000;
  f.tasks = {client, server};
  SeenTwice(e, At(5), f);
  EXPECT_FALSE(e.Evaluate(At(7)).settle) << "a relay's wait must hold longer";
  ReadinessEngine::Decision d = e.Evaluate(At(7));
  ASSERT_TRUE(d.probe_at);
  EXPECT_EQ(*d.probe_at, At(105));
  e.OnProbe(At(105), f);
  EXPECT_EQ(*e.Evaluate(At(105)).settle, WaitReason::kStdinRead);
}

TEST_F(EngineTest, ARelayPollingFasterThanItsConfirmGapStillSettles) {
  // pinentry-curses (started by gpg-agent, outside the foreground group): poll 70 ms in a loop.
  // Its counters move between the looks 100 ms apart; the loop, not the counters, confirms.
  ReadinessEngine e = SendEngine();
  WriteAt(e, At(0));
  auto pinentry = [](uint64_t switches, uint64_t run_ns) {
    ForegroundFacts f;
    f.foreground_pgid = kChild;
    f.waiting_for_input = Finding::kYes;
    f.canonical = false;
    TaskFacts gpg = Task(kChild, TtyWait::kNone, 10);
    TaskFacts reader = Task(kChild + 70, TtyWait::kPoll, run_ns);
    reader.outside_group = true;
    reader.wait_timeout_ms = 70;
    reader.switches = switches;
    f.tasks = {gpg, reader};
    return f;
  };
  e.OnProbe(At(10), pinentry(5, 1000));
  e.OnProbe(At(60), pinentry(5, 1000));
  e.OnProbe(At(120), pinentry(6, 1100));  // one round: a steady loop, first look
  EXPECT_FALSE(e.Evaluate(At(120)).settle);
  e.OnProbe(At(220), pinentry(8, 1300));  // two rounds later, nothing printed
  EXPECT_EQ(*e.Evaluate(At(220)).settle, WaitReason::kStdinRead);
}

TEST_F(EngineTest, ProbesBeforeTheWriteSettlesAreNotEvidence) {
  ReadinessEngine e = SendEngine();
  e.OnPreWriteFacts(Waiting(kShell, 1));
  e.OnWriteStarted(At(0));
  e.OnProbe(At(1), Waiting(kChild, 3));  // write still in flight
  EXPECT_FALSE(e.Evaluate(At(1)).settle);
}

TEST_F(EngineTest, SilenceFallbackAfterIdleSilenceWithNoOutput) {
  ReadinessEngine e = SendEngine();
  WriteAt(e, At(0));
  e.OnProbe(At(1), Busy(kChild));  // `sleep 100`: not waiting on the terminal
  EXPECT_FALSE(e.Evaluate(At(2999)).settle);
  ReadinessEngine::Decision d = e.Evaluate(At(3000));
  ASSERT_TRUE(d.settle);
  EXPECT_EQ(*d.settle, WaitReason::kInferredIdle);
}

TEST_F(EngineTest, OutputPushesTheSilenceBound) {
  ReadinessEngine e = SendEngine();
  WriteAt(e, At(0));
  e.OnOutput(At(2000));
  EXPECT_FALSE(e.Evaluate(At(4999)).settle);
  EXPECT_EQ(*e.Evaluate(At(5000)).settle, WaitReason::kInferredIdle);
}

TEST_F(EngineTest, AbsoluteTimeoutCountsFromTheSendStart) {
  ReadinessTimings t = Timings();
  t.timeout = milliseconds(300);
  ReadinessEngine e = SendEngine(t);
  e.OnPreWriteFacts(Waiting(kShell, 1));
  e.OnWriteStarted(At(100));
  e.OnWriteSettled(At(100));
  for (int ms = 100; ms < 300; ms += 20) {
    e.OnOutput(At(ms));  // a steady stream keeps silence away
    EXPECT_FALSE(e.Evaluate(At(ms)).settle);
  }
  EXPECT_EQ(*e.Evaluate(At(300)).settle, WaitReason::kTimeout);
}

TEST_F(EngineTest, TimeoutStaysArmedBeforeTheWrite) {
  ReadinessTimings t = Timings();
  t.timeout = milliseconds(300);
  ReadinessEngine e = SendEngine(t);
  EXPECT_FALSE(e.Evaluate(At(299)).settle);
  EXPECT_EQ(*e.Evaluate(At(300)).settle, WaitReason::kTimeout);
}

TEST_F(EngineTest, SessionExitWins) {
  ReadinessEngine e = SendEngine();
  WriteAt(e, At(0));
  e.OnOutput(At(1));
  e.OnSessionExit();
  EXPECT_EQ(*e.Evaluate(At(1)).settle, WaitReason::kSessionExit);
}

TEST_F(EngineTest, SettlesOnlyOnce) {
  ReadinessEngine e = SendEngine();
  WriteAt(e, At(0));
  e.OnPromptCandidate(At(1), kShell);
  e.OnProbe(At(2), Waiting(kShell, 1000));
  EXPECT_EQ(*e.Evaluate(At(2)).settle, WaitReason::kStdinRead);
  e.OnSessionExit();
  EXPECT_EQ(*e.Evaluate(At(40000)).settle, WaitReason::kStdinRead);
}

TEST_F(EngineTest, StartupZeroOutputSilenceNeverPublishes) {
  ReadinessTimings t = Timings();
  t.timeout = milliseconds(10000);
  ReadinessEngine e(ReadinessEngine::Purpose::kStartup, t, kShell, t0_);
  EXPECT_FALSE(e.Evaluate(At(3000)).settle);
  EXPECT_FALSE(e.Evaluate(At(9999)).settle);
  EXPECT_EQ(*e.Evaluate(At(10000)).settle, WaitReason::kTimeout);
}

TEST_F(EngineTest, StartupFallbackNeedsObservedOutput) {
  ReadinessEngine e(ReadinessEngine::Purpose::kStartup, Timings(), kShell, t0_);
  e.OnOutput(At(100));
  EXPECT_FALSE(e.Evaluate(At(3099)).settle);
  EXPECT_EQ(*e.Evaluate(At(3100)).settle, WaitReason::kInferredIdle);
}

TEST_F(EngineTest, StartupPublishesOnTheVerifiedPrompt) {
  ReadinessEngine e(ReadinessEngine::Purpose::kStartup, Timings(), kShell, t0_);
  e.OnOutput(At(20));
  e.OnPromptCandidate(At(20), kShell);
  EXPECT_FALSE(e.Evaluate(At(20)).settle);
  e.OnProbe(At(21), Waiting(kShell, 5));
  ReadinessEngine::Decision d = e.Evaluate(At(21));
  ASSERT_TRUE(d.settle);
  EXPECT_EQ(*d.settle, WaitReason::kStdinRead);
  EXPECT_TRUE(e.settled_by_prompt());
}

TEST_F(EngineTest, ProbesStartFastAndBackOffToThePollInterval) {
  ReadinessEngine e = SendEngine();
  WriteAt(e, At(0));
  std::vector<int> probe_times_us;
  TimePoint now = At(0);
  for (int i = 0; i < 16; ++i) {
    ReadinessEngine::Decision d = e.Evaluate(now);
    ASSERT_FALSE(d.settle);
    ASSERT_TRUE(d.probe_at);
    now = std::min(*d.wake_at, *d.probe_at);
    d = e.Evaluate(now);
    ASSERT_TRUE(d.probe_now);
    probe_times_us.push_back(static_cast<int>((now - At(0)) / std::chrono::microseconds(1)));
    e.OnProbe(now, Busy(kChild));
  }
  // 0.5 ms, then steps growing by half while within exactProbeAfterMs (150), capped at
  // pollIntervalMs (50), then every pollIntervalMs.
  std::vector<int> expected = {500,   1250,  2375,  4062,   6592,   10387,  16079,  24617,
                               37424, 56634, 85449, 128671, 178671, 228671, 278671, 328671};
  EXPECT_EQ(probe_times_us, expected);
}

TEST_F(EngineTest, NoProbesWhileTheWriteIsInFlight) {
  ReadinessEngine e = SendEngine();
  e.OnPreWriteFacts(Waiting(kShell, 1));
  e.OnWriteStarted(At(0));
  ReadinessEngine::Decision d = e.Evaluate(At(5));
  EXPECT_FALSE(d.probe_now);
  EXPECT_FALSE(d.probe_at);
  ASSERT_TRUE(d.wake_at);
  EXPECT_EQ(*d.wake_at, At(30000));  // only the absolute deadline is armed
}

// ---- One look where it proves the wait; the confirming look of a prompt is never postponed.

// As the terminal reports it: the wait, and nothing of our input unread (known).
ForegroundFacts WaitingDrained(pid_t pgid, uint64_t run_ns) {
  ForegroundFacts f = Waiting(pgid, run_ns);
  f.unread_input = size_t{0};
  return f;
}

TEST_F(EngineTest, OutputAfterACompleteCandidateDoesNotPostponeItsLook) {
  ReadinessEngine e = SendEngine();
  WriteAt(e, At(0));
  e.OnOutput(At(2));
  e.OnPromptCandidate(At(2), kShell);
  // Bytes after PS1 that keep the candidate (a CSI mode switch) arrive in a later read.
  e.OnOutput(At(2));
  ReadinessEngine::Decision d = e.Evaluate(At(2));
  EXPECT_TRUE(d.probe_now) << "the candidate's look stays due at once";
  e.OnProbe(At(2), WaitingDrained(kShell, 1000));
  d = e.Evaluate(At(2));
  ASSERT_TRUE(d.settle);
  EXPECT_TRUE(e.settled_by_prompt());
}

TEST_F(EngineTest, ADroppedCandidateReturnsToTheActivitySchedule) {
  ReadinessEngine e = SendEngine();
  WriteAt(e, At(0));
  e.OnOutput(At(2));
  e.OnPromptCandidate(At(2), kShell);
  e.OnOutput(At(2));  // printable text follows the prompt: it was an intermediate one
  e.OnPromptInvalidated();
  ReadinessEngine::Decision d = e.Evaluate(At(2));
  EXPECT_FALSE(d.probe_now) << "no look is owed to a candidate that is gone";
  ASSERT_TRUE(d.probe_at);
  EXPECT_GT(*d.probe_at, At(2));
}

TEST_F(EngineTest, TheFirstLookComesHalfAMillisecondAfterActivity) {
  ReadinessEngine e = SendEngine();
  WriteAt(e, At(0));
  ReadinessEngine::Decision d = e.Evaluate(At(0));
  ASSERT_TRUE(d.probe_at);
  EXPECT_EQ(*d.probe_at, t0_ + std::chrono::microseconds(500));
  EXPECT_FALSE(d.probe_now);
}

TEST_F(EngineTest, TheShellsOwnFreshWaitSettlesOnTheFirstLook) {
  // `read -p 'name? ' v`: the shell ran (its counters moved) and blocks in its read builtin.
  // Its output up to the facts was decoded before they count; the shell's group is complete.
  ReadinessEngine e = SendEngine();
  WriteAt(e, At(0));
  e.OnOutput(At(1));
  e.OnProbe(At(1), WaitingDrained(kShell, 1900));
  ReadinessEngine::Decision d = e.Evaluate(At(1));
  ASSERT_TRUE(d.settle);
  EXPECT_EQ(*d.settle, WaitReason::kStdinRead);
  EXPECT_FALSE(e.settled_by_prompt());
  EXPECT_FALSE(e.verifying_facts()) << "a stdin wait is not a verified prompt";
}

TEST_F(EngineTest, TheGroupThatWaitedBeforeTheWriteSettlesOnTheFirstLookOfANewWait) {
  // A python REPL: `1+1`, its answer, back in readline's select (counters moved).
  ReadinessEngine e = SendEngine();
  e.OnPreWriteFacts(Waiting(kChild, 500));
  e.OnWriteStarted(At(0));
  e.OnWriteSettled(At(0));
  e.OnProbe(At(1), WaitingDrained(kChild, 800));
  ReadinessEngine::Decision d = e.Evaluate(At(1));
  ASSERT_TRUE(d.settle);
  EXPECT_EQ(*d.settle, WaitReason::kStdinRead);
}

TEST_F(EngineTest, TheFirstLookNeverSettlesAStaleWait) {
  ReadinessEngine e = SendEngine();
  e.OnPreWriteFacts(Waiting(kChild, 500));  // `cat` waiting before the send
  e.OnWriteStarted(At(0));
  e.OnWriteSettled(At(0));
  e.OnProbe(At(1), WaitingDrained(kChild, 500));  // the same wait, not woken
  EXPECT_FALSE(e.Evaluate(At(1)).settle);
  e.OnProbe(At(3), WaitingDrained(kChild, 500));
  EXPECT_FALSE(e.Evaluate(At(3)).settle);
}

TEST_F(EngineTest, ANewGroupStillNeedsASecondLook) {
  // `cat | cat` started by this send: the shell forks the members one after another, so one
  // look may see the first waiting before the second exists.
  ReadinessEngine e = SendEngine();
  WriteAt(e, At(0));
  e.OnProbe(At(1), WaitingDrained(kChild, 3));
  EXPECT_FALSE(e.Evaluate(At(1)).settle);
  e.OnProbe(At(3), WaitingDrained(kChild, 3));
  ReadinessEngine::Decision d = e.Evaluate(At(3));
  ASSERT_TRUE(d.settle);
  EXPECT_EQ(*d.settle, WaitReason::kStdinRead);
}

TEST_F(EngineTest, TheFirstLookNeedsNothingUnreadAndKnownSo) {
  ReadinessEngine e = SendEngine();
  WriteAt(e, At(0));
  ForegroundFacts unknown_unread = Waiting(kShell, 1900);  // FIONREAD failed
  e.OnProbe(At(1), unknown_unread);
  EXPECT_FALSE(e.Evaluate(At(1)).settle);
  ForegroundFacts queued = WaitingDrained(kShell, 1900);
  queued.unread_input = size_t{4};  // about to read the rest of our input
  e.OnProbe(At(2), queued);
  EXPECT_FALSE(e.Evaluate(At(2)).settle);
}

TEST_F(EngineTest, TheFirstLookNeverSettlesATimedWaitOrARelay) {
  ReadinessEngine e = SendEngine();
  WriteAt(e, At(0));
  ForegroundFacts timed = WaitingDrained(kShell, 1900);
  timed.tasks[0].tty_wait = TtyWait::kSelect;
  timed.tasks[0].wait_timeout_ms = 1000;  // ends by itself
  e.OnProbe(At(1), timed);
  EXPECT_FALSE(e.Evaluate(At(1)).settle);
  e.OnProbe(At(3), timed);
  EXPECT_FALSE(e.Evaluate(At(3)).settle);

  ReadinessEngine relay = SendEngine();
  WriteAt(relay, At(0));
  // A tmux server outside the group reads the terminal; the group is the shell's job.
  ForegroundFacts outside = WaitingDrained(kShell, 1900);
  outside.tasks[0].outside_group = true;
  relay.OnProbe(At(1), outside);
  EXPECT_FALSE(relay.Evaluate(At(1)).settle);
  relay.OnProbe(At(3), outside);
  EXPECT_FALSE(relay.Evaluate(At(3)).settle) << "a relay holds its wait 100 ms";
  relay.OnProbe(At(101), outside);
  EXPECT_EQ(*relay.Evaluate(At(101)).settle, WaitReason::kStdinRead);
}

TEST_F(EngineTest, StartupNeverSettlesOnAFirstLook) {
  ReadinessEngine e(ReadinessEngine::Purpose::kStartup, Timings(), kShell, t0_);
  e.OnOutput(At(1));
  e.OnProbe(At(2), WaitingDrained(kShell, 5));
  EXPECT_FALSE(e.Evaluate(At(2)).settle);
}

TEST_F(EngineTest, TheVerifyingLookOfAPromptIsKeptForTheNextSend) {
  ReadinessEngine e = SendEngine();
  WriteAt(e, At(0));
  e.OnOutput(At(1));
  e.OnPromptCandidate(At(1), kShell);
  EXPECT_FALSE(e.verifying_facts());
  e.OnProbe(At(1), WaitingDrained(kShell, 4242));
  ASSERT_TRUE(e.Evaluate(At(1)).settle);
  std::optional<ForegroundFacts> verifying = e.verifying_facts();
  ASSERT_TRUE(verifying);
  ASSERT_EQ(verifying->tasks.size(), 1u);
  EXPECT_EQ(verifying->tasks[0].run_ns, 4242u);
}

}  // namespace
}  // namespace ptybox::backend
