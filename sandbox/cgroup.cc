#include "sandbox/cgroup.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>

#include "common/join.h"
#include "common/log.h"
#include "common/unique_fd.h"
#include "sandbox/cgroup_file.h"

namespace ptybox::sandbox {
namespace {

namespace fs = std::filesystem;
using cgroups::ParsePids;
using cgroups::ReadText;
using cgroups::WriteText;

// A cgroup v1 kill sweep: rounds of SIGKILL to every member of the pids cgroup (with pids.max
// at 0 none can fork meanwhile) before the caller's own polling takes over.
constexpr int kKillRounds = 64;

}  // namespace

Result<SessionCgroup> SessionCgroup::Create(const CgroupHost& host, const std::string& name,
                                            const cgroups::SessionLimits& limits) {
  const CleanupSupport& support = host.support();
  if (!support.cgroups) {
    return Fail(ErrorKind::kSpawnFailed, "per-session cgroups are unavailable: " + support.detail);
  }
  std::vector<Member> members;
  for (const CgroupHierarchy& h : host.hierarchies()) {
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
  SessionCgroup cgroup(std::move(members), support.plan.kill_v2);
  for (const cgroups::LimitFile& file : cgroups::RenderLimits(limits, support.plan)) {
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
      kill_v2_(other.kill_v2_),
      removed_(other.removed_) {
  other.removed_ = true;
}

SessionCgroup& SessionCgroup::operator=(SessionCgroup&& other) noexcept {
  if (this != &other) {
    if (!removed_) (void)Remove();  // best effort: the start-up sweep removes what is left
    path_ = std::move(other.path_);
    members_ = std::move(other.members_);
    kill_v2_ = other.kill_v2_;
    removed_ = other.removed_;
    other.removed_ = true;
  }
  return *this;
}

SessionCgroup::~SessionCgroup() {
  if (!removed_) (void)Remove();  // best effort: the start-up sweep removes what is left
}

Result<std::vector<UniqueFd>> SessionCgroup::OpenPlacement() const {
  if (removed_) {
    return Fail(ErrorKind::kSpawnFailed, "the session cgroup " + path_.string() + " is removed");
  }
  std::vector<UniqueFd> fds;
  for (const Member& m : members_) {
    const fs::path procs = m.path / "cgroup.procs";
    UniqueFd fd(::open(procs.c_str(), O_WRONLY | O_CLOEXEC));
    if (!fd)
      return std::unexpected(Error::FromErrno(ErrorKind::kSpawnFailed, "open", procs.string()));
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
  if (kill_v2_) {
    for (const Member& m : members_) {
      if (m.controllers.empty()) return WriteText(m.path / "cgroup.kill", "1");
    }
  }
  // No cgroup.kill: stop the session from starting tasks (pids.max 0 fails every fork and
  // clone), then SIGKILL its members until none is left or the rounds run out (the caller
  // polls on and repeats).
  for (const Member& m : members_) {
    std::error_code ec;
    // Ignored: a group that still forks is signalled again below until none is left.
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

std::optional<size_t> SessionCgroup::Tasks() const {
  for (const Member& m : members_) {
    const std::string text = ReadText(m.path / "pids.current");
    size_t n = 0;
    const char* end = text.data() + text.size();
    auto [ptr, ec] = std::from_chars(text.data(), end, n);
    if (ec == std::errc() && ptr != text.data() && (ptr == end || *ptr == '\n')) return n;
  }
  return std::nullopt;
}

std::string SessionCgroup::Members() const {
  std::vector<std::string> pids;
  for (pid_t pid : Pids()) pids.push_back(std::to_string(pid));
  return Join(pids, " ");
}

Result<void> SessionCgroup::Remove() {
  if (removed_) return {};
  // Members left to remove stay listed: a retry takes up only those.
  while (!members_.empty()) {
    const fs::path& path = members_.back().path;
    if (::rmdir(path.c_str()) != 0 && errno != ENOENT) {
      return std::unexpected(Error::FromErrno(ErrorKind::kCleanupFailed, "rmdir", path.string()));
    }
    members_.pop_back();
  }
  removed_ = true;
  return {};
}

}  // namespace ptybox::sandbox
