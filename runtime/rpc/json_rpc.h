// JSON-RPC 2.0 messages as both protocol servers read and write them (docs/protocol.md,
// "Transport"): one message per line, checked before and after parsing, and the envelopes of
// results, errors and notifications. Nothing here knows a method of the contract.
#pragma once

#include <cstddef>
#include <expected>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "common/error.h"

namespace ptybox::runtime {

using Json = nlohmann::json;

// One JSON-RPC 2.0 message read from one line; `ptybox serve` and `ptybox mcp` frame and check
// messages the same way.
struct RpcMessage {
  enum class Kind { kRequest, kNotification, kResponse };
  Kind kind = Kind::kRequest;
  Json id;             // requests and responses
  std::string method;  // requests and notifications
  Json params;         // an object, or null when absent
};

// The deepest nesting of arrays and objects a message may have. Deeper input is refused before
// it is parsed: a parse, copy or destruction of a deeply nested value recurses once per level.
inline constexpr size_t kMaxJsonDepth = 64;
// Values in the arrays and objects of one message (ParseRpcLine counts them before parsing).
inline constexpr size_t kMaxJsonValues = 100000;
// The longest request id accepted, in bytes of its JSON text.
inline constexpr size_t kMaxRequestIdBytes = 256;
// A reason a client gives (terminal_close, $/cancelRequest, notifications/cancelled), in bytes.
inline constexpr size_t kMaxReasonBytes = 1024;

// `text` for an error message: at most `max_bytes` (on a character boundary) and a note of what
// was left out, so a client's long value is never echoed whole.
std::string Abbreviate(std::string_view text, size_t max_bytes = 64);

// A line that is not a usable message, and the error response it gets.
struct RpcReject {
  Json id;  // null when no valid id could be read
  int code = -32600;
  std::string message;
};

// Parse error (-32700), invalid request (-32600: nested deeper than kMaxJsonDepth, more values
// than kMaxJsonValues, not an object, bad or longer id than kMaxRequestIdBytes, "jsonrpc" not
// "2.0", no method) or invalid params (-32602: "params" not an object).
std::expected<RpcMessage, RpcReject> ParseRpcLine(const std::string& line);

// A request id as a key for cancellation: its JSON text ("1" and "\"1\"" are different ids).
std::string RequestKey(const Json& id);

// Envelopes.
Json RpcResult(const Json& id, Json result);
Json RpcError(const Json& id, Json error_object);
Json RpcError(const Json& id, int code, const std::string& message);
Json RpcNotification(const std::string& method, Json params);
Json RpcRequest(const Json& id, const std::string& method, Json params);

// JSON-RPC error object for an application error: code -32000 and data.kind, or -32602 for
// kInvalidParams.
Json ErrorObject(const Error& error);

// Serializes without ever throwing: invalid UTF-8 (a path in bytes) is replaced.
std::string Dump(const Json& value);

}  // namespace ptybox::runtime
