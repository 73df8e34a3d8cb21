#include "runtime/doctor.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>

#include "runtime/daemon.h"
#include "sandbox/cgroup.h"
#include "sandbox/host_probe.h"

namespace ptybox::runtime {

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
  // Not a failure either way: both end every process of a session; cgroups also hold what a
  // session started when the daemon itself is killed, and hold its limits as a whole.
  const sandbox::CleanupSupport& cleanup = sandbox::SessionCleanupSupport();
  std::printf("[ ok ] session cleanup: %s\n",
              cleanup.cgroups ? ("per-session cgroups under " + cleanup.directory.string()).c_str()
                              : "the subreaper rule (every unknown child the daemon adopts is "
                                "ended)");
  const sandbox::cgroups::Plan& plan = cleanup.plan;
  std::printf("[%s] session limits: %s (%s)\n", plan.advice.empty() ? " ok " : "warn",
              plan.mechanism.c_str(), plan.detail.c_str());
  if (!plan.advice.empty()) std::printf("       to hold every limit: %s\n", plan.advice.c_str());
  sandbox::RemoveCleanupDirectory();
  std::printf(all_ok ? "this host can run confined sessions (read-only, workspace-write)\n"
                     : "this host cannot sandbox: confined sessions fail with sandbox_unavailable "
                       "until the failures above are fixed\n");
  return all_ok ? 0 : 1;
}

}  // namespace ptybox::runtime
