// ReadinessDriver with an injected clock and a fake terminal: the last look at the foreground
// that a handoff grace shorter than the poll interval would otherwise never get
// (docs/readiness.md).
#include "backend/readiness/readiness_driver.h"

#include <gtest/gtest.h>

#include <optional>
#include <vector>

namespace ptybox::backend {
namespace {

using std::chrono::milliseconds;

constexpr pid_t kShell = 100;
constexpr pid_t kChild = 200;

class FakeTerminal final : public TerminalHandle {
 public:
  void Inspect(std::function<void(ForegroundFacts)> done) override {
    ++inspections;
    pending = std::move(done);
  }
  std::optional<pid_t> ForegroundPgid() override { return kShell; }
  std::optional<size_t> UnreadInput() override { return 0; }
  void Write(std::string bytes, std::function<void(Result<size_t>)> done) override {
    done(bytes.size());
  }
  bool AbortWrite() override { return false; }
  void SignalForeground(int, SignalFollowLimit,
                        std::function<void(Result<SignalResult>)> done) override {
    done(SignalResult{true, kChild});
  }
  // Delivers the facts of the inspection in flight.
  void Answer(const ForegroundFacts& facts) {
    ASSERT_TRUE(pending) << "no inspection is in flight";
    auto done = std::move(pending);
    pending = nullptr;
    done(facts);
  }

  int inspections = 0;
  std::function<void(ForegroundFacts)> pending;
};

class FakeHost final : public ReadinessHost {
 public:
  TimePoint Now() override { return now; }
  void ArmTimer(TimePoint at) override { timer = at; }
  void CancelTimer() override { timer.reset(); }
  TerminalHandle& terminal() override { return term; }

  TimePoint now = TimePoint{} + std::chrono::hours(1);
  std::optional<TimePoint> timer;
  FakeTerminal term;
};

ForegroundFacts Facts(pid_t pgid, Finding waiting) {
  ForegroundFacts f;
  f.foreground_pgid = pgid;
  f.waiting_for_input = waiting;
  TaskFacts task;
  task.pid = pgid;
  task.tid = pgid;
  task.tty_wait = waiting == Finding::kYes ? TtyWait::kRead : TtyWait::kNone;
  task.run_ns = 7;
  task.running = waiting != Finding::kYes;
  f.tasks = {task};
  f.unread_input = 0;
  return f;
}

// Silence 100 ms, grace 10 ms, polls every second: no regular inspection falls in the grace.
ReadinessTimings ShortGrace() {
  ReadinessTimings t;
  t.idle_silence = milliseconds(100);
  t.handoff_grace = milliseconds(10);
  t.timeout = milliseconds(60000);
  t.poll_interval = milliseconds(1000);
  t.exact_probe_after = milliseconds(0);
  return t;
}

struct Scenario {
  FakeHost host;
  std::vector<WaitReason> settled;
  std::optional<ReadinessDriver> driver;

  // A send whose prompt candidate arrives while a child still holds the foreground; the first
  // inspection (right after the candidate) sees the child running.
  Scenario() {
    const TimePoint t0 = host.now;
    ReadinessEngine engine(ReadinessEngine::Purpose::kSend, ShortGrace(), kShell, t0);
    engine.OnPreWriteFacts(Facts(kShell, Finding::kNo));
    engine.OnWriteStarted(t0);
    engine.OnWriteSettled(t0);
    driver.emplace(host, std::move(engine), [this](WaitReason r) { settled.push_back(r); });
    host.now = t0 + milliseconds(1);
    driver->engine().OnOutput(host.now);
    driver->engine().OnPromptCandidate(host.now, kChild, 0);
    driver->Pump();
    EXPECT_EQ(host.term.inspections, 1);
    host.term.Answer(Facts(kChild, Finding::kNo));
    EXPECT_TRUE(settled.empty());
  }

  // Time reaches the fallback deadline (silence + grace after the output) and the timer fires.
  void ReachFallback() {
    host.now = host.now + milliseconds(110);
    driver->Pump();
  }
};

TEST(ReadinessDriverTest, AShortGraceStillLooksAtTheForegroundBeforeFallingBack) {
  Scenario s;
  s.ReachFallback();
  // Not settled yet: one more inspection first.
  EXPECT_TRUE(s.settled.empty());
  ASSERT_EQ(s.host.term.inspections, 2);
  // The shell took the foreground back during the grace and waits at its prompt.
  s.host.term.Answer(Facts(kShell, Finding::kYes));
  ASSERT_EQ(s.settled.size(), 1u);
  EXPECT_EQ(s.settled[0], WaitReason::kStdinRead);
  EXPECT_TRUE(s.driver->engine().settled_by_prompt());
}

TEST(ReadinessDriverTest, TheLastLookFallsBackWhenTheChildStillHoldsTheForeground) {
  Scenario s;
  s.ReachFallback();
  ASSERT_EQ(s.host.term.inspections, 2);
  s.host.term.Answer(Facts(kChild, Finding::kNo));
  ASSERT_EQ(s.settled.size(), 1u);
  EXPECT_EQ(s.settled[0], WaitReason::kInferredIdle);
  // Exactly one last look: no further inspection was started.
  EXPECT_EQ(s.host.term.inspections, 2);
  EXPECT_FALSE(s.host.term.pending);
}

}  // namespace
}  // namespace ptybox::backend
