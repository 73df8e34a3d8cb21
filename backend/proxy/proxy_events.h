// What a session's proxy reports to whoever audits the session (runtime/audit): each refusal,
// and the totals once it stops. Light on purpose: SpawnSpec carries it without the reactor.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace ptybox::backend::proxy {

// One refused request, for the audit log (`network_denied`) and the client's one line.
struct ProxyRefusal {
  std::string host;  // as requested, normalized when it could be (printable, bounded)
  uint16_t port = 0;
  std::string reason;  // the line the client got
};

// The session's traffic through its proxy, reported once when the proxy stops.
struct ProxyTotals {
  uint64_t connections = 0;     // relayed to a server
  uint64_t refused = 0;         // refused by the policy
  uint64_t bytes_sent = 0;      // client -> servers
  uint64_t bytes_received = 0;  // servers -> client
};

struct ProxyEvents {
  std::function<void(const ProxyRefusal&)> refused;
  std::function<void(const ProxyTotals&)> stopped;
};

}  // namespace ptybox::backend::proxy
