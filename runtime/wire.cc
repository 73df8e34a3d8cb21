#include "runtime/wire.h"

#include <algorithm>

namespace ptybox::runtime {

Json ToJson(const backend::SessionStatus& status) {
  if (!status.exited) return Json{{"kind", "running"}};
  Json j{{"kind", "exited"}};
  j["exitCode"] = status.exit_code ? Json(*status.exit_code) : Json(nullptr);
  j["signal"] = status.signal ? Json(backend::SignalName(*status.signal)) : Json(nullptr);
  return j;
}

Json ToJson(const backend::SendResult& r) {
  Json j;
  j["viewport"] = r.viewport;
  j["waitReason"] = std::string(backend::ToString(r.wait_reason));
  j["sessionStatus"] = ToJson(r.session_status);
  j["truncated"] = r.truncated;
  j["exitCode"] = r.exit_code ? Json(*r.exit_code) : Json(nullptr);
  j["cwd"] = r.cwd ? Json(*r.cwd) : Json(nullptr);
  j["foreground"] = r.foreground
                        ? Json{{"pgid", r.foreground->pgid}, {"command", r.foreground->command}}
                        : Json(nullptr);
  if (r.match) j["match"] = Json{{"text", r.match->text}, {"line", r.match->line}};
  return j;
}

Json ToJson(const backend::ReadResult& r) {
  return Json{{"text", r.text},
              {"cursor", r.cursor},
              {"nextCursor", r.next_cursor},
              {"truncated", r.truncated},
              {"end", r.end}};
}

Json ToJson(const backend::SendRead& read) {
  Json j{{"output", read.output}, {"done", read.done}};
  j["result"] = read.result ? ToJson(*read.result) : Json(nullptr);
  if (read.truncated) j["truncated"] = true;
  return j;
}

Json ToJson(const OpenResult& r) {
  Json j;
  j["sessionId"] = r.session_id;
  j["name"] = r.name;
  j["motd"] = r.motd;
  j["pid"] = r.pid ? Json(*r.pid) : Json(nullptr);
  j["mode"] = std::string(policy::ToString(r.mode));
  j["cwd"] = r.cwd;
  return j;
}

Json ToJson(const SessionInfo& info, bool for_list) {
  Json j;
  if (for_list) j["sessionId"] = info.session_id;
  j["name"] = info.name;
  j["mode"] = std::string(policy::ToString(info.mode));
  j["busy"] = info.busy;
  j["sessionStatus"] = ToJson(info.status);
  if (!for_list) j["pid"] = info.pid ? Json(*info.pid) : Json(nullptr);
  return j;
}

Json PolicyToJson(const policy::ResolvedPolicy& p) {
  Json writable = Json::array();
  if (p.mode == policy::Mode::kWorkspaceWrite) writable.push_back(p.workspace_root.string());
  if (p.mode != policy::Mode::kReadOnly) {
    for (const auto& root : p.writable_roots) writable.push_back(root.string());
  }
  if (p.mode == policy::Mode::kDangerFullAccess) writable = Json::array({"/"});
  Json sources = Json::object();
  for (const auto& [key, from] : p.sources) sources[key] = from;
  Json files = Json::array();
  for (const auto& file : p.policy_files) files.push_back(file.string());
  return Json{{"mode", std::string(policy::ToString(p.mode))},
              {"ceiling", std::string(policy::ToString(p.ceiling))},
              {"workspaceRoot", p.workspace_root.string()},
              {"writableRoots", writable},
              // Without a sandbox there is no network namespace: the network is reachable.
              {"network", p.network_allowed || p.mode == policy::Mode::kDangerFullAccess
                              ? "allow"
                              : "deny"},
              {"source", Json{{"files", files}, {"values", sources}}}};
}

Json ErrorObject(const Error& error) {
  Json data{{"kind", std::string(ToString(error.kind))}};
  if (!error.context.empty()) data["context"] = error.context;
  if (!error.cleanup_failure.empty()) {
    data["cleanupError"] = Json{{"kind", "cleanup_failed"}, {"message", error.cleanup_failure}};
  }
  if (error.kind == ErrorKind::kInvalidParams) {
    return Json{{"code", -32602}, {"message", error.Describe()}, {"data", data}};
  }
  if (error.kind == ErrorKind::kCanceled) data["reason"] = error.message;
  if (!error.session_id.empty()) data["sessionId"] = error.session_id;
  std::string message = error.message;
  if (!error.cleanup_failure.empty()) message += " (cleanup also failed: " + error.cleanup_failure + ")";
  return Json{{"code", -32000}, {"message", message}, {"data", data}};
}

std::string Abbreviate(std::string_view text, size_t max_bytes) {
  if (text.size() <= max_bytes) return std::string(text);
  size_t cut = max_bytes;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xc0) == 0x80) --cut;
  return std::string(text.substr(0, cut)) + "... (" + std::to_string(text.size()) + " bytes)";
}

namespace {

// What ParseRpcLine looks at before parsing: the nesting depth of `text` read as JSON and the
// number of values in its arrays and objects (commas, plus one per container), strings skipped,
// without recursion. Stops once past either limit.
struct Shape {
  size_t deepest = 0;
  size_t values = 0;
};
Shape ScanShape(std::string_view text, size_t depth_limit, size_t value_limit) {
  Shape shape;
  size_t depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      shape.deepest = std::max(shape.deepest, ++depth);
      ++shape.values;
      if (shape.deepest > depth_limit) return shape;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    } else if (c == ',' && ++shape.values > value_limit) {
      return shape;
    }
  }
  return shape;
}

}  // namespace

std::expected<RpcMessage, RpcReject> ParseRpcLine(const std::string& line) {
  const Shape shape = ScanShape(line, kMaxJsonDepth, kMaxJsonValues);
  if (shape.deepest > kMaxJsonDepth) {
    return std::unexpected(RpcReject{nullptr, -32600,
                                     "invalid request: JSON nested deeper than " +
                                         std::to_string(kMaxJsonDepth) +
                                         " levels of arrays and objects; flatten the message"});
  }
  // Refused before parsing: building millions of values would hold the reactor for seconds,
  // and no request needs that many (the largest lists of the contract hold 256 entries).
  if (shape.values > kMaxJsonValues) {
    return std::unexpected(
        RpcReject{nullptr, -32600,
                  "invalid request: more than " + std::to_string(kMaxJsonValues) +
                      " values in the arrays and objects of one message; send fewer"});
  }
  Json message = Json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (message.is_discarded()) {
    return std::unexpected(RpcReject{nullptr, -32700, "parse error: the line is not valid JSON"});
  }
  if (!message.is_object()) {
    return std::unexpected(
        RpcReject{nullptr, -32600,
                  "invalid request: expected one JSON-RPC 2.0 object per line (no batches)"});
  }
  RpcMessage out;
  auto id = message.find("id");
  const bool has_id = id != message.end();
  if (has_id) {
    if (!id->is_string() && !id->is_number_integer() && !id->is_number_unsigned() &&
        !id->is_null()) {
      return std::unexpected(
          RpcReject{nullptr, -32600, "invalid request: id must be a string or an integer"});
    }
    if (Dump(*id).size() > kMaxRequestIdBytes) {
      return std::unexpected(RpcReject{nullptr, -32600,
                                       "invalid request: id longer than " +
                                           std::to_string(kMaxRequestIdBytes) + " bytes"});
    }
    out.id = *id;
  }
  auto version = message.find("jsonrpc");
  if (version == message.end() || *version != "2.0") {
    return std::unexpected(
        RpcReject{out.id, -32600, "invalid request: \"jsonrpc\" must be \"2.0\""});
  }
  auto method = message.find("method");
  if (method == message.end() && has_id &&
      (message.contains("result") || message.contains("error"))) {
    out.kind = RpcMessage::Kind::kResponse;
    return out;
  }
  if (method == message.end() || !method->is_string()) {
    return std::unexpected(
        RpcReject{out.id, -32600, "invalid request: \"method\" must be a string"});
  }
  out.method = method->get<std::string>();
  out.params = message.contains("params") ? message["params"] : Json(nullptr);
  if (!out.params.is_null() && !out.params.is_object()) {
    return std::unexpected(
        RpcReject{out.id, -32602, "invalid params: \"params\" must be an object"});
  }
  out.kind = has_id ? RpcMessage::Kind::kRequest : RpcMessage::Kind::kNotification;
  return out;
}

std::string RequestKey(const Json& id) { return Dump(id); }

Json RpcResult(const Json& id, Json result) {
  return Json{{"jsonrpc", "2.0"}, {"id", id}, {"result", std::move(result)}};
}

Json RpcError(const Json& id, Json error_object) {
  return Json{{"jsonrpc", "2.0"}, {"id", id}, {"error", std::move(error_object)}};
}

Json RpcError(const Json& id, int code, const std::string& message) {
  return RpcError(id, Json{{"code", code}, {"message", message}});
}

std::string Dump(const Json& value) {
  return value.dump(-1, ' ', false, Json::error_handler_t::replace);
}

Result<Params> Params::Check(const Json& params, const std::string& method,
                             std::vector<std::string> allowed) {
  if (params.is_null()) return Params(Json::object(), method);
  if (!params.is_object()) {
    return Fail(ErrorKind::kInvalidParams, method + ": params must be an object", "params");
  }
  for (const auto& [key, value] : params.items()) {
    if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
      std::string list;
      for (const std::string& a : allowed) list += (list.empty() ? "" : ", ") + a;
      return Fail(ErrorKind::kInvalidParams,
                  method + ": unknown parameter \"" + Abbreviate(key) + "\" (accepted: " +
                      (list.empty() ? std::string("none") : list) + ")",
                  Abbreviate(key));
    }
  }
  return Params(params, method);
}

namespace {

Result<void> CheckLength(const std::string& method, const std::string& key, const Json& value,
                         size_t max_bytes) {
  const size_t size = value.get_ref<const std::string&>().size();
  if (size <= max_bytes) return {};
  return Fail(ErrorKind::kInvalidParams,
              method + ": \"" + key + "\" is " + std::to_string(size) + " bytes; the maximum is " +
                  std::to_string(max_bytes) + " bytes",
              key);
}

}  // namespace

Result<std::string> Params::RequiredString(const std::string& key, size_t max_bytes) const {
  auto it = params_.find(key);
  if (it == params_.end() || !it->is_string()) {
    return Fail(ErrorKind::kInvalidParams, method_ + ": \"" + key + "\" (a string) is required",
                key);
  }
  if (Result<void> ok = CheckLength(method_, key, *it, max_bytes); !ok) {
    return std::unexpected(ok.error());
  }
  return it->get<std::string>();
}

Result<std::optional<std::string>> Params::OptionalString(const std::string& key,
                                                          size_t max_bytes) const {
  auto it = params_.find(key);
  if (it == params_.end() || it->is_null()) return std::optional<std::string>();
  if (!it->is_string()) {
    return Fail(ErrorKind::kInvalidParams, method_ + ": \"" + key + "\" must be a string", key);
  }
  if (Result<void> ok = CheckLength(method_, key, *it, max_bytes); !ok) {
    return std::unexpected(ok.error());
  }
  return std::optional<std::string>(it->get<std::string>());
}

Result<std::optional<int64_t>> Params::OptionalInt(const std::string& key, int64_t min,
                                                   int64_t max) const {
  auto it = params_.find(key);
  if (it == params_.end() || it->is_null()) return std::optional<int64_t>();
  if (!it->is_number_integer() && !it->is_number_unsigned()) {
    return Fail(ErrorKind::kInvalidParams, method_ + ": \"" + key + "\" must be an integer", key);
  }
  if (it->is_number_unsigned() && it->get<uint64_t>() > static_cast<uint64_t>(max)) {
    return Fail(ErrorKind::kInvalidParams,
                method_ + ": \"" + key + "\" must be at most " + std::to_string(max), key);
  }
  int64_t v = it->get<int64_t>();
  if (v < min || v > max) {
    return Fail(ErrorKind::kInvalidParams,
                method_ + ": \"" + key + "\" must be between " + std::to_string(min) + " and " +
                    std::to_string(max),
                key);
  }
  return std::optional<int64_t>(v);
}

Result<std::optional<bool>> Params::OptionalBool(const std::string& key) const {
  auto it = params_.find(key);
  if (it == params_.end() || it->is_null()) return std::optional<bool>();
  if (!it->is_boolean()) {
    return Fail(ErrorKind::kInvalidParams, method_ + ": \"" + key + "\" must be true or false",
                key);
  }
  return std::optional<bool>(it->get<bool>());
}

Result<std::map<std::string, std::string>> Params::StringMap(const std::string& key) const {
  std::map<std::string, std::string> out;
  auto it = params_.find(key);
  if (it == params_.end() || it->is_null()) return out;
  if (!it->is_object()) {
    return Fail(ErrorKind::kInvalidParams,
                method_ + ": \"" + key + "\" must be an object of strings", key);
  }
  for (const auto& [name, value] : it->items()) {
    if (!value.is_string()) {
      return Fail(ErrorKind::kInvalidParams,
                  method_ + ": \"" + key + "." + name + "\" must be a string", key + "." + name);
    }
    out[name] = value.get<std::string>();
  }
  return out;
}

}  // namespace ptybox::runtime
