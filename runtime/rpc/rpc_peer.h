// One JSON-RPC 2.0 peer on one line connection, under `ptybox serve` and `ptybox mcp` alike
// (tmux's tmuxpeer: framing, ids and errors written once). It owns the connection and keeps the
// ids of requests not answered yet: a second request with one of them is refused, each request
// is answered at most once, the dialect's cancel notification reaches the handler with a bounded
// reason, and a handler that throws is contained to its request, which is answered -32603.
// What each method means is the handler's business (RpcConnection, McpServer).
#pragma once

#include <memory>
#include <set>
#include <string>
#include <string_view>

#include "runtime/rpc/json_rpc.h"
#include "runtime/rpc/line_connection.h"

namespace ptybox::runtime {

// How a protocol cancels a request, and whether a canceled request is still answered.
struct RpcDialect {
  std::string_view name;            // for the log: "rpc" or "mcp"
  std::string_view cancel_method;   // the notification that cancels a request
  std::string_view cancel_id_key;   // its parameter naming the request
  std::string_view default_reason;  // the reason when the client gives none
  // JSON-RPC answers a canceled request (error `canceled`); MCP asks for no answer to it.
  bool answer_canceled = true;
};

// `ptybox serve`: the Language Server Protocol's $/cancelRequest {"id"}.
inline constexpr RpcDialect kJsonRpcDialect{
    .name = "rpc",
    .cancel_method = "$/cancelRequest",
    .cancel_id_key = "id",
    .default_reason = "canceled by the client ($/cancelRequest)",
    .answer_canceled = true};
// `ptybox mcp`: notifications/cancelled {"requestId"}; the canceled request gets no answer.
inline constexpr RpcDialect kMcpDialect{
    .name = "mcp",
    .cancel_method = "notifications/cancelled",
    .cancel_id_key = "requestId",
    .default_reason = "canceled by the MCP host (notifications/cancelled)",
    .answer_canceled = false};

// What a protocol server does with the messages the peer accepted.
class RpcHandler {
 public:
  virtual ~RpcHandler() = default;
  // A request whose id was not in flight. It is in flight until the handler answers it
  // (RpcPeer::Reply, ReplyError) or drops it (RpcPeer::Drop), now or later.
  virtual void OnRequest(const RpcMessage& request) = 0;
  // Any notification but the dialect's cancel notification.
  virtual void OnNotification(const RpcMessage& notification) = 0;
  // A response to a request this side sent; `line` is the whole message.
  virtual void OnResponse(const RpcMessage& response, const std::string& line) = 0;
  // The client canceled request `key` (in flight). `reason` is at most kMaxReasonBytes long;
  // under a dialect that does not answer canceled requests, the answer is discarded.
  virtual void OnCancel(const std::string& key, const std::string& reason) = 0;
  // End of input or a transport error; called once.
  virtual void OnDisconnected() = 0;
};

class RpcPeer final : public std::enable_shared_from_this<RpcPeer> {
 public:
  // What a request gets when its handler threw.
  static constexpr int kInternalError = -32603;

  RpcPeer(std::shared_ptr<LineConnection> connection, const RpcDialect& dialect);
  // Starts reading; every event goes to `handler`, which is held weakly.
  void Start(std::weak_ptr<RpcHandler> handler);

  // One line as the connection delivers it, and the notice of a line over the bound (public
  // for tests: both normally come from the connection).
  void HandleLine(const std::string& line);
  void OnOversizedLine();

  // The answer to request `id`: sent once, if it is still in flight and was not canceled under
  // a dialect that leaves canceled requests unanswered. Either way `id` is free again.
  void Reply(const Json& id, Json result);
  void ReplyError(const Json& id, const Error& error);
  void ReplyError(const Json& id, int code, const std::string& message, Json data = nullptr);
  // Ends request `id` without an answer.
  void Drop(const Json& id);
  // A protocol error about a message that is not (or not yet) an in-flight request: `id`
  // stays as it was (a duplicate's refusal must not free the original).
  void Reject(const Json& id, int code, const std::string& message);
  // Messages that answer nothing: notifications, and requests to the other side.
  void Notify(const std::string& method, Json params);
  void SendRequest(const Json& id, const std::string& method, Json params);

  [[nodiscard]] bool InFlight(const std::string& key) const { return in_flight_.contains(key); }
  // An answer to `key` would be sent: in flight, and not canceled under a dialect that leaves
  // canceled requests unanswered.
  [[nodiscard]] bool Answerable(const std::string& key) const {
    return in_flight_.contains(key) && !canceled_.contains(key);
  }
  [[nodiscard]] size_t in_flight_count() const { return in_flight_.size(); }
  [[nodiscard]] LineConnection& connection() { return *connection_; }

 private:
  void Dispatch(const std::string& line, std::string& request_key);
  void OnRequestMessage(RpcHandler& handler, const RpcMessage& request, std::string& key);
  void OnCancelNotification(RpcHandler& handler, const Json& params);
  // Frees `id`; false when no answer may be sent for it.
  bool Finish(const Json& id);
  void Send(const Json& message);

  std::shared_ptr<LineConnection> connection_;
  RpcDialect dialect_;
  std::weak_ptr<RpcHandler> handler_;
  std::set<std::string> in_flight_;  // keys (RequestKey) of requests not answered yet
  std::set<std::string> canceled_;   // in flight and canceled, under !answer_canceled
};

}  // namespace ptybox::runtime
