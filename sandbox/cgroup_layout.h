// The pure parts of per-session cgroups (sandbox/cgroup.h): reading /proc/self/cgroup and
// /proc/self/mountinfo, choosing which hierarchy enforces each limit and ends a session, and
// rendering a session's limits as the files to write. No file system access: the probe in
// sandbox/cgroup.cc gathers HostFacts, these functions decide, tests inject both.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ptybox::sandbox::cgroups {

// One line of /proc/<pid>/cgroup, "ID:CONTROLLERS:PATH" (v2: "0::PATH", no controllers).
struct Membership {
  int id = 0;
  std::vector<std::string> controllers;  // "pids", "memory", "cpu", "name=systemd", ...
  std::string path;                      // absolute, from the hierarchy's (namespace) root
};
std::vector<Membership> ParseProcCgroup(std::string_view text);

// A mounted cgroup file system (one line of /proc/self/mountinfo).
struct Mount {
  std::filesystem::path mountpoint;
  std::string root;                      // the mount's root within its hierarchy
  bool v2 = false;                       // cgroup2
  std::vector<std::string> controllers;  // v1: the controllers in its super options
};
std::vector<Mount> ParseCgroupMounts(std::string_view mountinfo);

// This process's own directory in the v2 hierarchy (controller "") or in the v1 hierarchy that
// carries `controller`; nullopt when it is not mounted (or not visible from the mount's root).
std::optional<std::filesystem::path> OwnDirectory(const std::vector<Membership>& memberships,
                                                  const std::vector<Mount>& mounts,
                                                  std::string_view controller);

// This process's cgroup path (as /proc/self/cgroup spells it) in the v2 hierarchy (controller
// "") or the v1 hierarchy carrying `controller`: the base of its session cgroups' membership
// paths (sandbox/cgroup_signal.h).
std::optional<std::string> OwnCgroupPath(const std::vector<Membership>& memberships,
                                         std::string_view controller);

// Which hierarchy enforces one limit.
enum class Where { kNone, kV2, kV1 };
std::string_view ToString(Where where);

// The controllers ptybox limits a session with, in order.
inline constexpr std::string_view kControllers[] = {"pids", "memory", "cpu"};

// What the probe found out about this host (see sandbox/cgroup.cc).
struct HostFacts {
  bool disabled = false;                        // PTYBOX_SESSION_CGROUPS=0
  bool root = false;                            // the daemon's effective uid is 0
  std::optional<std::filesystem::path> v2_own;  // the daemon's v2 cgroup, when mounted
  std::string v2_problem;                       // why v2 cannot be used (empty when it can)
  bool v2_kill = false;                         // cgroup.kill exists (Linux 5.14+)
  std::vector<std::string> v2_controllers;      // enabled for the daemon's session cgroups
  // v1 hierarchies beneath whose own cgroup the daemon could create its directory.
  std::map<std::string, std::filesystem::path> v1_own;
  std::map<std::string, std::string> v1_problems;  // controller -> why not
};

// The mechanism in force, per limit and for ending a session.
struct Plan {
  bool cgroups = false;  // any session cgroup at all (v2 or v1)
  bool use_v2 = false;   // sessions get a v2 cgroup (cgroup.kill and/or v2 controllers)
  std::map<std::string, std::filesystem::path> v1;  // v1 controller -> the daemon's own dir
  Where tasks = Where::kNone;
  Where memory = Where::kNone;
  Where cpu = Where::kNone;
  bool kill_v2 = false;   // close ends the session with cgroup.kill, else pids.max 0 + SIGKILL
  std::string mechanism;  // "cgroup v2 (delegated)", "cgroup v1 controllers", ...
  std::string detail;     // one sentence: what is in force and why
  std::string advice;     // what to change for full enforcement (empty when nothing)
};
Plan ChoosePlan(const HostFacts& facts);

// A session's limits, as the policy resolved them (unset: no limit of that kind).
struct SessionLimits {
  std::optional<int64_t> tasks;  // processes and threads
  std::optional<int64_t> memory_bytes;
  std::optional<int64_t> cpu_millicores;  // 500: half of one core
  bool operator==(const SessionLimits&) const = default;
};

// One file to write in a session's cgroup: `controller` "" is the v2 cgroup.
struct LimitFile {
  std::string controller;
  std::string file;
  std::string value;
  bool optional = false;  // absent on some kernels (swap accounting): skipped when missing
  bool operator==(const LimitFile&) const = default;
};
inline constexpr int64_t kCpuPeriodMicros = 100'000;
std::vector<LimitFile> RenderLimits(const SessionLimits& limits, const Plan& plan);

}  // namespace ptybox::sandbox::cgroups
