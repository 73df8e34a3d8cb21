// The contract's JSON shapes (shared/contract.md, "Types"), for both protocol servers: encoding
// results and errors, and reading params with messages that name the parameter.
#pragma once

#include <expected>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "backend/types.h"
#include "common/error.h"
#include "policy/policy.h"
#include "runtime/service.h"

namespace ptybox::runtime {

using Json = nlohmann::json;

Json ToJson(const backend::SessionStatus& status);
Json ToJson(const backend::SendResult& result);
Json ToJson(const backend::ReadResult& result);
Json ToJson(const backend::SendRead& read);
Json ToJson(const OpenResult& result);
Json ToJson(const SessionInfo& info, bool for_list);
Json PolicyToJson(const policy::ResolvedPolicy& policy);

// JSON-RPC error object for an application error: code -32000 and data.kind, or -32602 for
// kInvalidParams.
Json ErrorObject(const Error& error);

// One JSON-RPC 2.0 message read from one line (shared/contract.md, "Transport"); `ptybox serve`
// and `ptybox mcp` frame and check messages the same way.
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

// Bounds of strings in params (bytes). `input` is bounded by the line (16 MiB) only.
inline constexpr size_t kMaxParamStringBytes = 4096;  // default: ids, modes, signals, cwd
inline constexpr size_t kMaxNameBytes = 256;          // terminal_open `name`
inline constexpr size_t kMaxReasonBytes = 1024;       // terminal_close / $/cancelRequest `reason`
inline constexpr size_t kUnboundedString = static_cast<size_t>(-1);
// The longest request id accepted, in bytes of its JSON text.
inline constexpr size_t kMaxRequestIdBytes = 256;

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
// than kMaxJsonValues, not an
// object, bad or longer id than kMaxRequestIdBytes, "jsonrpc" not "2.0", no method) or invalid
// params (-32602: "params" not an object).
std::expected<RpcMessage, RpcReject> ParseRpcLine(const std::string& line);

// A request id as a key for cancellation: its JSON text ("1" and "\"1\"" are different ids).
std::string RequestKey(const Json& id);

// Response envelopes.
Json RpcResult(const Json& id, Json result);
Json RpcError(const Json& id, Json error_object);
Json RpcError(const Json& id, int code, const std::string& message);

// Serializes without ever throwing: invalid UTF-8 (a path in bytes) is replaced.
std::string Dump(const Json& value);

// Reading params: each failure is kInvalidParams naming the parameter.
class Params final {
 public:
  // `allowed` lists every parameter the method accepts; any other key is an error.
  static Result<Params> Check(const Json& params, const std::string& method,
                              std::vector<std::string> allowed);
  // Strings longer than `max_bytes` are refused with a message naming the bound.
  Result<std::string> RequiredString(const std::string& key,
                                     size_t max_bytes = kMaxParamStringBytes) const;
  Result<std::optional<std::string>> OptionalString(const std::string& key,
                                                    size_t max_bytes = kMaxParamStringBytes) const;
  Result<std::optional<int64_t>> OptionalInt(const std::string& key, int64_t min,
                                             int64_t max) const;
  Result<std::optional<bool>> OptionalBool(const std::string& key) const;
  Result<std::map<std::string, std::string>> StringMap(const std::string& key) const;
  [[nodiscard]] const Json& raw() const { return params_; }

 private:
  explicit Params(Json params, std::string method)
      : params_(std::move(params)), method_(std::move(method)) {}
  Json params_;
  std::string method_;
};

}  // namespace ptybox::runtime
