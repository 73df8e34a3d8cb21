#include "runtime/daemon.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <asio/io_context.hpp>
#include <asio/signal_set.hpp>
#include <asio/steady_timer.hpp>
#include <cstdlib>
#include <memory>

#include "backend/child_reaper.h"
#include "backend/proxy/network_proxy.h"
#include "backend/readiness/foreground_inspector.h"
#include "backend/shell_session.h"
#include "common/count_text.h"
#include "common/log.h"
#include "runtime/mcp_server.h"
#include "runtime/methods.h"
#include "runtime/rpc_server.h"
#include "sandbox/cgroup.h"
#include "sandbox/cgroup_sweep.h"
#include "sandbox/host_walls.h"

namespace ptybox::runtime {

std::filesystem::path FindInitBinary() {
  if (const char* env = std::getenv("PTYBOX_INIT"); env != nullptr && *env != '\0') return env;
  std::error_code ec;
  std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    std::filesystem::path beside = self.parent_path() / "ptybox-init";
    if (std::filesystem::exists(beside, ec)) return beside;
    std::filesystem::path libexec = self.parent_path().parent_path() / "libexec/ptybox/ptybox-init";
    if (std::filesystem::exists(libexec, ec)) return libexec;
    return beside;
  }
  return "/usr/local/libexec/ptybox/ptybox-init";
}

std::optional<std::string> SocketInsideRoot(const std::filesystem::path& socket,
                                            const std::vector<std::filesystem::path>& roots) {
  static constexpr std::string_view kSystemTrees[] = {"/proc", "/dev", "/sys", "/run", "/var/run"};
  const std::string text = socket.lexically_normal().string();
  for (const std::filesystem::path& root : roots) {
    std::string r = root.lexically_normal().string();
    while (r.size() > 1 && r.back() == '/') r.pop_back();
    // Roots no sandbox accepts (sandbox/launcher.cc refuses them for every session): sessions
    // never hold them, so a socket there is no root's (a daemon started in / or /tmp).
    const bool never_a_root =
        r.empty() || r == "/" || r == "/tmp" || r == "/var/tmp" ||
        std::any_of(std::begin(kSystemTrees), std::end(kSystemTrees), [&](std::string_view tree) {
          return r == tree || r.starts_with(std::string(tree) + "/");
        });
    if (never_a_root) continue;
    if (r.back() != '/') r += '/';
    if (text.starts_with(r)) {
      return "the socket " + text + " is inside " + root.string() +
             ", a directory sessions may write: a session could rename its directory and lock "
             "every new client out. Put the socket outside the workspace and every writable "
             "root (for an ordinary user, $XDG_RUNTIME_DIR/ptybox/ptybox.sock)";
    }
  }
  return std::nullopt;
}

Result<std::filesystem::path> DefaultSocketPath() {
  std::optional<std::filesystem::path> dir = sandbox::PerUserRuntimeDirectory();
  if (!dir) {
    return Fail(ErrorKind::kInternal,
                "ptybox serve: this user has no run-time directory ($XDG_RUNTIME_DIR or "
                "/run/user/" +
                    std::to_string(::geteuid()) +
                    ", owned by this uid) for the default socket; give --socket PATH outside "
                    "every workspace, or --stdio");
  }
  return *dir / "ptybox.sock";
}

namespace {

// The workspace and the writable roots the operator's policy gives sessions (in
// workspace-write, where they are writable; the policy's own mode when that is refused).
std::vector<std::filesystem::path> SessionRoots(const ServiceOptions& options) {
  Result<policy::ResolvedPolicy> resolved =
      policy::Resolve(ResolveInputsFrom(options, policy::Mode::kWorkspaceWrite));
  if (!resolved) resolved = policy::Resolve(ResolveInputsFrom(options, std::nullopt));
  std::vector<std::filesystem::path> roots;
  std::error_code ec;
  std::filesystem::path workspace = std::filesystem::weakly_canonical(options.workspace, ec);
  roots.push_back(ec ? options.workspace : workspace);
  if (resolved) {
    roots.push_back(resolved->workspace_root);
    for (const std::filesystem::path& root : resolved->writable_roots) roots.push_back(root);
  }
  return roots;
}

constexpr size_t kReservedDescriptors = 64;   // logs, policy files, spawns in progress
constexpr size_t kDescriptorsPerSession = 4;  // PTY master, control socket, spawn pipes
// The sessions' proxies (network by name) get at least this many descriptors, or a quarter of
// the budget when the limit is too low for everything (2 per relayed connection).
constexpr size_t kMinProxyDescriptors = 128;

// Raises the soft descriptor limit to the hard one, then lowers the connection and session
// limits until they fit in it beside the proxies' share, which becomes the budget all session
// proxies count their connections against: running out of descriptors must be a refused
// connection or a refused open, never a failure deep inside the reactor (or an accept loop that
// spins).
void FitLimitsToDescriptors(DaemonOptions& options) {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return;
  if (limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &limit);
    ::getrlimit(RLIMIT_NOFILE, &limit);
  }
  if (limit.rlim_cur == RLIM_INFINITY) {
    backend::SetProcFileBudget(backend::kProcFilesPerSession * options.service.max_total_sessions);
    return;
  }
  const auto available = static_cast<size_t>(limit.rlim_cur);
  const DescriptorShares shares =
      ShareDescriptors(available, options.max_connections, options.service.max_total_sessions);
  options.max_connections = shares.connections;
  options.service.max_total_sessions = shares.sessions;
  if (shares.lowered) {
    LogWarn(
        "the descriptor limit is " + std::to_string(available) + ": serving at most " +
        text::CountText(shares.connections, "connection", "connections") + ", " +
        text::CountText(shares.sessions, "session", "sessions") + " and " +
        text::CountText(shares.proxy_descriptors / backend::proxy::kDescriptorsPerProxyConnection,
                        "proxied connection", "proxied connections") +
        " (raise `ulimit -n` for more)");
  }
  backend::SetProcFileBudget(shares.proc_files);
  backend::proxy::SetProxyConnectionBudget(std::max<size_t>(
      shares.proxy_descriptors / backend::proxy::kDescriptorsPerProxyConnection, 1));
}

// The daemon's one backend, bash: its warm pool fills only while the daemon's session limit
// leaves room beside the service's sessions (`headroom`).
MakeBackends ShellBackends(asio::io_context& io, backend::ChildReaper& reaper,
                           backend::ShellBackendOptions options) {
  return [&io, &reaper, options = std::move(options)](std::function<size_t()> headroom) {
    backend::ShellBackendOptions shell = options;
    shell.pool_headroom = std::move(headroom);
    auto backend = std::make_unique<backend::ShellBackend>(io, reaper, std::move(shell));
    Backends backends;
    backends.emplace(std::string(backend->type()), std::move(backend));
    return backends;
  };
}

// Runs the reactor until it is stopped. A handler that throws is a bug; it is logged and the
// reactor goes on serving every other client rather than ending all of them.
void RunReactor(asio::io_context& io) {
  for (;;) {
    try {
      io.run();
      return;
    } catch (const std::exception& e) {
      LogError(std::string("a handler failed, the daemon continues: ") + e.what());
    } catch (...) {
      LogError("a handler failed, the daemon continues");
    }
  }
}

// What ends a session's processes whatever happens to its ptybox-init: its own cgroup, or
// (without a delegated cgroup subtree) the rule that every child we adopt is a leak. Set up
// once, before the reactor runs, and handed to every session through the shell backend's
// options; its directories are removed when the last holder lets go of it. Also sweeps what a
// daemon that was SIGKILLed left in the cgroups (sandbox/cgroup_sweep.h).
std::shared_ptr<const sandbox::CgroupHost> SetUpSessionCleanup(backend::ChildReaper& reaper) {
  std::shared_ptr<const sandbox::CgroupHost> cgroups = sandbox::CgroupHost::SetUp();
  const sandbox::CleanupSupport& cleanup = cgroups->support();
  reaper.KillAdoptedChildren(!cleanup.cgroups);
  LogInfo("session cleanup: " + cleanup.detail);
  const sandbox::SweepReport swept = sandbox::SweepStaleDirectories();
  for (const std::filesystem::path& dir : swept.removed) {
    LogInfo("removed the stale session cgroups " + dir.string() + " of a daemon that is gone");
  }
  for (const std::string& problem : swept.problems) {
    LogWarn("cannot remove stale session cgroups " + problem);
  }
  return cgroups;
}

// `mcp --connect SOCKET --workspace DIR`: the daemon's workspace is the one its sessions get, so
// a DIR that is another one is refused rather than silently not used. nullopt when DIR was not
// given, is the daemon's workspace, or the daemon's policy could not be read.
std::optional<std::string> OtherWorkspace(const ServiceOptions& service,
                                          const Result<policy::ResolvedPolicy>& daemon) {
  if (!service.workspace_from_cli || !daemon || daemon->workspace_root.empty()) {
    return std::nullopt;
  }
  std::error_code ec;
  const std::filesystem::path mine = std::filesystem::weakly_canonical(service.workspace, ec);
  const std::filesystem::path theirs =
      std::filesystem::weakly_canonical(daemon->workspace_root, ec);
  if (mine == theirs) return std::nullopt;
  return "--workspace " + service.workspace.string() + " is not the workspace of the daemon, " +
         theirs.string() +
         ", and with --connect the daemon's workspace is the one terminals get; start a daemon "
         "with `ptybox serve --socket SOCKET --workspace " +
         service.workspace.string() + "` for it, or give --workspace " + theirs.string();
}

// The one client on standard input and output (JSON-RPC, or MCP, itself perhaps a client of a
// daemon): at its end of input every session is closed (a pending open answered), then every
// answer written, then `shutdown`; a client that no longer reads gets 10 s for that. The
// server and the timer live in the caller until the reactor stops. An exit code when the
// client cannot be served; nullopt to run the reactor.
std::optional<int> StartStdioClient(asio::io_context& io, PtyService& service,
                                    const DaemonOptions& options,
                                    const std::function<void(int)>& shutdown,
                                    asio::steady_timer& flush_grace,
                                    std::shared_ptr<void>& server) {
  Result<std::shared_ptr<LineConnection>> line =
      LineConnection::Create(io, ::dup(STDIN_FILENO), ::dup(STDOUT_FILENO));
  if (!line) {
    LogError(line.error().Describe());
    return 1;
  }
  auto finish = [&shutdown, &flush_grace, connection = *line] {
    connection->WhenFlushed([&shutdown] { shutdown(0); });
    flush_grace.expires_after(std::chrono::seconds(10));
    flush_grace.async_wait([&shutdown](const std::error_code& ec) {
      if (ec) return;
      LogWarn("the client does not read its last answers; exiting without them");
      shutdown(0);
    });
  };
  if (options.stdio) {
    auto rpc = std::make_shared<RpcConnection>(service, *line, "stdio client");
    rpc->Start(finish);
    server = rpc;
    return std::nullopt;
  }
  auto mcp = std::make_shared<McpServer>(io, service, *line, "mcp host", options.mcp_options);
  if (options.mcp_options.connect) {
    Result<std::shared_ptr<RemoteDaemon>> remote =
        RemoteDaemon::Connect(io, *options.mcp_options.connect, options.service.workspace);
    if (!remote) {
      LogError("ptybox mcp --connect: " + remote.error().Describe());
      return 1;
    }
    if (std::optional<std::string> other = OtherWorkspace(options.service, (*remote)->policy())) {
      (*remote)->Close();
      LogError("ptybox mcp --connect: " + *other);
      return 2;
    }
    mcp->UseRemote(*remote);
  }
  mcp->Start(finish);
  server = mcp;
  return std::nullopt;
}

}  // namespace

DescriptorShares ShareDescriptors(size_t available, size_t connections, size_t sessions) {
  DescriptorShares shares{connections, sessions, 0, 0, false};
  const size_t budget = available > kReservedDescriptors ? available - kReservedDescriptors : 0;
  const size_t wanted = connections + kDescriptorsPerSession * sessions;
  if (wanted + kMinProxyDescriptors <= budget) {
    // Without room for the kept /proc descriptors every look opens its files again; they never
    // take the proxies' minimum nor more than half of what is left (outside review 13).
    const size_t left = budget - wanted;
    const size_t proxy_floor = std::max(kMinProxyDescriptors, left / 2);
    shares.proc_files = left > proxy_floor
                            ? std::min(backend::kProcFilesPerSession * sessions, left - proxy_floor)
                            : 0;
    shares.proxy_descriptors = left - shares.proc_files;
    return shares;
  }
  shares.lowered = true;
  shares.proxy_descriptors = budget / 4;
  const size_t share =
      std::max<size_t>((budget - shares.proxy_descriptors) / (1 + kDescriptorsPerSession), 1);
  shares.connections = std::min(connections, share);
  shares.sessions = std::min(sessions, share);
  return shares;
}

int RunDaemon(DaemonOptions options) {
  if (Result<void> contract = CheckContract(Contract()); !contract) {
    LogError(contract.error().message);
    return 1;
  }
  ::signal(SIGPIPE, SIG_IGN);
  // Orphans of a session whose ptybox-init was killed re-parent to us, not to the host's init;
  // as a container entrypoint we are PID 1 and reap everything anyway.
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);

  FitLimitsToDescriptors(options);
  asio::io_context io(1);
  backend::ChildReaper reaper(io);
  options.service.shell.cgroups = SetUpSessionCleanup(reaper);
  if (options.socket) {  // hidden inside confined sessions (docs/security.md)
    std::error_code ec;
    std::filesystem::path socket = std::filesystem::weakly_canonical(*options.socket, ec);
    options.service.shell.daemon_socket = ec ? *options.socket : socket;
  }
  PtyService service(io, options.service, ShellBackends(io, reaper, options.service.shell));

  bool stopping = false;
  int exit_code = 0;
  std::unique_ptr<SocketServer> socket_server;
  asio::signal_set terminate(io, SIGTERM, SIGINT);
  asio::signal_set reload(io, SIGHUP);

  const std::function<void(int)> shutdown = [&](int code) {
    if (stopping) return;
    stopping = true;
    exit_code = code;
    if (socket_server) socket_server->Stop();
    service.Shutdown([&] {
      terminate.cancel();
      reload.cancel();
      io.stop();
    });
  };

  terminate.async_wait([&](const std::error_code& ec, int signal) {
    if (ec) return;
    LogInfo(std::string("received ") + (signal == SIGTERM ? "SIGTERM" : "SIGINT") +
            ": closing every session");
    shutdown(0);
  });
  std::function<void()> arm_reload = [&] {
    reload.async_wait([&](const std::error_code& ec, int) {
      if (ec) return;
      service.Reload();
      arm_reload();
    });
  };
  arm_reload();

  if (options.stdio || options.mcp) {
    asio::steady_timer flush_grace(io);
    std::shared_ptr<void> server;
    if (std::optional<int> failed =
            StartStdioClient(io, service, options, shutdown, flush_grace, server)) {
      return *failed;
    }
    RunReactor(io);
    return exit_code;
  }
  if (std::optional<std::string> inside =
          SocketInsideRoot(options.service.shell.daemon_socket, SessionRoots(options.service))) {
    LogError("ptybox serve: " + *inside);
    return 1;
  }
  socket_server = std::make_unique<SocketServer>(io, service, options.max_connections);
  if (Result<void> listening = socket_server->Listen(*options.socket); !listening) {
    LogError(listening.error().Describe());
    return 1;
  }
  LogInfo("listening on " + options.socket->string());
  RunReactor(io);
  return exit_code;
}

}  // namespace ptybox::runtime
