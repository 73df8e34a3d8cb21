// One send on one session: pre-write inspection, the write, the readiness wait and the settled
// result, plus cancellation with a real SIGINT. It owns the ordering rules of
// docs/readiness.md ("Cancellation"); the readiness decisions belong to its ReadinessEngine.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend/contract_types.h"
#include "backend/readiness/prompt_protocol.h"
#include "backend/readiness/readiness_driver.h"
#include "backend/readiness/readiness_engine.h"
#include "backend/readiness/terminal_handle.h"
#include "backend/send_render.h"
#include "backend/terminal/send_capture.h"
#include "common/error.h"

namespace ptybox::backend {

// The session side of a send: time, one timer, the terminal, and what the terminal shows.
class SendHost : public ReadinessHost {
 public:
  // The unterminated line as rendered now.
  virtual std::string PendingText() = 0;
  // The same keeping trailing blanks (what stands on the line at the write boundary).
  virtual std::string PendingTextUntrimmed() = 0;
  // The rendered screen when a full-screen program uses the alternate screen, else nullopt.
  virtual std::optional<std::string> AlternateScreen() = 0;
  virtual SessionStatus CurrentStatus() = 0;
  // True while a signal recently delivered to the foreground group may still be taking effect
  // (bash discards typeahead when its foreground job dies of SIGINT): a write now could be lost.
  virtual bool InSignalTransition(const ForegroundFacts& facts) = 0;
  // Runs `fn` on the reactor after `delay`.
  virtual void After(Millis delay, std::function<void()> fn) = 0;
  // The write boundary: the session starts keeping the send's raw output (backend/send_render.h).
  virtual void OnSendBoundary() {}
  // At settlement: when the send's output addressed the cursor across rows on the normal
  // screen, its viewport rendered the way the terminal showed it (and its scrollback lines
  // replaced by the same rendering); nullopt for plain output, whose line capture stands.
  // `at_prompt`: the send settled at the shell's prompt, which is not output.
  virtual std::optional<RenderedViewport> RenderSend(bool /*at_prompt*/) { return std::nullopt; }
  // Whether RenderSend would render now: the output since the boundary addressed the cursor
  // across rows on the normal screen.
  virtual bool WillRender() { return false; }
  // The facts of the look that last verified the shell idle at its own prompt, when nothing has
  // happened on the terminal since (no output, no signal, no resize); nullopt otherwise. The
  // pre-write check then only confirms they still hold (TerminalHandle::InspectSince).
  virtual std::optional<ForegroundFacts> IdlePromptFacts() { return std::nullopt; }
  // Just before this send's input is written, with its pre-write facts: true when whatever the
  // shell's line editor holds is nobody's input but a program's leftover (the rest of a
  // terminal answer it read only part of): every byte agents and persons wrote ended a line and
  // was read, and `facts` show the shell alone in the foreground, its line editor (readline's
  // wait in raw mode, a line read in canonical mode) reading the terminal. The send then
  // discards it before its own bytes (docs/readiness.md, section 3).
  virtual bool OnlyForeignInputOnLine(const ForegroundFacts& /*facts*/) { return false; }
  // This send's bytes are being written to the terminal.
  virtual void OnInputWritten(std::string_view /*bytes*/) {}
  // A send settled; `verifying` holds the facts of the look that verified the prompt it
  // settled at (nullopt when it did not settle at the prompt).
  virtual void OnSendSettled(const std::optional<ForegroundFacts>& /*verifying*/) {}
  // terminal_wait: the lines committed since the previous result settled, and in
  // `*pending_at_result` the unterminated line as it stood then (the first-line rule's boundary).
  virtual std::vector<std::string> LinesSinceLastResult(std::string* /*pending_at_result*/) {
    return {};
  }
  // terminal_wait: hands the active operation a prompt that came after the previous result
  // settled (marker and candidate), as if it had come after the boundary.
  virtual void ReplayIdlePrompt() {}
};

class SendOperation final {
 public:
  // The write boundary has passed: the terminal's events now belong to this operation.
  [[nodiscard]] bool past_boundary() const { return capture_ != nullptr; }
  struct Config {
    ReadinessTimings timings;
    pid_t shell_pgid = 0;
    size_t max_result_bytes = 256 * 1024;
    size_t max_unconsumed_bytes = 4 * 1024 * 1024;
  };
  using SettledCallback = std::function<void(const Result<SendResult>&)>;

  SendOperation(SendHost& host, Config config, SendRequest request);
  SendOperation(const SendOperation&) = delete;
  SendOperation& operator=(const SendOperation&) = delete;
  ~SendOperation();

  // The bytes this send types: its input, or its named keys as encoded (what the audit log and
  // a recording show).
  [[nodiscard]] const std::string& input() const { return request_.input; }

  // Called once when the result is known (settled or rejected).
  void SetSettledCallback(SettledCallback callback) { on_settled_ = std::move(callback); }
  // Called once when the operation gives up the session's send slot: settled, and its write and
  // signal have settled too.
  void SetReleasedCallback(std::function<void()> callback) { on_released_ = std::move(callback); }

  // Starts the pre-write inspection; the write follows it.
  void Start();
  // Cancels: marks queued input canceled, then signals SIGINT to the foreground group once no
  // write is in flight. False when the operation has already settled.
  bool Cancel();

  [[nodiscard]] bool settled() const { return result_.has_value(); }
  [[nodiscard]] bool released() const { return released_; }
  [[nodiscard]] bool canceled() const { return canceled_; }
  [[nodiscard]] const std::optional<Result<SendResult>>& result() const { return result_; }

  // Events from the session, in stream order.
  void OnOutput();
  // `line_end`: the scrollback offset just past the line's "\n" (it was just appended there).
  void OnLine(std::string_view line, std::optional<uint64_t> line_end = std::nullopt);
  // The output of one event has been decoded: a `pattern` match settles the send now.
  void AfterOutput();
  void OnMarker(const PromptMarker& marker, std::string pending_before_marker);
  void OnCandidate(std::optional<pid_t> foreground_pgid, std::optional<size_t> unread_input);
  void OnInvalidated();
  // Bash printed its continuation prompt: the line it starts is not output unless something
  // was printed on it (PS2 itself prints nothing visible).
  void OnContinuation();
  void OnTimer();
  void OnSessionExit();
  // Close began: no more probes or timers; the send waits for OnClosed.
  void StopPolling();
  // The session was closed and every process has ended: settle as session_exit, release.
  void OnClosed();

  // Output produced since the previous call (background sends), at most `max_bytes`.
  SendRead ReadOutput(size_t max_bytes);

 private:
  [[nodiscard]] static std::vector<std::string> InputLines(std::string_view input);
  enum class WriteState { kQueued, kInFlight, kDone, kRejected, kSkipped };
  enum class SignalState { kNone, kWanted, kInFlight, kDone };

  void OnPreWriteFacts(ForegroundFacts facts);
  void BeginWrite();
  // The bytes written for this send: its input, after the discard OnPreWriteFacts decided.
  [[nodiscard]] std::string BytesToWrite();
  void OnWriteSettled(Result<size_t> written);
  void MaybeSignal();
  void OnSignalSettled(Result<SignalResult> result);
  void Finish(WaitReason reason);
  // The foreground group and its command when the send did not end at the prompt and another
  // group than the shell's holds the terminal (SendResult::foreground).
  // Records the first line the request's pattern matches.
  void MatchPattern(std::optional<std::string_view> line);
  // The pattern's first match in `text`, while this call's matching budget lasts.
  std::optional<PatternMatch> FindWithinBudget(std::string_view text);
  [[nodiscard]] std::optional<ForegroundJob> ForegroundAtSettlement(bool at_prompt,
                                                                    const SessionStatus& status);
  [[nodiscard]] ReadinessEngine& engine() { return driver_.engine(); }
  void Reject(Error error);
  void MaybeRelease();

  // How long after a send's echo the terminal's ECHO is turned off once more (OnLine).
  static constexpr Millis kEchoReassertDelay{2};

  SendHost& host_;
  Config config_;
  SendRequest request_;
  ReadinessDriver driver_;
  std::unique_ptr<SendCapture> capture_;  // from the write boundary on

  WriteState write_ = WriteState::kQueued;
  SignalState signal_ = SignalState::kNone;
  bool started_ = false;
  bool canceled_ = false;
  Millis transition_step_{1};

  // The latest owned marker after the boundary, and the text before it on its line.
  std::optional<PromptMarker> marker_;
  // Real time the pattern's matching has used on the reactor (bounded by kPatternMatchBudget).
  std::chrono::steady_clock::duration pattern_spent_{};
  std::optional<PatternMatch> pattern_match_;  // the first line `pattern` matched
  std::string pending_before_marker_;
  // An intermediate prompt is on the current line: its text is not output of the send.
  bool prompt_on_line_ = false;
  bool continuation_on_line_ = false;  // the current line began with the continuation prompt
  // The input's complete lines when it was written to the verified prompt (readline reads
  // them), and how many of them OnLine took as their echo (ECHO turned back on by a program).
  std::vector<std::string> echo_lines_;
  size_t echo_taken_ = 0;
  // What the write discards first (OnlyForeignInputOnLine): nothing; the terminal's unread
  // input; or that and, in raw mode (readline's), the line the editor holds (a kill character).
  enum class Discard { kNone, kUnread, kUnreadAndLine };
  Discard discard_ = Discard::kNone;

  std::optional<Result<SendResult>> result_;
  bool released_ = false;
  SettledCallback on_settled_;
  std::function<void()> on_released_;
  // Guards callbacks that outlive the operation.
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace ptybox::backend
