#include "backend/send_operation.h"

#include <signal.h>

#include "backend/readiness/foreground_command.h"
#include "backend/readiness/output_pattern.h"
#include "common/log.h"

namespace ptybox::backend {

namespace {

// `line` without the intermediate prompt `before + PS1` it starts with; nullopt when it does not
// start with it. Rendered lines have their trailing blanks trimmed, so a line that held only the
// prompt reads "$", not "$ ".
std::optional<std::string> WithoutPrompt(std::string_view line, const std::string& before) {
  const std::string prompt = before + std::string(kPromptPs1);
  if (line.starts_with(prompt)) return before + std::string(line.substr(prompt.size()));
  std::string_view trimmed = prompt;
  while (!trimmed.empty() && trimmed.back() == ' ') trimmed.remove_suffix(1);
  if (line == trimmed) return before;
  return std::nullopt;
}

ReadinessTimings WithRequest(ReadinessTimings timings, const SendRequest& request) {
  if (request.timeout_ms) timings.timeout = Millis(*request.timeout_ms);
  if (request.silence_ms) timings.idle_silence = Millis(*request.silence_ms);
  return timings;
}

}  // namespace

SendOperation::SendOperation(SendHost& host, Config config, SendRequest request)
    : host_(host),
      config_(config),
      request_(std::move(request)),
      driver_(host,
              ReadinessEngine(ReadinessEngine::Purpose::kSend,
                              WithRequest(config.timings, request_), config.shell_pgid, host.Now()),
              [this](WaitReason reason) { Finish(reason); }) {}

SendOperation::~SendOperation() { *alive_ = false; }

std::vector<std::string> SendOperation::InputLines(std::string_view input) {
  // The complete lines of the input (Enter is "\n" or "\r"); an unterminated tail is not
  // accepted by readline yet, so it has no echoed line.
  std::vector<std::string> lines;
  size_t start = 0;
  for (size_t i = 0; i < input.size(); ++i) {
    if (input[i] != '\n' && input[i] != '\r') continue;
    lines.emplace_back(input.substr(start, i - start));
    start = i + 1;
  }
  return lines;
}

void SendOperation::Start() {
  if (started_) return;
  started_ = true;
  // The pre-write inspection: the baseline that tells an old stdin wait from a new one. After a
  // send that settled at the verified prompt with nothing on the terminal since, the facts of
  // that verifying look are the baseline, once the terminal confirms they still hold.
  std::weak_ptr<bool> alive = alive_;
  auto done = [this, alive](ForegroundFacts facts) {
    if (alive.expired()) return;
    OnPreWriteFacts(std::move(facts));
  };
  if (std::optional<ForegroundFacts> idle = host_.IdlePromptFacts()) {
    // Written to the verified prompt: readline reads these lines, and echoes them when a
    // program turned ECHO back on (`stty sane`): an echo OnLine can recognise exactly.
    if (!request_.wait) echo_lines_ = InputLines(request_.input);
    host_.terminal().InspectSince(*idle, std::move(done));
  } else {
    host_.terminal().Inspect(std::move(done));
  }
  driver_.Pump();
}

void SendOperation::OnPreWriteFacts(ForegroundFacts facts) {
  if (settled()) {
    // The deadline passed during the inspection: the input is never written.
    write_ = WriteState::kSkipped;
    MaybeRelease();
    return;
  }
  if (!canceled_ && host_.InSignalTransition(facts)) {
    // Let the signal's effect settle before writing; the deadline stays armed meanwhile.
    std::weak_ptr<bool> alive = alive_;
    host_.After(transition_step_, [this, alive] {
      if (alive.expired() || settled()) return;
      host_.terminal().Inspect([this, alive](ForegroundFacts again) {
        if (!alive.expired()) OnPreWriteFacts(std::move(again));
      });
    });
    transition_step_ = std::min(transition_step_ * 2, Millis(16));
    return;
  }
  engine().OnPreWriteFacts(facts);
  if (!request_.wait && !canceled_ && host_.OnlyForeignInputOnLine(facts)) {
    // Nothing on the line is the agent's: a program's leftover would join its command. In raw
    // mode the line editor has already taken it from the terminal; in canonical mode the kernel
    // keeps an unterminated line.
    discard_ = facts.canonical == false ? Discard::kUnreadAndLine : Discard::kUnread;
  }
  BeginWrite();
}

std::string SendOperation::BytesToWrite() {
  if (discard_ == Discard::kNone) return request_.input;
  host_.terminal().DiscardUnreadInput();
  // A space, then ^U: unix-line-discard in readline's emacs and vi insertion keymaps (and the
  // terminal's kill character, which readline binds to it) kills from the cursor to the start of
  // the line; the leftover was typed at its end. The space keeps the line from being empty,
  // where unix-line-discard rings the bell.
  // Only where both bytes are plain to the line editor: a program that ran `stty intr ^U` (or
  // `eof ' '`) would turn them into cutting the agent's first byte or ending the shell. What
  // readline bound from the characters it saw before its raw mode (`stty lnext ^U` makes ^U its
  // quoted-insert) no look can read: docs/security.md names that limit.
  if (discard_ == Discard::kUnreadAndLine && host_.terminal().LineDiscardIsInert()) {
    return " \x15" + request_.input;
  }
  return request_.input;
}

void SendOperation::BeginWrite() {
  const TimePoint now = host_.Now();
  // The write boundary. Output before it belongs to the previous send.
  if (request_.wait) {
    // terminal_wait: the output since the previous result is this wait's output.
    std::string pending_at_result = host_.PendingTextUntrimmed();
    std::vector<std::string> earlier = host_.LinesSinceLastResult(&pending_at_result);
    capture_ = std::make_unique<SendCapture>(config_.max_result_bytes, config_.max_unconsumed_bytes,
                                             pending_at_result);
    for (const std::string& line : earlier) capture_->AddLine(line);
  } else {
    capture_ = std::make_unique<SendCapture>(config_.max_result_bytes, config_.max_unconsumed_bytes,
                                             host_.PendingTextUntrimmed());
  }
  host_.OnSendBoundary();
  marker_.reset();
  prompt_on_line_ = false;
  continuation_on_line_ = false;
  engine().OnWriteStarted(now);
  if (request_.wait && !canceled_) {
    // Nothing to write: the boundary is also the end of the (empty) write.
    write_ = WriteState::kSkipped;
    engine().OnWriteSettled(now);
    host_.ReplayIdlePrompt();
    driver_.Pump();
    MaybeRelease();
    return;
  }
  if (canceled_) {
    // Canceled while the inspection was pending: the queued input is never written. The signal
    // the cancellation asked for goes out now, after an empty boundary.
    write_ = WriteState::kSkipped;
    engine().OnWriteSettled(now);
    MaybeSignal();
    driver_.Pump();
    return;
  }
  write_ = WriteState::kInFlight;
  std::weak_ptr<bool> alive = alive_;
  std::string bytes = BytesToWrite();
  host_.OnInputWritten(request_.input);
  host_.terminal().Write(std::move(bytes), [this, alive](Result<size_t> written) {
    if (alive.expired()) return;
    OnWriteSettled(std::move(written));
  });
}

void SendOperation::OnWriteSettled(Result<size_t> written) {
  write_ = written ? WriteState::kDone : WriteState::kRejected;
  engine().OnWriteSettled(host_.Now());
  // A rejected write sends no signal; a completed one releases a waiting cancellation.
  if (canceled_ && write_ == WriteState::kRejected) signal_ = SignalState::kNone;
  MaybeSignal();
  driver_.Pump();
  MaybeRelease();
}

bool SendOperation::Cancel() {
  if (settled() || canceled_) return !settled() && canceled_;
  // Mark the queued input canceled before asking for any signal.
  canceled_ = true;
  signal_ = SignalState::kWanted;
  if (write_ == WriteState::kInFlight) {
    // Signalling waits for the write; stop writing what has not gone out yet.
    host_.terminal().AbortWrite();
    return true;
  }
  if (write_ == WriteState::kQueued) {
    // The pre-write inspection is pending: BeginWrite sees the mark and skips the input.
    return true;
  }
  MaybeSignal();
  return true;
}

void SendOperation::MaybeSignal() {
  if (signal_ != SignalState::kWanted) return;
  if (write_ == WriteState::kQueued || write_ == WriteState::kInFlight) return;
  if (write_ == WriteState::kRejected) {
    signal_ = SignalState::kNone;
    return;
  }
  signal_ = SignalState::kInFlight;
  std::weak_ptr<bool> alive = alive_;
  host_.terminal().SignalForeground(SIGINT, TerminalHandle::SignalFollowLimit::kUntilEnded,
                                    [this, alive](Result<SignalResult> result) {
                                      if (alive.expired()) return;
                                      OnSignalSettled(std::move(result));
                                    });
}

void SendOperation::OnSignalSettled(Result<SignalResult> result) {
  signal_ = SignalState::kDone;
  if (!result) {
    // A signal failure is a terminal transport failure: it rejects the active send.
    Error error = result.error();
    error.kind = ErrorKind::kClosed;
    error.message = "canceling the send failed: " + error.message +
                    ". The terminal may be unusable; close the session (terminal_close).";
    Reject(std::move(error));
  }
  driver_.Pump();
  MaybeRelease();
}

void SendOperation::OnOutput() {
  if (settled()) return;
  engine().OnOutput(host_.Now());
  driver_.Pump();
}

void SendOperation::OnLine(std::string_view line, std::optional<uint64_t> line_end) {
  if (!capture_) return;  // before the boundary: the previous send's output
  if (echo_taken_ == 0 && !echo_lines_.empty() &&
      capture_->TakeEchoedFirstLine(line, echo_lines_.front())) {
    // ECHO is on (`stty sane`, `stty echo`): readline repeated the first input line after the
    // prompt. It is input, not output.
    // Readline restores the settings it found (ECHO on) once it has accepted the line and
    // reads them again before its next prompt: turned off now, while the command runs, the
    // next prompt does not echo. Should readline restore them after this, the next send's echo
    // is recognised here again and the settings turned off again.
    echo_taken_ = 1;
    (void)host_.terminal().ReassertNoEcho();
    // Readline restores them just after it writes the line's end, which the daemon, woken on
    // an idle core, reads first more often than not (ShellChangesTest lost 10 sends in a row
    // as an ordinary user): once more a moment later, while the command runs.
    std::weak_ptr<bool> alive = alive_;
    host_.After(kEchoReassertDelay, [this, alive] {
      if (!alive.expired() && !settled()) (void)host_.terminal().ReassertNoEcho();
    });
    return;
  }
  if (continuation_on_line_ && echo_taken_ > 0 && echo_taken_ < echo_lines_.size() &&
      line == echo_lines_[echo_taken_]) {
    // The echo of the next input line after the (invisible) continuation prompt.
    continuation_on_line_ = false;
    ++echo_taken_;
    return;
  }
  if (continuation_on_line_) {
    // A line of a heredoc or of a multi-line command: with ECHO off, nothing but the line end
    // readline writes when it accepts the line.
    continuation_on_line_ = false;
    if (line.empty()) return;
  }
  if (prompt_on_line_) {
    // The line that held an intermediate prompt: keep what preceded the prompt and what followed
    // it, drop the prompt itself; a line that was only a prompt is not output.
    prompt_on_line_ = false;
    if (std::optional<std::string> kept = WithoutPrompt(line, pending_before_marker_)) {
      // Only what followed the prompt is still where the scrollback has it.
      const bool suffix = line.ends_with(*kept);
      if (!kept->empty()) MatchPattern(capture_->AddLine(*kept, suffix ? line_end : std::nullopt));
      return;
    }
  }
  MatchPattern(capture_->AddLine(line, line_end));
}

void SendOperation::MatchPattern(std::optional<std::string_view> line) {
  if (!line || !request_.pattern || pattern_match_ || settled()) return;
  pattern_match_ = FindWithinBudget(*line);
}

std::optional<PatternMatch> SendOperation::FindWithinBudget(std::string_view text) {
  if (pattern_spent_ > kPatternMatchBudget) return std::nullopt;
  // Real time on the reactor, not the engine's clock: this bounds what one call's matching
  // takes from every other session of the daemon.
  const auto start = std::chrono::steady_clock::now();
  std::optional<PatternMatch> found = request_.pattern->Find(text);
  pattern_spent_ += std::chrono::steady_clock::now() - start;
  if (!found && pattern_spent_ > kPatternMatchBudget) {
    LogWarn("a pattern used its matching budget (" + std::to_string(kPatternMatchBudget.count()) +
            " ms) without a match: it is no longer matched for this call");
  }
  return found;
}

void SendOperation::AfterOutput() {
  if (!request_.pattern || settled() || !capture_) return;
  if (!pattern_match_) {
    // The unterminated line too ("Password: ", a progress line), without a prompt on it.
    std::string pending = host_.PendingText();
    if (marker_) {
      if (std::optional<std::string> kept = WithoutPrompt(pending, pending_before_marker_)) {
        pending = std::move(*kept);
      }
    }
    if (std::optional<std::string_view> part = capture_->PendingContribution(pending)) {
      if (!part->empty()) pattern_match_ = FindWithinBudget(*part);
    }
  }
  // Settled here, after the output was decoded, never from inside the decoder's line callback.
  if (pattern_match_) {
    driver_.Stop();
    Finish(WaitReason::kPattern);
  }
}

void SendOperation::OnMarker(const PromptMarker& marker, std::string pending_before_marker) {
  if (!capture_) return;
  marker_ = marker;
  pending_before_marker_ = std::move(pending_before_marker);
  prompt_on_line_ = false;
}

void SendOperation::OnCandidate(std::optional<pid_t> foreground_pgid,
                                std::optional<size_t> unread_input) {
  if (settled() || !capture_) return;
  engine().OnPromptCandidate(host_.Now(), foreground_pgid, unread_input);
  driver_.Pump();
}

void SendOperation::OnInvalidated() {
  if (!capture_) return;
  // The candidate prompt was followed by more output: it was an intermediate prompt.
  if (marker_) prompt_on_line_ = true;
  engine().OnPromptInvalidated();
}

void SendOperation::OnContinuation() {
  if (!capture_) return;
  continuation_on_line_ = true;
}

void SendOperation::OnTimer() { driver_.Pump(); }

void SendOperation::OnSessionExit() {
  engine().OnSessionExit();
  driver_.Pump();
}

void SendOperation::OnClosed() {
  engine().OnSessionExit();
  driver_.Resume();
  // Whatever was in flight was ended with the session.
  if (write_ == WriteState::kQueued || write_ == WriteState::kInFlight) {
    write_ = WriteState::kRejected;
  }
  if (signal_ != SignalState::kNone) signal_ = SignalState::kDone;
  MaybeRelease();
}

void SendOperation::StopPolling() { driver_.Stop(); }

void SendOperation::Finish(WaitReason reason) {
  if (settled()) return;  // rejected earlier
  SendResult result;
  result.wait_reason = reason;
  // Settled (the deadline, most often) while its input was still being written, blocked on a
  // full terminal input buffer: the rest is dropped, so the send ends now and no later input
  // lands after it. The result says so with `truncated`.
  const bool input_dropped = write_ == WriteState::kInFlight && host_.terminal().AbortWrite();
  result.session_status = host_.CurrentStatus();
  const bool at_prompt = engine().settled_by_prompt() && marker_.has_value();
  std::optional<RenderedViewport> rendered = capture_ ? host_.RenderSend(at_prompt) : std::nullopt;
  if (rendered) capture_->ForgetPlaces();  // its lines in the scrollback were replaced
  if (std::optional<std::string> screen = host_.AlternateScreen()) {
    // The rendered screen, within maxResultBytes like any viewport.
    bool truncated = false;
    result.viewport = SendCapture::Bound(*screen, config_.max_result_bytes, &truncated);
    result.truncated = truncated;
  } else if (rendered) {
    // Cursor-addressed output: what the terminal showed, not the line path's fragments.
    result.viewport = std::move(rendered->text);
    result.truncated = rendered->truncated;
  } else if (capture_) {
    const bool by_prompt = at_prompt;
    std::string pending = by_prompt ? pending_before_marker_ : host_.PendingText();
    if (!by_prompt && prompt_on_line_) {
      if (std::optional<std::string> kept = WithoutPrompt(pending, pending_before_marker_)) {
        pending = std::move(*kept);
      }
    }
    if (!by_prompt && reason == WaitReason::kStdinRead &&
        host_.terminal().ForegroundPgid() == config_.shell_pgid) {
      // The shell itself waits for a line without ptybox's marker (`exec bash` replaced the
      // hooked shell): its own prompt is not output. The result keeps exitCode null. What the
      // line adds to the boundary is judged: a shell without readline (dash, `exec $SHELL`)
      // prints its next prompt after the previous one on the same line ("$ $ ").
      const std::optional<std::string_view> part = capture_->PendingContribution(pending);
      if (part && LooksLikeBashPrompt(*part)) pending.clear();
    }
    bool truncated = false;
    result.viewport = capture_->Viewport(pending, &truncated);
    result.truncated = truncated;
  }
  if (input_dropped) result.truncated = true;
  if (engine().settled_by_prompt() && marker_) {
    result.exit_code = marker_->exit_code;
    if (marker_->cwd_known) result.cwd = marker_->cwd;
  }
  result.foreground = ForegroundAtSettlement(at_prompt, result.session_status);
  if (reason == WaitReason::kPattern) result.match = pattern_match_;
  result_ = std::move(result);
  // Settled: the signal is followed no longer (LocalTerminal::StartSignalFollow), so the slot
  // frees now and the next send is never answered busy, nor its own job signaled by this one's
  // follow. At its verified prompt the shell starts nothing more of the canceled line anyway.
  if (signal_ == SignalState::kInFlight) host_.terminal().EndSignalFollow();
  host_.OnSendSettled(engine().verifying_facts());
  if (on_settled_) on_settled_(*result_);
  MaybeRelease();
}

std::optional<ForegroundJob> SendOperation::ForegroundAtSettlement(bool at_prompt,
                                                                   const SessionStatus& status) {
  if (at_prompt || status.exited) return std::nullopt;
  std::optional<pid_t> pgid = host_.terminal().ForegroundPgid();
  if (!pgid || *pgid <= 0 || *pgid == config_.shell_pgid) return std::nullopt;
  return ForegroundJob{.pgid = *pgid, .command = ReadCommandLine(*pgid)};
}

void SendOperation::Reject(Error error) {
  if (settled()) return;
  driver_.Stop();
  result_ = std::unexpected(std::move(error));
  if (on_settled_) on_settled_(*result_);
}

void SendOperation::MaybeRelease() {
  if (released_ || !settled()) return;
  if (write_ == WriteState::kQueued || write_ == WriteState::kInFlight) return;
  if (signal_ == SignalState::kInFlight) return;
  if (signal_ == SignalState::kWanted) {
    // Settled before a wanted signal could go out (e.g. the deadline): it is not sent any more.
    signal_ = SignalState::kNone;
  }
  released_ = true;
  if (on_released_) on_released_();
}

SendRead SendOperation::ReadOutput(size_t max_bytes) {
  SendRead read;
  if (capture_) {
    read.output = capture_->TakeOutput(max_bytes, &read.truncated, &read.output_cursor);
    // Output that addressed the cursor across rows is rendered at settlement, its lines in the
    // scrollback replaced: no offset of them holds until then.
    if (!settled() && host_.WillRender()) read.output_cursor = std::nullopt;
  }
  // Done once settled and everything it produced has been consumed.
  if (settled() && read.output.size() < max_bytes) {
    read.done = true;
    if (result_->has_value()) read.result = **result_;
  }
  return read;
}

}  // namespace ptybox::backend
