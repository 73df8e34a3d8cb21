// This process's share of the host's cgroups, set up once by whoever starts sessions (the
// daemon, `ptybox run`) and passed down to every session it launches (backend/init_session.h):
// in each hierarchy used, a directory of its own beneath its own cgroup
// (`<own cgroup>/ptybox-<pid>-<random>`, per-session cgroups go inside), flocked for its
// lifetime (the mark of a live owner for other daemons' start-up sweep, sandbox/cgroup_sweep.h),
// with the controllers enabled for the sessions and the plan of which hierarchy holds which
// limit (cgroups::ChoosePlan). Nothing is created before SetUp is called, and nothing by
// Inspect: `ptybox doctor` reports the same plan from what it can read.
//
// PTYBOX_SESSION_CGROUPS=0 turns cgroups off (the subreaper rule then applies), for hosts
// where the operator wants the daemon's cgroup left alone, and for tests of the fallback;
// PTYBOX_SESSION_CGROUPS=v1 uses only the v1 hierarchies (hybrid hosts; tests of ending a
// session without cgroup.kill).
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "common/unique_fd.h"
#include "sandbox/cgroup_layout.h"

namespace ptybox::sandbox {

// Which mechanism ends a session's processes on this host, and why.
struct CleanupSupport {
  bool cgroups = false;  // per-session cgroups are in force (plan.cgroups)
  // This process's directory of session cgroups (v2, else the first v1 hierarchy's), when
  // cgroups; for Inspect, the cgroup it would be made in.
  std::filesystem::path directory;
  std::string detail;  // one sentence for `ptybox doctor` and the log
  cgroups::Plan plan;  // which hierarchy holds each limit, and why
};

// One hierarchy this process keeps session cgroups in.
struct CgroupHierarchy {
  std::vector<std::string> controllers;  // empty for v2; v1: those of the plan it carries
  std::filesystem::path home;            // this process's own cgroup
  std::filesystem::path directory;       // <home>/ptybox-<pid>-<random>
  std::string cgroup;                    // `directory` as /proc/<pid>/cgroup names it
};

class CgroupHost final {
 public:
  // Creates this process's directory in each usable hierarchy and locks it, enables the
  // controllers for the sessions, and proves that a forked child can place itself in a test
  // cgroup (as a session's child will) before removing it. A host without usable cgroups
  // gives a host whose support() says why (the subreaper rule then ends leaked processes).
  // Blocking (a forked child): call it before the reactor runs.
  [[nodiscard]] static std::shared_ptr<const CgroupHost> SetUp();
  // The plan SetUp would arrive at, from what is readable (memberships, mounts, the access
  // bits of the own cgroups, their controllers): creates, writes and forks nothing.
  [[nodiscard]] static CleanupSupport Inspect();

  CgroupHost(const CgroupHost&) = delete;
  CgroupHost& operator=(const CgroupHost&) = delete;
  ~CgroupHost();  // removes this process's directories when they are empty (best effort)

  [[nodiscard]] const CleanupSupport& support() const { return support_; }
  [[nodiscard]] const std::vector<CgroupHierarchy>& hierarchies() const { return hierarchies_; }

 private:
  CgroupHost() = default;

  CleanupSupport support_;
  // An flock on each directory, held until this value is destroyed: how another daemon's
  // start-up sweep tells a live owner, in any pid namespace.
  std::vector<UniqueFd> locks_;
  std::vector<CgroupHierarchy> hierarchies_;  // v2 first, then v1 by controller (each once)
};

}  // namespace ptybox::sandbox
