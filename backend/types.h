// The PTY vocabulary of the seeds (seeds/000), shared by backends, the service and the
// protocol servers: why a send returned, the top-level process status, results and requests.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ptybox::backend {

// Why one interactive send returned control to its caller. Independent of SessionStatus:
// kInferredIdle or kTimeout may return while the shell still runs; kSessionExit means the
// top-level shell exited, not some foreground child.
// kPattern: the output since the write matched the send's `pattern`
// (backend/readiness/output_pattern.h).
enum class WaitReason { kStdinRead, kInferredIdle, kTimeout, kSessionExit, kPattern };
std::string_view ToString(WaitReason reason);

// Top-level process status, independent of a send's wait reason.
struct SessionStatus {
  bool exited = false;
  std::optional<int> exit_code;  // when exited normally
  std::optional<int> signal;     // when killed by a signal
  static SessionStatus Running() { return {}; }
  bool operator==(const SessionStatus&) const = default;
};

// "SIGKILL"-style name of a signal number, or "SIG<n>" for one without a name.
std::string SignalName(int signal);
// The signals the contract lets a client send (terminal_signal), in the contract's order.
const std::vector<std::string>& ClientSignalNames();
// One of ClientSignalNames() as its number; nullopt for anything else.
std::optional<int> ParseClientSignal(std::string_view name);

class OutputPattern;

// What a `pattern` matched: the matched text and the whole line it is on (each bounded).
struct PatternMatch {
  std::string text;
  std::string line;
  bool operator==(const PatternMatch&) const = default;
};

// What holds the terminal's foreground when a send did not settle at the shell's prompt.
struct ForegroundJob {
  int pgid = 0;
  std::string command;  // the group leader's command line (backend/readiness/foreground_command.h)
  bool operator==(const ForegroundJob&) const = default;
};

// Settled result of one foreground or background send.
struct SendResult {
  std::string viewport;  // bounded rendered delta; echo and prompt excluded
  WaitReason wait_reason = WaitReason::kTimeout;
  SessionStatus session_status;
  bool truncated = false;          // output was dropped from the viewport or from scrollback
  std::optional<int> exit_code;    // $? at the verified prompt, else nullopt
  std::optional<std::string> cwd;  // working directory at the verified prompt, else nullopt
  // Not at the verified prompt and another group than the shell's holds the terminal: what is
  // still running (or waiting for input). nullopt at the prompt and once the shell exited.
  std::optional<ForegroundJob> foreground;
  std::optional<PatternMatch> match;  // settled by `pattern`
};

struct SendRequest {
  std::string input;  // written verbatim
  // Instead of input: named keys and literal strings (backend/terminal/key_encoder.h), encoded for
  // the terminal's current modes when the send starts.
  std::vector<std::string> keys;
  std::optional<int64_t> timeout_ms;
  std::optional<int64_t> silence_ms;
  // terminal_wait: nothing is written; the send waits for readiness as any send does, and its
  // viewport starts where the previous send's (or wait's) result ended.
  bool wait = false;
  // Settles the send with WaitReason::kPattern at the first output line it matches.
  std::shared_ptr<const OutputPattern> pattern;
};

// Output of a background operation consumed since the previous call.
struct SendRead {
  std::string output;
  bool done = false;
  std::optional<SendResult> result;  // once done
  bool truncated = false;            // output was dropped before it could be consumed
};

enum class ReadView { kLines, kScreen };

struct ReadRequest {
  std::optional<uint64_t> cursor;  // default: oldest retained
  std::optional<int64_t> max_bytes;
  ReadView view = ReadView::kLines;
};

struct ReadResult {
  std::string text;
  uint64_t cursor = 0;       // where this page starts (after clamping to what is retained)
  uint64_t next_cursor = 0;  // where the next page starts
  bool truncated = false;    // output before the requested cursor was already dropped
  bool end = false;          // the page reaches the newest output
};

struct SignalResult {
  bool delivered = false;
  int pgid = 0;
};

}  // namespace ptybox::backend
