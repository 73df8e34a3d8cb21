// The MCP server (`ptybox mcp`, docs/mcp.md) on one connection, which is one owner scope:
// lifecycle and protocol-version negotiation, the contract's methods as tools, the policy as the
// resource ptybox://policy with update notifications, notifications/cancelled, and the owner's
// sessions closed when the host disconnects. Requests run concurrently, as in rpc_server.
#pragma once

#include <functional>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/line_connection.h"
#include "runtime/service.h"
#include "runtime/wire.h"

namespace ptybox::runtime {

class McpServer final : public std::enable_shared_from_this<McpServer> {
 public:
  // Newest first; an unknown requested version is answered with the first.
  static const std::vector<std::string>& SupportedVersions();
  static constexpr std::string_view kPolicyUri = "ptybox://policy";

  McpServer(PtyService& service, std::shared_ptr<LineConnection> connection, std::string label);
  // Starts reading; `on_done` runs after the host left and its sessions were closed.
  void Start(std::function<void()> on_done);

  // Handles one line (exposed for tests).
  void HandleLine(const std::string& line);
  // Called by the connection (AttachServer): a line over the bound, and end of input.
  void OnOversizedLine();
  void OnDisconnected();

 private:
  void HandleRequest(const Json& id, const std::string& method, const Json& params);
  void HandleNotification(const std::string& method, const Json& params);
  void Initialize(const Json& id, const Json& params);
  void CallTool(const Json& id, const Json& params);
  void ReadResource(const Json& id, const Json& params);
  void Subscribe(const Json& id, const Json& params, bool subscribe);
  // The tools/call result for a finished method, shaped for the negotiated version.
  Json ToolResult(const std::string& tool, const Result<Json>& result);
  [[nodiscard]] Json ToolList() const;
  [[nodiscard]] std::string PolicyText();
  void OnPolicyChanged();
  // Structured results, titles and output schemas exist from 2025-06-18 on.
  [[nodiscard]] bool Structured() const;

  void Reply(const Json& id, Json result);
  void ReplyError(const Json& id, int code, const std::string& message, Json data = nullptr);
  void Notify(const std::string& method, Json params);

  PtyService& service_;
  std::shared_ptr<LineConnection> connection_;
  std::shared_ptr<Owner> owner_;
  std::function<void()> on_done_;
  bool disconnected_ = false;
  bool initialized_ = false;
  std::string protocol_version_;
  bool subscribed_to_policy_ = false;
  std::set<std::string> in_flight_;  // request keys of unanswered requests
  std::set<std::string> canceled_;   // in flight, canceled by the host: answered with nothing
};

}  // namespace ptybox::runtime
