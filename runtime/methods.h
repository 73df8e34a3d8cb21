// The contract's method table (docs/protocol.md, "Methods"), as tmux's cmd_entry makes a
// command one entry: each method's name, summary, parameters (type, bounds, default,
// description), handler and MCP face (runtime/mcp/tool_face.h) in one place. JSON-RPC param
// validation (ValidateParams), MCP tools/list and the result text (mcp_tools.h) are loops over
// it. Adding a method is adding one entry to Contract() in methods.cc. Both protocol servers call
// methods through CallMethod: JSON-RPC answers with its result as is; MCP wraps it in a tool
// result.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.h"
#include "runtime/mcp/tool_face.h"
#include "runtime/params.h"
#include "runtime/service.h"

namespace ptybox::runtime {

// Bounds written once: the table states them, validation enforces them, schemas and docs show
// them.
inline constexpr int64_t kMaxTimeoutMs = 24LL * 3600 * 1000;  // timeoutMs, silenceMs
inline constexpr int kMinRows = 2;                            // terminal_open/resize rows
inline constexpr size_t kMaxKeys = 1024;                      // terminal_send `keys` entries
inline constexpr size_t kMaxKeyBytes = 64 * 1024;             // one `keys` entry (a literal)
inline constexpr size_t kMaxTypedBase64Bytes = 64 * 1024;     // terminal_type `data`

enum class ParamType {
  kString,   // max_bytes
  kInteger,  // min..max
  kBoolean,
  kEnum,        // a string, one of `values`
  kEnv,         // an object of strings, checked by policy/schema.h's env.set rules
  kStringList,  // an array of at most max_items strings, each at most max_bytes
};

struct ParamSpec {
  std::string name = {};
  ParamType type = ParamType::kString;
  bool required = false;
  std::string description = {};             // for a model (the MCP schema) and for a person
  int64_t min = 0;                          // kInteger
  int64_t max = 0;                          // kInteger
  size_t max_bytes = kMaxParamStringBytes;  // kString, kEnum; kStringList: each entry
  size_t max_items = 0;                     // kStringList
  std::vector<std::string> values = {};     // kEnum
  Json default_value = nullptr;             // used when absent; null: none (or one from the policy)
};

// A method's params after validation: every value has its declared type and bounds, and
// absent params with a default hold it.
class Args final {
 public:
  explicit Args(Json values) : values_(std::move(values)) {}
  [[nodiscard]] bool Has(const std::string& name) const;
  [[nodiscard]] std::string String(const std::string& name) const;  // required or defaulted
  [[nodiscard]] std::optional<std::string> OptionalString(const std::string& name) const;
  [[nodiscard]] std::optional<int64_t> Int(const std::string& name) const;
  [[nodiscard]] bool Bool(const std::string& name) const;  // false when absent
  [[nodiscard]] std::map<std::string, std::string> Env(const std::string& name) const;
  [[nodiscard]] std::vector<std::string> StringList(const std::string& name) const;

 private:
  Json values_;
};

using Done = std::function<void(Result<Json>)>;

// What a handler gets: validated args, the caller, and `done` (run exactly once).
struct MethodCall {
  PtyService& service;
  const std::shared_ptr<Owner>& owner;
  const Args& args;
  const std::string& request_key;
  Done done;
};

struct MethodSpec {
  std::string name = {};
  std::string summary = {};  // one line: what it does and returns
  std::vector<ParamSpec> params = {};
  // Exactly one of these params must be given (empty: no such rule).
  std::vector<std::string> exactly_one_of = {};
  void (*handler)(MethodCall& call) = nullptr;
  // The MCP tool it is (runtime/mcp_tools.h); none for the methods only JSON-RPC serves.
  std::optional<McpFace> mcp = std::nullopt;
};

// The entry of `items` whose `name` is `name`; nullptr when none is.
template <typename T>
const T* FindByName(const std::vector<T>& items, std::string_view name) {
  for (const T& item : items) {
    if (item.name == name) return &item;
  }
  return nullptr;
}

// owner_attach's result, {sessions, operations}: RpcConnection answers that method (it replaces
// the connection's owner), its result shape lives here with every other method's.
[[nodiscard]] Json AttachResultJson(const AttachResult& attached);

// terminal_watch's result (an extension): RpcConnection answers that method (its notifications
// follow on the connection), its result shape lives here with every other method's.
[[nodiscard]] Json WatchStartJson(const WatchStart& start);

// Every method of the contract, in the contract's order.
const std::vector<MethodSpec>& Contract();

// The methods the servers call by name in their own code: owner_attach (RpcConnection answers
// it), what `ptybox mcp --connect` asks the daemon, and terminal_read, which the MCP server calls
// to locate a long viewport and names to the model in elision lines. Each must be in the table,
// with an MCP face where a model is told to call it. Every other fact a server needs of a method
// (consent, budgets, policy changes) is a field of its MCP face.
struct NamedMethod {
  std::string_view name;
  bool mcp_tool;
};
inline constexpr NamedMethod kMethodsNamedByServers[] = {
    {"owner_attach", false},     {"owner_info", false},   {"policy_resolve", false},
    {"policy_set_mode", false},  {"terminal_read", true}, {"terminal_watch", false},
    {"terminal_unwatch", false},
};

// Is `table` whole? Every name unique, every entry a handler, params named once, enums with
// values, exactly_one_of naming params, every MCP face a title, description, output schema and
// renderer, a budget that locates at most one text of the result itself (a page only where the
// method takes maxBytes), consent only where the method takes a mode, and every method in
// kMethodsNamedByServers present. The servers check Contract()
// at startup and refuse to start with this message (a table edit gone wrong), rather than
// crash on a lookup later.
Result<void> CheckContract(const std::vector<MethodSpec>& table);
// nullptr for a name that is not a contract method.
const MethodSpec* FindMethod(std::string_view name);
[[nodiscard]] bool IsContractMethod(std::string_view method);

// Checks `params` (an object or null) against `method`'s entry: unknown keys, types, bounds,
// enums, the exactly-one rule. Each failure is kInvalidParams with a message that names the
// method and the parameter, and the parameter as its context.
Result<Args> ValidateParams(const MethodSpec& method, const Json& params);

// Runs one contract method for `owner`. `request_key` identifies the request for cancellation.
// `done` runs exactly once, inline for the synchronous methods, later for open, send, signal and
// close. Bad params are kInvalidParams errors naming the parameter.
void CallMethod(PtyService& service, const std::shared_ptr<Owner>& owner, const std::string& method,
                const Json& params, const std::string& request_key, Done done);

}  // namespace ptybox::runtime
