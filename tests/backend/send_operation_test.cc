// Every ordering rule of docs/readiness.md ("Cancellation"), with an injected terminal whose
// inspections, writes and signals settle only when the test says so.
#include "backend/send_operation.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <deque>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "backend/readiness/output_pattern.h"

namespace ptybox::backend {
namespace {

class FakeTerminal final : public TerminalHandle {
 public:
  std::vector<std::string> log;
  std::deque<std::function<void(ForegroundFacts)>> inspections;
  std::function<void(Result<size_t>)> write_done;
  std::string written;
  std::function<void(Result<SignalResult>)> signal_done;
  std::optional<pid_t> foreground = 100;

  void Inspect(std::function<void(ForegroundFacts)> done) override {
    log.push_back("inspect");
    inspections.push_back(std::move(done));
  }
  void InspectSince(const ForegroundFacts& verified,
                    std::function<void(ForegroundFacts)> done) override {
    log.push_back("inspect-since:" + std::to_string(verified.foreground_pgid.value_or(0)));
    inspections.push_back(std::move(done));
  }
  std::optional<pid_t> ForegroundPgid() override { return foreground; }
  std::optional<size_t> UnreadInput() override { return 0; }
  void Write(std::string bytes, std::function<void(Result<size_t>)> done) override {
    log.push_back("write:" + bytes);
    written = bytes;
    write_done = std::move(done);
  }
  bool AbortWrite() override {
    log.push_back("abort");
    return true;
  }
  void SignalForeground(int signal, SignalFollowLimit limit,
                        std::function<void(Result<SignalResult>)> done) override {
    log.push_back("signal:" + std::to_string(signal) +
                  (limit == SignalFollowLimit::kUntilEnded ? ":until-ended" : ":fixed"));
    signal_done = std::move(done);
  }
  void EndSignalFollow() override { log.push_back("end-follow"); }

  void SettleInspection(ForegroundFacts facts = Shell()) {
    ASSERT_FALSE(inspections.empty());
    auto done = std::move(inspections.front());
    inspections.pop_front();
    done(facts);
  }
  void SettleWrite(Result<size_t> result) {
    ASSERT_TRUE(write_done);
    auto done = std::move(write_done);
    write_done = nullptr;
    done(result);
  }
  void SettleSignal(Result<SignalResult> result) {
    ASSERT_TRUE(signal_done);
    auto done = std::move(signal_done);
    signal_done = nullptr;
    done(result);
  }
  static ForegroundFacts Shell() {
    ForegroundFacts f;
    f.foreground_pgid = 100;
    f.waiting_for_input = Finding::kYes;
    TaskFacts t;
    t.pid = t.tid = 100;
    t.tty_wait = TtyWait::kRead;
    t.run_ns = 1;
    f.tasks = {t};
    return f;
  }
};

class FakeHost final : public SendHost {
 public:
  FakeTerminal fake;
  TimePoint now = TimePoint{} + std::chrono::hours(1);
  std::optional<TimePoint> timer;
  std::string pending = "$ ";

  TimePoint Now() override { return now; }
  void ArmTimer(TimePoint at) override { timer = at; }
  void CancelTimer() override { timer.reset(); }
  TerminalHandle& terminal() override { return fake; }
  std::string PendingText() override { return pending; }
  std::string PendingTextUntrimmed() override { return pending; }
  std::optional<std::string> AlternateScreen() override { return std::nullopt; }
  SessionStatus CurrentStatus() override { return SessionStatus::Running(); }
  bool transition = false;
  std::vector<std::function<void()>> later;
  bool InSignalTransition(const ForegroundFacts&) override { return transition; }
  void After(Millis, std::function<void()> fn) override { later.push_back(std::move(fn)); }
  std::optional<ForegroundFacts> idle;
  std::vector<std::optional<ForegroundFacts>> settled_with;
  std::optional<ForegroundFacts> IdlePromptFacts() override {
    return std::exchange(idle, std::nullopt);
  }
  void OnSendSettled(const std::optional<ForegroundFacts>& verifying) override {
    settled_with.push_back(verifying);
  }
};

class SendOperationTest : public ::testing::Test {
 protected:
  FakeHost host_;
  std::optional<Result<SendResult>> settled_;
  bool released_ = false;

  std::unique_ptr<SendOperation> Make(std::string input = "sleep 100\n",
                                      std::optional<int64_t> timeout_ms = std::nullopt) {
    SendOperation::Config config;
    config.shell_pgid = 100;
    SendRequest request;
    request.input = std::move(input);
    request.timeout_ms = timeout_ms;
    auto op = std::make_unique<SendOperation>(host_, config, std::move(request));
    op->SetSettledCallback([this](const Result<SendResult>& r) { settled_ = r; });
    op->SetReleasedCallback([this] { released_ = true; });
    return op;
  }
  // The shell prints its marker and prompt, and the inspection that follows finds it waiting
  // there: the verified prompt is back.
  void PromptBack(SendOperation& op, int exit_code) {
    PromptMarker marker{exit_code, "/work"};
    op.OnOutput();
    op.OnMarker(marker, "");
    op.OnCandidate(100, 0);
    host_.now += std::chrono::milliseconds(1);
    op.OnTimer();
    while (!settled_ && !host_.fake.inspections.empty()) host_.fake.SettleInspection();
  }
};

TEST_F(SendOperationTest, WritesOnlyAfterThePreWriteInspection) {
  auto op = Make();
  op->Start();
  EXPECT_EQ(host_.fake.log, (std::vector<std::string>{"inspect"}));
  host_.fake.SettleInspection();
  EXPECT_EQ(host_.fake.log, (std::vector<std::string>{"inspect", "write:sleep 100\n"}));
}

TEST_F(SendOperationTest, CancelWhileInspectingNeverWritesTheInput) {
  auto op = Make();
  op->Start();
  EXPECT_TRUE(op->Cancel());
  EXPECT_TRUE(op->canceled());
  // The inspection settles after the cancellation: the queued input must not run.
  host_.fake.SettleInspection();
  EXPECT_EQ(host_.fake.written, "");
  EXPECT_EQ(host_.fake.log, (std::vector<std::string>{"inspect", "signal:2:until-ended"}));
  host_.fake.SettleSignal(SignalResult{true, 100});
  PromptBack(*op, 130);
  ASSERT_TRUE(settled_);
  ASSERT_TRUE(settled_->has_value());
  EXPECT_EQ((*settled_)->wait_reason, WaitReason::kStdinRead);
  EXPECT_EQ((*settled_)->exit_code, 130);
  EXPECT_TRUE(released_);
}

TEST_F(SendOperationTest, SignalWaitsForAnInFlightWrite) {
  auto op = Make();
  op->Start();
  host_.fake.SettleInspection();
  EXPECT_TRUE(op->Cancel());
  // No signal while the write is in flight; the rest of the write is stopped.
  EXPECT_EQ(host_.fake.log, (std::vector<std::string>{"inspect", "write:sleep 100\n", "abort"}));
  host_.fake.SettleWrite(size_t{10});
  EXPECT_EQ(host_.fake.log.back(), "signal:2:until-ended");
}

TEST_F(SendOperationTest, ARejectedWriteSendsNoSignal) {
  auto op = Make();
  op->Start();
  host_.fake.SettleInspection();
  op->Cancel();
  host_.fake.SettleWrite(Fail(ErrorKind::kClosed, "write: Input/output error"));
  for (const std::string& entry : host_.fake.log)
    EXPECT_FALSE(entry.starts_with("signal:")) << entry;
}

TEST_F(SendOperationTest, CancellationIsARealSignalNeverAWrittenControlC) {
  auto op = Make();
  op->Start();
  host_.fake.SettleInspection();
  host_.fake.SettleWrite(size_t{10});
  op->Cancel();
  EXPECT_EQ(host_.fake.log.back(), "signal:" + std::to_string(SIGINT) + ":until-ended");
  for (const std::string& entry : host_.fake.log) EXPECT_EQ(entry.find('\x03'), std::string::npos);
}

TEST_F(SendOperationTest, CanceledSendKeepsItsSlotUntilWriteAndSignalSettle) {
  auto op = Make("cat\n", /*timeout_ms=*/1000);
  op->Start();
  host_.fake.SettleInspection();
  op->Cancel();
  // The deadline passes while the write is still in flight: the result is known...
  host_.now += std::chrono::milliseconds(1000);
  op->OnTimer();
  ASSERT_TRUE(settled_);
  EXPECT_EQ((*settled_)->wait_reason, WaitReason::kTimeout);
  // ...but the slot stays held, so no successor can receive late bytes or the signal.
  EXPECT_FALSE(released_);
  host_.fake.SettleWrite(size_t{4});
  EXPECT_EQ(host_.fake.log.back(),
            "signal:2:until-ended");  // the signal the cancellation asked for
  EXPECT_FALSE(released_);
  host_.fake.SettleSignal(SignalResult{true, 100});
  EXPECT_TRUE(released_);
}

TEST_F(SendOperationTest, SlotIsHeldWhileTheSignalIsInFlight) {
  auto op = Make();
  op->Start();
  host_.fake.SettleInspection();
  host_.fake.SettleWrite(size_t{10});
  op->Cancel();
  PromptBack(*op, 130);  // the prompt may come back before the signal call settles
  ASSERT_TRUE(settled_);
  EXPECT_FALSE(released_);
  host_.fake.SettleSignal(SignalResult{true, 200});
  EXPECT_TRUE(released_);
}

// A cancellation's signal is followed to the job of the line for as long as the send is
// active, not for a fixed time (a busy machine forks the job late): settling ends the follow.
TEST_F(SendOperationTest, SettlingEndsTheFollowOfTheCancellationsSignal) {
  auto op = Make();
  op->Start();
  host_.fake.SettleInspection();
  host_.fake.SettleWrite(size_t{10});
  op->Cancel();
  EXPECT_EQ(host_.fake.log.back(), "signal:2:until-ended");
  PromptBack(*op, 130);
  ASSERT_TRUE(settled_);
  EXPECT_EQ(host_.fake.log.back(), "end-follow");
}

TEST_F(SendOperationTest, AbsoluteDeadlineStaysArmedWhileCancellationWaits) {
  auto op = Make("sleep 100\n", /*timeout_ms=*/500);
  op->Start();
  host_.fake.SettleInspection();
  op->Cancel();  // waits for the write, which never settles
  ASSERT_TRUE(host_.timer);
  EXPECT_EQ(*host_.timer, host_.now + std::chrono::milliseconds(500));
  host_.now = *host_.timer;
  op->OnTimer();
  ASSERT_TRUE(settled_);
  EXPECT_EQ((*settled_)->wait_reason, WaitReason::kTimeout);
}

TEST_F(SendOperationTest, SignalFailureRejectsTheSend) {
  auto op = Make();
  op->Start();
  host_.fake.SettleInspection();
  host_.fake.SettleWrite(size_t{10});
  op->Cancel();
  host_.fake.SettleSignal(Fail(ErrorKind::kClosed, "kill: No such process"));
  ASSERT_TRUE(settled_);
  ASSERT_FALSE(settled_->has_value());
  EXPECT_EQ(settled_->error().kind, ErrorKind::kClosed);
  EXPECT_TRUE(released_);
}

TEST_F(SendOperationTest, CancelAfterSettlementIsFalseAndSendsNothing) {
  auto op = Make("echo hi\n");
  op->Start();
  host_.fake.SettleInspection();
  host_.fake.SettleWrite(size_t{8});
  PromptBack(*op, 0);
  ASSERT_TRUE(settled_);
  EXPECT_FALSE(op->Cancel());
  for (const std::string& entry : host_.fake.log)
    EXPECT_FALSE(entry.starts_with("signal:")) << entry;
}

TEST_F(SendOperationTest, DeadlineDuringInspectionMeansTheInputIsNeverWritten) {
  auto op = Make("rm -rf build\n", /*timeout_ms=*/100);
  op->Start();
  host_.now += std::chrono::milliseconds(100);
  op->OnTimer();
  ASSERT_TRUE(settled_);
  EXPECT_EQ((*settled_)->wait_reason, WaitReason::kTimeout);
  host_.fake.SettleInspection();
  EXPECT_EQ(host_.fake.written, "");
  EXPECT_TRUE(released_);
}

TEST_F(SendOperationTest, WriteWaitsWhileARecentSignalTakesEffect) {
  auto op = Make("echo after\n");
  host_.transition = true;  // e.g. SIGINT just went to a foreground job
  op->Start();
  host_.fake.SettleInspection();
  EXPECT_EQ(host_.fake.written, "");
  ASSERT_EQ(host_.later.size(), 1u);
  host_.transition = false;  // the shell printed its prompt since
  host_.later[0]();
  host_.fake.SettleInspection();
  EXPECT_EQ(host_.fake.written, "echo after\n");
}

TEST_F(SendOperationTest, ViewportDropsIntermediatePromptsAndKeepsOutput) {
  auto op = Make("echo a\necho b\n");
  op->Start();
  host_.fake.SettleInspection();
  host_.fake.SettleWrite(size_t{14});
  op->OnOutput();
  op->OnLine("$ ");  // the previous prompt line, committed unchanged: not output
  op->OnLine("a");
  op->OnMarker(PromptMarker{0, "/w"}, "");
  op->OnCandidate(100, 7);  // looks like the end, but "echo b" is still unread...
  op->OnInvalidated();      // ...but more followed: an intermediate prompt
  op->OnLine("$ ");         // that prompt's own line
  op->OnLine("b");
  PromptBack(*op, 0);
  ASSERT_TRUE(settled_);
  EXPECT_EQ((*settled_)->viewport, "a\nb");
  EXPECT_EQ((*settled_)->exit_code, 0);
  EXPECT_EQ((*settled_)->cwd, "/work");
}

TEST_F(SendOperationTest, IntermediatePromptLineIsDroppedAsTheDecoderRendersIt) {
  // Committed lines come with trailing blanks trimmed: a line holding only "$ " reads "$".
  host_.pending = "$";
  auto op = Make("sleep 1; echo a\necho b\n");
  op->Start();
  host_.fake.SettleInspection();
  host_.fake.SettleWrite(size_t{22});
  op->OnOutput();
  op->OnLine("$");
  op->OnLine("a");
  op->OnMarker(PromptMarker{0, "/w"}, "");
  op->OnCandidate(100, 0);
  op->OnInvalidated();
  op->OnLine("$");
  op->OnLine("b");
  op->OnMarker(PromptMarker{0, "/w"}, "x");  // output without a newline before the prompt
  op->OnCandidate(100, 0);
  op->OnInvalidated();
  op->OnLine("x$");
  PromptBack(*op, 0);
  ASSERT_TRUE(settled_);
  EXPECT_EQ((*settled_)->viewport, "a\nb\nx");
}

TEST_F(SendOperationTest, ClosedSessionSettlesAsSessionExitAfterQuiescence) {
  auto op = Make();
  op->Start();
  host_.fake.SettleInspection();
  host_.fake.SettleWrite(size_t{10});
  op->StopPolling();
  EXPECT_FALSE(host_.timer);
  EXPECT_FALSE(settled_);
  op->OnClosed();
  ASSERT_TRUE(settled_);
  EXPECT_EQ((*settled_)->wait_reason, WaitReason::kSessionExit);
  EXPECT_TRUE(released_);
}

TEST_F(SendOperationTest, AfterAVerifiedIdlePromptThePreWriteCheckOnlyConfirmsItsFacts) {
  // The session kept the facts of the look that verified its prompt: the pre-write check asks
  // the terminal whether they still hold instead of inspecting /proc again.
  host_.idle = FakeTerminal::Shell();
  auto op = Make("echo hi\n");
  op->Start();
  ASSERT_EQ(host_.fake.log.size(), 1u);
  EXPECT_EQ(host_.fake.log[0], "inspect-since:100");
  EXPECT_TRUE(host_.fake.written.empty()) << "nothing is written before the check answers";
  host_.fake.SettleInspection();
  EXPECT_EQ(host_.fake.written, "echo hi\n");
  host_.fake.SettleWrite(size_t{8});
  PromptBack(*op, 0);
  ASSERT_TRUE(settled_ && *settled_);
  // The send settled at the verified prompt: the session gets that look's facts for the next.
  ASSERT_EQ(host_.settled_with.size(), 1u);
  ASSERT_TRUE(host_.settled_with[0]);
  EXPECT_EQ(host_.settled_with[0]->foreground_pgid, 100);
  EXPECT_EQ(host_.settled_with[0]->waiting_for_input, Finding::kYes);
}

TEST_F(SendOperationTest, WithoutAVerifiedIdlePromptThePreWriteCheckIsAFullInspection) {
  auto op = Make("sleep 100\n", 50);
  op->Start();
  ASSERT_EQ(host_.fake.log.size(), 1u);
  EXPECT_EQ(host_.fake.log[0], "inspect");
  host_.fake.SettleInspection();
  host_.fake.SettleWrite(size_t{10});
  host_.now += std::chrono::milliseconds(60);
  op->OnTimer();
  ASSERT_TRUE(settled_ && *settled_);
  EXPECT_EQ((*settled_)->wait_reason, WaitReason::kTimeout);
  // Not settled at a verified prompt: nothing for the next send to rely on.
  ASSERT_EQ(host_.settled_with.size(), 1u);
  EXPECT_FALSE(host_.settled_with[0]);
}

// ---- pattern, terminal_wait and foreground (contract v1.2) -----------------------------------

std::shared_ptr<const OutputPattern> Pattern(std::string_view text) {
  auto compiled = OutputPattern::Compile(text);
  EXPECT_TRUE(compiled.has_value()) << (compiled ? "" : compiled.error().message);
  return compiled ? *compiled : nullptr;
}

TEST_F(SendOperationTest, AMatchingOutputLineSettlesWithPatternAndTheMatch) {
  SendOperation::Config config;
  config.shell_pgid = 100;
  SendRequest request;
  request.input = "server\n";
  request.pattern = Pattern(R"(Listening on \d+)");
  SendOperation op(host_, config, std::move(request));
  op.SetSettledCallback([this](const Result<SendResult>& r) { settled_ = r; });
  op.Start();
  host_.fake.SettleInspection();
  host_.fake.SettleWrite(size_t{7});
  host_.pending = "";           // the prompt line was committed; nothing pending after it
  host_.fake.foreground = 200;  // the server holds the terminal
  op.OnOutput();
  op.OnLine("$ ");  // the prompt line the input was typed on: not output
  op.OnLine("starting");
  op.AfterOutput();
  EXPECT_FALSE(settled_);
  op.OnOutput();
  op.OnLine("Listening on 8000 (pid 7)");
  op.AfterOutput();
  ASSERT_TRUE(settled_ && settled_->has_value());
  EXPECT_EQ((*settled_)->wait_reason, WaitReason::kPattern);
  ASSERT_TRUE((*settled_)->match);
  EXPECT_EQ((*settled_)->match->text, "Listening on 8000");
  EXPECT_EQ((*settled_)->match->line, "Listening on 8000 (pid 7)");
  EXPECT_EQ((*settled_)->viewport, "starting\nListening on 8000 (pid 7)");
  ASSERT_TRUE((*settled_)->foreground);
  EXPECT_EQ((*settled_)->foreground->pgid, 200);
  EXPECT_FALSE((*settled_)->exit_code);
}

TEST_F(SendOperationTest, TheUnterminatedLineIsMatchedButNeverThePrompt) {
  SendOperation::Config config;
  config.shell_pgid = 100;
  SendRequest request;
  request.input = "x\n";
  request.pattern = Pattern(R"(assword: $|\$)");
  SendOperation op(host_, config, std::move(request));
  op.SetSettledCallback([this](const Result<SendResult>& r) { settled_ = r; });
  op.Start();
  host_.fake.SettleInspection();
  host_.fake.SettleWrite(size_t{2});
  // Still the boundary's own prompt line: the first-line rule says it is no output.
  op.OnOutput();
  op.AfterOutput();
  EXPECT_FALSE(settled_);
  op.OnLine("$ ");
  host_.pending = "Password: ";
  op.OnOutput();
  op.AfterOutput();
  ASSERT_TRUE(settled_ && settled_->has_value());
  EXPECT_EQ((*settled_)->wait_reason, WaitReason::kPattern);
  EXPECT_EQ((*settled_)->match->text, "assword: ");
}

TEST_F(SendOperationTest, ExactReadinessThatComesFirstWinsOverALaterMatch) {
  SendOperation::Config config;
  config.shell_pgid = 100;
  SendRequest request;
  request.input = "true\n";
  request.pattern = Pattern("never printed");
  SendOperation op(host_, config, std::move(request));
  op.SetSettledCallback([this](const Result<SendResult>& r) { settled_ = r; });
  op.Start();
  host_.fake.SettleInspection();
  host_.fake.SettleWrite(size_t{5});
  PromptBack(op, 0);
  ASSERT_TRUE(settled_ && settled_->has_value());
  EXPECT_EQ((*settled_)->wait_reason, WaitReason::kStdinRead);
  EXPECT_EQ((*settled_)->exit_code, 0);
  EXPECT_FALSE((*settled_)->foreground) << "at the verified prompt nothing is still running";
  EXPECT_FALSE((*settled_)->match);
  op.OnLine("never printed");  // after settling: changes nothing
  op.AfterOutput();
  EXPECT_EQ((*settled_)->wait_reason, WaitReason::kStdinRead);
}

TEST_F(SendOperationTest, AWaitWritesNothingAndSettlesAtThePromptLikeASend) {
  SendOperation::Config config;
  config.shell_pgid = 100;
  SendRequest request;
  request.wait = true;
  SendOperation op(host_, config, std::move(request));
  op.SetSettledCallback([this](const Result<SendResult>& r) { settled_ = r; });
  op.Start();
  host_.fake.SettleInspection();
  for (const std::string& entry : host_.fake.log) EXPECT_FALSE(entry.starts_with("write"));
  EXPECT_FALSE(host_.fake.write_done) << "nothing is written";
  PromptBack(op, 0);
  ASSERT_TRUE(settled_ && settled_->has_value());
  EXPECT_EQ((*settled_)->wait_reason, WaitReason::kStdinRead);
  EXPECT_EQ((*settled_)->exit_code, 0);
}

TEST_F(SendOperationTest, ATimeoutWithAnotherForegroundGroupNamesIt) {
  auto op = Make("sleep 100\n", 5);
  op->Start();
  host_.fake.SettleInspection();
  host_.fake.SettleWrite(size_t{10});
  // This test process stands in for the foreground group's leader: its command line is read.
  host_.fake.foreground = getpid();
  host_.now += std::chrono::milliseconds(10);
  op->OnTimer();
  ASSERT_TRUE(settled_ && settled_->has_value());
  EXPECT_EQ((*settled_)->wait_reason, WaitReason::kTimeout);
  ASSERT_TRUE((*settled_)->foreground);
  EXPECT_EQ((*settled_)->foreground->pgid, getpid());
  EXPECT_NE((*settled_)->foreground->command.find("send_operation_test"), std::string::npos)
      << (*settled_)->foreground->command;
}

TEST_F(SendOperationTest, ATimeoutWithTheShellInTheForegroundHasNoForeground) {
  auto op = Make("read x\n", 5);
  op->Start();
  host_.fake.SettleInspection();
  host_.fake.SettleWrite(size_t{7});
  host_.now += std::chrono::milliseconds(10);
  op->OnTimer();
  ASSERT_TRUE(settled_ && settled_->has_value());
  EXPECT_EQ((*settled_)->wait_reason, WaitReason::kTimeout);
  EXPECT_FALSE((*settled_)->foreground);
}

}  // namespace
}  // namespace ptybox::backend
