#include "runtime/cli/daemon_client.h"

#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cerrno>

#include "common/propagate.h"
#include "runtime/daemon.h"
#include "runtime/mcp_connect.h"
#include "runtime/rpc/line_connection.h"

namespace ptybox::runtime {

Result<DaemonClient> DaemonClient::Connect(const std::filesystem::path& socket) {
  Result<UniqueFd> fd = ConnectToDaemon(socket);
  if (!fd) return Propagate(fd);
  return DaemonClient(std::move(*fd));
}

Result<void> DaemonClient::SendLine(const std::string& line) {
  size_t sent = 0;
  while (sent < line.size()) {
    const ssize_t n = ::send(fd_.Get(), line.data() + sent, line.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      return std::unexpected(Error::FromErrno(ErrorKind::kInternal, "send to the ptybox daemon"));
    }
    sent += static_cast<size_t>(n);
  }
  return {};
}

Result<void> DaemonClient::Send(const std::string& method, const Json& params) {
  return SendLine(
      Dump(Json{{"jsonrpc", "2.0"}, {"id", next_id_++}, {"method", method}, {"params", params}}) +
      "\n");
}

Result<bool> DaemonClient::ReadAvailable() {
  std::array<char, 64 * 1024> chunk{};
  ssize_t n;
  do {
    n = ::recv(fd_.Get(), chunk.data(), chunk.size(), 0);
  } while (n < 0 && errno == EINTR);
  if (n < 0) {
    return std::unexpected(Error::FromErrno(ErrorKind::kInternal, "recv from the ptybox daemon"));
  }
  if (n == 0) return false;
  buffer_.append(chunk.data(), static_cast<size_t>(n));
  size_t newline;
  while ((newline = buffer_.find('\n')) != std::string::npos) {
    Json message = Json::parse(buffer_.substr(0, newline), nullptr, false);
    buffer_.erase(0, newline + 1);
    if (!message.is_discarded() && message.is_object()) messages_.push_back(std::move(message));
  }
  if (buffer_.size() > LineConnection::kMaxLineBytes) {
    return Fail(ErrorKind::kInternal, "the ptybox daemon sent a line longer than 16 MiB");
  }
  return true;
}

std::optional<Json> DaemonClient::TakeMessage() {
  if (messages_.empty()) return std::nullopt;
  Json message = std::move(messages_.front());
  messages_.pop_front();
  return message;
}

Result<Json> DaemonClient::Call(const std::string& method, const Json& params) {
  const int64_t id = next_id_;
  if (Result<void> sent = Send(method, params); !sent) return Propagate(sent);
  for (;;) {
    for (auto it = messages_.begin(); it != messages_.end(); ++it) {
      if (!it->contains("id") || (*it)["id"] != id) continue;
      Json reply = std::move(*it);
      messages_.erase(it);
      if (reply.contains("error")) return std::unexpected(ErrorFromRpc(reply["error"]));
      if (!reply.contains("result")) {
        return Fail(ErrorKind::kInternal, "the daemon's answer to " + method + " has no result");
      }
      return reply["result"];
    }
    Result<bool> more = ReadAvailable();
    if (!more) return Propagate(more);
    if (!*more) {
      return Fail(ErrorKind::kInternal,
                  "the ptybox daemon closed the connection while answering " + method);
    }
  }
}

Result<std::optional<std::string>> ChooseOwnerToken(const std::string& token_file,
                                                    const std::string& workspace) {
  if (!token_file.empty()) {
    Result<std::string> token = ReadOwnerTokenFile(token_file);
    if (!token) return Propagate(token);
    return std::optional<std::string>(*token);
  }
  std::error_code ec;
  const std::filesystem::path dir =
      workspace.empty() ? std::filesystem::current_path(ec) : std::filesystem::path(workspace);
  Result<std::string> token = ReadOwnerTokenFile(McpTokenFile(dir));
  if (token) return std::optional<std::string>(*token);
  // No file for the current directory: this connection's own sessions (none, usually). For a
  // workspace asked for by name, the missing file is the answer.
  if (workspace.empty() && token.error().kind == ErrorKind::kNotFound) {
    return std::optional<std::string>();
  }
  Error error = token.error();
  if (error.kind == ErrorKind::kNotFound) {
    error.message = "no owner token is kept for the workspace " + workspace +
                    " (`ptybox mcp --connect` run there keeps one once it connected to the "
                    "daemon); give --token-file FILE, or the workspace the agent runs in";
  }
  return std::unexpected(error);
}

Result<std::filesystem::path> ChooseSocket(const std::string& socket) {
  if (!socket.empty()) return std::filesystem::absolute(socket);
  return DefaultSocketPath();
}

}  // namespace ptybox::runtime
