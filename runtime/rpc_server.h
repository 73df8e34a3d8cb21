// The JSON-RPC 2.0 server of docs/protocol.md: one RpcConnection per client (one owner) on an
// RpcPeer (framing, requests in flight concurrently, $/cancelRequest, errors that keep the
// connection usable).
// `ptybox serve --stdio` runs one connection on stdin/stdout; `--socket` accepts many.
#pragma once

#include <sys/types.h>

#include <asio/io_context.hpp>
#include <asio/local/stream_protocol.hpp>
#include <asio/steady_timer.hpp>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>

#include "runtime/params.h"
#include "runtime/rpc/line_connection.h"
#include "runtime/rpc/rpc_peer.h"
#include "runtime/service.h"

namespace ptybox::runtime {

class RpcConnection final : public RpcHandler, public std::enable_shared_from_this<RpcConnection> {
 public:
  // `may_detach`: the owner may outlive this connection (serve --socket; contract v1.1).
  // `attach_only`: admitted over --max-connections because detached owners hold places: until
  // owner_attach succeeds, every other request is `busy` (the message is `attach_only`'s text),
  // and its own fresh owner never detaches.
  RpcConnection(PtyService& service, std::shared_ptr<LineConnection> connection, std::string label,
                bool may_detach = false, std::string attach_only = {});
  // Starts reading; `on_done` runs after the client left and its sessions were closed.
  void Start(std::function<void()> on_done);

  // RpcHandler: what the peer (framing, ids, cancellation) hands over.
  void OnRequest(const RpcMessage& request) override;
  void OnNotification(const RpcMessage& notification) override;
  void OnResponse(const RpcMessage& response, const std::string& line) override;
  void OnCancel(const std::string& key, const std::string& reason) override;
  void OnDisconnected() override;

 private:
  // owner_attach (contract v1.1): this connection becomes the detached owner of the token.
  void Attach(const Json& id, const Json& params);
  // terminal_watch and terminal_unwatch (extensions, docs/protocol.md "Watching a session"):
  // the answer, then terminal_watch_output notifications on this connection until the watch
  // ends (terminal_watch_ended says why).
  void Watch(const Json& id, const Json& params);
  void Unwatch(const Json& id, const Json& params);

  PtyService& service_;
  std::shared_ptr<RpcPeer> peer_;
  std::shared_ptr<Owner> owner_;
  std::function<void()> on_done_;
  bool disconnected_ = false;
  bool attached_ = false;    // owner_attach succeeded on this connection
  std::string attach_only_;  // why only owner_attach is served (empty: everything is)
  // This connection's active watches (their ids), ended when it disconnects.
  std::shared_ptr<std::set<uint64_t>> watches_ = std::make_shared<std::set<uint64_t>>();
};

// Accepts connections on a Unix socket created with mode 0600, at most `max_connections` at
// once: one more is answered with an error line and closed. Detached owners (awaiting
// owner_attach) hold places too: while connections plus detached owners reach the limit, a
// connection is admitted only to attach (RpcConnection's `attach_only`). Never takes the path of a
// live daemon: a socket that accepts a connection is left alone; only a dead one is replaced.
class SocketServer final {
 public:
  static constexpr size_t kDefaultMaxConnections = 256;

  SocketServer(asio::io_context& io, PtyService& service,
               size_t max_connections = kDefaultMaxConnections);
  Result<void> Listen(const std::filesystem::path& path);
  void Stop();
  [[nodiscard]] size_t connection_count() const { return *connections_; }

 private:
  void Accept();
  void Refuse(int fd, const std::string& message);

  asio::io_context& io_;
  PtyService& service_;
  size_t max_connections_;
  std::optional<asio::local::stream_protocol::acceptor> acceptor_;
  std::optional<asio::steady_timer> backoff_;
  std::filesystem::path path_;
  // The device and inode of the socket file made at path_: Stop removes only that one.
  std::optional<std::pair<dev_t, ino_t>> socket_id_;
  std::shared_ptr<size_t> connections_ = std::make_shared<size_t>(0);
  // The connections being served, owned here until each is done. Not by a callback of the
  // connection itself: that was a reference cycle, so a daemon stopped (SIGTERM) with clients
  // still connected never freed them (LeakSanitizer, ProtocolTest.SigtermClosesEverySession...).
  using LiveConnections = std::unordered_map<const RpcConnection*, std::shared_ptr<RpcConnection>>;
  std::shared_ptr<LiveConnections> live_ = std::make_shared<LiveConnections>();
  uint64_t next_client_ = 1;
};

}  // namespace ptybox::runtime
