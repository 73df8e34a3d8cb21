// The proxy of one session with network by name, on the daemon's reactor: it accepts on the
// listener ptybox-init bound on the session's own loopback (127.0.0.1:3128), reads an HTTP
// (CONNECT or absolute-form) or SOCKS5 request, decides the name with the policy
// (policy/host_pattern.h) before connecting, resolves it itself off the reactor, refuses local
// and private addresses, checks the SNI of a ClientHello sent through CONNECT to port 443 (a
// ClientHello without one is refused for a dotted name), and relays bytes with bounded buffers.
// Owns its listener and every connection; Stop ends them.
#pragma once

#include <asio/io_context.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/steady_timer.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backend/contract_types.h"
#include "common/error.h"
#include "common/unique_fd.h"
#include "policy/host_pattern.h"

namespace ptybox::backend::proxy {

// A relayed connection holds two descriptors: the client's socket and the server's.
inline constexpr size_t kDescriptorsPerProxyConnection = 2;
// After a failed accept (EMFILE, ENFILE, ENOBUFS...) the proxy waits this long before the next,
// like the daemon's own acceptor: a pending client must not make the reactor spin.
inline constexpr std::chrono::milliseconds kProxyAcceptBackoff{100};

// How many proxy connections all sessions of this process may hold at once; the daemon fits it
// into its descriptor limit (runtime/daemon.cc FitLimitsToDescriptors). A client over it is
// accepted and closed at once, so running out of descriptors is a refused connection. Unbounded
// until set. Call on the reactor thread, before sessions start.
void SetProxyConnectionBudget(size_t connections);
[[nodiscard]] size_t ProxyConnectionsOpen();

struct ProxyLimits {
  size_t max_connections = 64;                    // open at once, per session
  std::chrono::milliseconds idle{5 * 60 * 1000};  // no byte either way: closed
  std::chrono::milliseconds request{30 * 1000};   // to send a complete request head
  size_t buffer_bytes = 16 * 1024;                // per direction and connection
  // Name lookups in flight at once, per session, for connections still open: one more is
  // answered 503 (SOCKS: general failure). A lookup whose connection closed frees its slot.
  size_t max_lookups = 4;
  // Lookup threads of the default resolver still running for this session, abandoned ones
  // included (getaddrinfo cannot be cancelled): one more is refused the same way.
  size_t max_lookup_threads = 16;
};

// Lookup threads of the default resolver at once, across every session of the process.
inline constexpr size_t kMaxLookupThreads = 128;

// Resolves `host` (a name or a literal) to its addresses, never on the reactor thread; calls
// `done` on the reactor. Injected by tests; the default runs each lookup (getaddrinfo) on a
// thread of its own (backend/off_reactor.h), so a slow name delays nobody else's lookups.
using ProxyResolver =
    std::function<void(const std::string& host, uint16_t port,
                       std::function<void(Result<std::vector<asio::ip::tcp::endpoint>>)> done)>;

class NetworkProxy final : public std::enable_shared_from_this<NetworkProxy> {
 public:
  // Starts accepting on `listener` (a listening TCP socket). `resolver` may be empty.
  static Result<std::shared_ptr<NetworkProxy>> Start(asio::io_context& io, UniqueFd listener,
                                                     policy::NetworkNames names, ProxyEvents events,
                                                     ProxyLimits limits = {},
                                                     ProxyResolver resolver = {});
  NetworkProxy(const NetworkProxy&) = delete;
  NetworkProxy& operator=(const NetworkProxy&) = delete;
  ~NetworkProxy();

  // Closes the listener and every connection; reports the totals once.
  void Stop();
  [[nodiscard]] const ProxyTotals& totals() const { return totals_; }
  [[nodiscard]] size_t open_connections() const { return connections_.size(); }
  // Accepts that failed (no descriptor...); each is followed by kProxyAcceptBackoff.
  [[nodiscard]] uint64_t accept_failures() const { return accept_failures_; }
  // Name lookups in flight for connections still open (at most ProxyLimits::max_lookups).
  [[nodiscard]] size_t lookups_in_flight() const;

  // Used by the connections (not part of the interface for callers).
  class Connection;
  struct Shared;

 private:
  NetworkProxy(asio::io_context& io, policy::NetworkNames names, ProxyEvents events,
               ProxyLimits limits, ProxyResolver resolver);
  void Accept();
  void Finished(uint64_t id);

  asio::io_context& io_;
  asio::ip::tcp::acceptor acceptor_;
  asio::steady_timer backoff_;
  std::shared_ptr<Shared> shared_;
  ProxyTotals& totals_;
  std::map<uint64_t, std::shared_ptr<Connection>> connections_;
  uint64_t next_id_ = 1;
  uint64_t accept_failures_ = 0;
  bool stopped_ = false;
};

}  // namespace ptybox::backend::proxy
