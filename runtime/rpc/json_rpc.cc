#include "runtime/rpc/json_rpc.h"

#include <algorithm>

namespace ptybox::runtime {

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
  if (!error.holder_session_id.empty()) data["sessionId"] = error.holder_session_id;
  std::string message = error.message;
  if (!error.cleanup_failure.empty())
    message += " (cleanup also failed: " + error.cleanup_failure + ")";
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
      return std::unexpected(RpcReject{
          nullptr, -32600,
          "invalid request: id longer than " + std::to_string(kMaxRequestIdBytes) + " bytes"});
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

Json RpcNotification(const std::string& method, Json params) {
  return Json{{"jsonrpc", "2.0"}, {"method", method}, {"params", std::move(params)}};
}

Json RpcRequest(const Json& id, const std::string& method, Json params) {
  return Json{{"jsonrpc", "2.0"}, {"id", id}, {"method", method}, {"params", std::move(params)}};
}

}  // namespace ptybox::runtime
