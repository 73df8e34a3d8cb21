#include "runtime/rpc_server.h"

#include <sys/stat.h>
#include <unistd.h>

#include "backend/types.h"
#include "common/log.h"
#include "runtime/methods.h"
#include "runtime/owner.h"
#include "runtime/peer_check.h"

namespace ptybox::runtime {
RpcConnection::RpcConnection(PtyService& service, std::shared_ptr<LineConnection> connection,
                             std::string label)
    : service_(service), connection_(std::move(connection)) {
  owner_ = service_.OpenOwner(std::move(label));
}

void RpcConnection::Start(std::function<void()> on_done) {
  on_done_ = std::move(on_done);
  AttachServer(*connection_, shared_from_this());
}

void RpcConnection::OnOversizedLine() {
  ReplyProtocolError(nullptr, -32600, kOversizedLineMessage);
}

void RpcConnection::OnDisconnected() {
  if (disconnected_) return;
  disconnected_ = true;
  std::shared_ptr<RpcConnection> self = shared_from_this();
  // Every session of this owner ends with the connection, awaited.
  service_.CloseOwner(owner_, [self] {
    std::function<void()> done = std::move(self->on_done_);
    self->on_done_ = nullptr;
    if (done) done();
  });
}

void RpcConnection::HandleLine(const std::string& line) {
  std::expected<RpcMessage, RpcReject> message = ParseRpcLine(line);
  if (!message) {
    ReplyProtocolError(message.error().id, message.error().code, message.error().message);
    return;
  }
  switch (message->kind) {
    case RpcMessage::Kind::kNotification:
      HandleNotification(message->method, message->params);
      return;
    case RpcMessage::Kind::kResponse:
      // This server sends no requests, so no response can be expected.
      ReplyProtocolError(message->id, -32600, "invalid request: \"method\" must be a string");
      return;
    case RpcMessage::Kind::kRequest:
      HandleRequest(message->id, message->method, message->params);
      return;
  }
}

void RpcConnection::HandleNotification(const std::string& method, const Json& params) {
  if (method == "$/cancelRequest" && params.is_object() && params.contains("id")) {
    std::string reason = "canceled by the client ($/cancelRequest)";
    if (params.contains("reason") && params["reason"].is_string()) {
      reason = params["reason"].get<std::string>();
    }
    service_.CancelRequest(*owner_, RequestKey(params["id"]), reason);
  }
  // Other notifications are ignored, as JSON-RPC requires.
}

void RpcConnection::Reply(const Json& id, Json result) {
  connection_->Send(Dump(RpcResult(id, std::move(result))));
}

void RpcConnection::ReplyError(const Json& id, const Error& error) {
  connection_->Send(Dump(RpcError(id, ErrorObject(error))));
}

void RpcConnection::ReplyProtocolError(const Json& id, int code, const std::string& message) {
  connection_->Send(Dump(RpcError(id, code, message)));
}

void RpcConnection::HandleRequest(const Json& id, const std::string& method, const Json& params) {
  if (!IsContractMethod(method)) {
    ReplyProtocolError(id, -32601, "method not found: " + method);
    return;
  }
  std::shared_ptr<RpcConnection> self = shared_from_this();
  CallMethod(service_, owner_, method, params, RequestKey(id), [self, id](Result<Json> result) {
    if (!result) return self->ReplyError(id, result.error());
    self->Reply(id, std::move(*result));
  });
}

SocketServer::SocketServer(asio::io_context& io, PtyService& service)
    : io_(io), service_(service) {}

Result<void> SocketServer::Listen(const std::filesystem::path& path) {
  path_ = path;
  std::error_code ec;
  if (std::filesystem::is_socket(path, ec)) std::filesystem::remove(path, ec);
  // Created with 0600 from the start: no window in which another user can connect.
  mode_t old_mask = ::umask(0177);
  acceptor_.emplace(io_);
  acceptor_->open(asio::local::stream_protocol(), ec);
  if (!ec) acceptor_->bind(asio::local::stream_protocol::endpoint(path.string()), ec);
  ::umask(old_mask);
  if (!ec) acceptor_->listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    acceptor_.reset();
    return Fail(ErrorKind::kInternal, "cannot listen on " + path.string() + ": " + ec.message() +
                                          " (is the directory writable? is another ptybox using it?)",
                path.string());
  }
  ::chmod(path.c_str(), 0600);
  Accept();
  return {};
}

void SocketServer::Accept() {
  if (!acceptor_) return;
  acceptor_->async_accept([this](const std::error_code& ec,
                                 asio::local::stream_protocol::socket socket) {
    if (ec == asio::error::operation_aborted || !acceptor_) return;
    if (!ec && AdmitPeer(socket.native_handle())) {  // runtime/peer_check.h
      int fd = socket.release();
      auto line = std::make_shared<LineConnection>(io_, fd, fd);
      auto rpc = std::make_shared<RpcConnection>(service_, line,
                                                 "socket client " + std::to_string(next_client_++));
      rpc->Start([rpc] {});
    }
    Accept();
  });
}

void SocketServer::Stop() {
  if (!acceptor_) return;
  std::error_code ec;
  acceptor_->close(ec);
  acceptor_.reset();
  std::filesystem::remove(path_, ec);
}

}  // namespace ptybox::runtime
