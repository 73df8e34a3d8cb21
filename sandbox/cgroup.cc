#include "sandbox/cgroup.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <iterator>
#include <sstream>

#include "common/log.h"
#include "common/random.h"
#include "common/unique_fd.h"
#include "sandbox/cgroup_file.h"

namespace ptybox::sandbox {
namespace {

namespace fs = std::filesystem;
using cgroups::ReadText;
using cgroups::Where;

// A cgroup v1 kill sweep: rounds of SIGKILL to every member of the pids cgroup (with pids.max
// at 0 none can fork meanwhile) before the caller's own polling takes over.
constexpr int kKillRounds = 64;
constexpr int kRemoveRetries = 20;

Result<void> WriteText(const fs::path& path, std::string_view text) {
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CLOEXEC));
  if (!fd) return std::unexpected(Error::FromErrno(ErrorKind::kCleanupFailed, "open", path.string()));
  ssize_t n;
  do {
    n = ::write(fd.Get(), text.data(), text.size());
  } while (n < 0 && errno == EINTR);
  if (n != static_cast<ssize_t>(text.size())) {
    return std::unexpected(Error::FromErrno(ErrorKind::kCleanupFailed, "write", path.string()));
  }
  return {};
}

std::vector<pid_t> ParsePids(std::string_view text) {
  std::vector<pid_t> pids;
  std::istringstream in{std::string(text)};
  for (long pid; in >> pid;) {
    if (pid > 0) pids.push_back(static_cast<pid_t>(pid));
  }
  return pids;
}

// One hierarchy this daemon keeps session cgroups in.
struct Hierarchy {
  std::vector<std::string> controllers;  // empty for v2; v1: those of the plan it carries
  fs::path home;           // the daemon's own cgroup
  fs::path directory;      // <home>/ptybox-<pid>-<random>
  std::string cgroup;      // `directory` as /proc/<pid>/cgroup names it
};

struct State {
  CleanupSupport support;
  // An flock on each directory of this daemon, held until exit: how another daemon's start-up
  // sweep (sandbox/cgroup_sweep.cc) tells a live owner, in any pid namespace.
  std::vector<UniqueFd> locks;
  std::vector<Hierarchy> hierarchies;  // v2 first, then v1 by controller (each path once)
};

// A forked child places itself in `cgroup` (writes "0" to its cgroup.procs, opened here, as
// a session's child does: sandbox/launcher.cc) and exits: the test that this daemon may place
// its children, without ever becoming a member itself.
Result<void> ChildCanJoin(const fs::path& cgroup) {
  const fs::path procs = cgroup / "cgroup.procs";
  UniqueFd fd(::open(procs.c_str(), O_WRONLY | O_CLOEXEC));
  if (!fd) return std::unexpected(Error::FromErrno(ErrorKind::kCleanupFailed, "open", procs.string()));
  const pid_t pid = ::fork();
  if (pid < 0) return std::unexpected(Error::FromErrno(ErrorKind::kCleanupFailed, "fork"));
  if (pid == 0) ::_exit(::write(fd.Get(), "0", 1) == 1 ? 0 : (errno & 0x7f));
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return {};
  errno = WIFEXITED(status) ? WEXITSTATUS(status) : EINTR;
  return std::unexpected(Error::FromErrno(ErrorKind::kCleanupFailed, "write", procs.string()));
}

// Creates `<home>/<name>` (locked) with a probe child a forked child could place itself in;
// the reason when it cannot.
std::string TryDirectory(const fs::path& home, const std::string& name, bool v2,
                         std::vector<UniqueFd>& locks) {
  const fs::path directory = home / name;
  if (::mkdir(directory.c_str(), 0755) != 0 && errno != EEXIST) {
    return Error::FromErrno(ErrorKind::kSandboxUnavailable, "mkdir", directory.string()).message +
           (v2 ? " (no delegated cgroup v2 subtree)" : "");
  }
  // Marked as this live daemon's at once (the start-up sweep of other daemons tries this lock).
  UniqueFd lock(::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (lock && ::flock(lock.Get(), LOCK_EX | LOCK_NB) == 0) locks.push_back(std::move(lock));
  const fs::path probe = directory / "probe";
  if (::mkdir(probe.c_str(), 0755) != 0 && errno != EEXIST) {
    std::string why = Error::FromErrno(ErrorKind::kSandboxUnavailable, "mkdir", probe.string()).message;
    ::rmdir(directory.c_str());
    return why;
  }
  Result<void> joined = ChildCanJoin(probe);
  // The child is reaped; a v1 hierarchy may list it a moment longer.
  int rc = ::rmdir(probe.c_str());
  for (int retry = 0; rc != 0 && errno == EBUSY && retry < kRemoveRetries; ++retry) {
    ::usleep(1000);
    rc = ::rmdir(probe.c_str());
  }
  if (!joined) {
    ::rmdir(directory.c_str());
    return "cannot move processes into " + directory.string() + ": " + joined.error().message;
  }
  return {};
}

std::vector<std::string> Words(const std::string& text) {
  std::vector<std::string> words;
  std::istringstream in(text);
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

State& Probed() {
  static State state = [] {
    State s;
    cgroups::HostFacts facts;
    facts.root = ::geteuid() == 0;
    if (const char* off = std::getenv("PTYBOX_SESSION_CGROUPS"); off != nullptr && std::string_view(off) == "0") {
      facts.disabled = true;
      s.support.plan = cgroups::ChoosePlan(facts);
      s.support.detail = s.support.plan.detail;
      return s;
    }
    const auto memberships = cgroups::ParseProcCgroup(ReadText("/proc/self/cgroup"));
    const auto mounts = cgroups::ParseCgroupMounts(ReadText("/proc/self/mountinfo"));
    // The pid alone could repeat: daemons in other pid namespaces may share these cgroups.
    const std::string name = "ptybox-" + std::to_string(::getpid()) + "-" + RandomHex(4);

    facts.v2_own = cgroups::OwnDirectory(memberships, mounts, "");
    const char* only = std::getenv("PTYBOX_SESSION_CGROUPS");
    if (only != nullptr && std::string_view(only) == "v1") {
      facts.v2_problem = "cgroup v2 is not used (PTYBOX_SESSION_CGROUPS=v1)";
    } else if (!facts.v2_own) {
      facts.v2_problem = "this process is in no mounted cgroup v2 hierarchy";
    } else if (std::error_code ec; !fs::exists(*facts.v2_own / "cgroup.procs", ec)) {
      facts.v2_problem = "its cgroup v2 directory " + facts.v2_own->string() + " is not visible";
    } else {
      facts.v2_problem = TryDirectory(*facts.v2_own, name, true, s.locks);
    }
    if (facts.v2_problem.empty()) {
      const fs::path dir = *facts.v2_own / name;
      std::error_code ec;
      // cgroup.kill is in every non-root cgroup on Linux 5.14+: look at a child's.
      if (::mkdir((dir / "probe").c_str(), 0755) == 0) {
        facts.v2_kill = fs::exists(dir / "probe" / "cgroup.kill", ec);
        ::rmdir((dir / "probe").c_str());
      }
      // The controllers the daemon's cgroup hands down, enabled for its session cgroups.
      const std::vector<std::string> available = Words(ReadText(dir / "cgroup.controllers"));
      for (std::string_view c : cgroups::kControllers) {
        if (std::find(available.begin(), available.end(), c) == available.end()) continue;
        (void)WriteText(dir / "cgroup.subtree_control", "+" + std::string(c));
      }
      facts.v2_controllers = Words(ReadText(dir / "cgroup.subtree_control"));
    }
    std::map<std::string, fs::path> v1_created;  // controller -> directory
    for (std::string_view c : cgroups::kControllers) {
      const std::string controller(c);
      if (facts.v2_problem.empty() &&
          std::find(facts.v2_controllers.begin(), facts.v2_controllers.end(), c) != facts.v2_controllers.end()) {
        continue;
      }
      std::optional<fs::path> own = cgroups::OwnDirectory(memberships, mounts, c);
      if (!own) {
        facts.v1_problems[controller] = "neither cgroup v2 nor a mounted v1 hierarchy provides it";
        continue;
      }
      bool shared = false;  // a hierarchy that carries two of the controllers (cpu,memory)
      for (const auto& [other, dir] : v1_created) shared = shared || dir == *own / name;
      const std::string problem = shared ? std::string() : TryDirectory(*own, name, false, s.locks);
      if (!problem.empty()) {
        facts.v1_problems[controller] = problem;
        continue;
      }
      facts.v1_own[controller] = *own;
      v1_created[controller] = *own / name;
    }

    s.support.plan = cgroups::ChoosePlan(facts);
    const cgroups::Plan& plan = s.support.plan;
    if (facts.v2_problem.empty()) {
      if (plan.use_v2) {
        s.hierarchies.push_back(
            {{}, *facts.v2_own, *facts.v2_own / name,
             cgroups::ChildCgroupPath(cgroups::OwnCgroupPath(memberships, "").value_or("/"), name)});
      } else {
        ::rmdir((*facts.v2_own / name).c_str());
      }
    }
    for (const auto& [controller, dir] : v1_created) {
      if (plan.v1.contains(controller)) {
        Hierarchy* seen = nullptr;
        for (Hierarchy& h : s.hierarchies) {
          if (h.directory == dir) seen = &h;
        }
        if (seen != nullptr) {
          seen->controllers.push_back(controller);
        } else {
          s.hierarchies.push_back(
              {{controller}, dir.parent_path(), dir,
               cgroups::ChildCgroupPath(cgroups::OwnCgroupPath(memberships, controller).value_or("/"),
                                        name)});
        }
      } else {
        ::rmdir(dir.c_str());
      }
    }
    s.support.cgroups = plan.cgroups && !s.hierarchies.empty();
    if (s.support.cgroups) s.support.directory = s.hierarchies.front().directory;
    s.support.detail = "per-session cgroups: " + plan.mechanism + " (" + plan.detail + ")" +
                       (s.support.cgroups ? " under " + s.support.directory.string() : "");
    if (!s.support.cgroups) {
      s.support.detail += "; the subreaper rule ends leaked processes (every unknown child the daemon adopts)";
    }
    return s;
  }();
  return state;
}

}  // namespace

const CleanupSupport& SessionCleanupSupport() { return Probed().support; }

void RemoveCleanupDirectory() {
  for (const Hierarchy& h : Probed().hierarchies) ::rmdir(h.directory.c_str());
}

Result<SessionCgroup> SessionCgroup::Create(const std::string& name,
                                            const cgroups::SessionLimits& limits) {
  const State& state = Probed();
  if (!state.support.cgroups) {
    return Fail(ErrorKind::kSpawnFailed,
                "per-session cgroups are unavailable: " + state.support.detail);
  }
  std::vector<Member> members;
  for (const Hierarchy& h : state.hierarchies) {
    fs::path path = h.directory / name;
    if (::mkdir(path.c_str(), 0755) != 0) {
      Error error = Error::FromErrno(ErrorKind::kSpawnFailed, "mkdir", path.string());
      for (const Member& m : members) ::rmdir(m.path.c_str());
      return std::unexpected(error);
    }
    cgroups::MembershipTarget target{h.controllers.empty() ? std::string() : h.controllers.front(),
                                     cgroups::ChildCgroupPath(h.cgroup, name)};
    members.push_back({h.controllers, std::move(path), std::move(target)});
  }
  SessionCgroup cgroup(std::move(members));
  for (const cgroups::LimitFile& file : cgroups::RenderLimits(limits, state.support.plan)) {
    const Member* target = nullptr;
    for (const Member& m : cgroup.members_) {
      const bool v2 = m.controllers.empty();
      if (file.controller.empty() ? v2
                                  : std::find(m.controllers.begin(), m.controllers.end(),
                                              file.controller) != m.controllers.end()) {
        target = &m;
      }
    }
    if (target == nullptr) continue;
    const fs::path path = target->path / file.file;
    std::error_code ec;
    if (file.optional && !fs::exists(path, ec)) continue;
    if (Result<void> written = WriteText(path, file.value); !written) {
      if (file.optional) continue;
      return Fail(ErrorKind::kSpawnFailed, "cannot set the session limit " + file.file + " = " +
                                               file.value + ": " + written.error().message);
    }
  }
  return cgroup;
}

SessionCgroup::SessionCgroup(SessionCgroup&& other) noexcept
    : path_(std::move(other.path_)),
      members_(std::move(other.members_)),
      removed_(other.removed_) {
  other.removed_ = true;
}

SessionCgroup& SessionCgroup::operator=(SessionCgroup&& other) noexcept {
  if (this != &other) {
    if (!removed_) (void)Remove();
    path_ = std::move(other.path_);
    members_ = std::move(other.members_);
    removed_ = other.removed_;
    other.removed_ = true;
  }
  return *this;
}

SessionCgroup::~SessionCgroup() {
  if (!removed_) (void)Remove();
}

Result<std::vector<UniqueFd>> SessionCgroup::OpenPlacement() const {
  if (removed_) {
    return Fail(ErrorKind::kSpawnFailed, "the session cgroup " + path_.string() + " is removed");
  }
  std::vector<UniqueFd> fds;
  for (const Member& m : members_) {
    const fs::path procs = m.path / "cgroup.procs";
    UniqueFd fd(::open(procs.c_str(), O_WRONLY | O_CLOEXEC));
    if (!fd) return std::unexpected(Error::FromErrno(ErrorKind::kSpawnFailed, "open", procs.string()));
    fds.push_back(std::move(fd));
  }
  return fds;
}

std::vector<pid_t> SessionCgroup::Pids() const {
  std::vector<pid_t> pids;
  for (const Member& m : members_) {
    for (pid_t pid : ParsePids(ReadText(m.path / "cgroup.procs"))) {
      if (std::find(pids.begin(), pids.end(), pid) == pids.end()) pids.push_back(pid);
    }
  }
  return pids;
}

Result<void> SessionCgroup::Kill() {
  if (removed_) {
    return Fail(ErrorKind::kCleanupFailed, "the session cgroup " + path_.string() + " is removed");
  }
  const cgroups::Plan& plan = Probed().support.plan;
  if (plan.kill_v2) {
    for (const Member& m : members_) {
      if (m.controllers.empty()) return WriteText(m.path / "cgroup.kill", "1");
    }
  }
  // No cgroup.kill: stop the session from starting tasks (pids.max 0 fails every fork and
  // clone), then SIGKILL its members until none is left or the rounds run out (the caller
  // polls on and repeats).
  for (const Member& m : members_) {
    std::error_code ec;
    if (fs::exists(m.path / "pids.max", ec)) (void)WriteText(m.path / "pids.max", "0");
  }
  // Each pid through a pidfd, and only while it still names a member: a pid read from
  // cgroup.procs may have been reused by another process meanwhile (sandbox/cgroup_signal.h).
  for (int round = 0; round < kKillRounds; ++round) {
    bool any = false;
    for (const Member& m : members_) {
      const std::vector<pid_t> pids = ParsePids(ReadText(m.path / "cgroup.procs"));
      any = any || !pids.empty();
      (void)cgroups::SignalMembers(pids, m.target, SIGKILL);
    }
    if (!any) break;
  }
  return {};
}

Result<bool> SessionCgroup::Populated() const {
  for (const Member& m : members_) {
    if (!m.controllers.empty()) continue;
    std::string events = ReadText(m.path / "cgroup.events");
    if (events.find("populated 0") != std::string::npos) return false;
    if (events.find("populated 1") != std::string::npos) return true;
    return Fail(ErrorKind::kCleanupFailed, "cannot read " + (m.path / "cgroup.events").string());
  }
  // v1 only: a member is listed until it is reaped or gone; zombies count as populated here
  // (the daemon reaps its own; the subreaper adopts the rest).
  std::error_code ec;
  if (!members_.empty() && !fs::exists(members_.front().path / "cgroup.procs", ec)) {
    return Fail(ErrorKind::kCleanupFailed,
                "cannot read " + (members_.front().path / "cgroup.procs").string());
  }
  return !Pids().empty();
}

std::string SessionCgroup::Members() const {
  std::string text;
  for (pid_t pid : Pids()) text += (text.empty() ? "" : " ") + std::to_string(pid);
  return text;
}

Result<void> SessionCgroup::Remove() {
  if (removed_) return {};
  for (const Member& m : members_) {
    // A v1 hierarchy may still list a member the kernel is tearing down (EBUSY) a moment after
    // v2 reported the session empty: a few short retries.
    int rc = ::rmdir(m.path.c_str());
    for (int retry = 0; rc != 0 && errno == EBUSY && retry < kRemoveRetries; ++retry) {
      ::usleep(1000);
      rc = ::rmdir(m.path.c_str());
    }
    if (rc != 0 && errno != ENOENT) {
      return std::unexpected(Error::FromErrno(ErrorKind::kCleanupFailed, "rmdir", m.path.string()));
    }
  }
  removed_ = true;
  return {};
}

}  // namespace ptybox::sandbox
