#include "runtime/mcp_server.h"

#include <algorithm>

#include "common/log.h"
#include "runtime/mcp_tools.h"
#include "runtime/methods.h"
#include "runtime/owner.h"

#ifndef PTYBOX_VERSION
#define PTYBOX_VERSION "0.0.0"
#endif

namespace ptybox::runtime {
namespace {

// JSON-RPC codes MCP uses besides the standard ones.
constexpr int kResourceNotFound = -32002;
constexpr int kInternalError = -32603;

constexpr std::string_view kFirstStructuredVersion = "2025-06-18";

Json PolicyResourceEntry() {
  return Json{{"uri", std::string(McpServer::kPolicyUri)},
              {"name", "policy"},
              {"description",
               "The sandbox policy new terminals run under: mode, writable roots, network. "
               "Updated (notifications/resources/updated) when the mode changes."},
              {"mimeType", "application/json"}};
}

}  // namespace

const std::vector<std::string>& McpServer::SupportedVersions() {
  static const std::vector<std::string> kVersions = {"2025-11-25", "2025-06-18", "2025-03-26",
                                                     "2024-11-05"};
  return kVersions;
}

McpServer::McpServer(PtyService& service, std::shared_ptr<LineConnection> connection,
                     std::string label)
    : service_(service), connection_(std::move(connection)) {
  owner_ = service_.OpenOwner(std::move(label));
}

void McpServer::Start(std::function<void()> on_done) {
  on_done_ = std::move(on_done);
  std::weak_ptr<McpServer> weak = weak_from_this();
  owner_->on_policy_changed = [weak](const policy::ResolvedPolicy&) {
    if (auto self = weak.lock()) self->OnPolicyChanged();
  };
  AttachServer(*connection_, shared_from_this());
}

void McpServer::OnOversizedLine() { ReplyError(nullptr, -32600, kOversizedLineMessage); }

void McpServer::OnDisconnected() {
  if (disconnected_) return;
  disconnected_ = true;
  std::shared_ptr<McpServer> self = shared_from_this();
  // The host left (end of input): every session of this owner ends with it, awaited.
  service_.CloseOwner(owner_, [self] {
    self->owner_->on_policy_changed = nullptr;
    std::function<void()> done = std::move(self->on_done_);
    self->on_done_ = nullptr;
    if (done) done();
  });
}

void McpServer::HandleLine(const std::string& line) {
  std::expected<RpcMessage, RpcReject> message = ParseRpcLine(line);
  if (!message) {
    ReplyError(message.error().id, message.error().code, message.error().message);
    return;
  }
  switch (message->kind) {
    case RpcMessage::Kind::kNotification:
      HandleNotification(message->method, message->params);
      return;
    case RpcMessage::Kind::kResponse:
      // This server sends no requests; a response to none is dropped.
      LogDebug("mcp: ignored a response to no request");
      return;
    case RpcMessage::Kind::kRequest:
      HandleRequest(message->id, message->method, message->params);
      return;
  }
}

void McpServer::HandleNotification(const std::string& method, const Json& params) {
  if (method == "notifications/cancelled") {
    if (!params.is_object() || !params.contains("requestId")) return;  // malformed: ignored
    const std::string key = RequestKey(params["requestId"]);
    if (!in_flight_.contains(key)) return;  // unknown or already answered: ignored
    std::string reason = "canceled by the MCP host (notifications/cancelled)";
    if (params.contains("reason") && params["reason"].is_string()) {
      reason = params["reason"].get<std::string>();
    }
    // The spec asks for no response to a canceled request; the work still ends as the contract
    // says (an open closes its unpublished shell, a send is interrupted like terminal_cancel).
    canceled_.insert(key);
    service_.CancelRequest(*owner_, key, reason);
    LogInfo("mcp: request " + key + " canceled: " + reason);
    return;
  }
  // notifications/initialized and every other notification need nothing from us.
}

void McpServer::HandleRequest(const Json& id, const std::string& method, const Json& params) {
  if (in_flight_.contains(RequestKey(id))) {
    ReplyError(id, -32600,
               "invalid request: request " + RequestKey(id) +
                   " is still in progress; give each request a new id");
    return;
  }
  if (method == "ping") return Reply(id, Json::object());
  if (method == "initialize") return Initialize(id, params);
  if (!initialized_) {
    return ReplyError(id, -32600,
                      "invalid request: send initialize first (MCP lifecycle), then " + method);
  }
  if (method == "tools/list") return Reply(id, ToolList());
  if (method == "tools/call") return CallTool(id, params);
  if (method == "resources/list") {
    return Reply(id, Json{{"resources", Json::array({PolicyResourceEntry()})}});
  }
  if (method == "resources/templates/list") {
    return Reply(id, Json{{"resourceTemplates", Json::array()}});
  }
  if (method == "resources/read") return ReadResource(id, params);
  if (method == "resources/subscribe") return Subscribe(id, params, true);
  if (method == "resources/unsubscribe") return Subscribe(id, params, false);
  ReplyError(id, -32601, "method not found: " + method);
}

void McpServer::Initialize(const Json& id, const Json& params) {
  if (initialized_) {
    return ReplyError(id, -32600, "invalid request: initialize was already answered");
  }
  if (!params.is_object() || !params.contains("protocolVersion") ||
      !params["protocolVersion"].is_string()) {
    return ReplyError(id, -32602, "invalid params: initialize needs \"protocolVersion\" (a string)",
                      Json{{"supported", SupportedVersions()}});
  }
  // Version negotiation: the host's version when we speak it, else our latest.
  const std::string requested = params["protocolVersion"].get<std::string>();
  const std::vector<std::string>& supported = SupportedVersions();
  protocol_version_ = std::find(supported.begin(), supported.end(), requested) != supported.end()
                          ? requested
                          : supported.front();
  initialized_ = true;
  Json server_info{{"name", "ptybox"}, {"version", PTYBOX_VERSION}};
  if (Structured()) server_info["title"] = "ptybox sandboxed terminals";
  Json capabilities{{"tools", Json{{"listChanged", false}}},
                    {"resources", Json{{"subscribe", true}, {"listChanged", false}}}};
  LogInfo("mcp: host asked for protocol " + requested + ", speaking " + protocol_version_);
  Reply(id, Json{{"protocolVersion", protocol_version_},
                 {"capabilities", capabilities},
                 {"serverInfo", server_info},
                 {"instructions", PolicyText()}});
}

bool McpServer::Structured() const {
  // Versions are dates: they compare as strings.
  return protocol_version_ >= kFirstStructuredVersion;
}

Json McpServer::ToolList() const {
  Json tools = Json::array();
  for (const McpTool& tool : McpTools()) {
    Json entry{
        {"name", tool.name}, {"description", tool.description}, {"inputSchema", tool.input_schema}};
    if (Structured()) {
      entry["title"] = tool.title;
      entry["outputSchema"] = tool.output_schema;
    }
    // Tool annotations exist from 2025-03-26 on.
    if (protocol_version_ >= "2025-03-26") entry["annotations"] = tool.annotations;
    tools.push_back(std::move(entry));
  }
  return Json{{"tools", tools}};
}

void McpServer::CallTool(const Json& id, const Json& params) {
  if (!params.is_object() || !params.contains("name") || !params["name"].is_string()) {
    return ReplyError(id, -32602, "invalid params: tools/call needs \"name\" (a string)");
  }
  const std::string name = params["name"].get<std::string>();
  if (FindMcpTool(name) == nullptr) {
    return ReplyError(id, -32602, "unknown tool: " + name + " (tools/list lists them)");
  }
  Json arguments = params.contains("arguments") ? params["arguments"] : Json::object();
  if (arguments.is_null()) arguments = Json::object();
  if (!arguments.is_object()) {
    return ReplyError(id, -32602, "invalid params: tools/call \"arguments\" must be an object");
  }
  const std::string key = RequestKey(id);
  in_flight_.insert(key);
  std::shared_ptr<McpServer> self = shared_from_this();
  CallMethod(service_, owner_, name, arguments, key, [self, id, key, name](Result<Json> result) {
    self->in_flight_.erase(key);
    if (self->canceled_.erase(key) > 0) return;  // canceled: no response
    self->Reply(id, self->ToolResult(name, result));
  });
}

Json McpServer::ToolResult(const std::string& tool, const Result<Json>& result) {
  // A tool's failure (bad id, busy, fenced, bad arguments) is a result the model reads and can
  // act on, not a protocol error.
  if (!result) {
    return Json{{"content",
                 Json::array({Json{{"type", "text"}, {"text", RenderToolError(result.error())}}})},
                {"isError", true}};
  }
  std::string text = RenderToolResult(tool, *result);
  Json content = Json::array();
  if (tool == "policy_set_mode") {
    // The superseding policy statement is appended to the conversation, never rewriting it.
    text += "\n" + PolicyText();
  }
  content.push_back(Json{{"type", "text"}, {"text", text}});
  Json out;
  if (Structured()) {
    if (tool == "policy_set_mode") {
      Json link = PolicyResourceEntry();
      link["type"] = "resource_link";
      content.push_back(std::move(link));
    }
    out["structuredContent"] = *result;
  } else {
    // Before structured results existed, the JSON travels as a second text block.
    content.push_back(Json{{"type", "text"}, {"text", Dump(*result)}});
  }
  out["content"] = std::move(content);
  out["isError"] = false;
  return out;
}

std::string McpServer::PolicyText() {
  Result<policy::ResolvedPolicy> resolved = service_.ResolvePolicy(*owner_);
  if (!resolved) {
    return "Sandbox policy: unresolved (" + resolved.error().Describe() +
           "); terminals cannot open until the policy files are fixed.";
  }
  return PolicyClause(*resolved);
}

void McpServer::ReadResource(const Json& id, const Json& params) {
  if (!params.is_object() || !params.contains("uri") || !params["uri"].is_string()) {
    return ReplyError(id, -32602, "invalid params: resources/read needs \"uri\" (a string)");
  }
  const std::string uri = params["uri"].get<std::string>();
  if (uri != kPolicyUri) {
    return ReplyError(id, kResourceNotFound,
                      "resource not found: " + uri + " (the only resource is ptybox://policy)",
                      Json{{"uri", uri}});
  }
  Result<policy::ResolvedPolicy> resolved = service_.ResolvePolicy(*owner_);
  if (!resolved) {
    return ReplyError(id, kInternalError,
                      "the policy cannot be resolved: " + resolved.error().Describe(),
                      ErrorObject(resolved.error())["data"]);
  }
  Json contents = Json::array();
  contents.push_back(
      Json{{"uri", uri}, {"mimeType", "text/plain"}, {"text", PolicyClause(*resolved)}});
  contents.push_back(Json{
      {"uri", uri}, {"mimeType", "application/json"}, {"text", Dump(PolicyToJson(*resolved))}});
  Reply(id, Json{{"contents", contents}});
}

void McpServer::Subscribe(const Json& id, const Json& params, bool subscribe) {
  if (!params.is_object() || !params.contains("uri") || !params["uri"].is_string()) {
    return ReplyError(id, -32602, "invalid params: \"uri\" (a string) is required");
  }
  const std::string uri = params["uri"].get<std::string>();
  if (uri != kPolicyUri) {
    return ReplyError(id, kResourceNotFound,
                      "resource not found: " + uri + " (the only resource is ptybox://policy)",
                      Json{{"uri", uri}});
  }
  subscribed_to_policy_ = subscribe;
  Reply(id, Json::object());
}

void McpServer::OnPolicyChanged() {
  if (!subscribed_to_policy_) return;
  Notify("notifications/resources/updated", Json{{"uri", std::string(kPolicyUri)}});
}

void McpServer::Reply(const Json& id, Json result) {
  connection_->Send(Dump(RpcResult(id, std::move(result))));
}

void McpServer::ReplyError(const Json& id, int code, const std::string& message, Json data) {
  Json error{{"code", code}, {"message", message}};
  if (!data.is_null()) error["data"] = std::move(data);
  connection_->Send(Dump(RpcError(id, std::move(error))));
}

void McpServer::Notify(const std::string& method, Json params) {
  connection_->Send(
      Dump(Json{{"jsonrpc", "2.0"}, {"method", method}, {"params", std::move(params)}}));
}

}  // namespace ptybox::runtime
