#include "runtime/mcp_server.h"

#include <algorithm>

#include "common/log.h"
#include "policy/mode_fence.h"
#include "runtime/mcp/mcp_consent.h"
#include "runtime/mcp_tools.h"
#include "runtime/methods.h"
#include "runtime/owner.h"
#include "runtime/rpc/display_text.h"
#include "runtime/rpc/policy_json.h"

#ifndef PTYBOX_VERSION
#define PTYBOX_VERSION "0.0.0"
#endif

namespace ptybox::runtime {
namespace {

// JSON-RPC codes MCP uses besides the standard ones.
constexpr int kResourceNotFound = -32002;
constexpr int kInternalError = -32603;
// Unknown names, methods and URIs are echoed quoted and cut to this many bytes: the client (the
// model) chose them, and a whole megabyte of them helps no one.
constexpr size_t kEchoBytes = 64;
constexpr std::string_view kFirstStructuredVersion = "2025-06-18";

Json PolicyResourceEntry() {
  return Json{{"uri", std::string(McpServer::kPolicyUri)},
              {"name", "policy"},
              {"description",
               "The sandbox policy new terminals run under: mode, writable roots, network. "
               "Updated (notifications/resources/updated) when the mode changes."},
              {"mimeType", "application/json"}};
}

// "300 seconds", "1 second", "250 ms".
std::string DurationText(std::chrono::milliseconds d) {
  if (d.count() == 1000) return "1 second";
  if (d.count() % 1000 == 0) return std::to_string(d.count() / 1000) + " seconds";
  return std::to_string(d.count()) + " ms";
}

}  // namespace

const std::vector<std::string>& McpServer::SupportedVersions() {
  static const std::vector<std::string> kVersions = {"2025-11-25", "2025-06-18", "2025-03-26",
                                                     "2024-11-05"};
  return kVersions;
}

McpServer::McpServer(asio::io_context& io, PtyService& service,
                     std::shared_ptr<LineConnection> connection, std::string label,
                     McpOptions options)
    : io_(io),
      options_(options),
      service_(service),
      peer_(std::make_shared<RpcPeer>(std::move(connection), kMcpDialect)) {
  owner_ = service_.OpenOwner(std::move(label));
}

void McpServer::Start(std::function<void()> on_done) {
  on_done_ = std::move(on_done);
  std::weak_ptr<McpServer> weak = weak_from_this();
  owner_->on_policy_changed = [weak](const policy::ResolvedPolicy&) {
    if (auto self = weak.lock()) self->OnPolicyChanged();
  };
  peer_->Start(weak_from_this());
}

void McpServer::OnDisconnected() {
  if (disconnected_) return;
  disconnected_ = true;
  // Nobody is left to answer or to be answered: pending consent requests end unanswered.
  for (auto& [key, pending] : consents_) pending.timer->cancel();
  consents_.clear();
  std::shared_ptr<McpServer> self = shared_from_this();
  // --connect: the daemon keeps the owner for its grace; this process only leaves.
  if (remote_) remote_->Close();
  // The host left (end of input): every session of this owner ends with it, awaited.
  service_.CloseOwner(owner_, [self] {
    self->owner_->on_policy_changed = nullptr;
    std::function<void()> done = std::move(self->on_done_);
    self->on_done_ = nullptr;
    if (done) done();
  });
}

void McpServer::OnNotification(const RpcMessage&) {
  // notifications/initialized and every other notification need nothing from us.
}

void McpServer::OnCancel(const std::string& key, const std::string& reason) {
  // A policy_set_mode waiting for the user: the question is withdrawn, nothing changes.
  if (WithdrawConsent(key, reason)) return;
  // The spec asks for no response to a canceled request (the peer drops it); the work still
  // ends as the contract says (an open closes its unpublished shell, a send is interrupted like
  // terminal_cancel).
  if (remote_) {
    remote_->Cancel(key, reason);
  } else {
    service_.CancelRequest(*owner_, key, reason);
  }
}

void McpServer::OnRequest(const RpcMessage& request) {
  const Json& id = request.id;
  const std::string& method = request.method;
  const Json& params = request.params;
  if (method == "ping") return Reply(id, Json::object());
  if (method == "initialize") return Initialize(id, params);
  if (!initialized_) {
    return ReplyError(id, -32600,
                      "invalid request: send initialize first (MCP lifecycle), then " +
                          QuotedText(method, kEchoBytes));
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
  ReplyError(id, -32601, "method not found: " + QuotedText(method, kEchoBytes));
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
  can_elicit_ = CanElicitForm(params.value("capabilities", Json::object()), protocol_version_);
  // The mode the model starts in is the widest it may choose alone. When the policy cannot be
  // resolved now, only the --mode given (else read-only) is free.
  Result<policy::ResolvedPolicy> start = CurrentPolicy();
  widest_free_ =
      start ? start->mode : owner_->fence().requested_mode().value_or(policy::Mode::kReadOnly);
  Json server_info{{"name", "ptybox"}, {"version", PTYBOX_VERSION}};
  if (Structured()) server_info["title"] = "ptybox sandboxed terminals";
  Json capabilities{{"tools", Json{{"listChanged", false}}},
                    {"resources", Json{{"subscribe", true}, {"listChanged", false}}}};
  LogInfo("mcp: host asked for protocol " + requested + ", speaking " + protocol_version_ +
          "; model starts in " + std::string(policy::ToString(widest_free_)) +
          (can_elicit_ ? "; wider modes ask the user (elicitation)"
                       : "; wider modes are refused (the host cannot elicit)"));
  Reply(id, Json{{"protocolVersion", protocol_version_},
                 {"capabilities", capabilities},
                 {"serverInfo", server_info},
                 {"instructions", PolicyText()}});
}

Result<policy::ResolvedPolicy> McpServer::CurrentPolicy() {
  if (remote_) return remote_->policy();
  return service_.ResolvePolicy(*owner_);
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
    return ReplyError(id, -32602,
                      "unknown tool: " + QuotedText(name, kEchoBytes) + " (tools/list lists them)");
  }
  Json arguments = params.contains("arguments") ? params["arguments"] : Json::object();
  if (arguments.is_null()) arguments = Json::object();
  if (!arguments.is_object()) {
    return ReplyError(id, -32602, "invalid params: tools/call \"arguments\" must be an object");
  }
  if (FindMcpFace(name)->needs_consent) return ConsentTool(id, name, arguments);
  RunTool(id, name, arguments);
}

void McpServer::RunTool(const Json& id, const std::string& name, const Json& arguments) {
  const std::string key = RequestKey(id);
  std::shared_ptr<McpServer> self = shared_from_this();
  const std::string session_id =
      arguments.contains("sessionId") && arguments["sessionId"].is_string()
          ? arguments["sessionId"].get<std::string>()
          : std::string();
  // What the method's face says of its result: the text a budget may shorten and where it sits.
  const McpFace* face = FindMcpFace(name);
  const bool changes_policy = face != nullptr && face->changes_policy;
  const ResultBudget budget = face != nullptr ? face->budget : ResultBudget{};
  const std::optional<BoundedText> located =
      budget.Located() != nullptr ? std::optional<BoundedText>(*budget.Located()) : std::nullopt;
  const bool paged = located && located->place == TextPlace::kPage;
  Json args = arguments;
  // The screen view is the screen now, not a page of scrollback.
  const bool screen = args.contains("view") && args["view"] == "screen";
  if (paged && !screen) {
    // A page the model can read whole: nextCursor then continues exactly where it ends. A third
    // of what the envelope and the footers leave, since the text and the structured result both
    // carry it (JSON escapes of newlines take the rest).
    const int64_t page = static_cast<int64_t>((options_.max_result_bytes - 1024) / 3);
    if (!args.contains("maxBytes") || !args["maxBytes"].is_number_integer() ||
        args["maxBytes"].get<int64_t>() > page) {
      args["maxBytes"] = page;
    }
  }
  auto answer = [self, id, key, name, session_id, located, paged](Result<Json> result) {
    // Canceled: no answer, and no anchor probe for it.
    if (!self->peer_->Answerable(key)) return self->peer_->Drop(id);
    if (result && paged &&
        result->value("cursor", uint64_t{0}) != result->value("nextCursor", uint64_t{0})) {
      TextAnchor anchor{.begin = result->value("cursor", uint64_t{0}), .end = std::nullopt};
      return self->Reply(id, self->ToolResult(id, name, result, anchor, session_id));
    }
    const bool long_text = result && located && located->place != TextPlace::kPage &&
                           result->contains(located->field) &&
                           (*result)[located->field].is_string() &&
                           (*result)[located->field].get_ref<const std::string&>().size() >
                               self->options_.max_result_bytes / 3;
    if (!long_text) return self->Reply(id, self->ToolResult(id, name, result));
    if (located->place == TextPlace::kCollected) {
      // The backend says where the collected output starts when it knows exactly; otherwise
      // the elision names no place (never a guess).
      const Json& at = result->contains("outputCursor") ? (*result)["outputCursor"] : Json();
      if (!at.is_number_unsigned()) return self->Reply(id, self->ToolResult(id, name, result));
      const TextAnchor anchor{.begin = at.get<uint64_t>(), .end = std::nullopt};
      return self->AnswerWithinKept(id, name, session_id, key, result, anchor);
    }
    // The viewport ends where the scrollback ended when the send settled: ask for that offset
    // (a cursor past the end is clamped to it) and the unterminated line after it.
    const std::string field = located->field;
    const std::string& viewport = (*result)[field].get_ref<const std::string&>();
    Json probe{{"sessionId", session_id},
               {"cursor", INT64_MAX},
               {"maxBytes", static_cast<int64_t>(viewport.size()) + 1}};
    self->Invoke("terminal_read", probe, key + "#anchor",
                 [self, id, name, session_id, result, field, key](Result<Json> page) {
                   TextAnchor anchor;
                   if (page && page->contains("cursor") && (*page)["cursor"].is_number_integer()) {
                     const uint64_t end = (*page)["cursor"].get<uint64_t>();
                     const std::string pending =
                         (*page)["text"].is_string() ? (*page)["text"].get<std::string>() : "";
                     const std::string& text = (*result)[field].get_ref<const std::string&>();
                     const bool at_prompt =
                         result->contains("exitCode") && (*result)["exitCode"].is_number_integer();
                     if (!at_prompt && !pending.empty() && text.ends_with(pending)) {
                       anchor.end = end + pending.size();
                     } else if (end > 0) {
                       anchor.end = end - 1;  // the last line's "\n" is not in the viewport
                     }
                   }
                   if (!anchor.end) {
                     return self->Reply(id, self->ToolResult(id, name, result, anchor, session_id));
                   }
                   self->AnswerWithinKept(id, name, session_id, key, result, anchor);
                 });
  };
  if (remote_) {
    // On the daemon: a mode change is read back before the answer states the new policy.
    remote_->Call(name, args, key, [self, answer, changes_policy](Result<Json> result) {
      if (!changes_policy || !result) return answer(std::move(result));
      self->remote_->RefreshPolicy([self, answer, result] {
        self->OnPolicyChanged();
        answer(result);
      });
    });
    return;
  }
  CallMethod(service_, owner_, name, args, key, answer);
}

void McpServer::AnswerWithinKept(const Json& id, const std::string& name,
                                 const std::string& session_id, const std::string& key,
                                 const Result<Json>& result, TextAnchor anchor) {
  // The located text may begin before what the scrollback still keeps (its last
  // scrollbackLines lines): a read from 0 starts at the oldest byte kept.
  std::shared_ptr<McpServer> self = shared_from_this();
  Json first{{"sessionId", session_id}, {"cursor", 0}, {"maxBytes", 1}};
  Invoke("terminal_read", first, key + "#oldest",
         [self, id, name, session_id, result, anchor](Result<Json> oldest) mutable {
           if (oldest && oldest->contains("cursor") && (*oldest)["cursor"].is_number_integer()) {
             anchor.oldest = (*oldest)["cursor"].get<uint64_t>();
           } else {
             anchor = TextAnchor{};  // what is kept is unknown: no pointer
           }
           self->Reply(id, self->ToolResult(id, name, result, anchor, session_id));
         });
}

void McpServer::Invoke(const std::string& method, const Json& arguments, const std::string& key,
                       std::function<void(Result<Json>)> done) {
  if (remote_) return remote_->Call(method, arguments, key, std::move(done));
  CallMethod(service_, owner_, method, arguments, key, std::move(done));
}

void McpServer::ConsentTool(const Json& id, const std::string& name, const Json& arguments) {
  // Without a valid mode the ordinary way refuses it; within the free range it simply runs.
  std::optional<policy::Mode> mode;
  if (arguments.contains("mode") && arguments["mode"].is_string()) {
    mode = policy::ParseMode(arguments["mode"].get<std::string>());
  }
  if (!mode || !NeedsConsent(*mode, widest_free_)) return RunTool(id, name, arguments);
  // A widening only ever applies {"mode": ...}: other arguments are refused here, whatever
  // the ordinary way would do with them.
  for (const auto& [key, value] : arguments.items()) {
    if (key == "mode") continue;
    return ReplyToolError(
        id, Error{ErrorKind::kInvalidParams,
                  name + ": unknown parameter " + QuotedText(key, kEchoBytes) + " (accepted: mode)",
                  key});
  }

  // A widening. What the ceiling or the fence refuses anyway is refused without asking.
  Result<policy::ResolvedPolicy> current = CurrentPolicy();
  if (!current) return ReplyToolError(id, current.error());
  if (remote_) {
    // The daemon checks the ceiling and the fence when the accepted change applies.
    if (!can_elicit_) return ReplyToolError(id, ConsentUnavailable(current->mode, *mode));
    if (!consents_.empty()) {
      return ReplyToolError(id, ConsentInProgress());
    }
    policy::ResolvedPolicy wanted = *current;
    wanted.mode = *mode;
    return AskConsent(id, name, *current, wanted);
  }
  Owner probe(0, name + " probe", *mode);  // never registered: resolves the wanted mode
  Result<policy::ResolvedPolicy> wanted = service_.ResolvePolicy(probe);
  if (!wanted) return ReplyToolError(id, wanted.error());
  policy::ModeFence fence = owner_->fence();  // a copy: checks, commits nothing
  if (Result<void> fenced = fence.SetMode(wanted->mode, current->mode); !fenced) {
    return ReplyToolError(id, fenced.error());
  }
  if (!can_elicit_) return ReplyToolError(id, ConsentUnavailable(current->mode, wanted->mode));
  if (!consents_.empty()) {
    return ReplyToolError(id, ConsentInProgress());
  }
  AskConsent(id, name, *current, *wanted);
}

void McpServer::AskConsent(const Json& id, const std::string& tool,
                           const policy::ResolvedPolicy& current,
                           const policy::ResolvedPolicy& wanted) {
  const Json elicit_id = "ptybox-consent-" + std::to_string(next_request_++);
  const std::string key = RequestKey(elicit_id);
  PendingConsent pending{id, tool, current.mode, wanted.mode,
                         std::make_unique<asio::steady_timer>(io_)};
  pending.timer->expires_after(options_.consent_timeout);
  std::weak_ptr<McpServer> weak = weak_from_this();
  pending.timer->async_wait([weak, key, elicit_id](const std::error_code& ec) {
    if (ec) return;
    auto self = weak.lock();
    if (!self || !self->consents_.contains(key)) return;
    const std::string why = "no answer came within " + DurationText(self->options_.consent_timeout);
    // The host may drop the question it still shows.
    self->Notify("notifications/cancelled", Json{{"requestId", elicit_id}, {"reason", why}});
    self->SettleConsent(key, why);
  });
  consents_.emplace(key, std::move(pending));
  LogInfo("mcp: asking the user to widen the mode from " +
          std::string(policy::ToString(current.mode)) + " to " +
          std::string(policy::ToString(wanted.mode)) + " (elicitation " + key + ")");
  peer_->SendRequest(elicit_id, "elicitation/create",
                     ConsentRequestParams(current, wanted, protocol_version_));
}

void McpServer::OnResponse(const RpcMessage& response, const std::string& line) {
  const std::string key = RequestKey(response.id);
  if (!consents_.contains(key)) {
    // Not ours, already settled (timed out, withdrawn) or a stray: never applied.
    LogDebug("mcp: ignored a response to no pending request (" + key + ")");
    return;
  }
  SettleConsent(key, ConsentRefusal(Json::parse(line, nullptr, /*allow_exceptions=*/false)));
}

void McpServer::SettleConsent(const std::string& elicit_key, std::optional<std::string> refusal) {
  auto it = consents_.find(elicit_key);
  if (it == consents_.end()) return;
  PendingConsent pending = std::move(it->second);
  consents_.erase(it);
  pending.timer->cancel();
  const std::string from(policy::ToString(pending.from));
  const std::string to(policy::ToString(pending.to));
  if (refusal) {
    // The outcome of a consent is shown at the default level (PTYBOX_LOG=warn).
    LogWarn("mcp: widening from " + from + " to " + to + " refused: " + *refusal);
    return ReplyToolError(pending.tool_id, ConsentRefused(pending.from, pending.to, *refusal));
  }
  LogWarn("mcp: the user accepted widening from " + from + " to " + to);
  // Accepted for this connection; the ceiling and the fence are checked again as it applies.
  if (!policy::Within(pending.to, widest_free_)) widest_free_ = pending.to;
  RunTool(pending.tool_id, pending.tool, Json{{"mode", to}});
}

bool McpServer::WithdrawConsent(const std::string& tool_key, const std::string& reason) {
  for (auto it = consents_.begin(); it != consents_.end(); ++it) {
    if (RequestKey(it->second.tool_id) != tool_key) continue;
    it->second.timer->cancel();
    const Json elicit_id = Json::parse(it->first);
    const Json tool_id = it->second.tool_id;
    consents_.erase(it);
    peer_->Drop(tool_id);  // the canceled tools/call gets no response
    Notify("notifications/cancelled",
           Json{{"requestId", elicit_id}, {"reason", "the tool call was canceled: " + reason}});
    LogInfo("mcp: consent request " + Dump(elicit_id) + " withdrawn");
    return true;
  }
  return false;
}

Json McpServer::ToolResult(const Json& id, const std::string& tool, const Result<Json>& result,
                           const TextAnchor& anchor, const std::string& session_id) {
  // A tool's failure (bad id, busy, fenced, bad arguments) is a result the model reads and can
  // act on, not a protocol error.
  if (!result) {
    return Json{{"content",
                 Json::array({Json{{"type", "text"}, {"text", RenderToolError(result.error())}}})},
                {"isError", true}};
  }
  // Claude Code and Codex hand their model JSON.stringify(structuredContent) when it is present,
  // other hosts the text (docs/mcp.md): both carry the same bounded viewport, so each model sees
  // the head, the tail and the pointer to the rest. Each shrink step takes the overshoot out of
  // the text fields (counted twice: text and structured), until the whole answer fits.
  const size_t budget = options_.max_result_bytes;
  const McpFace* face = FindMcpFace(tool);
  const ResultBudget budget_of = face != nullptr ? face->budget : ResultBudget{};
  Json out = RenderResult(tool, *result);
  size_t size = Dump(RpcResult(id, out)).size();
  size_t field = budget / 2;
  for (int step = 0; step < 8 && size > budget; ++step) {
    out = RenderResult(tool, BoundToolResult(budget_of, *result, field, anchor, session_id));
    size = Dump(RpcResult(id, out)).size();
    if (size <= budget || field <= kMinElidedTextBytes) break;
    const size_t over = size > budget ? size - budget : 0;
    const size_t cut = over / 2 + 64;
    field = field > kMinElidedTextBytes + cut ? field - cut : kMinElidedTextBytes;
  }
  return out;
}

Json McpServer::RenderResult(const std::string& tool, const Json& result) {
  std::string text = RenderToolResult(tool, result);
  Json content = Json::array();
  const McpFace* face = FindMcpFace(tool);
  const bool changes_policy = face != nullptr && face->changes_policy;
  if (changes_policy) {
    // The superseding policy statement is appended to the conversation, never rewriting it.
    text += "\n" + PolicyText();
  }
  content.push_back(Json{{"type", "text"}, {"text", text}});
  Json out;
  if (Structured()) {
    if (changes_policy) {
      Json link = PolicyResourceEntry();
      link["type"] = "resource_link";
      content.push_back(std::move(link));
    }
    out["structuredContent"] = result;
  } else {
    // Before structured results existed, the JSON travels as a second text block.
    content.push_back(Json{{"type", "text"}, {"text", Dump(result)}});
  }
  out["content"] = std::move(content);
  out["isError"] = false;
  return out;
}

std::string McpServer::PolicyText() {
  Result<policy::ResolvedPolicy> resolved = CurrentPolicy();
  if (!resolved) {
    return "Sandbox policy: unresolved (" + EscapedText(resolved.error().Describe(), 1024) +
           "); terminals cannot open until the policy files are fixed.";
  }
  return PolicyClause(*resolved);
}

bool McpServer::NamesThePolicy(const Json& id, const Json& params, std::string_view method) {
  if (!params.is_object() || !params.contains("uri") || !params["uri"].is_string()) {
    ReplyError(id, -32602, "invalid params: " + std::string(method) + " needs \"uri\" (a string)");
    return false;
  }
  const std::string& uri = params["uri"].get_ref<const std::string&>();
  if (uri == kPolicyUri) return true;
  ReplyError(id, kResourceNotFound,
             "resource not found: " + QuotedText(uri, kEchoBytes) +
                 " (the only resource is ptybox://policy)",
             Json{{"uri", Abbreviate(uri, kEchoBytes)}});
  return false;
}

void McpServer::ReadResource(const Json& id, const Json& params) {
  if (!NamesThePolicy(id, params, "resources/read")) return;
  const std::string uri(kPolicyUri);
  Result<policy::ResolvedPolicy> resolved = CurrentPolicy();
  if (!resolved) {
    return ReplyError(id, kInternalError,
                      "the policy cannot be resolved: " + resolved.error().Describe(),
                      ErrorObject(resolved.error())["data"]);
  }
  Json contents = Json::array();
  contents.push_back(
      Json{{"uri", uri}, {"mimeType", "text/plain"}, {"text", PolicyClause(*resolved)}});
  Json policy = PolicyToJson(*resolved);
  // Over MCP: how far the model may change the mode by itself, and what a wider mode takes.
  policy["modelConsent"] = Json{
      {"widestWithoutConsent", std::string(policy::ToString(widest_free_))},
      {"widerModes", can_elicit_ ? "ask the user (elicitation)"
                                 : "refused: this host cannot ask the user; restart ptybox mcp "
                                   "with a wider --mode"}};
  // ASCII only: a bidi override or line separator in a path stays an escape inside the text,
  // also after the host decodes the message around it.
  contents.push_back(
      Json{{"uri", uri},
           {"mimeType", "application/json"},
           {"text", policy.dump(-1, ' ', /*ensure_ascii=*/true, Json::error_handler_t::replace)}});
  Reply(id, Json{{"contents", contents}});
}

void McpServer::Subscribe(const Json& id, const Json& params, bool subscribe) {
  if (!NamesThePolicy(id, params, subscribe ? "resources/subscribe" : "resources/unsubscribe")) {
    return;
  }
  subscribed_to_policy_ = subscribe;
  Reply(id, Json::object());
}

void McpServer::OnPolicyChanged() {
  if (!subscribed_to_policy_) return;
  Notify("notifications/resources/updated", Json{{"uri", std::string(kPolicyUri)}});
}

void McpServer::Reply(const Json& id, Json result) { peer_->Reply(id, std::move(result)); }

void McpServer::ReplyError(const Json& id, int code, const std::string& message, Json data) {
  peer_->ReplyError(id, code, message, std::move(data));
}

void McpServer::ReplyToolError(const Json& id, const Error& error) {
  Reply(id, ToolResult(id, "", std::unexpected(error)));
}

void McpServer::Notify(const std::string& method, Json params) {
  peer_->Notify(method, std::move(params));
}

}  // namespace ptybox::runtime
