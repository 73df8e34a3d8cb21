// The JSON-RPC 2.0 server of shared/contract.md: one RpcConnection per client (one owner),
// requests in flight concurrently, $/cancelRequest, errors that keep the connection usable.
// `ptybox serve --stdio` runs one connection on stdin/stdout; `--socket` accepts many.
#pragma once

#include <asio/io_context.hpp>
#include <asio/local/stream_protocol.hpp>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>

#include "runtime/line_connection.h"
#include "runtime/service.h"
#include "runtime/wire.h"

namespace ptybox::runtime {

class RpcConnection final : public std::enable_shared_from_this<RpcConnection> {
 public:
  RpcConnection(PtyService& service, std::shared_ptr<LineConnection> connection,
                std::string label);
  // Starts reading; `on_done` runs after the client left and its sessions were closed.
  void Start(std::function<void()> on_done);

  // Handles one line (exposed for tests).
  void HandleLine(const std::string& line);
  // Called by the connection (AttachServer): a line over the bound, and end of input.
  void OnOversizedLine();
  void OnDisconnected();

 private:
  void HandleRequest(const Json& id, const std::string& method, const Json& params);
  void HandleNotification(const std::string& method, const Json& params);
  void Reply(const Json& id, Json result);
  void ReplyError(const Json& id, const Error& error);
  void ReplyProtocolError(const Json& id, int code, const std::string& message);

  PtyService& service_;
  std::shared_ptr<LineConnection> connection_;
  std::shared_ptr<Owner> owner_;
  std::function<void()> on_done_;
  bool disconnected_ = false;
};

// Accepts connections on a Unix socket created with mode 0600.
class SocketServer final {
 public:
  SocketServer(asio::io_context& io, PtyService& service);
  Result<void> Listen(const std::filesystem::path& path);
  void Stop();

 private:
  void Accept();

  asio::io_context& io_;
  PtyService& service_;
  std::optional<asio::local::stream_protocol::acceptor> acceptor_;
  std::filesystem::path path_;
  uint64_t next_client_ = 1;
};

}  // namespace ptybox::runtime
