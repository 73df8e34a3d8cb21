#include "sandbox/cgroup.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <sstream>

#include "common/log.h"
#include "common/random.h"
#include "common/unique_fd.h"

namespace ptybox::sandbox {
namespace {

namespace fs = std::filesystem;

std::string ReadText(const fs::path& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

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

// This process's cgroup v2 directory: the "0::" line of /proc/self/cgroup, under the cgroup2
// mount that holds it (hybrid hosts mount it at /sys/fs/cgroup/unified).
Result<fs::path> OwnCgroupDirectory() {
  std::string own;
  std::istringstream lines(ReadText("/proc/self/cgroup"));
  for (std::string line; std::getline(lines, line);) {
    if (line.starts_with("0::")) own = line.substr(3);
  }
  if (own.empty() || own[0] != '/') {
    return Fail(ErrorKind::kSandboxUnavailable,
                "this process is in no cgroup v2 hierarchy (/proc/self/cgroup has no 0:: line)");
  }
  std::istringstream mounts(ReadText("/proc/self/mountinfo"));
  for (std::string line; std::getline(mounts, line);) {
    size_t dash = line.find(" - ");
    if (dash == std::string::npos || !line.substr(dash + 3).starts_with("cgroup2 ")) continue;
    std::istringstream fields(line.substr(0, dash));
    std::string id, parent, devno, root, mountpoint;
    fields >> id >> parent >> devno >> root >> mountpoint;
    std::string relative;
    if (root == "/") {
      relative = own;
    } else if (own == root || own.starts_with(root + "/")) {
      relative = own.substr(root.size());
    } else {
      continue;
    }
    fs::path dir = fs::path(mountpoint) / fs::path(relative).relative_path();
    std::error_code ec;
    if (fs::exists(dir / "cgroup.procs", ec)) return dir.lexically_normal();
  }
  return Fail(ErrorKind::kSandboxUnavailable,
              "no mounted cgroup2 file system holds this process's cgroup " + own);
}

struct State {
  CleanupSupport support;
  fs::path home;  // the daemon's own cgroup (where it returns after a launch)
};

// Set by the probe before it tries a cgroup of its own (so Create and RunInside need not ask
// the probe, which is still running).
fs::path g_home;
fs::path g_directory;

State& Probed() {
  static State state = [] {
    State s;
    if (const char* off = std::getenv("PTYBOX_SESSION_CGROUPS"); off != nullptr && std::string_view(off) == "0") {
      s.support.detail = "per-session cgroups turned off (PTYBOX_SESSION_CGROUPS=0); the subreaper rule ends leaked processes";
      return s;
    }
    auto fallback = [&s](const std::string& why) {
      s.support.detail = why + "; the subreaper rule ends leaked processes (every unknown child the daemon adopts)";
      return s;
    };
    Result<fs::path> home = OwnCgroupDirectory();
    if (!home) return fallback(home.error().message);
    s.home = *home;
    g_home = *home;
    // The pid alone could repeat: daemons in other pid namespaces may share this cgroup.
    fs::path directory = *home / ("ptybox-" + std::to_string(::getpid()) + "-" + RandomHex(4));
    if (::mkdir(directory.c_str(), 0755) != 0 && errno != EEXIST) {
      return fallback(Error::FromErrno(ErrorKind::kSandboxUnavailable, "mkdir", directory.string()).message +
                      " (no delegated cgroup subtree)");
    }
    g_directory = directory;
    Result<SessionCgroup> probe = SessionCgroup::Create("probe");
    if (!probe) {
      ::rmdir(directory.c_str());
      g_directory.clear();
      return fallback(probe.error().message);
    }
    std::error_code ec;
    if (!fs::exists(probe->path() / "cgroup.kill", ec)) {
      (void)probe->Remove();
      ::rmdir(directory.c_str());
      g_directory.clear();
      return fallback("cgroup.kill is missing (Linux 5.14 or later is needed)");
    }
    if (Result<void> inside = probe->RunInside([] {}); !inside) {
      (void)probe->Remove();
      ::rmdir(directory.c_str());
      g_directory.clear();
      return fallback("cannot move processes into " + directory.string() + ": " + inside.error().message);
    }
    (void)probe->Remove();
    s.support.directory = directory;
    s.support.cgroups = true;
    s.support.detail = "per-session cgroups (cgroup v2 cgroup.kill) under " + directory.string();
    return s;
  }();
  return state;
}

}  // namespace

const CleanupSupport& SessionCleanupSupport() { return Probed().support; }

void RemoveCleanupDirectory() {
  const CleanupSupport& support = SessionCleanupSupport();
  if (support.cgroups) ::rmdir(support.directory.c_str());
}

Result<SessionCgroup> SessionCgroup::Create(const std::string& name) {
  if (g_directory.empty() && !Probed().support.cgroups) {
    return Fail(ErrorKind::kSpawnFailed,
                "per-session cgroups are unavailable: " + Probed().support.detail);
  }
  fs::path path = g_directory / name;
  if (::mkdir(path.c_str(), 0755) != 0) {
    return std::unexpected(Error::FromErrno(ErrorKind::kSpawnFailed, "mkdir", path.string()));
  }
  return SessionCgroup(path);
}

SessionCgroup::SessionCgroup(SessionCgroup&& other) noexcept
    : path_(std::move(other.path_)), holds_daemon_(other.holds_daemon_), removed_(other.removed_) {
  other.removed_ = true;
}

SessionCgroup& SessionCgroup::operator=(SessionCgroup&& other) noexcept {
  if (this != &other) {
    if (!removed_) (void)Remove();
    path_ = std::move(other.path_);
    holds_daemon_ = other.holds_daemon_;
    removed_ = other.removed_;
    other.removed_ = true;
  }
  return *this;
}

SessionCgroup::~SessionCgroup() {
  if (!removed_) (void)Remove();
}

Result<void> SessionCgroup::RunInside(const std::function<void()>& fork_and_exec) {
  const std::string self = std::to_string(::getpid());
  if (Result<void> in = WriteText(path_ / "cgroup.procs", self); !in) return in;
  holds_daemon_ = true;
  fork_and_exec();
  if (Result<void> out = WriteText(g_home / "cgroup.procs", self); !out) {
    LogError("the daemon could not leave the session cgroup " + path_.string() + ": " +
             out.error().message + "; this session's cgroup will not be used to end it");
    return out;
  }
  holds_daemon_ = false;
  return {};
}

Result<void> SessionCgroup::Kill() {
  if (holds_daemon_ || removed_) {
    return Fail(ErrorKind::kCleanupFailed, "the session cgroup " + path_.string() + " is not usable");
  }
  return WriteText(path_ / "cgroup.kill", "1");
}

Result<bool> SessionCgroup::Populated() const {
  std::string events = ReadText(path_ / "cgroup.events");
  if (events.find("populated 0") != std::string::npos) return false;
  if (events.find("populated 1") != std::string::npos) return true;
  return Fail(ErrorKind::kCleanupFailed, "cannot read " + (path_ / "cgroup.events").string());
}

std::string SessionCgroup::Members() const {
  std::string procs = ReadText(path_ / "cgroup.procs");
  for (char& c : procs) {
    if (c == '\n') c = ' ';
  }
  while (!procs.empty() && procs.back() == ' ') procs.pop_back();
  return procs;
}

Result<void> SessionCgroup::Remove() {
  if (removed_) return {};
  if (holds_daemon_) return Fail(ErrorKind::kCleanupFailed, "the daemon is still inside " + path_.string());
  if (::rmdir(path_.c_str()) != 0 && errno != ENOENT) {
    return std::unexpected(Error::FromErrno(ErrorKind::kCleanupFailed, "rmdir", path_.string()));
  }
  removed_ = true;
  return {};
}

}  // namespace ptybox::sandbox
