// Staging of the binds. The parent part opens and checks (errors are values); the child part is
// a flat list of syscalls on precomputed strings, so it stays async-signal-safe after fork.
#include "sandbox/mount_stage.h"

#include <fcntl.h>
#include <grp.h>
#include <linux/openat2.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <string_view>
#include <utility>

#include "common/log.h"
#include "common/propagate.h"
#include "sandbox/git_private.h"
#include "sandbox/git_work_dir.h"
#include "sandbox/host_walls.h"
#include "sandbox/mount_plan.h"
#include "sandbox/path_open.h"
#include "sandbox/repository_walk.h"
#include "sandbox/session_uid_lease.h"
#include "sandbox/user_namespace.h"

namespace ptybox::sandbox {
namespace {

constexpr unsigned kCloneFlags = OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH | AT_RECURSIVE;

Error IdmapError(const std::string& path, int saved) {
  return Error(ErrorKind::kSandboxUnavailable,
               "cannot give the session an idmapped mount of " + path +
                   " (mount_setattr MOUNT_ATTR_IDMAP: " + std::strerror(saved) +
                   "). A root daemon's sessions run as an unprivileged host id and reach their "
                   "roots only through idmapped mounts; ptybox never falls back to host root. "
                   "Fix: keep the workspace and writable roots on a filesystem that supports "
                   "idmapped mounts (ext4, xfs, btrfs; tmpfs from Linux 6.3, overlayfs from "
                   "5.19) on Linux 5.12 or later, or run the daemon as an ordinary user",
               path);
}

// The writable root that lexically contains `path` (the longest), or nullptr.
const OpenedPath* ContainingRoot(const std::vector<OpenedPath>& roots,
                                 const std::filesystem::path& path,
                                 std::filesystem::path& relative) {
  const OpenedPath* best = nullptr;
  for (const OpenedPath& root : roots) {
    const std::filesystem::path rel = path.lexically_normal().lexically_relative(root.path);
    if (rel.empty() || rel == "." || *rel.begin() == "..") continue;
    if (best == nullptr || root.path.string().size() > best->path.string().size()) {
      best = &root;
      relative = rel;
    }
  }
  return best;
}

// --- child side: async-signal-safe helpers ---

void Say(int fd, const char* text) noexcept { (void)::write(fd, text, std::strlen(text)); }

bool Failed(int fd, const char* what, const char* path, int saved) noexcept {
  char number[16];
  int n = 0;
  char reversed[16];
  unsigned value = static_cast<unsigned>(saved);
  do {
    reversed[n++] = static_cast<char>('0' + value % 10);
    value /= 10;
  } while (value != 0 && n < 15);
  for (int i = 0; i < n; ++i) number[i] = reversed[n - 1 - i];
  number[n] = '\0';
  Say(fd, "ptybox-launch: ");
  Say(fd, what);
  if (path != nullptr) {
    Say(fd, " ");
    Say(fd, path);
  }
  Say(fd, ": errno ");
  Say(fd, number);
  Say(fd, "\n");
  return false;
}

bool WriteFile(const char* path, const char* text) noexcept {
  const int fd = ::open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const size_t length = std::strlen(text);
  const bool ok = ::write(fd, text, length) == static_cast<ssize_t>(length);
  ::close(fd);
  return ok;
}

// A read-only, nosuid, nodev clone of `name` beneath `dir` (no links; a directory when
// `directory`), or -1 with errno set.
int ReadOnlyClone(int dir, const char* name, bool directory) noexcept {
  const int fd = OpenAt2(dir, name, O_PATH | O_NOFOLLOW | O_CLOEXEC,
                         RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS);
  if (fd < 0) return -1;
  struct stat st {};
  if (::fstat(fd, &st) != 0 || (directory ? !S_ISDIR(st.st_mode) : !S_ISREG(st.st_mode))) {
    ::close(fd);
    errno = ESTALE;
    return -1;
  }
  const int clone = static_cast<int>(::syscall(SYS_open_tree, fd, "", kCloneFlags));
  const int saved = errno;
  ::close(fd);
  if (clone < 0) {
    errno = saved;
    return -1;
  }
  struct mount_attr attr {};
  attr.attr_set = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_RDONLY;
  if (::syscall(SYS_mount_setattr, clone, "", AT_EMPTY_PATH | AT_RECURSIVE, &attr, sizeof attr) !=
      0) {
    const int failed = errno;
    ::close(clone);
    errno = failed;
    return -1;
  }
  return clone;
}

// kPrivateGit's linked worktrees: each private directory (a clone of its subdirectory of the staged
// private copy) attached over `worktrees/<id>` beneath `top` (the private copy, whose worktrees/
// is the host's, read-only, by now), then the host's own files (`clones`, in the order of
// c.worktrees and their files) attached onto their mount points in it. No links followed.
bool AttachWorktrees(const StagePlan& plan, const ComposedEntry& c, int top, const int* clones,
                     int error_fd) noexcept {
  constexpr uint64_t kNoLinks = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
  const StageEntry& mine = plan.entries[c.source_entry];
  const int from = plan.as_root ? mine.tree.Get() : mine.child_tree;
  size_t next = 0;
  for (const ComposedEntry::Worktree& w : c.worktrees) {
    const int dir = OpenAt2(from, w.private_dir.c_str(),
                            O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC, kNoLinks);
    const int source =
        dir < 0 ? -1
                : static_cast<int>(::syscall(SYS_open_tree, dir, "",
                                             OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH));
    if (dir >= 0) ::close(dir);
    struct mount_attr attr {};
    attr.attr_set = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
    const int point =
        OpenAt2(top, w.host_dir.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC, kNoLinks);
    const bool attached =
        source >= 0 && point >= 0 &&
        ::syscall(SYS_mount_setattr, source, "", AT_EMPTY_PATH, &attr, sizeof attr) == 0 &&
        ::syscall(SYS_move_mount, source, "", point, "",
                  MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) == 0;
    const int saved = errno;
    if (source >= 0) ::close(source);
    if (point >= 0) ::close(point);
    if (!attached) {
      return Failed(error_fd, "attaching a linked worktree's private directory onto",
                    w.host_dir.c_str(), saved);
    }
    const int inside =
        OpenAt2(top, w.host_dir.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC, kNoLinks);
    if (inside < 0) {
      return Failed(error_fd, "re-opening a linked worktree's private directory",
                    w.host_dir.c_str(), errno);
    }
    for (const std::string& file : w.files) {
      const int file_point =
          OpenAt2(inside, file.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC, kNoLinks);
      const long moved = file_point < 0
                             ? -1
                             : ::syscall(SYS_move_mount, clones[next], "", file_point, "",
                                         MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH);
      const int failed = errno;
      ++next;
      if (file_point >= 0) ::close(file_point);
      if (moved != 0) {
        ::close(inside);
        return Failed(error_fd,
                      "binding read-only in a linked worktree's private directory:", file.c_str(),
                      failed);
      }
    }
    ::close(inside);
  }
  return true;
}

// kPrivateGit: the host's code and configuration entries and its objects cloned read-only from
// the .git (`target`), the private directory attached over it, then each clone attached onto its
// mount point beneath the private directory (reached through the root again, no links).
bool ComposePrivateGit(const StagePlan& plan, const ComposedEntry& c, int root_fd, int target,
                       int error_fd) noexcept {
  constexpr size_t kMaxReadOnly = sizeof kGitReadOnlyEntries / sizeof kGitReadOnlyEntries[0];
  int clones[kMaxReadOnly + 1];
  size_t count = 0;
  auto close_all = [&] {
    for (size_t i = 0; i < count; ++i) ::close(clones[i]);
  };
  const size_t names =
      c.read_only_names.size() < kMaxReadOnly ? c.read_only_names.size() : kMaxReadOnly;
  for (size_t i = 0; i < names; ++i) {
    bool directory = false;
    for (const GitReadOnlyEntry& e : kGitReadOnlyEntries) {
      if (std::strcmp(e.name, c.read_only_names[i].c_str()) == 0) directory = e.directory;
    }
    clones[count] = ReadOnlyClone(target, c.read_only_names[i].c_str(), directory);
    if (clones[count] < 0) {
      const int saved = errno;
      close_all();
      return Failed(error_fd, "cloning read-only (changed since the launch read it?)",
                    c.read_only_names[i].c_str(), saved);
    }
    ++count;
  }
  clones[count] = ReadOnlyClone(target, "objects", true);
  if (clones[count] < 0) {
    const int saved = errno;
    close_all();
    return Failed(error_fd, "cloning the objects of", c.host_path.c_str(), saved);
  }
  ++count;
  // The linked worktrees' own host files, cloned while the .git is still the host's.
  constexpr size_t kMaxWorktreeFiles =
      kGitMaxWorktrees * (sizeof kGitWorktreeReadOnlyFiles / sizeof kGitWorktreeReadOnlyFiles[0]);
  int worktree_clones[kMaxWorktreeFiles];
  size_t worktree_count = 0;
  auto close_worktree_clones = [&] {
    for (size_t i = 0; i < worktree_count; ++i) ::close(worktree_clones[i]);
  };
  for (const ComposedEntry::Worktree& w : c.worktrees) {
    for (const std::string& file : w.host_files) {
      const int clone = worktree_count < kMaxWorktreeFiles
                            ? ReadOnlyClone(target, file.c_str(), false)
                            : (errno = E2BIG, -1);
      if (clone < 0) {
        const int saved = errno;
        close_worktree_clones();
        close_all();
        return Failed(error_fd, "cloning read-only (changed since the launch read it?)",
                      file.c_str(), saved);
      }
      worktree_clones[worktree_count++] = clone;
    }
  }
  const StageEntry& mine = plan.entries[c.source_entry];
  const int from = plan.as_root ? mine.tree.Get() : mine.child_tree;
  const int source = static_cast<int>(
      ::syscall(SYS_open_tree, from, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH));
  if (source < 0) {
    const int saved = errno;
    close_all();
    close_worktree_clones();
    return Failed(error_fd, "open_tree for the private git directory of", c.host_path.c_str(),
                  saved);
  }
  struct mount_attr attr {};
  attr.attr_set = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
  if (::syscall(SYS_mount_setattr, source, "", AT_EMPTY_PATH | AT_RECURSIVE, &attr, sizeof attr) !=
          0 ||
      ::syscall(SYS_move_mount, source, "", target, "",
                MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) != 0) {
    const int saved = errno;
    ::close(source);
    close_all();
    close_worktree_clones();
    return Failed(error_fd, "attaching the private git directory onto", c.host_path.c_str(), saved);
  }
  ::close(source);
  const int top =
      OpenAt2(root_fd, c.relative.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC,
              RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS);
  if (top < 0) {
    const int saved = errno;
    close_all();
    close_worktree_clones();
    return Failed(error_fd, "re-opening the private git directory at", c.host_path.c_str(), saved);
  }
  for (size_t i = 0; i < count; ++i) {
    const char* name = i < names ? c.read_only_names[i].c_str() : kGitHostObjects;
    const int point = OpenAt2(top, name, O_PATH | O_NOFOLLOW | O_CLOEXEC,
                              RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS);
    const long moved = point < 0 ? -1
                                 : ::syscall(SYS_move_mount, clones[i], "", point, "",
                                             MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH);
    const int saved = errno;
    if (point >= 0) ::close(point);
    if (moved != 0) {
      ::close(top);
      close_all();
      close_worktree_clones();
      return Failed(error_fd, "binding read-only in the private git directory:", name, saved);
    }
  }
  for (const std::string& name : c.covered_names) {
    const int cover = static_cast<int>(::syscall(SYS_open_tree, AT_FDCWD, plan.cover_dir.c_str(),
                                                 OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC));
    struct mount_attr ro {};
    ro.attr_set = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_RDONLY;
    const int point = OpenAt2(top, name.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC,
                              RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS);
    const bool ok = cover >= 0 && point >= 0 &&
                    ::syscall(SYS_mount_setattr, cover, "", AT_EMPTY_PATH, &ro, sizeof ro) == 0 &&
                    ::syscall(SYS_move_mount, cover, "", point, "",
                              MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) == 0;
    const int saved = errno;
    if (cover >= 0) ::close(cover);
    if (point >= 0) ::close(point);
    if (!ok) {
      ::close(top);
      close_all();
      close_worktree_clones();
      return Failed(error_fd, "covering in the private git directory:", name.c_str(), saved);
    }
  }
  const bool attached = AttachWorktrees(plan, c, top, worktree_clones, error_fd);
  ::close(top);
  close_all();
  close_worktree_clones();
  return attached;
}

// Makes the detached tree `source` nosuid,nodev throughout (and read-only when `read_only`),
// then attaches it onto the descriptor `target` (move_mount), closing both. 0, or the errno of
// the step that failed, which `step` then names. bwrap's recursive bind keeps the flags (it only
// adds nosuid, nodev and, in read-only mode, rdonly to submounts).
int AttachOnto(int source, int target, bool read_only, const char*& step) noexcept {
  struct mount_attr attr {};
  attr.attr_set = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | (read_only ? MOUNT_ATTR_RDONLY : 0);
  int failed = 0;
  if (::syscall(SYS_mount_setattr, source, "", AT_EMPTY_PATH | AT_RECURSIVE, &attr, sizeof attr) !=
      0) {
    failed = errno;
    step = "setting nosuid,nodev (and read-only) (mount_setattr)";
  } else if (::syscall(SYS_move_mount, source, "", target, "",
                       MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) != 0) {
    failed = errno;
    step = "move_mount onto";
  }
  ::close(source);
  ::close(target);
  return failed;
}

// Attaches each composed mount onto its staged root by descriptor (mount_stage.h).
bool ComposeNested(StagePlan& plan, int error_fd) noexcept {
  if (plan.composed.empty()) return true;
  if (::mkdir(plan.cover_dir.c_str(), 0755) != 0) {
    return Failed(error_fd, "mkdir", plan.cover_dir.c_str(), errno);
  }
  for (const ComposedEntry& c : plan.composed) {
    const StageEntry& root = plan.entries[c.root_entry];
    const int root_fd = plan.as_root ? root.tree.Get() : root.child_tree;
    const int target = OpenAt2(root_fd, c.relative.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC,
                               RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS);
    if (target < 0) {
      return Failed(error_fd, "re-opening beneath its root (changed since it was checked?)",
                    c.host_path.c_str(), errno);
    }
    struct stat st {};
    if (::fstat(target, &st) != 0 || st.st_dev != c.dev || st.st_ino != c.ino) {
      ::close(target);
      return Failed(error_fd,
                    "refusing to mount over: replaced since it was checked:", c.host_path.c_str(),
                    ESTALE);
    }
    if (c.kind == NestedMount::Kind::kPrivateGit) {
      const bool composed = ComposePrivateGit(plan, c, root_fd, target, error_fd);
      ::close(target);
      if (!composed) return false;
      continue;
    }
    int source = -1;
    bool read_only = true;
    switch (c.kind) {
      case NestedMount::Kind::kPrivateGit:
        break;  // above
      case NestedMount::Kind::kPin:
        read_only = false;  // the directory itself, as writable as it was
        [[fallthrough]];
      case NestedMount::Kind::kProtected:
        source = static_cast<int>(::syscall(SYS_open_tree, target, "", kCloneFlags));
        break;
      case NestedMount::Kind::kCoverFile:
        source = static_cast<int>(::syscall(SYS_open_tree, AT_FDCWD, plan.cover_file.c_str(),
                                            OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC));
        break;
      case NestedMount::Kind::kCoverDir:
        source = static_cast<int>(::syscall(SYS_open_tree, AT_FDCWD, plan.cover_dir.c_str(),
                                            OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC));
        break;
      case NestedMount::Kind::kInit: {
        const StageEntry& init = plan.entries[c.source_entry];
        const int from = plan.as_root ? init.tree.Get() : init.child_tree;
        source = static_cast<int>(::syscall(SYS_open_tree, from, "",
                                            OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH));
        break;
      }
    }
    if (source < 0) {
      const int saved = errno;
      ::close(target);
      return Failed(error_fd, "open_tree for", c.host_path.c_str(), saved);
    }
    const char* step = nullptr;
    if (const int failed = AttachOnto(source, target, read_only, step); failed != 0) {
      return Failed(error_fd, step, c.host_path.c_str(), failed);
    }
  }
  return true;
}

// Covers the host's sockets (StagePlan::host_sockets) on the host root of this mount namespace,
// each reached by descriptor: a socket unbound, renamed or swapped for a link since the daemon's
// look is skipped, so no local user's churn can fail a launch, and no cover lands on a path
// other than the socket the descriptor holds.
bool CoverHostSockets(const StagePlan& plan, int error_fd) noexcept {
  for (const std::string& path : plan.host_sockets) {
    const int target = OpenAt2(AT_FDCWD, path.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC,
                               RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS);
    if (target < 0) continue;
    struct stat st {};
    if (::fstat(target, &st) != 0 || !S_ISSOCK(st.st_mode)) {
      ::close(target);
      continue;
    }
    const int source = static_cast<int>(::syscall(SYS_open_tree, AT_FDCWD, plan.cover_file.c_str(),
                                                  OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC));
    if (source < 0) {
      const int saved = errno;
      ::close(target);
      return Failed(error_fd, "open_tree for the cover of", path.c_str(), saved);
    }
    const char* step = nullptr;
    // ENOENT: unlinked after the open (a mount point must still have a name).
    if (const int failed = AttachOnto(source, target, /*read_only=*/true, step);
        failed != 0 && failed != ENOENT) {
      return Failed(error_fd, step, path.c_str(), failed);
    }
  }
  return true;
}

// The session's identity. Root daemon: a session uid of `uids`, leased host-wide. Ordinary
// user: its own ids, mapped 1:1.
Result<void> ChooseIdentity(StagePlan& plan, bool as_root, const policy::SessionUidRange& uids) {
  if (!as_root) {
    plan.self_uid_map = IdMapLine(::getuid(), ::getuid(), 1);
    plan.self_gid_map = IdMapLine(::getgid(), ::getgid(), 1);
    return {};
  }
  if (std::optional<std::string> conflict = SessionUidRangeConflictOnHost(uids)) {
    return Fail(ErrorKind::kSandboxUnavailable,
                "a root daemon runs each confined session as an unprivileged host id, but " +
                    *conflict +
                    " (set `sessionIds: {first: N, count: M}` in the operator "
                    "policy to a range no user, group or /etc/subuid entry uses)",
                "sessionIds");
  }
  // Host-wide: no other live session of any ptybox on this host has this uid.
  Result<SessionUidLease> lease = LeaseSessionUid(uids);
  if (!lease) return Propagate(lease);
  plan.session_uid = lease->uid;
  plan.session_uid_lease = std::move(lease->lock);
  return {};
}

// The staging tmpfs needs its mount point (mounted over in the child's namespace only).
Result<void> CheckStageMount(bool as_root) {
  struct stat stage_point {};
  if (::lstat(kStageMount, &stage_point) != 0 && errno == ENOENT && as_root) {
    ::mkdir(kStageMount, 0755);
  }
  if (::lstat(kStageMount, &stage_point) != 0 || !S_ISDIR(stage_point.st_mode)) {
    return Fail(ErrorKind::kSandboxUnavailable,
                std::string("the launcher stages a session's binds on a private tmpfs at ") +
                    kStageMount +
                    ", which is missing or not a directory here: create it "
                    "(mkdir -m 0755 " +
                    kStageMount + ")",
                kStageMount);
  }
  return {};
}

// Every root the policy names (the workspace first), and the ones that are bound, each opened
// once with no link in its path.
struct OpenedRoots {
  std::vector<std::filesystem::path> paths;        // every root, the workspace first
  std::vector<OpenedPath> bound;                   // only the roots that no other root holds
  std::vector<std::filesystem::path> bound_paths;  // parallel to `bound`
  uid_t owner_uid = 0;                             // the workspace's on-disk owner
  gid_t owner_gid = 0;
};

// 1. The roots. Only the roots that no other root holds are bound (mount_plan.h: a nested one
// adds no access, only a destination to race).
Result<OpenedRoots> OpenRoots(const SandboxSpec& sandbox) {
  OpenedRoots out;
  out.paths = {sandbox.workspace_root};
  out.paths.insert(out.paths.end(), sandbox.writable_roots.begin(), sandbox.writable_roots.end());
  const std::vector<std::filesystem::path> bound =
      RootsToBind(sandbox.workspace_root, sandbox.writable_roots);
  for (size_t i = 0; i < out.paths.size(); ++i) {
    const std::filesystem::path normal = out.paths[i].lexically_normal();
    Result<OpenedPath> opened = OpenRootNoFollow(normal);
    if (!opened) return Propagate(opened);
    if (i == 0) {
      // One identity: every root is idmapped with the workspace owner's mapping only, so files
      // of any other owner appear as the overflow id, never as the session.
      out.owner_uid = opened->owner_uid;
      out.owner_gid = opened->owner_gid;
    }
    if (std::find(bound.begin(), bound.end(), normal) == bound.end()) continue;
    bool seen = false;
    for (const OpenedPath& r : out.bound) seen = seen || r.path == normal;
    if (!seen) out.bound.push_back(std::move(*opened));
  }
  for (const OpenedPath& root : out.bound) out.bound_paths.push_back(root.path);
  return out;
}

// A repository's private git directory (git_private.h), made and filled from the host's .git
// (`git`, opened beneath its root). nullopt, with a warning, when the daemon has no run-time
// directory to hold it: the .git is then composed read-only as before (the session cannot
// commit there, and the host stays safe).
Result<std::optional<PrivateGit>> MakePrivateGit(const OpenedPath& git, const OpenedRoots& roots,
                                                 bool as_root) {
  std::optional<std::filesystem::path> parent = GitWorkDirectory();  // warns when none
  if (!parent) return std::optional<PrivateGit>();
  PrivateGit made;
  made.host_git = git.path;
  std::string name = (*parent / "g-XXXXXX").string();
  if (::mkdtemp(name.data()) == nullptr) {
    return std::unexpected(Error::FromErrno(ErrorKind::kSpawnFailed, "mkdtemp", name));
  }
  made.private_dir = name;
  auto fail = [](Error error) -> Result<std::optional<PrivateGit>> {
    return std::unexpected(std::move(error));  // `made` removes the directory
  };
  made.private_fd.Reset(OpenAt2(AT_FDCWD, name.c_str(),
                                O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC,
                                RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS));
  if (!made.private_fd) return fail(Error::FromErrno(ErrorKind::kSpawnFailed, "openat2", name));
  made.host_fd.Reset(::openat(git.fd.Get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!made.host_fd) {
    return fail(Error::FromErrno(ErrorKind::kSpawnFailed, "openat", git.path.string()));
  }
  std::optional<GitOwner> owner;
  if (as_root) {
    owner = GitOwner{roots.owner_uid, roots.owner_gid};
    if (::fchown(made.private_fd.Get(), owner->uid, owner->gid) != 0) {
      return fail(Error::FromErrno(ErrorKind::kSpawnFailed, "fchown", name));
    }
  }
  Result<GitSnapshot> snapshot =
      PreparePrivateGit(made.host_fd.Get(), made.private_fd.Get(), kGitHostObjectsAlternate, owner);
  if (!snapshot) {
    // Not a repository git can use (no HEAD: a directory merely named .git), or unreadable:
    // composed read-only as before, which protects the host as well.
    LogWarn("no private git directory for " + git.path.string() + " (" +
            snapshot.error().Describe() + "); it stays read-only in the session");
    return std::optional<PrivateGit>();  // `made` removes the directory
  }
  made.snapshot = std::move(*snapshot);
  MarkSharedWorktrees(made.host_fd.Get(), roots.paths, made.snapshot);
  if (::mkdirat(made.private_fd.Get(), kGitHostObjects, 0755) != 0) {
    return fail(Error::FromErrno(ErrorKind::kSpawnFailed, "mkdirat", kGitHostObjects));
  }
  return std::optional<PrivateGit>(std::move(made));
}

// 2. What is composed onto the bound roots by descriptor: protected paths (the policy files,
// each root's .git and every nested repository's, found by the walk), hidden paths and the pins
// above them. Each is opened now beneath its root without links, and the child re-opens it
// beneath the staged clone and checks it is the same inode.
Result<void> PlanComposed(StagePlan& plan, const SandboxSpec& sandbox, const OpenedRoots& roots,
                          const std::filesystem::path& init_binary,
                          const LaunchRepositories& repositories) {
  std::vector<std::filesystem::path> protected_candidates = sandbox.read_only_paths;
  if (sandbox.mode == policy::Mode::kWorkspaceWrite) {
    protected_candidates.insert(protected_candidates.end(), repositories.git_paths.begin(),
                                repositories.git_paths.end());
    protected_candidates.insert(protected_candidates.end(), repositories.submodule_dirs.begin(),
                                repositories.submodule_dirs.end());
  }
  const std::vector<NestedMount> nested =
      PlanNestedMounts(sandbox.mode, roots.bound_paths, protected_candidates, sandbox.hidden,
                       GrantedPaths(sandbox, init_binary), repositories.gitlink_dirs);
  for (const NestedMount& n : nested) {
    const OpenedPath& root = roots.bound[n.root];
    Result<std::optional<OpenedPath>> opened = OpenBeneath(root, n.relative);
    if (!opened) return Propagate(opened);
    const std::string where = (root.path / n.relative).string();
    const bool is_dir = *opened && (*opened)->type == S_IFDIR;
    if (n.kind == NestedMount::Kind::kProtected) {
      const bool submodule =
          std::binary_search(repositories.submodule_dirs.begin(), repositories.submodule_dirs.end(),
                             root.path / n.relative);
      if (submodule && !(*opened && is_dir)) {
        // Found a moment ago: a session could now make a repository there for the host's git.
        return Fail(ErrorKind::kSpawnFailed,
                    "the submodule directory " + where +
                        " was removed or replaced while the session was being launched; "
                        "nothing was started. Try again; if it persists, something keeps "
                        "changing it",
                    where);
      }
      if (!*opened) continue;  // missing or a link: not bound (docs/sandbox.md says why)
    } else if (!*opened || (n.kind == NestedMount::Kind::kCoverFile) == is_dir) {
      // The path existed when the hidden paths were collected (a moment ago): a link or a
      // different kind of object now means it is being changed. Refused rather than launched
      // with a secret uncovered.
      return Fail(
          ErrorKind::kSpawnFailed,
          std::string(n.kind == NestedMount::Kind::kPin ? "the directory " : "the hidden path ") +
              where +
              " (or a directory above it) was replaced while the session was being "
              "launched; nothing was started. Try again; if it persists, something "
              "keeps renaming it",
          where);
    }
    ComposedEntry entry;
    entry.root_entry = n.root;  // the bound roots are the first entries, in this order
    entry.relative = n.relative.string();
    entry.kind = n.kind;
    if (n.kind == NestedMount::Kind::kProtected && is_dir && policy::GitWriteEnabled() &&
        sandbox.mode == policy::Mode::kWorkspaceWrite &&
        std::find(repositories.git_paths.begin(), repositories.git_paths.end(),
                  root.path / n.relative) != repositories.git_paths.end()) {
      Result<std::optional<PrivateGit>> made = MakePrivateGit(**opened, roots, plan.as_root);
      if (!made) return Propagate(made);
      if (*made) {
        entry.kind = NestedMount::Kind::kPrivateGit;
        entry.read_only_names = (*made)->snapshot.read_only_names;
        entry.covered_names = (*made)->snapshot.covered_names;
        for (const auto& [id, worktree] : (*made)->snapshot.worktrees) {
          ComposedEntry::Worktree w;
          w.host_dir = "worktrees/" + id;
          w.private_dir = std::string(kGitPrivateWorktrees) + "/" + id;
          for (const std::string& file : worktree.read_only_names) {
            w.files.push_back(file);
            w.host_files.push_back(w.host_dir + "/" + file);
          }
          entry.worktrees.push_back(std::move(w));
        }
        entry.source_entry = plan.private_gits.size();  // an entry index once staged
        plan.private_gits.push_back(std::move(**made));
      } else {
        ++plan.gits_left_read_only;
      }
    }
    entry.dev = (*opened)->dev;
    entry.ino = (*opened)->ino;
    entry.host_path = where;
    plan.composed.push_back(std::move(entry));
  }
  return {};
}

// A ptybox-init inside a root (a build in the workspace) is composed like the rest, last, so
// bwrap resolves no destination inside a root. When its path there passes through a link (an
// operator's layout) or names another file, it stays bwrap's to bind at its path (nullopt).
Result<std::optional<ComposedEntry>> InitInsideRoot(const OpenedRoots& roots,
                                                    const std::filesystem::path& init_binary,
                                                    const OpenedPath& init) {
  std::filesystem::path init_relative;
  const int holder = HoldingRoot(roots.bound_paths, init_binary.lexically_normal(), init_relative);
  if (holder < 0) return std::nullopt;
  Result<std::optional<OpenedPath>> there =
      OpenBeneath(roots.bound[static_cast<size_t>(holder)], init_relative);
  if (!there) return Propagate(there);
  if (!*there || (*there)->dev != init.dev || (*there)->ino != init.ino) return std::nullopt;
  return ComposedEntry{.root_entry = static_cast<size_t>(holder),
                       .relative = init_relative.string(),
                       .kind = NestedMount::Kind::kInit,
                       .source_entry = 0,
                       .dev = init.dev,
                       .ino = init.ino,
                       .host_path = init_binary.string(),
                       .read_only_names = {},
                       .covered_names = {},
                       .worktrees = {}};
}

// Root daemon: bwrap runs as the session uid and must reach every bind destination (a
// workspace in /root, ptybox-init built there): a directory above one that the uid cannot
// search is veiled, an empty tmpfs holding only the path down to each destination below it.
void PlanVeils(StagePlan& plan, const std::vector<OpenedPath>& roots,
               const std::filesystem::path& init_binary) {
  std::vector<std::pair<std::filesystem::path, bool>> destinations;
  for (const OpenedPath& root : roots) destinations.emplace_back(root.path, true);
  std::filesystem::path unused;
  if (ContainingRoot(roots, init_binary, unused) == nullptr) {
    destinations.emplace_back(init_binary.lexically_normal(), false);
  }
  for (const auto& [destination, directory] : destinations) {
    const std::filesystem::path veil = TopmostVeil(destination);
    if (veil.empty()) continue;
    bool known = false;
    for (const std::string& v : plan.veils) known = known || v == veil.string();
    if (!known) plan.veils.push_back(veil.string());
    std::filesystem::path path = veil;
    const std::filesystem::path rest = destination.lexically_relative(veil);
    for (auto part = rest.begin(); part != rest.end(); ++part) {
      path /= *part;
      const bool last = std::next(part) == rest.end();
      bool seen = false;
      for (const auto& e : plan.skeleton) seen = seen || e.path == path.string();
      if (!seen) plan.skeleton.push_back({path.string(), !last || directory});
    }
  }
  // A veil inside another veil is already covered by the outer tmpfs.
  std::erase_if(plan.veils, [&](const std::string& v) {
    for (const std::string& outer : plan.veils) {
      if (v != outer && v.starts_with(outer + "/")) return true;
    }
    return false;
  });
  std::erase_if(plan.skeleton, [&](const StagePlan::SkeletonEntry& e) {
    for (const std::string& v : plan.veils) {
      if (e.path == v) return true;
    }
    return false;
  });
}

// 3. One staged entry: for a root daemon the clone of exactly what was checked, nosuid,nodev,
// and idmapped with the one mapping (`identity`) when `idmap`.
Result<void> AddStageEntry(StagePlan& plan, OpenedPath opened, bool idmap, bool follow,
                           const UniqueFd& identity) {
  StageEntry entry;
  entry.host_path = opened.path.string();
  entry.stage_path = std::string(kStageDir) + "/" + std::to_string(plan.entries.size());
  entry.directory = opened.type == S_IFDIR;
  entry.follow_links = follow;
  entry.dev = opened.dev;
  entry.ino = opened.ino;
  if (plan.as_root) {
    entry.tree.Reset(::open_tree(opened.fd.Get(), "", kCloneFlags));
    if (!entry.tree) {
      Error error = Error::FromErrno(ErrorKind::kSandboxUnavailable, "open_tree", entry.host_path);
      error.message += " (cloning a mount needs Linux 5.2 or later and CAP_SYS_ADMIN)";
      return std::unexpected(error);
    }
    // Every staged tree is nosuid,nodev before bwrap ever sees it (bwrap's own binds add the
    // same flags): nothing under a root runs set-id or opens a device, whatever it holds.
    // The roots are idmapped with the one mapping (the workspace owner's).
    struct mount_attr attr {};
    attr.attr_set = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
    if (idmap) {
      attr.attr_set |= MOUNT_ATTR_IDMAP;
      attr.userns_fd = static_cast<uint64_t>(identity.Get());
    }
    if (::mount_setattr(entry.tree.Get(), "", AT_EMPTY_PATH | AT_RECURSIVE, &attr, sizeof attr) !=
        0) {
      if (idmap) return std::unexpected(IdmapError(entry.host_path, errno));
      return std::unexpected(Error::FromErrno(ErrorKind::kSandboxUnavailable,
                                              "mount_setattr(nosuid,nodev)", entry.host_path));
    }
  }
  entry.checked = std::move(opened.fd);
  plan.entries.push_back(std::move(entry));
  return {};
}

}  // namespace

Result<StagePlan> PrepareStage(SandboxSpec& sandbox, const std::filesystem::path& init_binary,
                               bool as_root, const policy::SessionUidRange& uids,
                               const LaunchRepositories& repositories) {
  StagePlan plan;
  plan.as_root = as_root;
  if (Result<void> chosen = ChooseIdentity(plan, as_root, uids); !chosen) return Propagate(chosen);
  if (Result<void> mount = CheckStageMount(as_root); !mount) return Propagate(mount);
  Result<OpenedRoots> roots = OpenRoots(sandbox);
  if (!roots) return Propagate(roots);
  if (Result<void> composed = PlanComposed(plan, sandbox, *roots, init_binary, repositories);
      !composed) {
    return Propagate(composed);
  }
  // bwrap no longer places any of these: what lies in a bound root is composed above, what lies
  // outside every root is on the read-only host and stays bwrap's.
  sandbox.read_only_paths.clear();
  std::filesystem::path unused_relative;
  std::erase_if(sandbox.hidden, [&](const HiddenPath& h) {
    return HoldingRoot(roots->bound_paths, h.path, unused_relative) >= 0;
  });
  sandbox.bound_roots = roots->bound_paths;

  Result<OpenedPath> init = OpenFollowing(init_binary);
  if (!init) return Propagate(init);
  Result<std::optional<ComposedEntry>> init_inside = InitInsideRoot(*roots, init_binary, *init);
  if (!init_inside) return Propagate(init_inside);
  if (as_root) PlanVeils(plan, roots->bound, init_binary);

  // 3. One entry per bound root and the init binary, the roots idmapped with the one mapping.
  UniqueFd identity;
  if (as_root) {
    Result<UniqueFd> ns =
        CreateUserNamespace(RootIdMapFor(roots->owner_uid, roots->owner_gid, plan.session_uid));
    if (!ns) return Propagate(ns);
    identity = std::move(*ns);
  }
  for (OpenedPath& root : roots->bound) {
    const std::filesystem::path path = root.path;
    if (Result<void> added = AddStageEntry(plan, std::move(root), true, false, identity); !added) {
      return Propagate(added);
    }
    sandbox.bind_sources[path] = plan.entries.back().stage_path;
  }
  if (Result<void> added = AddStageEntry(plan, std::move(*init), false, true, identity); !added) {
    return Propagate(added);
  }
  sandbox.bind_sources[init_binary] = plan.entries.back().stage_path;
  if (*init_inside) {
    (*init_inside)->source_entry = plan.entries.size() - 1;
    plan.composed.push_back(std::move(**init_inside));
    sandbox.init_composed = true;
  }
  // The private git directories, after the init binary: staged (idmapped like the roots, so the
  // session writes them as itself), never bound by bwrap, only composed over each .git.
  // One that cannot be staged (a root daemon's run-time directory on a tmpfs older than Linux
  // 6.3 cannot be idmapped) leaves its .git read-only as before, which protects the host as well.
  std::vector<std::optional<size_t>> private_entries;
  for (const PrivateGit& git : plan.private_gits) {
    Result<OpenedPath> opened = OpenRootNoFollow(git.private_dir);
    if (!opened) return Propagate(opened);
    if (Result<void> added = AddStageEntry(plan, std::move(*opened), true, false, identity);
        !added) {
      LogWarn("no private git directory for " + git.host_git.string() + " (" +
              added.error().Describe() + "); it stays read-only in the session");
      private_entries.push_back(std::nullopt);
      ++plan.gits_left_read_only;
      continue;
    }
    private_entries.push_back(plan.entries.size() - 1);
  }
  std::vector<PrivateGit> staged;
  for (ComposedEntry& c : plan.composed) {
    if (c.kind != NestedMount::Kind::kPrivateGit) continue;
    const size_t index = c.source_entry;
    if (private_entries[index]) {
      c.source_entry = *private_entries[index];
      staged.push_back(std::move(plan.private_gits[index]));
    } else {
      c.kind = NestedMount::Kind::kProtected;
      c.read_only_names.clear();
      c.covered_names.clear();
      c.worktrees.clear();
    }
  }
  plan.private_gits = std::move(staged);  // the others are removed here
  // A hidden file is covered by /dev/null as bwrap did (bound nodev inside: it cannot even be
  // opened); a hidden directory by an empty directory of the staging tmpfs, read-only.
  plan.cover_file = "/dev/null";
  plan.cover_dir = std::string(kStageDir) + "/cover-dir";
  sandbox.uid_zero_inside = as_root;
  return plan;
}

PrivateGit::PrivateGit(PrivateGit&& other) noexcept
    : host_git(std::move(other.host_git)),
      private_dir(std::exchange(other.private_dir, {})),
      host_fd(std::move(other.host_fd)),
      private_fd(std::move(other.private_fd)),
      snapshot(std::move(other.snapshot)) {}

PrivateGit& PrivateGit::operator=(PrivateGit&& other) noexcept {
  if (this != &other) {
    PrivateGit old(std::move(*this));
    host_git = std::move(other.host_git);
    private_dir = std::exchange(other.private_dir, {});
    host_fd = std::move(other.host_fd);
    private_fd = std::move(other.private_fd);
    snapshot = std::move(other.snapshot);
  }
  return *this;
}

PrivateGit::~PrivateGit() {
  if (private_dir.empty()) return;
  std::error_code ec;
  std::filesystem::remove_all(private_dir, ec);  // never follows a link
  if (ec) LogWarn("cannot remove " + private_dir.string() + ": " + ec.message());
}

std::filesystem::path TopmostVeil(const std::filesystem::path& destination) {
  std::filesystem::path dir = "/";
  const std::filesystem::path parent = destination.lexically_normal().parent_path();
  for (const std::filesystem::path& part : parent.relative_path()) {
    dir /= part;
    struct stat st {};
    if (::stat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode) && (st.st_mode & S_IXOTH) == 0) {
      return dir;
    }
  }
  return {};
}

bool EnterStage(StagePlan& plan, int error_fd) noexcept {
  if (plan.as_root) {
    if (::unshare(CLONE_NEWNS) != 0)
      return Failed(error_fd, "unshare(CLONE_NEWNS)", nullptr, errno);
  } else {
    if (::unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0) {
      return Failed(error_fd, "unshare(CLONE_NEWUSER|CLONE_NEWNS)", nullptr, errno);
    }
    if (!WriteFile("/proc/self/setgroups", "deny") ||
        !WriteFile("/proc/self/uid_map", plan.self_uid_map.c_str()) ||
        !WriteFile("/proc/self/gid_map", plan.self_gid_map.c_str())) {
      return Failed(error_fd, "writing the id maps of", "/proc/self", errno);
    }
  }
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
    return Failed(error_fd, "making / private", nullptr, errno);
  }
  if (!plan.as_root) {
    // Same path, same inode as the parent checked, no link on the way: the object bound is the
    // object checked (a swap in between fails here instead of binding something else).
    for (StageEntry& e : plan.entries) {
      const uint64_t resolve = e.follow_links ? 0 : (RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS);
      const int fd = OpenAt2(AT_FDCWD, e.host_path.c_str(),
                             O_PATH | O_CLOEXEC | (e.follow_links ? 0 : O_NOFOLLOW), resolve);
      if (fd < 0)
        return Failed(error_fd, "re-opening (changed since it was checked?)", e.host_path.c_str(),
                      errno);
      struct stat st {};
      if (::fstat(fd, &st) != 0 || st.st_dev != e.dev || st.st_ino != e.ino) {
        return Failed(error_fd,
                      "refusing to bind: replaced since it was checked:", e.host_path.c_str(),
                      ESTALE);
      }
      e.child_tree = static_cast<int>(::syscall(SYS_open_tree, fd, "", kCloneFlags));
      if (e.child_tree < 0) return Failed(error_fd, "open_tree", e.host_path.c_str(), errno);
    }
  }
  if (::mount("tmpfs", kStageMount, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755") != 0) {
    return Failed(error_fd, "mounting the staging tmpfs on", kStageMount, errno);
  }
  if (::mkdir(kStageDir, 0755) != 0) return Failed(error_fd, "mkdir", kStageDir, errno);
  for (StageEntry& e : plan.entries) {
    if (e.directory) {
      if (::mkdir(e.stage_path.c_str(), 0755) != 0) {
        return Failed(error_fd, "mkdir", e.stage_path.c_str(), errno);
      }
    } else {
      const int fd = ::open(e.stage_path.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
      if (fd < 0) return Failed(error_fd, "creating", e.stage_path.c_str(), errno);
      ::close(fd);
    }
    const int tree = plan.as_root ? e.tree.Get() : e.child_tree;
    if (::move_mount(tree, "", AT_FDCWD, e.stage_path.c_str(), MOVE_MOUNT_F_EMPTY_PATH) != 0) {
      return Failed(error_fd, "move_mount to", e.stage_path.c_str(), errno);
    }
  }
  if (!ComposeNested(plan, error_fd)) return false;
  if (!CoverHostSockets(plan, error_fd)) return false;
  // Veils (root daemon): after the stage's clones exist, so they hold the real objects.
  for (const std::string& veil : plan.veils) {
    if (::mount("tmpfs", veil.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755") != 0) {
      return Failed(error_fd, "veiling", veil.c_str(), errno);
    }
  }
  for (const StagePlan::SkeletonEntry& e : plan.skeleton) {
    if (e.directory) {
      if (::mkdir(e.path.c_str(), 0755) != 0 && errno != EEXIST) {
        return Failed(error_fd, "mkdir in a veil", e.path.c_str(), errno);
      }
    } else {
      const int fd = ::open(e.path.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
      if (fd < 0) return Failed(error_fd, "creating in a veil", e.path.c_str(), errno);
      ::close(fd);
    }
  }
  if (plan.as_root) {
    const uid_t id = plan.session_uid.value();
    if (::setgroups(0, nullptr) != 0 || ::setresgid(id, id, id) != 0 ||
        ::setresuid(id, id, id) != 0) {
      return Failed(error_fd, "dropping to the session uid", nullptr, errno);
    }
  }
  return true;
}

}  // namespace ptybox::sandbox
