// What the JSON-RPC fuzz targets check on one line: ParseRpcLine (runtime/params.h) answers every
// line with a message or a reject and never throws; a reject has one of the three documented
// codes and a message; the answer a server would send serializes; and a request's params go
// through Params::Check and every accessor, each giving a value or an error that names the
// parameter; and the params of every contract method go through the contract table's
// validation (runtime/methods.h), which gives validated args or a -32602 error naming the method.
// A violated expectation traps, which libFuzzer reports as a crash.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "runtime/methods.h"
#include "runtime/params.h"

namespace ptybox::fuzz {

inline void Check(bool ok) {
  if (!ok) __builtin_trap();
}

inline void CheckDecodesParams(const runtime::RpcMessage& message) {
  std::vector<std::string> keys;
  if (message.params.is_object()) {
    for (const auto& [key, value] : message.params.items()) keys.push_back(key);
  }
  // With no key allowed, any key is refused, and the message names it (abbreviated when long:
  // a client's key is never echoed unbounded).
  Result<runtime::Params> none = runtime::Params::Check(message.params, message.method, {});
  Check(none.has_value() == keys.empty());
  if (!none) {
    Check(!none.error().message.empty() &&
          none.error().context == runtime::Abbreviate(keys.front()));
  }

  Result<runtime::Params> params = runtime::Params::Check(message.params, message.method, keys);
  Check(params.has_value());
  for (const std::string& key : keys) {
    auto s = params->RequiredString(key);
    Check(s.has_value() == params->raw()[key].is_string());
    auto os = params->OptionalString(key);
    if (!os) Check(os.error().context == key);
    auto oi = params->OptionalInt(key, -1000, 1000);
    if (oi && *oi) Check(**oi >= -1000 && **oi <= 1000);
    if (!oi) Check(oi.error().context == key);
    auto ob = params->OptionalBool(key);
    if (!ob) Check(ob.error().context == key);
    auto map = params->StringMap(key);
    if (!map) Check(!map.error().message.empty());
  }
  // A key the line does not hold is absent (the fuzzer can spell any key, this one included).
  const std::string absent = "no such key";
  if (std::find(keys.begin(), keys.end(), absent) == keys.end()) {
    Check(!params->RequiredString(absent).has_value());
  }
}

// The contract table's validation of `params` for every method (whatever the line's method):
// args, or an invalid-params error whose message starts with the method and names a context.
inline void CheckValidatesForEveryMethod(const runtime::Json& params) {
  for (const runtime::MethodSpec& method : runtime::Contract()) {
    Result<runtime::Args> args = runtime::ValidateParams(method, params);
    if (args) continue;
    Check(args.error().kind == ErrorKind::kInvalidParams);
    Check(runtime::ErrorObject(args.error())["code"] == -32602);
    Check(args.error().message.starts_with(method.name + ": ") ||
          args.error().message.starts_with("env"));
    // The context names what was refused: empty only when that is a key spelled "".
    Check(!args.error().context.empty() || (params.is_object() && params.contains("")));
    Check(!runtime::Dump(runtime::ErrorObject(args.error())).empty());
  }
}

// Decodes one line as both servers do, and builds the answer they would send.
inline void CheckLine(const std::string& line) {
  auto message = runtime::ParseRpcLine(line);
  if (!message) {
    const runtime::RpcReject& reject = message.error();
    Check(reject.code == -32700 || reject.code == -32600 || reject.code == -32602);
    Check(!reject.message.empty());
    Check(reject.id.is_null() || reject.id.is_string() || reject.id.is_number_integer() ||
          reject.id.is_number_unsigned());
    Check(!runtime::Dump(runtime::RpcError(reject.id, reject.code, reject.message)).empty());
    return;
  }
  Check(message->params.is_null() || message->params.is_object());
  Check(!runtime::RequestKey(message->id).empty());
  if (message->kind == runtime::RpcMessage::Kind::kResponse) return;
  Check(!runtime::Dump(runtime::RpcResult(message->id, message->params)).empty());
  CheckDecodesParams(*message);
  CheckValidatesForEveryMethod(message->params);
}

}  // namespace ptybox::fuzz
