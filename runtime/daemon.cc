#include "runtime/daemon.h"

#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <asio/io_context.hpp>
#include <asio/signal_set.hpp>
#include <cstdlib>
#include <memory>

#include "backend/child_reaper.h"
#include "common/log.h"
#include "sandbox/cgroup.h"
#include "runtime/mcp_server.h"
#include "runtime/rpc_server.h"

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

int RunDaemon(DaemonOptions options) {
  ::signal(SIGPIPE, SIG_IGN);
  // Orphans of a session whose ptybox-init was killed re-parent to us, not to the host's init;
  // as a container entrypoint we are PID 1 and reap everything anyway.
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);

  asio::io_context io(1);
  backend::ChildReaper reaper(io);
  // What ends a session's processes whatever happens to its ptybox-init: its own cgroup, or
  // (without a delegated cgroup subtree) the rule that every child we adopt is a leak.
  const sandbox::CleanupSupport& cleanup = sandbox::SessionCleanupSupport();
  reaper.KillAdoptedChildren(!cleanup.cgroups);
  LogInfo("session cleanup: " + cleanup.detail);
  struct RemoveCleanupDirectory {
    ~RemoveCleanupDirectory() { sandbox::RemoveCleanupDirectory(); }
  } remove_cleanup_directory;
  PtyService service(io, reaper, options.service);

  bool stopping = false;
  int exit_code = 0;
  std::unique_ptr<SocketServer> socket_server;
  asio::signal_set terminate(io, SIGTERM, SIGINT);
  asio::signal_set reload(io, SIGHUP);

  auto shutdown = [&](int code) {
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

  if (options.stdio) {
    auto line = std::make_shared<LineConnection>(io, ::dup(STDIN_FILENO), ::dup(STDOUT_FILENO));
    auto rpc = std::make_shared<RpcConnection>(service, line, "stdio client");
    rpc->Start([&] { shutdown(0); });
    io.run();
    return exit_code;
  }
  if (options.mcp) {
    auto line = std::make_shared<LineConnection>(io, ::dup(STDIN_FILENO), ::dup(STDOUT_FILENO));
    auto mcp = std::make_shared<McpServer>(service, line, "mcp host");
    mcp->Start([&] { shutdown(0); });
    io.run();
    return exit_code;
  }
  socket_server = std::make_unique<SocketServer>(io, service);
  if (Result<void> listening = socket_server->Listen(*options.socket); !listening) {
    LogError(listening.error().Describe());
    return 1;
  }
  LogInfo("listening on " + options.socket->string());
  io.run();
  return exit_code;
}

}  // namespace ptybox::runtime
