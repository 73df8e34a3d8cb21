#include "runtime/rpc_server.h"

#include <fcntl.h>
#include <malloc.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>

#include "backend/contract_types.h"
#include "common/base64.h"
#include "common/count_text.h"
#include "common/log.h"
#include "common/propagate.h"
#include "common/random.h"
#include "runtime/audit/owned_directory.h"
#include "runtime/methods.h"
#include "runtime/owner.h"
#include "runtime/peer_check.h"

namespace ptybox::runtime {
RpcConnection::RpcConnection(PtyService& service, std::shared_ptr<LineConnection> connection,
                             std::string label, bool may_detach, std::string attach_only)
    : service_(service),
      peer_(std::make_shared<RpcPeer>(std::move(connection), kJsonRpcDialect)),
      attach_only_(std::move(attach_only)) {
  owner_ = service_.OpenOwner(std::move(label));
  owner_->may_detach = may_detach;
}

void RpcConnection::Start(std::function<void()> on_done) {
  on_done_ = std::move(on_done);
  peer_->Start(weak_from_this());
}

void RpcConnection::OnDisconnected() {
  if (disconnected_) return;
  disconnected_ = true;
  std::shared_ptr<RpcConnection> self = shared_from_this();
  // A person's `ptybox attach` left: its watches end (the sessions it watched go on).
  // Ignored: a watch the service already ended (its session closed) has nothing left to end.
  for (uint64_t watch : std::set<uint64_t>(*watches_)) (void)service_.Unwatch(*owner_, watch);
  watches_->clear();
  // An owner with a detach grace outlives the connection (contract v1.1): nothing to await.
  // Not the fresh owner of a connection admitted only to attach: it would hold a place over
  // the limit.
  if ((attach_only_.empty() || attached_) && service_.DetachOwner(owner_)) {
    owner_.reset();
    std::function<void()> done = std::move(on_done_);
    on_done_ = nullptr;
    if (done) done();
    return;
  }
  // Every session of this owner ends with the connection, awaited.
  service_.CloseOwner(owner_, [self] {
    std::function<void()> done = std::move(self->on_done_);
    self->on_done_ = nullptr;
    if (done) done();
  });
}

void RpcConnection::OnNotification(const RpcMessage&) {
  // Notifications other than $/cancelRequest are ignored, as JSON-RPC requires.
}

void RpcConnection::OnResponse(const RpcMessage& response, const std::string&) {
  // This server sends no requests, so no response can be expected.
  peer_->Reject(response.id, -32600, "invalid request: \"method\" must be a string");
}

void RpcConnection::OnCancel(const std::string& key, const std::string& reason) {
  service_.CancelRequest(*owner_, key, reason);
}

void RpcConnection::OnRequest(const RpcMessage& request) {
  const Json& id = request.id;
  if (!IsContractMethod(request.method)) {
    return peer_->ReplyError(id, -32601, "method not found: " + Abbreviate(request.method));
  }
  if (request.method == "owner_attach") return Attach(id, request.params);
  if (!attach_only_.empty() && !attached_) {
    return peer_->ReplyError(id, Error{ErrorKind::kBusy, attach_only_, "maxConnections"});
  }
  if (request.method == "terminal_watch") return Watch(id, request.params);
  if (request.method == "terminal_unwatch") return Unwatch(id, request.params);
  CallMethod(service_, owner_, request.method, request.params, RequestKey(id),
             // By reference: no copy of a large result (and g++ 12 misreads a by-value one).
             [peer = peer_, id](Result<Json>&& result) {
               if (!result) return peer->ReplyError(id, result.error());
               peer->Reply(id, std::move(*result));
             });
}

void RpcConnection::Attach(const Json& id, const Json& params) {
  // The params are checked by the method's entry of the contract table, as every method's are.
  // In the table: CheckContract refuses to start without it (kMethodsNamedByServers).
  const MethodSpec* method = FindMethod("owner_attach");
  if (method == nullptr) return peer_->ReplyError(id, -32601, "method not found: owner_attach");
  Result<Args> args = ValidateParams(*method, params);
  if (!args) return peer_->ReplyError(id, args.error());
  const std::string token = args->String("ownerToken");
  // Only the first call of a connection may attach: the fresh owner it replaces must hold
  // nothing (contract v1.1).
  if (attached_ || !owner_->pristine()) {
    return peer_->ReplyError(
        id, -32600,
        "invalid request: owner_attach must come before this connection opens a session or "
        "attaches; use a new connection to attach");
  }
  Result<AttachResult> attached = service_.AttachOwner(token);
  if (!attached) return peer_->ReplyError(id, attached.error());
  attached_ = true;
  const bool may_detach = owner_->may_detach;
  owner_ = attached->owner;
  owner_->may_detach = may_detach;
  peer_->Reply(id, AttachResultJson(*attached));
}

void RpcConnection::Watch(const Json& id, const Json& params) {
  // In the table: CheckContract refuses to start without it (kMethodsNamedByServers).
  const MethodSpec* method = FindMethod("terminal_watch");
  if (method == nullptr) return peer_->ReplyError(id, -32601, "method not found: terminal_watch");
  Result<Args> args = ValidateParams(*method, params);
  if (!args) return peer_->ReplyError(id, args.error());
  std::weak_ptr<RpcPeer> weak_peer = peer_;
  std::weak_ptr<std::set<uint64_t>> weak_watches = watches_;
  auto make_sink = [weak_peer, weak_watches](uint64_t watch_id) {
    WatchHub::Watcher sink;
    sink.on_output = [weak_peer, watch_id](std::string_view bytes) {
      std::shared_ptr<RpcPeer> peer = weak_peer.lock();
      if (!peer) return true;  // the connection is ending; its disconnect unwatches
      // The bound of this watcher's queue: what waits unsent on its connection. A person's
      // terminal that stopped reading is dropped here, never waited for.
      std::string data = Base64Encode(bytes);
      if (!WatchMayQueue(peer->connection().unsent_bytes(), data.size())) return false;
      peer->Notify("terminal_watch_output", Json{{"watchId", watch_id}, {"data", std::move(data)}});
      return true;
    };
    sink.on_resize = [weak_peer, watch_id](const backend::ScreenSnapshot& screen) {
      std::shared_ptr<RpcPeer> peer = weak_peer.lock();
      if (!peer) return true;
      Json notice{{"watchId", watch_id},
                  {"cols", screen.columns},
                  {"rows", screen.rows},
                  {"lines", screen.lines},
                  {"cursor", Json{{"row", screen.cursor_row}, {"column", screen.cursor_column}}},
                  {"alternateScreen", screen.alternate_screen}};
      // Bounded like output: a screen is at most 500 rows of 1000 cells.
      if (!WatchMayQueue(peer->connection().unsent_bytes(), notice.dump().size())) return false;
      peer->Notify("terminal_watch_resized", std::move(notice));
      return true;
    };
    sink.on_end = [weak_peer, weak_watches, watch_id](WatchEnd end) {
      if (std::shared_ptr<std::set<uint64_t>> watches = weak_watches.lock()) {
        watches->erase(watch_id);
      }
      std::shared_ptr<RpcPeer> peer = weak_peer.lock();
      if (!peer) return;
      std::string message;
      switch (end) {
        case WatchEnd::kClosed:
          message = "the session was closed";
          break;
        case WatchEnd::kSlow:
          message = "this watcher fell more than " + std::to_string(kMaxWatchQueueBytes) +
                    " bytes behind the session's output and was dropped; watch again to resume";
          break;
        case WatchEnd::kOwnerGone:
          message = "the daemon is stopping";
          break;
        case WatchEnd::kUnwatched:
          message = "unwatched";
          break;
      }
      peer->Notify("terminal_watch_ended", Json{{"watchId", watch_id},
                                                {"reason", std::string(WatchEndName(end))},
                                                {"message", message}});
    };
    return sink;
  };
  Result<WatchStart> started = service_.Watch(*owner_, args->String("sessionId"),
                                              args->OptionalString("ownerToken"), make_sink);
  if (!started) return peer_->ReplyError(id, started.error());
  watches_->insert(started->watch_id);
  // Answered in the same reactor turn as the snapshot: every later byte follows the answer.
  peer_->Reply(id, WatchStartJson(*started));
}

void RpcConnection::Unwatch(const Json& id, const Json& params) {
  const MethodSpec* method = FindMethod("terminal_unwatch");
  if (method == nullptr) return peer_->ReplyError(id, -32601, "method not found: terminal_unwatch");
  Result<Args> args = ValidateParams(*method, params);
  if (!args) return peer_->ReplyError(id, args.error());
  const auto watch_id = static_cast<uint64_t>(*args->Int("watchId"));
  if (Result<void> unwatched = service_.Unwatch(*owner_, watch_id); !unwatched) {
    return peer_->ReplyError(id, unwatched.error());
  }
  watches_->erase(watch_id);
  peer_->Reply(id, Json{{"unwatched", true}});
}

SocketServer::SocketServer(asio::io_context& io, PtyService& service, size_t max_connections)
    : io_(io), service_(service), max_connections_(std::max<size_t>(max_connections, 1)) {}

namespace {

// Is a daemon accepting on `path`? Connecting is the only way to know: a socket file outlives
// its daemon, and a live daemon's file must never be replaced (its clients would be cut off).
Result<void> CheckSocketPathFree(const std::filesystem::path& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return {};
    return std::unexpected(Error::FromErrno(ErrorKind::kInternal, "lstat", path.string()));
  }
  if (!S_ISSOCK(st.st_mode)) {
    return Fail(ErrorKind::kInternal,
                path.string() +
                    " exists and is not a socket; remove it or choose another "
                    "--socket path",
                path.string());
  }
  // Another user's socket (planted in a sticky directory, or that user's daemon): never this
  // daemon's to replace or to wait for, and its clients would hand it their tokens.
  if (st.st_uid != ::geteuid()) {
    return Fail(ErrorKind::kInternal,
                path.string() + " is a socket of uid " + std::to_string(st.st_uid) +
                    ", not of this user (uid " + std::to_string(::geteuid()) +
                    "): another user put it there; have it removed, or choose another --socket "
                    "path (the default, in this user's run-time directory, is out of others' "
                    "reach)",
                path.string());
  }
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (path.string().size() >= sizeof(address.sun_path)) {
    return Fail(ErrorKind::kInternal,
                "the socket path is longer than " + std::to_string(sizeof(address.sun_path) - 1) +
                    " bytes; choose a shorter --socket path",
                path.string());
  }
  std::memcpy(address.sun_path, path.c_str(), path.string().size());
  // Non-blocking: a live daemon whose backlog is full answers EAGAIN instead of blocking us.
  int probe = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (probe < 0) return std::unexpected(Error::FromErrno(ErrorKind::kInternal, "socket"));
  int rc = ::connect(probe, reinterpret_cast<const sockaddr*>(&address), sizeof(address));
  int err = errno;
  ::close(probe);
  if (rc == 0 || err == EAGAIN) {
    return Fail(ErrorKind::kInternal,
                "another ptybox daemon is listening on " + path.string() +
                    "; stop it first (SIGTERM) or choose another --socket path",
                path.string());
  }
  if (err != ECONNREFUSED) {
    return std::unexpected(Error::FromErrno(ErrorKind::kInternal, "connect", path.string(), err));
  }
  // Nobody accepts on it: the file of a daemon that is gone, safe to replace.
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
    return std::unexpected(Error::FromErrno(ErrorKind::kInternal, "unlink", path.string()));
  }
  return {};
}

// The socket's directory: created (0700, with its parents) when missing, so that a container's
// empty volume or a fresh runtime directory needs no step before the daemon; an existing one
// this uid cannot write is named with its owner and the fix, before bind's bare EACCES.
Result<void> PrepareSocketDirectory(const std::filesystem::path& path) {
  const std::filesystem::path dir = path.parent_path();
  if (dir.empty()) return {};
  // `--socket "$XDG_RUNTIME_DIR/ptybox.sock"` with the variable unset (root, `su`) names
  // /ptybox.sock: refused before the checks below would advise chowning /.
  if (dir == dir.root_path()) {
    return Fail(ErrorKind::kInternal,
                "the socket path " + path.string() +
                    " lies in / itself (was a variable such as $XDG_RUNTIME_DIR empty when the "
                    "shell expanded it?); give a path in a directory of its own (root: "
                    "/run/ptybox/ptybox.sock), or leave --socket out for this user's default",
                path.string());
  }
  if (Result<void> made =
          CreatePrivateDirectories(dir, "the socket directory", "--socket path", path.string());
      !made) {
    return Propagate(made);
  }
  // Checked below like any existing directory: another user may have made it first.
  // The directory itself, not what a link there points to; and only one that nobody else can
  // rearrange: owned by this uid or root, and writable by group or others only when sticky
  // (/tmp, a 1777 /run/ptybox), so no other user can swap the socket for something else.
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return Fail(ErrorKind::kInternal,
                "the socket directory " + dir.string() +
                    " is not a directory (or is a symbolic "
                    "link); choose another --socket path",
                path.string());
  }
  if (Result<void> owned =
          RequireOwnedDirectory(st, "the socket directory " + dir.string(), path.string());
      !owned) {
    return Propagate(owned);
  }
  if (::access(dir.c_str(), W_OK | X_OK) != 0) {
    return Fail(ErrorKind::kInternal,
                "the socket directory " + dir.string() + " (owner uid " +
                    std::to_string(st.st_uid) + ", mode " + ModeText(st.st_mode) +
                    ") is not writable by uid " + std::to_string(::geteuid()) +
                    "; chown it to this uid, run ptybox as its owner, or choose another "
                    "--socket path (in a container: mount a directory this uid owns, or none)",
                path.string());
  }
  return {};
}

}  // namespace

Result<void> SocketServer::Listen(const std::filesystem::path& path) {
  if (Result<void> dir = PrepareSocketDirectory(path); !dir) return dir;
  if (Result<void> free = CheckSocketPathFree(path); !free) return free;
  path_ = path;
  std::error_code ec;
  // Created with 0600 from the start: no window in which another user can connect.
  mode_t old_mask = ::umask(0177);
  // The name appears only once the socket listens: bound under a private name in the same
  // directory, then renamed into place, so a client that waits for the file (a service manager,
  // a CI script, a test) never meets a socket that refuses it. A private name longer than a
  // socket path may be is not used (the socket then appears at bind, as before).
  const std::filesystem::path staged = path.parent_path() / (".ptybox-" + RandomHex(6) + ".sock");
  const bool stage = staged.string().size() < sizeof(sockaddr_un{}.sun_path);
  acceptor_.emplace(io_);
  acceptor_->open(asio::local::stream_protocol(), ec);
  if (!ec) {
    acceptor_->bind(asio::local::stream_protocol::endpoint((stage ? staged : path).string()), ec);
  }
  ::umask(old_mask);
  if (!ec) acceptor_->listen(asio::socket_base::max_listen_connections, ec);
  // Never over another daemon's socket made meanwhile (two started at once on one path).
  if (!ec && stage &&
      ::renameat2(AT_FDCWD, staged.c_str(), AT_FDCWD, path.c_str(), RENAME_NOREPLACE) != 0) {
    ec = std::error_code(errno, std::generic_category());
  }
  struct stat bound {};
  if (!ec && ::lstat(path.c_str(), &bound) == 0) socket_id_ = {bound.st_dev, bound.st_ino};
  if (ec && stage) ::unlink(staged.c_str());
  if (ec) {
    acceptor_.reset();
    path_.clear();
    return Fail(ErrorKind::kInternal,
                "cannot listen on " + path.string() + ": " + ec.message() +
                    " (is the directory writable? is another ptybox using it?)",
                path.string());
  }
  // No chmod by path afterwards: the umask made it 0600 at bind, and a chmod by name would
  // follow whatever another process put at that name meanwhile.
  Accept();
  return {};
}

void SocketServer::Refuse(int fd, const std::string& message) {
  // Best effort and never blocking: the client learns why, the daemon does not wait for it.
  std::string line = Dump(RpcError(nullptr, Json{{"code", -32000},
                                                 {"message", message},
                                                 {"data", Json{{"kind", "busy"}}}})) +
                     "\n";
  (void)::send(fd, line.data(), line.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
  ::close(fd);
}

void SocketServer::Accept() {
  if (!acceptor_) return;
  acceptor_->async_accept([this](const std::error_code& ec,
                                 asio::local::stream_protocol::socket socket) {
    if (ec == asio::error::operation_aborted || !acceptor_) return;
    if (ec) {
      // Out of descriptors or memory: the connection waits in the backlog; try again shortly
      // rather than spinning (the client sees a slow connect, every other client is served).
      LogWarn("accepting a connection failed: " + ec.message() + "; retrying in 100 ms");
      backoff_.emplace(io_, std::chrono::milliseconds(100));
      backoff_->async_wait([this](const std::error_code& wait_ec) {
        if (!wait_ec) Accept();
      });
      return;
    }
    if (AdmitPeer(socket.native_handle())) {  // runtime/peer_check.h
      int fd = socket.release();
      // Detached owners hold their places (docs/security.md): over the limit with them, a
      // connection may take one of them back, nothing more.
      const size_t detached = service_.detached_owner_count();
      std::string attach_only;
      if (*connections_ < max_connections_ && *connections_ + detached >= max_connections_) {
        attach_only = "this daemon's " + std::to_string(max_connections_) +
                      " places (serve --max-connections) are taken by " +
                      text::CountText(*connections_, "connection", "connections") + " and " +
                      text::CountText(detached, "detached owner", "detached owners") +
                      " awaiting owner_attach (each keeps its place until "
                      "attached or its limits.detachGraceMs ends); this connection may only "
                      "owner_attach. Attach to your owner, or close this connection and retry "
                      "later";
      }
      if (*connections_ >= max_connections_) {
        Refuse(fd, "this daemon already serves " +
                       text::CountText(max_connections_, "connection", "connections") +
                       " (serve --max-connections); close one and retry");
      } else if (Result<std::shared_ptr<LineConnection>> line = LineConnection::Create(io_, fd, fd);
                 !line) {
        LogWarn("refusing a connection: " + line.error().message);
      } else {
        ++*connections_;
        auto rpc = std::make_shared<RpcConnection>(
            service_, *line, "socket client " + std::to_string(next_client_++),
            /*may_detach=*/true, std::move(attach_only));
        live_->emplace(rpc.get(), rpc);
        rpc->Start(
            [live = std::weak_ptr<LiveConnections>(live_), id = rpc.get(), count = connections_] {
              --*count;
              // The caller still holds the connection while this runs.
              if (std::shared_ptr<LiveConnections> connections = live.lock())
                connections->erase(id);
              // What the client's traffic allocated goes back to the system now, not at exit.
              ::malloc_trim(0);
            });
      }
    }
    Accept();
  });
}

void SocketServer::Stop() {
  if (!acceptor_) return;
  std::error_code ec;
  acceptor_->close(ec);
  acceptor_.reset();
  backoff_.reset();
  // Only the socket this server made: another daemon's at the same name stays.
  struct stat now {};
  if (::lstat(path_.c_str(), &now) == 0 && socket_id_ &&
      *socket_id_ == std::pair<dev_t, ino_t>{now.st_dev, now.st_ino}) {
    std::filesystem::remove(path_, ec);
  }
}

}  // namespace ptybox::runtime
