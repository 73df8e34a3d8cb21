// The long-running side of the CLI: one Asio reactor, the child reaper, the service, and the
// protocol server on stdio or a socket; SIGTERM/SIGINT close every session then exit 0, SIGHUP
// reloads policy. Also the PID-1 duties when ptybox is a container's entrypoint (reaping orphans).
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "runtime/mcp_server.h"
#include "runtime/service.h"

namespace ptybox::runtime {

// Defaults of the daemon-wide limits (serve --max-connections, --max-sessions). The daemon
// raises its soft descriptor limit to the hard one and lowers both when even then they could
// exhaust its descriptors (about one per connection, four per session).
inline constexpr size_t kDefaultMaxConnections = 256;

struct DaemonOptions {
  size_t max_connections = kDefaultMaxConnections;
  bool stdio = false;
  std::optional<std::filesystem::path> socket;
  bool mcp = false;
  McpOptions mcp_options;
  ServiceOptions service;
};

// How the daemon shares its descriptor limit (RLIMIT_NOFILE, `available`) out: the connection
// and session limits it serves (lowered from the asked ones when they do not fit), the proxies'
// descriptors, and the sessions' kept /proc descriptors (backend/readiness/foreground_inspector.h).
// The proxies' share never shrinks as `available` grows; the kept descriptors get at most half
// of what is left beside connections and sessions.
struct DescriptorShares {
  size_t connections = 0;
  size_t sessions = 0;
  size_t proxy_descriptors = 0;
  size_t proc_files = 0;
  bool lowered = false;  // the asked limits did not fit: connections and sessions were lowered
};
[[nodiscard]] DescriptorShares ShareDescriptors(size_t available, size_t connections,
                                                size_t sessions);

// Runs until the stdio client leaves (stdio, mcp) or a termination signal (socket). Returns the
// process exit code.
int RunDaemon(DaemonOptions options);

// Why the daemon's socket may not be at `socket`: it lies inside one of `roots` (the workspace
// and the writable roots sessions get), where a session could rename its directory and lock
// every new client out, or replace it. nullopt when it lies outside all of them. Paths are
// compared as given (the caller makes them canonical).
std::optional<std::string> SocketInsideRoot(const std::filesystem::path& socket,
                                            const std::vector<std::filesystem::path>& roots);

// `serve` without --stdio or --socket: `<PerUserRuntimeDirectory()>/ptybox.sock` (sandbox/
// host_walls.h), hidden in every session of any daemon of this user; an error saying to give
// --socket when this user has no run-time directory.
Result<std::filesystem::path> DefaultSocketPath();

// Where ptybox-init is: $PTYBOX_INIT, next to this executable, or ../libexec/ptybox/.
std::filesystem::path FindInitBinary();

}  // namespace ptybox::runtime
