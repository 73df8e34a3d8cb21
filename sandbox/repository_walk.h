// Every repository inside a writable root: a walk for `.git` entries (a directory or a gitfile),
// so that each gets the protection of the root's own .git (docs/security.md, "Protected paths"):
// the host's git run there must not run what a session wrote.
//
// The walk fails closed: when it cannot prove it saw every directory a session could write
// (too many entries, a path deeper than the kernel resolves, a directory it cannot read but a
// session could open up), it says why, and the launch is refused rather than started with a
// repository left writable. It has no depth bound. It costs one getdents per directory and runs
// off the daemon's reactor (backend/off_reactor.h), at a launch and again at the warm pool's
// claim of a pre-started shell.
#pragma once

#include <sys/types.h>
#include <time.h>

#include <cstddef>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "common/error.h"
#include "sandbox/bwrap_args.h"
#include "sandbox/path_open.h"
#include "sandbox/tree_watch.h"

namespace ptybox::sandbox {

// A launch's walk: past this many entries in all its writable roots together the launch is
// refused (about 1 s of walking on a quiet machine; a workspace that large should be narrowed).
inline constexpr size_t kRepositoryWalkMaxEntries = 1'000'000;
// The entries of git directories a launch looks at, all repositories together, each directory
// once (links, hard links): past this the launch is refused. A monorepo that fetched many
// branches keeps a reflog file per branch (`git gc` keeps them).
inline constexpr size_t kGitLookMaxEntries = 1'000'000;
// A launch's submodule directories (each a mount of the session, with the pins above it): past
// this many the launch is refused.
inline constexpr size_t kMaxSubmoduleDirs = 1000;
// What a launch reads of its repositories' gitfiles and indexes together (each index at most
// kGitIndexMax): past this the launch is refused, so that a session's many large indexes cannot
// make every later launch of the workspace read gigabytes.
inline constexpr size_t kSubmoduleIndexBudget = 512u << 20;
// The directories a launch's submodules put between their roots and themselves (each a pin of
// the session): past this many the launch is refused, before a mount is made.
inline constexpr size_t kMaxSubmodulePins = 10'000;

// Which object a .git entry was when the walk met it: a repository re-created at the same path
// (a fresh clone, `mv .git` and `git init`) is another one.
struct GitIdentity {
  dev_t dev = 0;
  ino_t ino = 0;
  bool operator==(const GitIdentity&) const = default;
};

struct RepositoryWalk {
  std::vector<std::filesystem::path> git_paths;  // absolute: root / ... / .git
  std::vector<GitIdentity> git_ids;              // parallel to git_paths
  std::vector<std::filesystem::path> git_links;  // absolute: each .git that is a symbolic link
  size_t entries = 0;                            // directory entries read
  // Set when the walk could not search the whole tree: what stopped it, where, and the fix.
  std::optional<std::string> incomplete;
};

// Walks `root` by descriptor: each directory is opened with openat2 beneath the root's
// descriptor (no links, no other mount), so neither a link nor a rename elsewhere leads the walk
// outside it; a .git directory is never entered. The root's own .git is included when present.
// `owner` is the host uid a session writes as: a directory the walk cannot read makes it
// incomplete when the session could still reach into it (it owns it and could chmod it, or the
// directory can be searched without being read, mode 0711); one it can neither read nor search
// is skipped. An ordinary user's daemon shows mounts inside a root to its sessions, so there a
// mount the walk does not cross makes it incomplete too.
// `watch`, or none: each directory is watched for arrivals (made, moved in) before it is read
// (CheckRepositoriesAfterLaunch); a directory that cannot be watched makes the walk incomplete.
// `roots`: every writable root of the launch (none: `root` alone); a .git that is a symbolic
// link into one of them makes the walk incomplete (it cannot be protected through the link).
[[nodiscard]] RepositoryWalk WalkRepositories(const OpenedPath& root, uid_t owner,
                                              size_t max_entries = kRepositoryWalkMaxEntries,
                                              TreeWatch* watch = nullptr,
                                              const std::vector<std::filesystem::path>& roots = {});

// What a launch of `sandbox` protects as repositories: the walk of each writable root
// (workspace-write only; nothing to walk otherwise), sorted. `walked` tells a value made by the
// walk from a default one, so that a launch never goes ahead without it.
struct LaunchRepositories {
  std::vector<std::filesystem::path> git_paths;
  std::vector<GitIdentity> git_ids;  // parallel to git_paths
  // The directory of each submodule (a gitlink of a repository's index) that has no .git of its
  // own: the host's git would enter a repository a session made there, so each is protected as
  // a whole. A submodule whose directory is missing refuses the launch (`incomplete`).
  std::vector<std::filesystem::path> submodule_dirs;
  // Every submodule directory inside a writable root, with a .git or without: each is pinned
  // with the directories above it, so that none can be moved aside for one the session makes.
  std::vector<std::filesystem::path> gitlink_dirs;
  size_t entries = 0;
  std::optional<std::string> incomplete;
  bool walked = false;
  bool operator==(const LaunchRepositories&) const = default;
};
// `look_max`: the entries of the repositories' git directories looked at for links and hard
// links, all together (kGitLookMaxEntries).
[[nodiscard]] LaunchRepositories RepositoriesOfLaunch(
    const SandboxSpec& sandbox, size_t max_entries = kRepositoryWalkMaxEntries,
    TreeWatch* watch = nullptr, size_t look_max = kGitLookMaxEntries);
// The roots a workspace-write launch of `sandbox` can write: the workspace, then the others.
[[nodiscard]] std::vector<std::filesystem::path> WritableRoots(const SandboxSpec& sandbox);

// The git paths of two walks are the same set, each the same object, and the second searched
// everything: a pooled shell launched with `launched` may serve a launch that walked `now`.
[[nodiscard]] bool SameRepositories(const LaunchRepositories& launched,
                                    const LaunchRepositories& now);

// The check after a launch composed its mounts (docs/security.md, "Protected paths"): `after` is
// a second walk of the roots, made once the session's view exists, and `session_mounts` the
// mount points of the session's mount namespace read after it (SessionMountPoints; a mount
// point's path follows renames of the directories above it). Every repository of `after` must
// be a mount point there (composed read-only), unless it was created after `walk_started`
// (CLOCK_REALTIME read before the launch's first walk; never the coarse clock, which a birth
// time made before it can be later than): such a one is the session's own, as one created after
// the launch. A repository the first walk missed because a concurrent
// session renamed it into a directory the walk had already read, or one that moved between the
// walk and the composition, is not a mount point and refuses the launch. A repository beneath
// one of `covered` (the hidden directories the launch covered: CoveredDirectories) that is a
// mount point of the session is not in the session at all, and needs no protection. Returns
// why, or nullopt when the launch holds. A filesystem without birth times counts every
// unprotected repository as older.
[[nodiscard]] std::optional<std::string> UnprotectedRepository(
    const LaunchRepositories& after, const std::vector<std::filesystem::path>& session_mounts,
    const struct timespec& walk_started, const std::vector<std::filesystem::path>& covered = {});

// How often the check after a launch walks again when directories arrived during its walk.
inline constexpr int kAfterLaunchWalks = 3;

// The check after a launch, once its session is ready (`session`: a process in its mount
// namespace): the roots are walked with every directory watched before it is read (TreeWatch:
// a directory made or moved in, or a `.git` arriving; fanotify for a root daemon), then the
// session's mount points are read. A walk during which nothing arrived in a directory it had read
// saw every repository the tree held when it ended; each must then be a mount point of the session,
// or born after `walk_started` (UnprotectedRepository). A walk during which something arrived is
// made again, up to kAfterLaunchWalks times, then the launch is refused. `init_binary` is the
// launch's ptybox-init (which hidden directories it covered depends on it). Returns why the
// launch must be refused, or nullopt.
[[nodiscard]] std::optional<std::string> CheckRepositoriesAfterLaunch(
    const SandboxSpec& sandbox, const std::filesystem::path& init_binary, pid_t session,
    const struct timespec& walk_started, size_t max_entries = kRepositoryWalkMaxEntries);

// For a process that exits once its one session ends (`ptybox run`): from now on a check's
// fanotify group is closed in a child process of its own. Closing the group waits in the kernel
// for an SRCU grace period (fsnotify_destroy_group, 5-15 ms here); the daemon closes it on a
// thread, but a process's exit waits for its threads, and `run -- true` in workspace-write paid
// it at every exit. The child (no exit signal) is left for the process's exit to hand on.
void EndWatchesInAHelperProcess();

// The mount points of the mount namespace of process `pid` (its /proc/<pid>/mountinfo, paths
// as the process sees them, octal escapes decoded), sorted; an error when it cannot be read.
[[nodiscard]] Result<std::vector<std::filesystem::path>> SessionMountPoints(pid_t pid);

}  // namespace ptybox::sandbox
