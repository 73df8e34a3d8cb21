// The session proxy's connections: request, decision, resolution, SNI check, relay. Every step
// is an asynchronous operation on the reactor with a deadline; nothing here blocks.
#include "backend/proxy/network_proxy.h"

#include <netdb.h>
#include <sys/socket.h>

#include <asio/connect.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/steady_timer.hpp>
#include <asio/write.hpp>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <deque>
#include <limits>

#include "backend/off_reactor.h"
#include "backend/proxy/host_addresses.h"
#include "backend/proxy/proxy_parse.h"
#include "backend/proxy/refusal_limiter.h"
#include "common/log.h"
#include "common/untrusted_text.h"

namespace ptybox::backend::proxy {

using asio::ip::tcp;

struct NetworkProxy::Shared {
  Shared(asio::io_context& io, policy::NetworkNames names_in, ProxyEvents events_in,
         ProxyLimits limits_in, ProxyResolver resolver_in)
      : names(std::move(names_in)),
        events(std::move(events_in)),
        limits(limits_in),
        resolver(std::move(resolver_in)),
        off_reactor(io) {}
  policy::NetworkNames names;
  ProxyEvents events;
  ProxyLimits limits;
  ProxyResolver resolver;
  ProxyTotals totals;
  size_t lookups_live = 0;     // for open connections (ProxyLimits::max_lookups)
  size_t lookups_running = 0;  // default resolver threads, abandoned ones included
  RefusalLimiter refusals;     // what reaches events.refused (the audit log)
  OffReactor off_reactor;      // last: destroyed first, so no result arrives after the rest
};

namespace {

// Every proxy of the process counts against one budget: the descriptors are the process's.
std::atomic<size_t> g_connection_budget{std::numeric_limits<size_t>::max()};
std::atomic<size_t> g_connections_open{0};

std::atomic<size_t> g_lookup_threads{0};

// getaddrinfo on a thread of its own: it blocks for as long as the name servers take, and a
// shared resolver thread would make every session wait behind the slowest name.
Result<std::vector<tcp::endpoint>> LookUp(const std::string& host, uint16_t port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV | AI_ADDRCONFIG;
  addrinfo* list = nullptr;
  const std::string service = std::to_string(port);
  const int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &list);
  if (rc != 0)
    return Fail(ErrorKind::kNotFound, "cannot resolve " + host + ": " + gai_strerror(rc));
  std::vector<tcp::endpoint> endpoints;
  for (const addrinfo* entry = list; entry != nullptr; entry = entry->ai_next) {
    if (entry->ai_family == AF_INET) {
      const auto* v4 = reinterpret_cast<const sockaddr_in*>(entry->ai_addr);
      asio::ip::address_v4::bytes_type bytes;
      std::memcpy(bytes.data(), &v4->sin_addr, 4);
      endpoints.emplace_back(asio::ip::address_v4(bytes), port);
    } else if (entry->ai_family == AF_INET6) {
      const auto* v6 = reinterpret_cast<const sockaddr_in6*>(entry->ai_addr);
      asio::ip::address_v6::bytes_type bytes;
      std::memcpy(bytes.data(), &v6->sin6_addr, 16);
      endpoints.emplace_back(asio::ip::address_v6(bytes, v6->sin6_scope_id), port);
    }
  }
  ::freeaddrinfo(list);
  return endpoints;
}

// The line that stands for the refusals the limiter kept out of the audit log.
ProxyRefusal UnloggedSummary(uint64_t count) {
  return ProxyRefusal{"", 0,
                      "ptybox: " + std::to_string(count) +
                          " more refusals of this session were not logged (at most " +
                          std::to_string(kRefusalsLoggedPerSecond) +
                          " a second are; network_closed counts them all)"};
}

policy::IpAddress ToIp(const asio::ip::address& address) {
  policy::IpAddress out;
  if (address.is_v4()) {
    auto bytes = address.to_v4().to_bytes();
    out.bytes[10] = 0xFF;
    out.bytes[11] = 0xFF;
    std::copy(bytes.begin(), bytes.end(), out.bytes.begin() + 12);
  } else {
    auto bytes = address.to_v6().to_bytes();
    std::copy(bytes.begin(), bytes.end(), out.bytes.begin());
  }
  return out;
}

}  // namespace

class NetworkProxy::Connection final : public std::enable_shared_from_this<Connection> {
 public:
  Connection(asio::io_context& io, tcp::socket client, std::shared_ptr<Shared> shared,
             std::function<void()> finished)
      : io_(io),
        client_(std::move(client)),
        server_(io),
        timer_(io),
        shared_(std::move(shared)),
        finished_(std::move(finished)) {}

  void Start() {
    Arm(shared_->limits.request);
    ReadRequest();
  }

  void Close() {
    if (closed_) return;
    closed_ = true;
    EndLookup();
    std::error_code ignored;
    timer_.cancel();
    client_.close(ignored);
    server_.close(ignored);
    // A queued write's continuation holds this connection: dropped here, or a connection
    // closed with writes still queued (a client that stopped reading) would keep itself, its
    // buffers and its session's proxy alive forever. The bytes stay until the connection goes
    // (an aborted write in flight may still name them).
    for (auto& queued : client_queue_) queued.second = nullptr;
    auto finished = std::move(finished_);
    if (finished) finished();
  }

 private:
  enum class Protocol { kUnknown, kHttp, kSocks };
  enum class Stage { kRequest, kSocksRequest, kResolving, kHello, kConnecting, kRelay, kClosing };

  void Arm(std::chrono::milliseconds after) {
    timer_.expires_after(after);
    timer_.async_wait([self = shared_from_this()](const std::error_code& ec) {
      if (!ec) self->Close();
    });
  }

  // Reads more of the request (or the ClientHello) into in_, never beyond its bound.
  void ReadRequest() {
    const size_t bound =
        stage_ == Stage::kHello ? in_offset_ + kMaxClientHelloBytes + 16384 : kMaxRequestHeadBytes;
    if (in_.size() >= bound) return Answer(431, "ptybox proxy: the request is too large");
    chunk_.resize(std::min<size_t>(4096, bound - in_.size()));
    client_.async_read_some(asio::buffer(chunk_),
                            [self = shared_from_this()](const std::error_code& ec, size_t n) {
                              if (self->closed_) return;
                              if (ec) {
                                self->Close();
                                return;
                              }
                              self->in_.append(self->chunk_.data(), n);
                              self->OnRequestBytes();
                            });
  }

  void OnRequestBytes() {
    if (protocol_ == Protocol::kUnknown) {
      protocol_ = static_cast<uint8_t>(in_[0]) == 5 ? Protocol::kSocks : Protocol::kHttp;
    }
    if (stage_ == Stage::kHello) {
      OnHelloBytes();
      return;
    }
    if (protocol_ == Protocol::kHttp) {
      HttpParse parsed = ParseHttpRequest(in_);
      if (parsed.status == ParseStatus::kNeedMore) return ReadRequest();
      if (parsed.status == ParseStatus::kBad) {
        return Answer(parsed.http_status, "ptybox proxy: " + parsed.error);
      }
      request_ = std::move(parsed.request);
      in_offset_ = request_.head_bytes;
      return Decide(request_.host, request_.port);
    }
    if (stage_ == Stage::kRequest) {
      SocksGreeting greeting = ParseSocksGreeting(in_);
      if (greeting.status == ParseStatus::kNeedMore) return ReadRequest();
      if (greeting.status == ParseStatus::kBad || !greeting.no_auth_offered) {
        return WriteThenClose(std::string("\x05\xFF", 2));
      }
      in_.erase(0, greeting.consumed);
      stage_ = Stage::kSocksRequest;
      Write(std::string("\x05\x00", 2), nullptr);
      if (in_.empty()) return ReadRequest();
    }
    SocksRequest parsed = ParseSocksRequest(in_);
    if (parsed.status == ParseStatus::kNeedMore) return ReadRequest();
    if (parsed.status == ParseStatus::kBad) return WriteThenClose(SocksReply(parsed.reply));
    in_offset_ = parsed.consumed;
    request_.host = parsed.host;
    request_.port = parsed.port;
    request_.connect = true;
    Decide(parsed.host, parsed.port);
  }

  void Decide(const std::string& raw_host, uint16_t port) {
    stage_ = Stage::kResolving;
    raw_host_ = Printable(raw_host, 256);
    port_ = port;
    std::optional<std::string> host = policy::NormalizeHost(raw_host);
    if (!host) {
      return Refuse("ptybox: `" + raw_host_ + "` is not a host name the network policy can judge",
                    403);
    }
    host_ = *host;
    policy::NameVerdict verdict = policy::DecideName(shared_->names, host_, port_);
    if (!verdict.allowed) return Refuse(verdict.reason, 403);
    if (shared_->lookups_live >= shared_->limits.max_lookups) {
      return Answer(503, "ptybox proxy: this session already has " +
                             std::to_string(shared_->lookups_live) +
                             " name lookups in flight (the most it may); try again when one ends");
    }
    if (!shared_->resolver && shared_->lookups_running >= shared_->limits.max_lookup_threads) {
      return Answer(503, "ptybox proxy: this session's earlier name lookups (" +
                             std::to_string(shared_->lookups_running) +
                             ") are still running; try again when they end");
    }
    ++shared_->lookups_live;
    lookup_pending_ = true;
    std::weak_ptr<Connection> weak = weak_from_this();
    auto done = [weak](Result<std::vector<tcp::endpoint>> resolved) {
      auto self = weak.lock();
      if (!self || self->closed_) return;
      self->EndLookup();
      self->OnResolved(std::move(resolved));
    };
    if (shared_->resolver) {
      shared_->resolver(host_, port_, std::move(done));
      if (lookup_pending_) WatchForHangUp();
      return;
    }
    if (g_lookup_threads >= kMaxLookupThreads) {
      EndLookup();
      return Answer(503, "ptybox proxy: the daemon has " + std::to_string(kMaxLookupThreads) +
                             " name lookups in flight (the most it runs); try again shortly");
    }
    ++g_lookup_threads;
    ++shared_->lookups_running;
    // `deliver` may be destroyed on the worker thread: it holds only a weak pointer and the
    // Shared it reports to (reached through the connection only while it lives).
    std::weak_ptr<Shared> weak_shared = shared_;
    Result<void> started = shared_->off_reactor.Run<Result<std::vector<tcp::endpoint>>>(
        "looks up " + host_,
        [host = host_, port = port_] {
          Result<std::vector<tcp::endpoint>> out = LookUp(host, port);
          --g_lookup_threads;
          return out;
        },
        [weak_shared, done](Result<std::vector<tcp::endpoint>> resolved) {
          if (auto shared = weak_shared.lock()) --shared->lookups_running;
          done(std::move(resolved));
        });
    if (!started) {
      --g_lookup_threads;
      --shared_->lookups_running;
      EndLookup();
      return Answer(503, "ptybox proxy: " + started.error().message);
    }
    WatchForHangUp();
  }

  // Nothing reads the client while its name is looked up, so a client that gives up would
  // hold its lookup slot until the request deadline: notice the end of its stream instead.
  // Bytes that arrive early stay queued for after the lookup (the deadline still applies).
  void WatchForHangUp() {
    client_.async_wait(tcp::socket::wait_read, [self =
                                                    shared_from_this()](const std::error_code& ec) {
      if (self->closed_ || !self->lookup_pending_) return;
      if (ec) return self->Close();
      char byte = 0;
      const ssize_t n = ::recv(self->client_.native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
        self->Close();
      }
    });
  }

  // The session's lookup slot is this connection's until its answer arrives or it closes.
  void EndLookup() {
    if (!lookup_pending_) return;
    lookup_pending_ = false;
    --shared_->lookups_live;
  }

  void OnResolved(Result<std::vector<tcp::endpoint>> resolved) {
    if (!resolved || resolved->empty()) {
      if (protocol_ == Protocol::kSocks) return WriteThenClose(SocksReply(kSocksHostUnreachable));
      return Answer(502, "ptybox proxy: " + host_ + " does not resolve" +
                             (resolved ? std::string() : ": " + resolved.error().message));
    }
    // Every address must pass: a name that also resolves into the host's own networks, to the
    // host itself or to a denied literal is refused as a whole (a rebinding answer would
    // otherwise win on a retry). The interfaces are read now: they change while sessions live.
    const std::vector<policy::IpAddress> own = HostInterfaceAddresses();
    for (const tcp::endpoint& endpoint : *resolved) {
      policy::NameVerdict verdict =
          policy::DecideAddress(shared_->names, host_, port_, ToIp(endpoint.address()), own);
      if (!verdict.allowed) return Refuse(verdict.reason, 403);
    }
    endpoints_ = std::move(*resolved);
    if (request_.connect && port_ == 443) {
      // Answer first and read the ClientHello before anything leaves: a name the SNI does not
      // match is refused without a connection to the server.
      stage_ = Stage::kHello;
      replied_ = true;
      Write(Accepted(), nullptr);
      in_.erase(0, in_offset_);
      in_offset_ = 0;
      if (in_.empty()) return ReadRequest();
      return OnHelloBytes();
    }
    ConnectServer();
  }

  void OnHelloBytes() {
    SniParse sni = ParseClientHelloSni(in_);
    if (sni.status == ParseStatus::kNeedMore) return ReadRequest();
    if (sni.status == ParseStatus::kBad) {
      // On 443 only a ClientHello whose name can be checked goes through: an SSLv2-format
      // hello (no extensions, so no name) or an alert sent first would otherwise reach a
      // server that might answer a site the policy never judged.
      if (static_cast<uint8_t>(in_[0]) == 0x16) {
        return Refuse("ptybox: a malformed TLS ClientHello to " + host_ + ": " + sni.error, 0);
      }
      return Refuse("ptybox: the connection to " + host_ +
                        ":443 does not begin with a TLS ClientHello, so the site it reaches "
                        "cannot be checked; refused by the network policy (" +
                        shared_->names.source + ")",
                    0);
    }
    if (!sni.server_name && ServerNameExpected(host_)) {
      // Without a server name the proxy cannot tell which site of that address is reached.
      return Refuse("ptybox: the TLS ClientHello to " + host_ +
                        " carries no server name (SNI), so the site it reaches cannot be "
                        "checked; refused by the network policy (" +
                        shared_->names.source + ")",
                    0);
    }
    if (sni.server_name) {
      std::optional<std::string> name = policy::NormalizeHost(*sni.server_name);
      if (!name || *name != host_) {
        return Refuse("ptybox: the TLS server name `" + Printable(*sni.server_name, 256) +
                          "` differs from the CONNECT name " + host_ +
                          "; refused by the network policy (" + shared_->names.source + ")",
                      0);
      }
    }
    ConnectServer();
  }

  void ConnectServer() {
    stage_ = Stage::kConnecting;
    asio::async_connect(
        server_, endpoints_,
        [self = shared_from_this()](const std::error_code& ec, const tcp::endpoint&) {
          if (self->closed_) return;
          if (ec) {
            if (self->replied_) return self->Close();
            if (self->protocol_ == Protocol::kSocks) {
              return self->WriteThenClose(SocksReply(kSocksHostUnreachable));
            }
            return self->Answer(
                502, "ptybox proxy: cannot connect to " + self->host_ + ": " + ec.message());
          }
          self->OnConnected();
        });
  }

  std::string Accepted() const {
    if (protocol_ == Protocol::kSocks) return SocksReply(kSocksSucceeded);
    return "HTTP/1.1 200 Connection established\r\n\r\n";
  }

  void OnConnected() {
    stage_ = Stage::kRelay;
    ++shared_->totals.connections;
    Arm(shared_->limits.idle);
    std::string first =
        request_.connect ? in_.substr(in_offset_) : request_.forward_head + in_.substr(in_offset_);
    in_.clear();
    in_.shrink_to_fit();
    auto self = shared_from_this();
    auto start = [self] {
      self->RelayUp();
      self->RelayDown();
    };
    if (request_.connect && !replied_) {
      replied_ = true;
      Write(Accepted(), nullptr);
    }
    if (first.empty()) return start();
    shared_->totals.bytes_sent += first.size();
    auto data = std::make_shared<std::string>(std::move(first));
    asio::async_write(server_, asio::buffer(*data),
                      [self, data, start](const std::error_code& ec, size_t) {
                        if (self->closed_) return;
                        if (ec) return self->Close();
                        start();
                      });
  }

  // End of one direction: pass the end on; the connection closes when both ended.
  void DirectionDone(tcp::socket& to) {
    std::error_code ignored;
    to.shutdown(tcp::socket::shutdown_send, ignored);
    if (++directions_done_ == 2) Close();
  }

  // Client -> server: at most one buffer in flight, so a server that does not read holds the
  // client back instead of growing memory.
  void RelayUp() {
    up_.resize(shared_->limits.buffer_bytes);
    client_.async_read_some(asio::buffer(up_),
                            [self = shared_from_this()](const std::error_code& ec, size_t n) {
                              if (self->closed_) return;
                              if (ec) return self->DirectionDone(self->server_);
                              self->shared_->totals.bytes_sent += n;
                              self->Arm(self->shared_->limits.idle);
                              asio::async_write(self->server_, asio::buffer(self->up_.data(), n),
                                                [self](const std::error_code& wec, size_t) {
                                                  if (self->closed_) return;
                                                  if (wec) return self->Close();
                                                  self->RelayUp();
                                                });
                            });
  }

  // Server -> client, through the client's write queue; likewise one buffer in flight.
  void RelayDown() {
    down_.resize(shared_->limits.buffer_bytes);
    server_.async_read_some(
        asio::buffer(down_), [self = shared_from_this()](const std::error_code& ec, size_t n) {
          if (self->closed_) return;
          if (ec) {
            // After what is queued for the client has gone out.
            return self->Write(std::string(), [self] { self->DirectionDone(self->client_); });
          }
          self->shared_->totals.bytes_received += n;
          self->Arm(self->shared_->limits.idle);
          self->Write(std::string(self->down_.data(), n), [self] { self->RelayDown(); });
        });
  }

  void Write(std::string bytes, std::function<void()> then) {
    client_queue_.emplace_back(std::move(bytes), std::move(then));
    FlushClient();
  }

  void FlushClient() {
    if (client_writing_ || client_queue_.empty() || closed_) return;
    client_writing_ = true;
    asio::async_write(client_, asio::buffer(client_queue_.front().first),
                      [self = shared_from_this()](const std::error_code& ec, size_t) {
                        if (self->closed_) return;
                        if (ec) return self->Close();
                        auto then = std::move(self->client_queue_.front().second);
                        self->client_queue_.pop_front();
                        self->client_writing_ = false;
                        if (then) then();
                        self->FlushClient();
                      });
  }

  void WriteThenClose(std::string bytes) {
    stage_ = Stage::kClosing;
    Write(std::move(bytes), [self = shared_from_this()] {
      std::error_code ignored;
      self->client_.shutdown(tcp::socket::shutdown_send, ignored);
      self->Close();
    });
  }

  // An HTTP answer with a one-line body (the proxy's own errors and refusals).
  void Answer(int status, const std::string& line) {
    if (protocol_ == Protocol::kSocks || replied_) {
      if (protocol_ == Protocol::kSocks && !replied_) {
        return WriteThenClose(SocksReply(kSocksGeneralFailure));
      }
      return Close();
    }
    const char* text = status == 403   ? "Forbidden"
                       : status == 431 ? "Request Header Fields Too Large"
                       : status == 502 ? "Bad Gateway"
                       : status == 503 ? "Service Unavailable"
                       : status == 505 ? "HTTP Version Not Supported"
                       : status == 414 ? "URI Too Long"
                                       : "Bad Request";
    const std::string body = line + "\n";
    // The line in the status line too: clients that show only the status (apt: "403 Forbidden
    // [IP: ...]") then say why. One line of visible characters, bounded.
    std::string reason = line.substr(0, 512);
    for (char& c : reason) {
      if (static_cast<unsigned char>(c) < 0x20 || c == 0x7F) c = '?';
    }
    WriteThenClose("HTTP/1.1 " + std::to_string(status) + " " + text + " (" + reason + ")" +
                   "\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: " +
                   std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body);
  }

  // A refusal by the policy: audited, then answered (403, SOCKS "not allowed", or a close
  // once the connection was already accepted).
  void Refuse(const std::string& reason, int status) {
    ++shared_->totals.refused;
    const RefusalLimiter::Step step = shared_->refusals.OnRefusal(RefusalLimiter::Clock::now());
    if (shared_->events.refused) {
      if (step.unlogged_before > 0) {
        shared_->events.refused(UnloggedSummary(step.unlogged_before));
      }
      if (step.log) {
        shared_->events.refused(ProxyRefusal{host_.empty() ? raw_host_ : host_, port_, reason});
      }
    }
    if (protocol_ == Protocol::kSocks && !replied_) {
      return WriteThenClose(SocksReply(kSocksNotAllowed));
    }
    if (replied_ || status == 0) return Close();
    Answer(status, reason);
  }

  asio::io_context& io_;
  tcp::socket client_;
  tcp::socket server_;
  asio::steady_timer timer_;
  std::shared_ptr<Shared> shared_;
  std::function<void()> finished_;
  Protocol protocol_ = Protocol::kUnknown;
  Stage stage_ = Stage::kRequest;
  std::string in_;
  size_t in_offset_ = 0;  // where the bytes after the request begin in in_
  std::vector<char> chunk_;
  HttpRequest request_;
  std::string raw_host_;
  std::string host_;
  uint16_t port_ = 0;
  std::vector<tcp::endpoint> endpoints_;
  bool replied_ = false;
  bool closed_ = false;
  bool lookup_pending_ = false;
  int directions_done_ = 0;
  std::vector<char> up_;
  std::vector<char> down_;
  std::deque<std::pair<std::string, std::function<void()>>> client_queue_;
  bool client_writing_ = false;
};

void SetProxyConnectionBudget(size_t connections) { g_connection_budget = connections; }
size_t ProxyConnectionsOpen() { return g_connections_open; }

NetworkProxy::NetworkProxy(asio::io_context& io, policy::NetworkNames names, ProxyEvents events,
                           ProxyLimits limits, ProxyResolver resolver)
    : io_(io),
      acceptor_(io),
      backoff_(io),
      shared_(std::make_shared<Shared>(io, std::move(names), std::move(events), limits,
                                       std::move(resolver))),
      totals_(shared_->totals) {}

NetworkProxy::~NetworkProxy() { Stop(); }

Result<std::shared_ptr<NetworkProxy>> NetworkProxy::Start(asio::io_context& io, UniqueFd listener,
                                                          policy::NetworkNames names,
                                                          ProxyEvents events, ProxyLimits limits,
                                                          ProxyResolver resolver) {
  std::shared_ptr<NetworkProxy> proxy(
      new NetworkProxy(io, std::move(names), std::move(events), limits, std::move(resolver)));
  std::error_code ec;
  proxy->acceptor_.assign(tcp::v4(), listener.Get(), ec);
  if (ec) {
    return Fail(ErrorKind::kSpawnFailed, "the session's proxy port: " + ec.message());
  }
  (void)listener.Release();
  proxy->acceptor_.non_blocking(true, ec);
  proxy->Accept();
  return proxy;
}

void NetworkProxy::Accept() {
  std::weak_ptr<NetworkProxy> weak = weak_from_this();
  acceptor_.async_accept([weak](const std::error_code& ec, tcp::socket client) {
    std::shared_ptr<NetworkProxy> self = weak.lock();
    if (!self || self->stopped_) return;
    if (ec == asio::error::operation_aborted) return;
    if (ec) {
      // No descriptor (or another transient failure): the client stays queued in the backlog;
      // try again after a pause instead of spinning on the reactor.
      ++self->accept_failures_;
      self->backoff_.expires_after(kProxyAcceptBackoff);
      self->backoff_.async_wait([weak](const std::error_code& wec) {
        std::shared_ptr<NetworkProxy> proxy = weak.lock();
        if (wec || !proxy || proxy->stopped_) return;
        proxy->Accept();
      });
      return;
    }
    if (self->connections_.size() >= self->shared_->limits.max_connections ||
        g_connections_open >= g_connection_budget) {
      // At a bound: this client waits for nothing; the others keep their share.
      std::error_code ignored;
      client.close(ignored);
    } else {
      ++g_connections_open;
      const uint64_t id = self->next_id_++;
      auto connection =
          std::make_shared<Connection>(self->io_, std::move(client), self->shared_, [weak, id] {
            if (auto proxy = weak.lock()) proxy->Finished(id);
          });
      self->connections_.emplace(id, connection);
      connection->Start();
    }
    self->Accept();
  });
}

size_t NetworkProxy::lookups_in_flight() const { return shared_->lookups_live; }

void NetworkProxy::Finished(uint64_t id) {
  if (connections_.erase(id) == 1) --g_connections_open;
}

void NetworkProxy::Stop() {
  if (stopped_) return;
  stopped_ = true;
  std::error_code ignored;
  acceptor_.close(ignored);
  backoff_.cancel();
  auto connections = std::move(connections_);
  connections_.clear();
  g_connections_open -= connections.size();
  for (auto& [id, connection] : connections) connection->Close();
  if (const uint64_t unlogged = shared_->refusals.TakeUnlogged();
      unlogged > 0 && shared_->events.refused) {
    shared_->events.refused(UnloggedSummary(unlogged));
  }
  if (shared_->events.stopped) shared_->events.stopped(shared_->totals);
}

}  // namespace ptybox::backend::proxy
