#include "sandbox/cgroup_sweep.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <iterator>
#include <map>
#include <sstream>

#include "common/error.h"
#include "common/unique_fd.h"
#include "sandbox/cgroup_file.h"
#include "sandbox/cgroup_layout.h"
#include "sandbox/cgroup_signal.h"

namespace ptybox::sandbox {
namespace cgroups {

std::optional<pid_t> StaleCandidateOwner(std::string_view name) {
  constexpr std::string_view kPrefix = "ptybox-";
  if (!name.starts_with(kPrefix)) return std::nullopt;
  name.remove_prefix(kPrefix.size());
  const size_t dash = name.find('-');
  if (dash == std::string_view::npos || dash == 0 || dash > 9) return std::nullopt;
  const std::string_view digits = name.substr(0, dash);
  const std::string_view hex = name.substr(dash + 1);
  if (!std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return std::nullopt;
  }
  if (hex.empty() || hex.size() > 32 || !std::all_of(hex.begin(), hex.end(), [](char c) {
        return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
      })) {
    return std::nullopt;
  }
  const long pid = std::stol(std::string(digits));
  if (pid <= 0) return std::nullopt;
  return static_cast<pid_t>(pid);
}

Judgement JudgeOwner(pid_t owner, const OwnerFacts& facts, std::string_view own_comm) {
  const std::string who = "pid " + std::to_string(owner);
  if (facts.self) return {false, "this process's own"};
  if (facts.locked) return {false, "locked by its live owner"};
  if (!facts.alive) return {true, "its owner (" + who + ") is gone"};
  if (!facts.comm) return {false, who + " is alive and cannot be identified"};
  if (*facts.comm == "ptybox" || (!own_comm.empty() && *facts.comm == own_comm)) {
    return {false, who + " is a live ptybox process"};
  }
  if (facts.in_parent) {
    return {false, who + " (" + *facts.comm + ") is alive in the cgroup its owner ran in"};
  }
  return {true,
          who + " is now " + *facts.comm +
              ", not a ptybox process and outside the cgroup its owner ran in (a reused pid)"};
}

}  // namespace cgroups

namespace {

namespace fs = std::filesystem;
using cgroups::ParsePids;
using cgroups::ReadText;
using cgroups::WriteText;

constexpr int kKillRounds = 300;  // each followed by kRoundPause: a 3 s bound per tree
constexpr useconds_t kRoundPause = 10'000;
constexpr int kRemoveRetries = 20;
constexpr int kSettleRounds = 300;  // with kRoundPause: 3 s for exited members to be reaped

std::vector<pid_t> ReadPids(const fs::path& dir) {
  return ParsePids(ReadText(dir / "cgroup.procs"));
}

// One hierarchy to sweep: the daemon's own cgroup there.
struct Home {
  fs::path directory;
  std::string cgroup;      // as /proc/<pid>/cgroup names it
  std::string controller;  // "" for v2
};

std::vector<Home> Homes() {
  const auto memberships = cgroups::ParseProcCgroup(ReadText("/proc/self/cgroup"));
  const auto mounts = cgroups::ParseCgroupMounts(ReadText("/proc/self/mountinfo"));
  std::vector<Home> homes;
  auto add = [&](std::string_view controller) {
    std::optional<fs::path> dir = cgroups::OwnDirectory(memberships, mounts, controller);
    std::optional<std::string> path = cgroups::OwnCgroupPath(memberships, controller);
    if (!dir || !path) return;
    for (const Home& h : homes) {
      if (h.directory == *dir) return;
    }
    homes.push_back({*dir, *path, std::string(controller)});
  };
  add("");
  for (std::string_view c : cgroups::kControllers) add(c);
  return homes;
}

// Every directory of the tree at `top`, deepest first (no links: cgroupfs has none, and
// nothing that is not a directory is followed).
std::vector<fs::path> LeafFirst(const fs::path& top) {
  std::vector<fs::path> dirs{top};
  std::error_code ec;
  for (fs::recursive_directory_iterator it(top, fs::directory_options::none, ec), end;
       !ec && it != end; it.increment(ec)) {
    if (it->is_directory(ec) && !it->is_symlink(ec)) dirs.push_back(it->path());
  }
  std::stable_sort(dirs.begin(), dirs.end(), [](const fs::path& a, const fs::path& b) {
    return std::distance(a.begin(), a.end()) > std::distance(b.begin(), b.end());
  });
  return dirs;
}

bool Populated(const fs::path& top, bool v2) {
  if (v2) return ReadText(top / "cgroup.events").find("populated 1") != std::string::npos;
  std::istringstream in(ReadText(top / "pids.current"));  // v1: only the pids hierarchy tells
  long n = 0;
  return (in >> n) && n > 0;
}

// Whether `top` holds processes none of which is visible here (another pid namespace's). A v1
// pids.current also counts members that exited and are not yet reaped, which cgroup.procs no
// longer lists: such a count is given a moment (bounded) to settle before it is believed.
bool Foreign(const fs::path& top, bool v2) {
  for (int round = 0; round < kSettleRounds; ++round) {
    size_t visible = 0;
    for (const fs::path& d : LeafFirst(top)) visible += ReadPids(d).size();
    if (!cgroups::ForeignTree(Populated(top, v2), visible)) return false;
    ::usleep(kRoundPause);
  }
  return true;
}

// Ends what is left in `top` (a stale tree) and removes it; the problem when it cannot.
std::string EndAndRemove(const Home& home, const fs::path& top, const std::string& name) {
  const bool v2 = home.controller.empty();
  const std::vector<fs::path> dirs = LeafFirst(top);
  const cgroups::MembershipTarget target{home.controller,
                                         cgroups::ChildCgroupPath(home.cgroup, name)};
  std::error_code ec;
  if (v2 && fs::exists(top / "cgroup.kill", ec)) {
    // The whole subtree, in the kernel. Ignored: a failure leaves members, which the rounds
    // below SIGKILL one by one.
    (void)WriteText(top / "cgroup.kill", "1");
  } else {
    for (const fs::path& d : dirs) {
      // Ignored: a group that still forks is signalled again below until none is left.
      if (fs::exists(d / "pids.max", ec)) (void)WriteText(d / "pids.max", "0");
    }
  }
  for (int round = 0; round < kKillRounds; ++round) {
    bool any = false;
    for (const fs::path& d : dirs) {
      const std::vector<pid_t> pids = ReadPids(d);
      if (pids.empty()) continue;
      any = true;
      (void)cgroups::SignalMembers(pids, target, SIGKILL);
    }
    if (!any && !(v2 && Populated(top, true))) break;
    ::usleep(kRoundPause);
  }
  for (const fs::path& d : dirs) {
    int rc = ::rmdir(d.c_str());
    for (int retry = 0; rc != 0 && errno == EBUSY && retry < kRemoveRetries; ++retry) {
      ::usleep(1000);
      rc = ::rmdir(d.c_str());
    }
    if (rc != 0 && errno != ENOENT) {
      return Error::FromErrno(ErrorKind::kCleanupFailed, "rmdir", d.string()).message;
    }
  }
  return {};
}

}  // namespace

SweepReport SweepStaleDirectories() {
  SweepReport report;
  if (const char* off = std::getenv("PTYBOX_SESSION_CGROUPS");
      off != nullptr && std::string_view(off) == "0") {
    return report;
  }
  const std::string own_comm = [] {
    std::string c = ReadText("/proc/self/comm");
    while (!c.empty() && c.back() == '\n') c.pop_back();
    return c;
  }();
  // First every judgement and the foreign-tree check, in every hierarchy; only then any kill
  // (a kill through one hierarchy leaves members that the other hierarchies still count until
  // they are reaped). The locks of the stale trees are held until the end.
  struct Stale {
    const Home* home;
    fs::path top;
    std::string reason;
    UniqueFd lock;
  };
  const std::vector<Home> homes = Homes();  // v2 first
  std::vector<Stale> stale;
  // The v2 verdict on a name is the one believed in every hierarchy: v2's `populated` ignores
  // members that exited, v1's pids.current does not.
  std::map<std::string, bool> v2_foreign;
  for (const Home& home : homes) {
    // Nothing can be removed where this process may not remove directories (an ordinary user
    // beneath a root-owned cgroup): such a hierarchy is not looked at.
    if (::faccessat(AT_FDCWD, home.directory.c_str(), W_OK, AT_EACCESS) != 0) continue;
    std::error_code ec;
    std::vector<fs::path> candidates;
    for (const fs::directory_entry& e : fs::directory_iterator(home.directory, ec)) {
      if (e.is_directory(ec) && !e.is_symlink(ec) &&
          cgroups::StaleCandidateOwner(e.path().filename().string())) {
        candidates.push_back(e.path());
      }
    }
    for (const fs::path& top : candidates) {
      const std::string name = top.filename().string();
      const pid_t owner = *cgroups::StaleCandidateOwner(name);
      // Held for the sweep: a second daemon sweeping at the same time sees it locked.
      UniqueFd lock(::open(top.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (!lock) continue;  // gone meanwhile, or not ours to open
      cgroups::OwnerFacts facts;
      facts.self = owner == ::getpid();
      facts.locked = ::flock(lock.Get(), LOCK_EX | LOCK_NB) != 0;
      facts.alive = ::kill(owner, 0) == 0 || errno != ESRCH;
      if (facts.alive) {
        if (std::string c = ReadText("/proc/" + std::to_string(owner) + "/comm"); !c.empty()) {
          while (!c.empty() && c.back() == '\n') c.pop_back();
          facts.comm = c;
        }
        facts.in_parent = cgroups::IsMember(ReadText("/proc/" + std::to_string(owner) + "/cgroup"),
                                            {home.controller, home.cgroup});
      }
      const cgroups::Judgement judged = cgroups::JudgeOwner(owner, facts, own_comm);
      if (!judged.stale) {
        report.kept.push_back(top.string() + ": " + judged.reason);
      } else if (const auto v2 = v2_foreign.find(name);
                 v2 != v2_foreign.end() ? v2->second : Foreign(top, home.controller.empty())) {
        report.problems.push_back(top.string() + " (" + judged.reason +
                                  "): left alone: it holds processes of another pid namespace");
      } else {
        stale.push_back({&home, top, judged.reason, std::move(lock)});
      }
      if (judged.stale && home.controller.empty()) {
        v2_foreign[name] = stale.empty() || stale.back().top != top;
      }
    }
  }
  for (const Stale& s : stale) {
    if (std::string problem = EndAndRemove(*s.home, s.top, s.top.filename().string());
        !problem.empty()) {
      report.problems.push_back(s.top.string() + " (" + s.reason + "): " + problem);
    } else {
      report.removed.push_back(s.top);
    }
  }
  return report;
}

}  // namespace ptybox::sandbox
