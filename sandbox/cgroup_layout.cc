#include "sandbox/cgroup_layout.h"

#include <algorithm>
#include <sstream>

#include "common/join.h"

namespace ptybox::sandbox::cgroups {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> Split(std::string_view text, char separator) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(separator, start);
    if (end == std::string_view::npos) end = text.size();
    if (end > start) parts.emplace_back(text.substr(start, end - start));
    start = end + 1;
  }
  return parts;
}

bool Has(const std::vector<std::string>& list, std::string_view item) {
  return std::find(list.begin(), list.end(), item) != list.end();
}

}  // namespace

std::vector<Membership> ParseProcCgroup(std::string_view text) {
  std::vector<Membership> result;
  for (const std::string& line : Split(text, '\n')) {
    const size_t first = line.find(':');
    if (first == std::string::npos) continue;
    const size_t second = line.find(':', first + 1);
    if (second == std::string::npos) continue;
    Membership m;
    const std::string id = line.substr(0, first);
    if (id.empty() || id.size() > 9 ||
        !std::all_of(id.begin(), id.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      continue;
    }
    m.id = std::stoi(id);
    m.controllers = Split(std::string_view(line).substr(first + 1, second - first - 1), ',');
    m.path = line.substr(second + 1);
    if (m.path.empty() || m.path[0] != '/') continue;  // "(deleted)" or garbage
    result.push_back(std::move(m));
  }
  return result;
}

std::vector<Mount> ParseCgroupMounts(std::string_view mountinfo) {
  std::vector<Mount> result;
  for (const std::string& line : Split(mountinfo, '\n')) {
    const size_t dash = line.find(" - ");
    if (dash == std::string::npos) continue;
    std::istringstream tail(line.substr(dash + 3));
    std::string type, source, options;
    tail >> type >> source >> options;
    if (type != "cgroup" && type != "cgroup2") continue;
    std::istringstream head(line.substr(0, dash));
    std::string id, parent, devno, root, mountpoint;
    head >> id >> parent >> devno >> root >> mountpoint;
    if (mountpoint.empty()) continue;
    Mount m;
    m.mountpoint = mountpoint;
    m.root = root;
    m.v2 = type == "cgroup2";
    if (!m.v2) {
      for (const std::string& option : Split(options, ',')) {
        if (option == "rw" || option == "ro" || option.starts_with("release_agent=") ||
            option == "clone_children" || option == "noprefix" || option == "xattr" ||
            option == "cpuset_v2_mode" || option == "favordynmods") {
          continue;
        }
        m.controllers.push_back(option);
      }
    }
    result.push_back(std::move(m));
  }
  return result;
}

std::optional<fs::path> OwnDirectory(const std::vector<Membership>& memberships,
                                     const std::vector<Mount>& mounts,
                                     std::string_view controller) {
  const bool v2 = controller.empty();
  const Membership* own = nullptr;
  for (const Membership& m : memberships) {
    if (v2 ? (m.id == 0 && m.controllers.empty()) : Has(m.controllers, controller)) own = &m;
  }
  if (own == nullptr) return std::nullopt;
  for (const Mount& mount : mounts) {
    if (mount.v2 != v2 || (!v2 && !Has(mount.controllers, controller))) continue;
    std::string relative;
    if (mount.root == "/") {
      relative = own->path;
    } else if (own->path == mount.root || own->path.starts_with(mount.root + "/")) {
      relative = own->path.substr(mount.root.size());
    } else {
      continue;
    }
    fs::path dir = mount.mountpoint;
    if (fs::path rest = fs::path(relative).relative_path(); !rest.empty()) dir /= rest;
    return dir.lexically_normal();
  }
  return std::nullopt;
}

std::optional<std::string> OwnCgroupPath(const std::vector<Membership>& memberships,
                                         std::string_view controller) {
  const bool v2 = controller.empty();
  for (const Membership& m : memberships) {
    if (v2 ? (m.id == 0 && m.controllers.empty()) : Has(m.controllers, controller)) return m.path;
  }
  return std::nullopt;
}

std::string_view ToString(Where where) {
  switch (where) {
    case Where::kV2:
      return "cgroup v2";
    case Where::kV1:
      return "cgroup v1";
    case Where::kNone:
      break;
  }
  return "none";
}

Plan ChoosePlan(const HostFacts& facts) {
  Plan plan;
  if (facts.disabled) {
    plan.mechanism = "rlimits (per-session cgroups turned off)";
    plan.detail =
        "per-session cgroups turned off (PTYBOX_SESSION_CGROUPS=0): no task, memory or CPU cap "
        "holds a session as a whole; the subreaper rule ends leaked processes";
    plan.advice = "unset PTYBOX_SESSION_CGROUPS to hold sessions in cgroups";
    return plan;
  }
  plan.use_v2 = facts.v2_own.has_value() && facts.v2_problem.empty();
  plan.kill_v2 = plan.use_v2 && facts.v2_kill;
  auto choose = [&](std::string_view controller) {
    if (plan.use_v2 && Has(facts.v2_controllers, controller)) return Where::kV2;
    if (auto it = facts.v1_own.find(std::string(controller)); it != facts.v1_own.end()) {
      plan.v1[it->first] = it->second;
      return Where::kV1;
    }
    return Where::kNone;
  };
  plan.tasks = choose("pids");
  plan.memory = choose("memory");
  plan.cpu = choose("cpu");
  plan.cgroups = plan.use_v2 || !plan.v1.empty();
  // Without cgroup.kill a session is ended through its pids cgroup (pids.max 0, then SIGKILL
  // to every member until none is left); without either, the v2 cgroup is of no use for ending.
  if (plan.use_v2 && !plan.kill_v2 && plan.tasks != Where::kV1 && plan.tasks != Where::kV2) {
    plan.use_v2 = false;
    plan.cgroups = !plan.v1.empty();
  }

  const bool v2_limits =
      plan.tasks == Where::kV2 || plan.memory == Where::kV2 || plan.cpu == Where::kV2;
  const bool v1_limits = !plan.v1.empty();
  if (v2_limits && v1_limits) {
    plan.mechanism = "cgroup v2 and v1 controllers";
  } else if (v2_limits) {
    plan.mechanism = "cgroup v2 (delegated)";
  } else if (v1_limits) {
    plan.mechanism =
        plan.kill_v2 ? "cgroup v1 controllers (+ cgroup v2 cgroup.kill)" : "cgroup v1 controllers";
  } else if (plan.cgroups) {
    plan.mechanism = "cgroup v2 cgroup.kill only; limits by rlimits";
  } else {
    plan.mechanism = "rlimits (no usable cgroup)";
  }
  auto where = [](std::string_view what, Where w) {
    return std::string(what) + ": " +
           (w == Where::kNone ? std::string("rlimits only") : std::string(ToString(w)));
  };
  plan.detail = where("tasks", plan.tasks) + ", " + where("memory", plan.memory) + ", " +
                where("cpu", plan.cpu) + "; close ends a session by " +
                (plan.kill_v2 ? "cgroup.kill"
                 : plan.tasks == Where::kV1 || plan.tasks == Where::kV2
                     ? "pids.max 0 and SIGKILL to every member of its cgroup"
                     : "the subreaper rule (parent links)");

  std::vector<std::string> missing;
  for (std::string_view c : kControllers) {
    const Where w = c == "pids" ? plan.tasks : c == "memory" ? plan.memory : plan.cpu;
    if (w != Where::kNone) continue;
    std::string why;
    if (auto it = facts.v1_problems.find(std::string(c)); it != facts.v1_problems.end()) {
      why = it->second;
    } else if (!facts.v2_problem.empty()) {
      why = facts.v2_problem;
    } else {
      why = "the controller is not enabled for the daemon's cgroup";
    }
    missing.push_back(std::string(c) + " (" + why + ")");
  }
  if (!missing.empty()) {
    plan.advice =
        "not held by a cgroup: " + Join(missing, "; ") +
        ". Run the daemon where it has a delegated cgroup v2 subtree with these controllers "
        "(systemd: Delegate=yes in its unit; a container: its own cgroup namespace, with "
        "`+pids +memory +cpu` in the parent's cgroup.subtree_control), or as root on a v1 or "
        "hybrid host" +
        (facts.root ? std::string() : std::string(" (this daemon is not root)"));
  }
  return plan;
}

std::vector<LimitFile> RenderLimits(const SessionLimits& limits, const Plan& plan) {
  std::vector<LimitFile> files;
  if (limits.tasks) {
    const std::string n = std::to_string(*limits.tasks);
    if (plan.tasks == Where::kV2) files.push_back({"", "pids.max", n});
    if (plan.tasks == Where::kV1) files.push_back({"pids", "pids.max", n});
  }
  if (limits.memory_bytes) {
    const std::string n = std::to_string(*limits.memory_bytes);
    if (plan.memory == Where::kV2) {
      files.push_back({"", "memory.max", n});
      files.push_back({"", "memory.swap.max", "0", true});  // no way around the cap by swapping
    }
    if (plan.memory == Where::kV1) {
      files.push_back({"memory", "memory.limit_in_bytes", n});
      // memory + swap, never below the memory limit: written after it.
      files.push_back({"memory", "memory.memsw.limit_in_bytes", n, true});
    }
  }
  if (limits.cpu_millicores) {
    // quota/period = cores; the kernel's smallest quota is 1 ms.
    const int64_t quota = std::max<int64_t>(1000, *limits.cpu_millicores * kCpuPeriodMicros / 1000);
    if (plan.cpu == Where::kV2) {
      files.push_back(
          {"", "cpu.max", std::to_string(quota) + " " + std::to_string(kCpuPeriodMicros)});
    }
    if (plan.cpu == Where::kV1) {
      files.push_back({"cpu", "cpu.cfs_period_us", std::to_string(kCpuPeriodMicros)});
      files.push_back({"cpu", "cpu.cfs_quota_us", std::to_string(quota)});
    }
  }
  return files;
}

}  // namespace ptybox::sandbox::cgroups
