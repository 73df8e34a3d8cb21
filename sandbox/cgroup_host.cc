#include "sandbox/cgroup_host.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <sstream>

#include "common/error.h"
#include "common/random.h"
#include "sandbox/cgroup_file.h"
#include "sandbox/cgroup_signal.h"
#include "sandbox/init/child_exec.h"

namespace ptybox::sandbox {
namespace {

namespace fs = std::filesystem;
using cgroups::ReadText;
using cgroups::WriteText;

// At set-up only (before the reactor runs): a v1 hierarchy may list the probe child a moment
// after it was reaped.
constexpr int kProbeRemoveRetries = 20;

// A forked child places itself in `cgroup` (writes "0" to its cgroup.procs, opened here, as a
// session's child does: sandbox/launcher.cc) and exits: the test that this process may place
// its children, without ever becoming a member itself.
Result<void> ChildCanJoin(const fs::path& cgroup) {
  const fs::path procs = cgroup / "cgroup.procs";
  UniqueFd fd(::open(procs.c_str(), O_WRONLY | O_CLOEXEC));
  if (!fd) {
    return std::unexpected(Error::FromErrno(ErrorKind::kCleanupFailed, "open", procs.string()));
  }
  int report[2];
  if (::pipe2(report, O_CLOEXEC) != 0) {
    return std::unexpected(Error::FromErrno(ErrorKind::kCleanupFailed, "pipe2"));
  }
  UniqueFd report_read(report[0]);
  UniqueFd report_write(report[1]);
  const pid_t pid = ::fork();
  if (pid < 0) return std::unexpected(Error::FromErrno(ErrorKind::kCleanupFailed, "fork"));
  if (pid == 0) {
    if (::write(fd.Get(), "0", 1) != 1) FailChild({ChildStage::kCgroup, errno}, report_write.Get());
    ::_exit(0);
  }
  report_write.Reset();
  const std::optional<ChildFailure> failure = AwaitChildExec(report_read.Get());
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (failure) {
    return std::unexpected(
        Error::FromErrno(ErrorKind::kCleanupFailed, "write", procs.string(), failure->err));
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return {};
  return Fail(ErrorKind::kCleanupFailed, "the child placing itself in " + procs.string() +
                                             " did not exit cleanly (status " +
                                             std::to_string(status) + ")");
}

// Creates `<home>/<name>` (locked) and proves a forked child can place itself in a test cgroup
// there; the reason when it cannot ("" when it can).
std::string MakeDirectory(const fs::path& home, const std::string& name, bool v2,
                          std::vector<UniqueFd>& locks) {
  const fs::path directory = home / name;
  if (::mkdir(directory.c_str(), 0755) != 0 && errno != EEXIST) {
    return Error::FromErrno(ErrorKind::kSandboxUnavailable, "mkdir", directory.string()).message +
           (v2 ? " (no delegated cgroup v2 subtree)" : "");
  }
  // Marked as this live process's at once (the start-up sweep of other daemons tries this lock).
  UniqueFd lock(::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (lock && ::flock(lock.Get(), LOCK_EX | LOCK_NB) == 0) locks.push_back(std::move(lock));
  const fs::path probe = directory / "probe";
  if (::mkdir(probe.c_str(), 0755) != 0 && errno != EEXIST) {
    std::string why =
        Error::FromErrno(ErrorKind::kSandboxUnavailable, "mkdir", probe.string()).message;
    ::rmdir(directory.c_str());
    return why;
  }
  Result<void> joined = ChildCanJoin(probe);
  int rc = ::rmdir(probe.c_str());
  for (int retry = 0; rc != 0 && errno == EBUSY && retry < kProbeRemoveRetries; ++retry) {
    ::usleep(1000);
    rc = ::rmdir(probe.c_str());
  }
  if (!joined) {
    ::rmdir(directory.c_str());
    return "cannot move processes into " + directory.string() + ": " + joined.error().message;
  }
  return {};
}

// What MakeDirectory would say, from the access bits alone: creating a directory in `home`
// needs write access to it, and a child moving from `home` into a cgroup below needs write
// access to `home`'s cgroup.procs (their common ancestor's).
std::string JudgeDirectory(const fs::path& home, bool v2) {
  for (const fs::path& path : {home, home / "cgroup.procs"}) {
    if (::faccessat(AT_FDCWD, path.c_str(), W_OK, AT_EACCESS) != 0) {
      return Error::FromErrno(ErrorKind::kSandboxUnavailable, "access(W_OK)", path.string())
                 .message +
             (v2 ? " (no delegated cgroup v2 subtree)" : "");
    }
  }
  return {};
}

std::vector<std::string> Words(const std::string& text) {
  std::vector<std::string> words;
  std::istringstream in(text);
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

bool Has(const std::vector<std::string>& words, std::string_view word) {
  return std::find(words.begin(), words.end(), word) != words.end();
}

// Whether the running kernel is Linux `major`.`minor` or later (uname's release).
bool KernelAtLeast(int major, int minor) {
  struct utsname name {};
  if (::uname(&name) != 0) return false;
  int have_major = 0;
  int have_minor = 0;
  if (std::sscanf(name.release, "%d.%d", &have_major, &have_minor) != 2) return false;
  return have_major > major || (have_major == major && have_minor >= minor);
}

// Whether a cgroup made beneath `own` would have cgroup.kill (Linux 5.14+): every non-root
// cgroup has it, so `own` itself tells; at the hierarchy's root (which has none) the kernel's
// release decides. Not the root's children: other processes make and remove them at any moment,
// so two looks (doctor's Inspect, the daemon's SetUp) could disagree.
bool V2HasKill(const fs::path& own) {
  std::error_code ec;
  if (fs::exists(own / "cgroup.kill", ec)) return true;
  return KernelAtLeast(5, 14);
}

// Everything read about this host, and what SetUp made of it.
struct Survey {
  cgroups::HostFacts facts;
  std::vector<cgroups::Membership> memberships;
  std::string name;                         // ptybox-<pid>-<random>
  std::map<std::string, fs::path> v1_dirs;  // controller -> <own v1 cgroup>/<name>
  std::vector<UniqueFd> locks;              // SetUp only
};

// The v2 hierarchy: whether this process's directory can be (or was) made there, whether
// cgroup.kill exists, and the controllers its session cgroups get.
void SurveyV2(Survey& s, const std::vector<cgroups::Mount>& mounts, bool create) {
  cgroups::HostFacts& facts = s.facts;
  facts.v2_own = cgroups::OwnDirectory(s.memberships, mounts, "");
  const char* only = std::getenv("PTYBOX_SESSION_CGROUPS");
  if (only != nullptr && std::string_view(only) == "v1") {
    facts.v2_problem = "cgroup v2 is not used (PTYBOX_SESSION_CGROUPS=v1)";
  } else if (!facts.v2_own) {
    facts.v2_problem = "this process is in no mounted cgroup v2 hierarchy";
  } else if (std::error_code ec; !fs::exists(*facts.v2_own / "cgroup.procs", ec)) {
    facts.v2_problem = "its cgroup v2 directory " + facts.v2_own->string() + " is not visible";
  } else {
    facts.v2_problem = create ? MakeDirectory(*facts.v2_own, s.name, true, s.locks)
                              : JudgeDirectory(*facts.v2_own, true);
  }
  if (!facts.v2_problem.empty()) return;
  std::error_code ec;
  if (!create) {
    // A directory made here would offer what the own cgroup's subtree_control hands down.
    facts.v2_kill = V2HasKill(*facts.v2_own);
    for (const std::string& c : Words(ReadText(*facts.v2_own / "cgroup.subtree_control"))) {
      if (std::ranges::find(cgroups::kControllers, c) != std::end(cgroups::kControllers)) {
        facts.v2_controllers.push_back(c);
      }
    }
    return;
  }
  const fs::path dir = *facts.v2_own / s.name;
  // cgroup.kill is in every non-root cgroup on Linux 5.14+: look at a child's.
  if (::mkdir((dir / "probe").c_str(), 0755) == 0) {
    facts.v2_kill = fs::exists(dir / "probe" / "cgroup.kill", ec);
    ::rmdir((dir / "probe").c_str());
  }
  // The controllers the own cgroup hands down, enabled for the session cgroups.
  const std::vector<std::string> available = Words(ReadText(dir / "cgroup.controllers"));
  for (std::string_view c : cgroups::kControllers) {
    // Ignored: a controller that cannot be enabled is one the plan reports as not held.
    if (Has(available, c)) (void)WriteText(dir / "cgroup.subtree_control", "+" + std::string(c));
  }
  facts.v2_controllers = Words(ReadText(dir / "cgroup.subtree_control"));
}

// The v1 hierarchies, for each controller v2 does not provide.
void SurveyV1(Survey& s, const std::vector<cgroups::Mount>& mounts, bool create) {
  cgroups::HostFacts& facts = s.facts;
  for (std::string_view c : cgroups::kControllers) {
    const std::string controller(c);
    if (facts.v2_problem.empty() && Has(facts.v2_controllers, c)) continue;
    std::optional<fs::path> own = cgroups::OwnDirectory(s.memberships, mounts, c);
    if (!own) {
      facts.v1_problems[controller] = "neither cgroup v2 nor a mounted v1 hierarchy provides it";
      continue;
    }
    bool shared = false;  // a hierarchy that carries two of the controllers (cpu,memory)
    for (const auto& [other, dir] : s.v1_dirs) shared = shared || dir == *own / s.name;
    std::string problem;
    if (!shared) {
      problem = create ? MakeDirectory(*own, s.name, false, s.locks) : JudgeDirectory(*own, false);
    }
    if (!problem.empty()) {
      facts.v1_problems[controller] = problem;
      continue;
    }
    facts.v1_own[controller] = *own;
    s.v1_dirs[controller] = *own / s.name;
  }
}

Survey SurveyHost(bool create) {
  Survey s;
  s.facts.root = ::geteuid() == 0;
  const char* mode = std::getenv("PTYBOX_SESSION_CGROUPS");
  if (mode != nullptr && std::string_view(mode) == "0") {
    s.facts.disabled = true;
    return s;
  }
  s.memberships = cgroups::ParseProcCgroup(ReadText("/proc/self/cgroup"));
  const auto mounts = cgroups::ParseCgroupMounts(ReadText("/proc/self/mountinfo"));
  // The pid alone could repeat: daemons in other pid namespaces may share these cgroups.
  s.name = "ptybox-" + std::to_string(::getpid()) + "-" + RandomHex(4);
  SurveyV2(s, mounts, create);
  SurveyV1(s, mounts, create);
  return s;
}

// The hierarchies the plan uses; the directories it does not use are removed again.
std::vector<CgroupHierarchy> KeepPlanned(const Survey& s, const cgroups::Plan& plan) {
  std::vector<CgroupHierarchy> kept;
  const cgroups::HostFacts& facts = s.facts;
  if (facts.v2_problem.empty() && facts.v2_own) {
    if (plan.use_v2) {
      kept.push_back({{},
                      *facts.v2_own,
                      *facts.v2_own / s.name,
                      cgroups::ChildCgroupPath(
                          cgroups::OwnCgroupPath(s.memberships, "").value_or("/"), s.name)});
    } else {
      ::rmdir((*facts.v2_own / s.name).c_str());
    }
  }
  for (const auto& [controller, dir] : s.v1_dirs) {
    if (!plan.v1.contains(controller)) {
      ::rmdir(dir.c_str());
      continue;
    }
    auto seen = std::find_if(kept.begin(), kept.end(),
                             [&dir](const CgroupHierarchy& h) { return h.directory == dir; });
    if (seen != kept.end()) {
      seen->controllers.push_back(controller);
      continue;
    }
    kept.push_back({{controller},
                    dir.parent_path(),
                    dir,
                    cgroups::ChildCgroupPath(
                        cgroups::OwnCgroupPath(s.memberships, controller).value_or("/"), s.name)});
  }
  return kept;
}

std::string Describe(const CleanupSupport& support, std::string_view where) {
  const cgroups::Plan& plan = support.plan;
  std::string detail = "per-session cgroups: " + plan.mechanism + " (" + plan.detail + ")";
  if (support.cgroups) {
    return detail + " " + std::string(where) + " " + support.directory.string();
  }
  return detail +
         "; the subreaper rule ends leaked processes (every unknown child the daemon adopts)";
}

}  // namespace

std::shared_ptr<const CgroupHost> CgroupHost::SetUp() {
  Survey s = SurveyHost(/*create=*/true);
  std::shared_ptr<CgroupHost> host(new CgroupHost());
  host->support_.plan = cgroups::ChoosePlan(s.facts);
  if (s.facts.disabled) {
    host->support_.detail = host->support_.plan.detail;
    return host;
  }
  host->hierarchies_ = KeepPlanned(s, host->support_.plan);
  host->locks_ = std::move(s.locks);
  host->support_.cgroups = host->support_.plan.cgroups && !host->hierarchies_.empty();
  if (host->support_.cgroups) host->support_.directory = host->hierarchies_.front().directory;
  host->support_.detail = Describe(host->support_, "under");
  return host;
}

CleanupSupport CgroupHost::Inspect() {
  const Survey s = SurveyHost(/*create=*/false);
  CleanupSupport support;
  support.plan = cgroups::ChoosePlan(s.facts);
  if (s.facts.disabled) {
    support.detail = support.plan.detail;
    return support;
  }
  support.cgroups = support.plan.cgroups;
  if (support.plan.use_v2 && s.facts.v2_own) {
    support.directory = *s.facts.v2_own;
  } else if (!support.plan.v1.empty()) {
    support.directory = support.plan.v1.begin()->second;
  } else {
    support.cgroups = false;
  }
  support.detail = Describe(support, "beneath");
  return support;
}

CgroupHost::~CgroupHost() {
  for (const CgroupHierarchy& h : hierarchies_) ::rmdir(h.directory.c_str());
}

}  // namespace ptybox::sandbox
