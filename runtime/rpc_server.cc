#include "runtime/rpc_server.h"

#include <sys/stat.h>
#include <unistd.h>

#include "backend/types.h"
#include "common/log.h"
#include "runtime/owner.h"

namespace ptybox::runtime {
namespace {

// A request id as a map key: its JSON text ("1" and "\"1\"" are different ids).
std::string RequestKey(const Json& id) { return Dump(id); }

constexpr int64_t kMaxTimeoutMs = 24LL * 3600 * 1000;

Result<backend::SendRequest> SendRequestFrom(const Params& p) {
  backend::SendRequest request;
  Result<std::string> input = p.RequiredString("input");
  if (!input) return std::unexpected(input.error());
  request.input = std::move(*input);
  Result<std::optional<int64_t>> timeout = p.OptionalInt("timeoutMs", 1, kMaxTimeoutMs);
  if (!timeout) return std::unexpected(timeout.error());
  request.timeout_ms = *timeout;
  Result<std::optional<int64_t>> silence = p.OptionalInt("silenceMs", 1, kMaxTimeoutMs);
  if (!silence) return std::unexpected(silence.error());
  request.silence_ms = *silence;
  return request;
}

}  // namespace

RpcConnection::RpcConnection(PtyService& service, std::shared_ptr<LineConnection> connection,
                             std::string label)
    : service_(service), connection_(std::move(connection)) {
  owner_ = service_.OpenOwner(std::move(label));
}

void RpcConnection::Start(std::function<void()> on_done) {
  on_done_ = std::move(on_done);
  std::weak_ptr<RpcConnection> weak = weak_from_this();
  LineConnection::Handlers handlers;
  handlers.on_line = [weak](std::string line) {
    if (auto self = weak.lock()) self->HandleLine(line);
  };
  handlers.on_oversized_line = [weak] {
    if (auto self = weak.lock()) {
      self->ReplyProtocolError(nullptr, -32600,
                               "request line longer than 16 MiB was skipped; send smaller input "
                               "in several terminal_send calls");
    }
  };
  handlers.on_closed = [weak] {
    if (auto self = weak.lock()) self->OnDisconnected();
  };
  connection_->Start(std::move(handlers));
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
  Json message = Json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (message.is_discarded()) {
    ReplyProtocolError(nullptr, -32700, "parse error: the line is not valid JSON");
    return;
  }
  if (!message.is_object()) {
    ReplyProtocolError(nullptr, -32600,
                       "invalid request: expected one JSON-RPC 2.0 object per line (no batches)");
    return;
  }
  Json id = nullptr;
  bool has_id = message.contains("id");
  if (has_id) {
    id = message["id"];
    if (!id.is_string() && !id.is_number_integer() && !id.is_number_unsigned() && !id.is_null()) {
      ReplyProtocolError(nullptr, -32600, "invalid request: id must be a string or an integer");
      return;
    }
  }
  auto version = message.find("jsonrpc");
  if (version == message.end() || *version != "2.0") {
    ReplyProtocolError(id, -32600, "invalid request: \"jsonrpc\" must be \"2.0\"");
    return;
  }
  auto method = message.find("method");
  if (method == message.end() || !method->is_string()) {
    ReplyProtocolError(id, -32600, "invalid request: \"method\" must be a string");
    return;
  }
  Json params = message.contains("params") ? message["params"] : Json(nullptr);
  if (!params.is_null() && !params.is_object()) {
    ReplyProtocolError(id, -32602, "invalid params: \"params\" must be an object");
    return;
  }
  if (!has_id) {
    HandleNotification(method->get<std::string>(), params);
    return;
  }
  HandleRequest(id, method->get<std::string>(), params);
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
  connection_->Send(Dump(Json{{"jsonrpc", "2.0"}, {"id", id}, {"result", std::move(result)}}));
}

void RpcConnection::ReplyError(const Json& id, const Error& error) {
  connection_->Send(Dump(Json{{"jsonrpc", "2.0"}, {"id", id}, {"error", ErrorObject(error)}}));
}

void RpcConnection::ReplyProtocolError(const Json& id, int code, const std::string& message) {
  connection_->Send(Dump(Json{
      {"jsonrpc", "2.0"}, {"id", id}, {"error", Json{{"code", code}, {"message", message}}}}));
}

void RpcConnection::HandleRequest(const Json& id, const std::string& method, const Json& raw) {
  std::shared_ptr<RpcConnection> self = shared_from_this();
  auto fail = [&](const Error& error) { ReplyError(id, error); };
  auto check = [&](std::vector<std::string> allowed) {
    return Params::Check(raw, method, std::move(allowed));
  };
  const std::string key = RequestKey(id);

  if (method == "terminal_open") {
    Result<Params> p = check({"type", "name", "cwd", "cols", "rows", "env", "timeoutMs"});
    if (!p) return fail(p.error());
    OpenParams open;
    auto type = p->OptionalString("type");
    auto name = p->OptionalString("name");
    auto cwd = p->OptionalString("cwd");
    auto cols = p->OptionalInt("cols", 2, 1000);
    auto rows = p->OptionalInt("rows", 2, 1000);
    auto env = p->StringMap("env");
    auto timeout = p->OptionalInt("timeoutMs", 1, kMaxTimeoutMs);
    for (const Error* e : {type ? nullptr : &type.error(), name ? nullptr : &name.error(),
                           cwd ? nullptr : &cwd.error(), cols ? nullptr : &cols.error(),
                           rows ? nullptr : &rows.error(), env ? nullptr : &env.error(),
                           timeout ? nullptr : &timeout.error()}) {
      if (e != nullptr) return fail(*e);
    }
    if (*type) open.type = **type;
    open.name = *name;
    open.cwd = *cwd;
    if (*cols) open.columns = static_cast<int>(**cols);
    if (*rows) open.rows = static_cast<int>(**rows);
    open.env = std::move(*env);
    open.timeout_ms = *timeout;
    service_.Open(owner_, std::move(open), key, [self, id](Result<OpenResult> result) {
      if (!result) return self->ReplyError(id, result.error());
      self->Reply(id, ToJson(*result));
    });
    return;
  }
  if (method == "terminal_send") {
    Result<Params> p = check({"sessionId", "input", "timeoutMs", "silenceMs", "background"});
    if (!p) return fail(p.error());
    Result<std::string> session = p->RequiredString("sessionId");
    if (!session) return fail(session.error());
    Result<backend::SendRequest> request = SendRequestFrom(*p);
    if (!request) return fail(request.error());
    Result<std::optional<bool>> background = p->OptionalBool("background");
    if (!background) return fail(background.error());
    service_.Send(owner_, *session, std::move(*request), background->value_or(false), key,
                  [self, id](Result<SendOutcome> outcome) {
                    if (!outcome) return self->ReplyError(id, outcome.error());
                    if (outcome->operation_id) {
                      return self->Reply(id, Json{{"operationId", *outcome->operation_id}});
                    }
                    self->Reply(id, ToJson(*outcome->result));
                  });
    return;
  }
  if (method == "terminal_output" || method == "terminal_cancel" || method == "terminal_status") {
    Result<Params> p = check({"sessionId"});
    if (!p) return fail(p.error());
    Result<std::string> session = p->RequiredString("sessionId");
    if (!session) return fail(session.error());
    if (method == "terminal_output") {
      Result<backend::SendRead> read = service_.Output(*owner_, *session);
      if (!read) return fail(read.error());
      return Reply(id, ToJson(*read));
    }
    if (method == "terminal_cancel") {
      Result<bool> canceled = service_.Cancel(*owner_, *session);
      if (!canceled) return fail(canceled.error());
      return Reply(id, Json{{"canceled", *canceled}});
    }
    Result<SessionInfo> info = service_.Status(*owner_, *session);
    if (!info) return fail(info.error());
    return Reply(id, ToJson(*info, /*for_list=*/false));
  }
  if (method == "terminal_read") {
    Result<Params> p = check({"sessionId", "cursor", "maxBytes", "view"});
    if (!p) return fail(p.error());
    Result<std::string> session = p->RequiredString("sessionId");
    if (!session) return fail(session.error());
    backend::ReadRequest request;
    Result<std::optional<int64_t>> cursor = p->OptionalInt("cursor", 0, INT64_MAX);
    if (!cursor) return fail(cursor.error());
    if (*cursor) request.cursor = static_cast<uint64_t>(**cursor);
    Result<std::optional<int64_t>> max_bytes = p->OptionalInt("maxBytes", 1, INT64_MAX);
    if (!max_bytes) return fail(max_bytes.error());
    request.max_bytes = *max_bytes;
    Result<std::optional<std::string>> view = p->OptionalString("view");
    if (!view) return fail(view.error());
    if (*view && **view == "screen") {
      request.view = backend::ReadView::kScreen;
    } else if (*view && **view != "lines") {
      return fail(Error{ErrorKind::kInvalidParams,
                        "terminal_read: \"view\" must be \"lines\" or \"screen\"", "view"});
    }
    Result<backend::ReadResult> read = service_.Read(*owner_, *session, request);
    if (!read) return fail(read.error());
    return Reply(id, ToJson(*read));
  }
  if (method == "terminal_signal") {
    Result<Params> p = check({"sessionId", "signal"});
    if (!p) return fail(p.error());
    Result<std::string> session = p->RequiredString("sessionId");
    if (!session) return fail(session.error());
    Result<std::string> name = p->RequiredString("signal");
    if (!name) return fail(name.error());
    std::optional<int> signal = backend::ParseClientSignal(*name);
    if (!signal) {
      return fail(Error{ErrorKind::kInvalidParams,
                        "terminal_signal: unknown signal \"" + *name +
                            "\" (SIGINT, SIGTERM, SIGKILL, SIGQUIT, SIGHUP, SIGTSTP or SIGCONT)",
                        "signal"});
    }
    service_.Signal(*owner_, *session, *signal,
                    [self, id](Result<backend::SignalResult> result) {
                      if (!result) return self->ReplyError(id, result.error());
                      self->Reply(id, Json{{"delivered", result->delivered}, {"pgid", result->pgid}});
                    });
    return;
  }
  if (method == "terminal_close") {
    Result<Params> p = check({"sessionId", "reason"});
    if (!p) return fail(p.error());
    Result<std::string> session = p->RequiredString("sessionId");
    if (!session) return fail(session.error());
    Result<std::optional<std::string>> reason = p->OptionalString("reason");
    if (!reason) return fail(reason.error());
    service_.Close(owner_, *session, reason->value_or("closed by the client"),
                   [self, id](Result<backend::SessionStatus> status) {
                     if (!status) return self->ReplyError(id, status.error());
                     self->Reply(id, Json{{"sessionStatus", ToJson(*status)}});
                   });
    return;
  }
  if (method == "terminal_list") {
    Result<Params> p = check({});
    if (!p) return fail(p.error());
    Json sessions = Json::array();
    for (const SessionInfo& info : service_.List(*owner_)) sessions.push_back(ToJson(info, true));
    return Reply(id, Json{{"sessions", sessions}});
  }
  if (method == "policy_resolve") {
    Result<Params> p = check({});
    if (!p) return fail(p.error());
    Result<policy::ResolvedPolicy> resolved = service_.ResolvePolicy(*owner_);
    if (!resolved) return fail(resolved.error());
    return Reply(id, PolicyToJson(*resolved));
  }
  if (method == "policy_set_mode") {
    Result<Params> p = check({"mode"});
    if (!p) return fail(p.error());
    Result<std::string> text = p->RequiredString("mode");
    if (!text) return fail(text.error());
    std::optional<policy::Mode> mode = policy::ParseMode(*text);
    if (!mode) {
      return fail(Error{ErrorKind::kInvalidParams,
                        "policy_set_mode: unknown mode \"" + *text +
                            "\" (read-only, workspace-write or danger-full-access)",
                        "mode"});
    }
    Result<policy::Mode> set = service_.SetMode(*owner_, *mode);
    if (!set) return fail(set.error());
    return Reply(id, Json{{"mode", std::string(policy::ToString(*set))}});
  }
  ReplyProtocolError(id, -32601, "method not found: " + method);
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
    if (!ec) {
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
