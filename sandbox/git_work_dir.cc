// This process's git work directory and the sweep of ended processes' (git_work_dir.h).
#include "sandbox/git_work_dir.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <mutex>
#include <string>
#include <system_error>
#include <vector>

#include "common/log.h"
#include "common/unique_fd.h"
#include "sandbox/host_walls.h"

namespace ptybox::sandbox {
namespace {

// `<run-time directory>/git`, or `/tmp/ptybox-git-<uid>`: mode 0700, this uid's, not a link.
std::optional<std::filesystem::path> Parent() {
  std::filesystem::path parent;
  if (std::optional<std::filesystem::path> runtime = PerUserRuntimeDirectory()) {
    ::mkdir(runtime->c_str(), 0700);
    parent = *runtime / "git";
  } else {
    parent = "/tmp/ptybox-git-" + std::to_string(::geteuid());
  }
  ::mkdir(parent.c_str(), 0700);
  struct stat st {};
  if (::lstat(parent.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != ::geteuid() ||
      (st.st_mode & 0077) != 0) {
    LogWarn("no directory of mode 0700 owned by uid " + std::to_string(::geteuid()) + " at " +
            parent.string() +
            " for private git directories; repositories stay read-only in sessions. Remove or "
            "fix it (mode 0700, owned by the daemon's user) and restart the daemon");
    return std::nullopt;
  }
  return parent;
}

UniqueFd OpenDirectory(const std::filesystem::path& path) {
  return UniqueFd(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
}

struct Held {
  std::filesystem::path path;
  UniqueFd lock;  // holds the flock for the life of the process
};

// With the parent locked (flock on its descriptor), so that no other process's directory is
// taken between its mkdtemp and its flock.
size_t SweepLocked(const std::filesystem::path& parent) {
  std::vector<std::filesystem::path> stale;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(parent, ec)) {
    const std::string name = entry.path().filename().string();
    if (!name.starts_with("p-")) continue;
    UniqueFd dir = OpenDirectory(entry.path());
    if (!dir) continue;  // not a directory, or a link: never ours
    if (::flock(dir.Get(), LOCK_EX | LOCK_NB) != 0) continue;  // a live process holds it
    stale.push_back(entry.path());
  }
  size_t removed = 0;
  for (const std::filesystem::path& path : stale) {
    std::filesystem::remove_all(path, ec);  // never follows a link
    if (ec) {
      LogWarn("cannot remove " + path.string() +
              ", left by an ended ptybox process: " + ec.message());
      continue;
    }
    ++removed;
  }
  return removed;
}

std::optional<Held> MakeOwn() {
  std::optional<std::filesystem::path> parent = Parent();
  if (!parent) return std::nullopt;
  UniqueFd parent_fd = OpenDirectory(*parent);
  if (!parent_fd || ::flock(parent_fd.Get(), LOCK_EX) != 0) {
    LogWarn("cannot lock " + parent->string() + ": " + std::generic_category().message(errno) +
            "; repositories stay read-only in sessions");
    return std::nullopt;
  }
  if (const size_t removed = SweepLocked(*parent); removed != 0) {
    LogInfo("removed " + std::to_string(removed) +
            " git work directories left by ended ptybox processes in " + parent->string());
  }
  std::string name = (*parent / ("p-" + std::to_string(::getpid()) + "-XXXXXX")).string();
  Held held;
  if (::mkdtemp(name.data()) != nullptr) {
    held.path = name;
    held.lock = OpenDirectory(held.path);
  }
  if (!held.lock || ::flock(held.lock.Get(), LOCK_EX | LOCK_NB) != 0) {
    LogWarn("cannot make and lock a git work directory in " + parent->string() + ": " +
            std::generic_category().message(errno) + "; repositories stay read-only in sessions");
    return std::nullopt;
  }
  return held;  // the parent's lock goes with parent_fd
}

}  // namespace

std::optional<std::filesystem::path> GitWorkDirectory() {
  static std::once_flag once;
  static std::optional<Held>* held = nullptr;  // never destroyed: the lock lasts to the exit
  std::call_once(once, [] { held = new std::optional<Held>(MakeOwn()); });
  if (!*held) return std::nullopt;
  return (*held)->path;
}

size_t SweepStaleGitWorkDirectories(const std::filesystem::path& parent) {
  UniqueFd parent_fd = OpenDirectory(parent);
  if (!parent_fd || ::flock(parent_fd.Get(), LOCK_EX) != 0) return 0;
  return SweepLocked(parent);
}

}  // namespace ptybox::sandbox
