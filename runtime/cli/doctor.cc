#include "runtime/cli/doctor.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "policy/mode.h"
#include "policy/resolver.h"
#include "runtime/daemon.h"
#include "sandbox/cgroup.h"
#include "sandbox/host_probe.h"
#include "sandbox/tree_watch.h"

namespace ptybox::runtime {
namespace {

// The default workspace (the current directory, or the operator policy's `workspace`) must be
// writable by this uid when sessions start in workspace-write mode: a container whose user does
// not own the mounted workspace passes every sandbox probe and still cannot write a file.
// Returns false on a failure.
bool ReportWorkspace() {
  policy::ResolveInputs inputs;
  if (const char* path = std::getenv("PTYBOX_OPERATOR_POLICY"); path != nullptr && *path) {
    inputs.default_operator_policy = path;
  }
  std::error_code ec;
  inputs.workspace = std::filesystem::current_path(ec);
  inputs.workspace_from_cli = false;
  Result<policy::ResolvedPolicy> resolved = policy::Resolve(inputs);
  if (!resolved) {
    std::printf("[FAIL] workspace: the policy for %s does not resolve: %s\n",
                inputs.workspace.c_str(), resolved.error().message.c_str());
    std::printf("       fix: ptybox policy check lists every problem\n");
    return false;
  }
  const std::filesystem::path& root = resolved->workspace_root;
  if (resolved->mode != policy::Mode::kWorkspaceWrite) {
    std::printf("[ ok ] workspace: %s (sessions start %s: it need not be writable)\n", root.c_str(),
                std::string(policy::ToString(resolved->mode)).c_str());
    return true;
  }
  if (::access(root.c_str(), W_OK | X_OK) == 0) {
    std::printf("[ ok ] workspace: %s is writable by uid %u (workspace-write sessions)\n",
                root.c_str(), static_cast<unsigned>(::geteuid()));
    return true;
  }
  struct stat st {};
  const bool known = ::stat(root.c_str(), &st) == 0;
  std::printf(
      "[FAIL] workspace: %s (owner uid %s) is not writable by uid %u, so "
      "workspace-write sessions cannot write it\n",
      root.c_str(), known ? std::to_string(st.st_uid).c_str() : "?",
      static_cast<unsigned>(::geteuid()));
  std::printf(
      "       fix: run ptybox as the workspace's owner (in a container: --user "
      "\"$(id -u):$(id -g)\" of the host user who owns the mounted directory), or "
      "make it writable, or use mode: read-only\n");
  return false;
}

}  // namespace

int Doctor() {
  bool all_ok = true;
  std::filesystem::path init = FindInitBinary();
  bool init_ok = ::access(init.c_str(), X_OK) == 0;
  std::printf("[%s] ptybox-init: %s\n", init_ok ? " ok " : "FAIL", init.c_str());
  if (!init_ok) {
    std::printf("       fix: install ptybox-init next to ptybox, or set PTYBOX_INIT\n");
    all_ok = false;
  }
  for (const sandbox::ProbeResult& probe : sandbox::ProbeHost(sandbox::FindBwrap())) {
    std::printf("[%s] %s: %s\n", probe.ok ? " ok " : "FAIL", probe.name.c_str(),
                probe.detail.c_str());
    if (!probe.ok) {
      all_ok = false;
      if (!probe.fix.empty()) std::printf("       fix: %s\n", probe.fix.c_str());
    }
  }
  const bool workspace_ok = ReportWorkspace();
  // Not a failure: the private network namespace already keeps the host's abstract sockets out
  // with the network denied; what a kernel lacks is said, with what remains open.
  const sandbox::ProbeResult unix_sockets = sandbox::ProbeUnixSocketWalls();
  std::printf("[%s] %s: %s\n", unix_sockets.ok ? " ok " : "warn", unix_sockets.name.c_str(),
              unix_sockets.detail.c_str());
  if (!unix_sockets.fix.empty()) std::printf("       to close it: %s\n", unix_sockets.fix.c_str());
  // Not a failure: a root daemon whose fanotify fails still checks, with inotify's budget.
  std::error_code ec;
  const sandbox::ProbeResult watch = sandbox::ProbeTreeWatch(std::filesystem::current_path(ec));
  std::printf("[%s] %s: %s\n", watch.ok ? " ok " : "warn", watch.name.c_str(),
              watch.detail.c_str());
  if (!watch.fix.empty()) std::printf("       to need no budget: %s\n", watch.fix.c_str());
  // Not a failure either way: both end every process of a session; cgroups also hold what a
  // session started when the daemon itself is killed, and hold its limits as a whole.
  // Inspected, not set up: the doctor creates no cgroup, writes no controller and forks no
  // probe child (the daemon does that when it starts).
  const sandbox::CleanupSupport cleanup = sandbox::CgroupHost::Inspect();
  std::printf("[ ok ] session cleanup: %s\n",
              cleanup.cgroups
                  ? ("per-session cgroups beneath " + cleanup.directory.string()).c_str()
                  : "the subreaper rule (every unknown child the daemon adopts is ended)");
  const sandbox::cgroups::Plan& plan = cleanup.plan;
  std::printf("[%s] session limits: %s (%s)\n", plan.advice.empty() ? " ok " : "warn",
              plan.mechanism.c_str(), plan.detail.c_str());
  if (!plan.advice.empty()) std::printf("       to hold every limit: %s\n", plan.advice.c_str());
  if (!all_ok) {
    std::printf(
        "this host cannot sandbox: confined sessions fail with sandbox_unavailable "
        "until the failures above are fixed\n");
  } else if (!workspace_ok) {
    std::printf(
        "this host can sandbox, but sessions in this workspace cannot work as the "
        "policy says until the workspace failure above is fixed\n");
  } else {
    std::printf("this host can run confined sessions (read-only, workspace-write)\n");
  }
  return all_ok && workspace_ok ? 0 : 1;
}

}  // namespace ptybox::runtime
