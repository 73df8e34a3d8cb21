// The PTY vocabulary of the contract (docs/protocol.md), shared by backends, the service and the
// protocol servers: why a send returned, the top-level process status, results and requests, and
// what a session's proxy reports.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/tokens.h"

namespace ptybox::backend {

// Why one interactive send returned control to its caller. Independent of SessionStatus:
// kInferredIdle or kTimeout may return while the shell still runs; kSessionExit means the
// top-level shell exited, not some foreground child.
// kPattern: the output since the write matched the send's `pattern`
// (backend/readiness/output_pattern.h).
enum class WaitReason { kStdinRead, kInferredIdle, kTimeout, kSessionExit, kPattern };

// A wait reason and its contract name as one token (common/tokens.h): the one table of wait
// reasons, which ToString, the MCP output schema's enum and the text a model reads are drawn from.
using WaitReasonToken = NameToken<WaitReason>;
// Every wait reason in the enum's order (ToString indexes it).
inline constexpr std::array<WaitReasonToken, 5> kWaitReasonTokens = {{
    {WaitReason::kStdinRead, "stdin_read"},
    {WaitReason::kInferredIdle, "inferred_idle"},
    {WaitReason::kTimeout, "timeout"},
    {WaitReason::kSessionExit, "session_exit"},
    {WaitReason::kPattern, "pattern"},
}};
static_assert(InEnumOrder(kWaitReasonTokens),
              "kWaitReasonTokens must list the wait reasons in the enum's order");

std::string_view ToString(WaitReason reason);
// The contract names of every wait reason, in the table's order (for schemas' enums).
std::vector<std::string> WaitReasonNames();

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
  // The scrollback offset (a terminal_read cursor) where `output` starts, when `output` is
  // exactly the scrollback's bytes from there; nullopt otherwise (docs/protocol.md).
  std::optional<uint64_t> output_cursor;
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

namespace proxy {

// What a session's proxy (backend/proxy/network_proxy.h) reports to whoever audits the session
// (runtime/audit): each refusal, and the totals once it stops. Light on purpose: SpawnSpec
// carries it without the reactor, and the audit room below the backend reads it.

// One refused request, for the audit log (`network_denied`) and the client's one line.
struct ProxyRefusal {
  std::string host;  // as requested, normalized when it could be (printable, bounded)
  uint16_t port = 0;
  std::string reason;  // the line the client got
};

// The session's traffic through its proxy, reported once when the proxy stops.
struct ProxyTotals {
  uint64_t connections = 0;     // relayed to a server
  uint64_t refused = 0;         // refused by the policy
  uint64_t bytes_sent = 0;      // client -> servers
  uint64_t bytes_received = 0;  // servers -> client
};

struct ProxyEvents {
  std::function<void(const ProxyRefusal&)> refused;
  std::function<void(const ProxyTotals&)> stopped;
};

}  // namespace proxy
}  // namespace ptybox::backend
