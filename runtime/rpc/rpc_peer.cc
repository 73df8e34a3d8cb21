#include "runtime/rpc/rpc_peer.h"

#include "common/log.h"
#include "runtime/rpc/display_text.h"

namespace ptybox::runtime {
namespace {

// A client's id or reason in the server's log: escaped and bounded (runtime/rpc/display_text.h),
// so a reason of a megabyte, or one that draws a fake log line, stays one short line.
std::string ForLog(std::string_view text) { return EscapedText(text, 128); }

}  // namespace

RpcPeer::RpcPeer(std::shared_ptr<LineConnection> connection, const RpcDialect& dialect)
    : connection_(std::move(connection)), dialect_(dialect) {}

void RpcPeer::Start(std::weak_ptr<RpcHandler> handler) {
  handler_ = std::move(handler);
  std::weak_ptr<RpcPeer> weak = weak_from_this();
  LineConnection::Handlers handlers;
  handlers.on_line = [weak](std::string line) {
    if (auto self = weak.lock()) self->HandleLine(line);
  };
  handlers.on_oversized_line = [weak] {
    if (auto self = weak.lock()) self->OnOversizedLine();
  };
  handlers.on_closed = [weak] {
    std::shared_ptr<RpcPeer> self = weak.lock();
    if (!self) return;
    std::shared_ptr<RpcHandler> target = self->handler_.lock();
    if (!target) return;
    // Never into the reactor, where it would end every other client.
    try {
      target->OnDisconnected();
    } catch (const std::exception& e) {
      LogError(std::string(self->dialect_.name) + ": closing a connection failed: " + e.what());
    } catch (...) {
      LogError(std::string(self->dialect_.name) + ": closing a connection failed");
    }
  };
  connection_->Start(std::move(handlers));
}

void RpcPeer::OnOversizedLine() { Reject(nullptr, -32600, kOversizedLineMessage); }

void RpcPeer::HandleLine(const std::string& line) {
  // The key of the request this line carries, once it is in flight.
  std::string request_key;
  std::string what;
  try {
    Dispatch(line, request_key);
    return;
  } catch (const std::exception& e) {
    what = e.what();
  } catch (...) {
    what = "an exception that is not a std::exception";
  }
  // A bug, never an answer to be expected: logged, and contained to this request, which is
  // answered if it was not already (the client would otherwise wait for it forever).
  LogError(std::string(dialect_.name) + ": handling a message failed: " + ForLog(what));
  if (request_key.empty() || !in_flight_.contains(request_key)) return;
  ReplyError(Json::parse(request_key), kInternalError, "internal error: " + Abbreviate(what, 256));
}

void RpcPeer::Dispatch(const std::string& line, std::string& request_key) {
  std::expected<RpcMessage, RpcReject> message = ParseRpcLine(line);
  if (!message) {
    return Reject(message.error().id, message.error().code, message.error().message);
  }
  std::shared_ptr<RpcHandler> handler = handler_.lock();
  if (!handler) return;
  switch (message->kind) {
    case RpcMessage::Kind::kRequest:
      return OnRequestMessage(*handler, *message, request_key);
    case RpcMessage::Kind::kNotification:
      if (message->method == dialect_.cancel_method) {
        return OnCancelNotification(*handler, message->params);
      }
      return handler->OnNotification(*message);
    case RpcMessage::Kind::kResponse:
      return handler->OnResponse(*message, line);
  }
}

void RpcPeer::OnRequestMessage(RpcHandler& handler, const RpcMessage& request, std::string& key) {
  // An id is the key of its request until answered (cancellation, pending opens): a second
  // request with the same id would take the first one's place, which could then escape its
  // limits, and the client could not tell the answers apart.
  const std::string id_key = RequestKey(request.id);
  if (in_flight_.contains(id_key)) {
    return Reject(request.id, -32600,
                  "invalid request: id " + id_key +
                      " is already in flight on this connection; use a new id for each request");
  }
  in_flight_.insert(id_key);
  key = id_key;
  handler.OnRequest(request);
}

void RpcPeer::OnCancelNotification(RpcHandler& handler, const Json& params) {
  // Malformed, unknown or already answered: ignored, as a notification gets no answer.
  if (!params.is_object()) return;
  auto id = params.find(std::string(dialect_.cancel_id_key));
  if (id == params.end()) return;
  const std::string key = RequestKey(*id);
  if (!in_flight_.contains(key)) return;
  std::string reason(dialect_.default_reason);
  auto given = params.find("reason");
  if (given != params.end() && given->is_string()) {
    reason = Abbreviate(given->get_ref<const std::string&>(), kMaxReasonBytes);
  }
  LogInfo(std::string(dialect_.name) + ": request " + ForLog(key) + " canceled: " + ForLog(reason));
  if (!dialect_.answer_canceled) canceled_.insert(key);
  handler.OnCancel(key, reason);
}

bool RpcPeer::Finish(const Json& id) {
  const std::string key = RequestKey(id);
  if (in_flight_.erase(key) == 0) {
    // Answered already (a handler that threw after starting its work, then finished it).
    LogDebug(std::string(dialect_.name) + ": dropped a second answer to request " + ForLog(key));
    return false;
  }
  return canceled_.erase(key) == 0;
}

void RpcPeer::Reply(const Json& id, Json result) {
  if (Finish(id)) Send(RpcResult(id, std::move(result)));
}

void RpcPeer::ReplyError(const Json& id, const Error& error) {
  if (Finish(id)) Send(RpcError(id, ErrorObject(error)));
}

void RpcPeer::ReplyError(const Json& id, int code, const std::string& message, Json data) {
  if (!Finish(id)) return;
  Json error{{"code", code}, {"message", message}};
  if (!data.is_null()) error["data"] = std::move(data);
  Send(RpcError(id, std::move(error)));
}

void RpcPeer::Drop(const Json& id) {
  const std::string key = RequestKey(id);
  in_flight_.erase(key);
  canceled_.erase(key);
}

void RpcPeer::Reject(const Json& id, int code, const std::string& message) {
  Send(RpcError(id, code, message));
}

void RpcPeer::Notify(const std::string& method, Json params) {
  Send(RpcNotification(method, std::move(params)));
}

void RpcPeer::SendRequest(const Json& id, const std::string& method, Json params) {
  Send(RpcRequest(id, method, std::move(params)));
}

void RpcPeer::Send(const Json& message) { connection_->Send(Dump(message)); }

}  // namespace ptybox::runtime
