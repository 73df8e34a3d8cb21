// The MCP server (`ptybox mcp`, docs/mcp.md) on one connection, which is one owner scope:
// lifecycle and protocol-version negotiation, the contract's methods as tools, the policy as the
// resource ptybox://policy with update notifications, notifications/cancelled, and the owner's
// sessions closed when the host disconnects. Requests run concurrently, as in rpc_server.
// The model is the caller here: a policy_set_mode that widens the sandbox beyond what the user
// started or accepted asks the user first (elicitation/create), or is refused
// (runtime/mcp/mcp_consent.h).
#pragma once

#include <asio/io_context.hpp>
#include <asio/steady_timer.hpp>
#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/mcp/mcp_budget.h"
#include "runtime/mcp_connect.h"
#include "runtime/params.h"
#include "runtime/rpc/line_connection.h"
#include "runtime/rpc/rpc_peer.h"
#include "runtime/service.h"

namespace ptybox::runtime {

struct McpOptions {
  // How long the user has to answer a consent request; no answer by then is a refusal.
  std::chrono::milliseconds consent_timeout = std::chrono::minutes(5);
  // `ptybox mcp --connect SOCKET`: the daemon to serve as a client of.
  std::optional<std::filesystem::path> connect;
  // `--max-result-bytes`: every tool result, as the host receives it, fits in this many bytes
  // (runtime/mcp/mcp_budget.h).
  size_t max_result_bytes = kDefaultMcpResultBytes;
};

class McpServer final : public RpcHandler, public std::enable_shared_from_this<McpServer> {
 public:
  // Newest first; an unknown requested version is answered with the first.
  static const std::vector<std::string>& SupportedVersions();
  static constexpr std::string_view kPolicyUri = "ptybox://policy";

  McpServer(asio::io_context& io, PtyService& service, std::shared_ptr<LineConnection> connection,
            std::string label, McpOptions options = {});
  // Starts reading; `on_done` runs after the host left and its sessions were closed.
  void Start(std::function<void()> on_done);
  // `ptybox mcp --connect`: every tool runs on the daemon as the attached owner (before Start).
  void UseRemote(std::shared_ptr<RemoteDaemon> remote) { remote_ = std::move(remote); }

  // RpcHandler: what the peer (framing, ids, notifications/cancelled) hands over.
  void OnRequest(const RpcMessage& request) override;
  void OnNotification(const RpcMessage& notification) override;
  void OnResponse(const RpcMessage& response, const std::string& line) override;
  void OnCancel(const std::string& key, const std::string& reason) override;
  void OnDisconnected() override;

 private:
  void Initialize(const Json& id, const Json& params);
  void CallTool(const Json& id, const Json& params);
  // Runs a tool's method and answers the tools/call (nothing when it was canceled).
  void RunTool(const Json& id, const std::string& name, const Json& arguments);
  // A tool whose face needs consent (policy_set_mode): keeping or narrowing the mode runs at
  // once; a widening asks the user.
  void ConsentTool(const Json& id, const std::string& name, const Json& arguments);
  void AskConsent(const Json& id, const std::string& tool, const policy::ResolvedPolicy& current,
                  const policy::ResolvedPolicy& wanted);
  // Settles a pending consent request: accepted (nullopt) or refused for `why`.
  void SettleConsent(const std::string& elicit_key, std::optional<std::string> refusal);
  // The host canceled the tools/call waiting for consent: the question is withdrawn.
  bool WithdrawConsent(const std::string& tool_key, const std::string& reason);
  // Does `params` name ptybox://policy? Otherwise answers the error (bad params, not found).
  bool NamesThePolicy(const Json& id, const Json& params, std::string_view method);
  void ReadResource(const Json& id, const Json& params);
  void Subscribe(const Json& id, const Json& params, bool subscribe);
  // The tools/call result for a finished method, shaped for the negotiated version.
  // The tools/call answer for `id`, within options_.max_result_bytes; `anchor` locates a
  // viewport or page in the scrollback for the elision line's terminal_read pointer.
  Json ToolResult(const Json& id, const std::string& tool, const Result<Json>& result,
                  const TextAnchor& anchor = {}, const std::string& session_id = {});
  // The unbounded answer: the text rendering and the structured result.
  Json RenderResult(const std::string& tool, const Json& result);
  // Answers `result` of `name` with `anchor` (where its located text sits in the scrollback)
  // and the scrollback's oldest kept offset, so the elision line never points at dropped bytes.
  void AnswerWithinKept(const Json& id, const std::string& name, const std::string& session_id,
                        const std::string& key, const Result<Json>& result, TextAnchor anchor);
  // Runs a contract method for the server itself (in process, or on the --connect daemon).
  void Invoke(const std::string& method, const Json& arguments, const std::string& key,
              std::function<void(Result<Json>)> done);
  [[nodiscard]] Json ToolList() const;
  [[nodiscard]] std::string PolicyText();
  void OnPolicyChanged();
  // Structured results, titles and output schemas exist from 2025-06-18 on.
  [[nodiscard]] bool Structured() const;
  // The owner's policy: this process's service, or the daemon's answer (--connect).
  Result<policy::ResolvedPolicy> CurrentPolicy();

  void Reply(const Json& id, Json result);
  void ReplyError(const Json& id, int code, const std::string& message, Json data = nullptr);
  void Notify(const std::string& method, Json params);
  void ReplyToolError(const Json& id, const Error& error);

  // A mode change (policy_set_mode) waiting for the user's answer to our elicitation/create
  // request.
  struct PendingConsent {
    Json tool_id;      // the tools/call to answer
    std::string tool;  // the tool it calls once accepted
    policy::Mode from = policy::Mode::kReadOnly;
    policy::Mode to = policy::Mode::kReadOnly;
    std::unique_ptr<asio::steady_timer> timer;
  };

  asio::io_context& io_;
  McpOptions options_;
  PtyService& service_;
  std::shared_ptr<RpcPeer> peer_;
  std::shared_ptr<Owner> owner_;
  std::shared_ptr<RemoteDaemon> remote_;  // --connect
  std::function<void()> on_done_;
  bool disconnected_ = false;
  bool initialized_ = false;
  std::string protocol_version_;
  bool subscribed_to_policy_ = false;
  bool can_elicit_ = false;  // the host declared form elicitation
  // The widest mode the model may choose without asking: the start mode, then what the user
  // accepted on this connection. Set at initialize.
  policy::Mode widest_free_ = policy::Mode::kReadOnly;
  std::map<std::string, PendingConsent> consents_;  // by the request key of our elicitation
  uint64_t next_request_ = 1;                       // ids of the requests we send
};

}  // namespace ptybox::runtime
