// The staging of a confined session's binds: every root, protected path and the init binary is
// opened once without following links (path_open.h), and what bwrap binds is that very object,
// attached at a staging path that only the launcher's private mount namespace has.
//
// Root daemon: the parent clones each tree (open_tree) from its checked descriptor and idmaps
// it so the root's on-disk owner appears as the session's unprivileged host id; the forked child
// makes a private mount namespace, attaches the clones under kStageDir, drops to that id and
// execs bwrap. Non-root daemon: the child creates its own user and mount namespace, re-opens
// each path without links, checks it is the same inode the parent checked, clones and attaches
// it there, then execs bwrap (no idmap: its ids are the daemon's own).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/unique_fd.h"
#include "policy/policy.h"
#include "sandbox/bwrap_args.h"
#include "sandbox/git_private.h"
#include "sandbox/mount_plan.h"
#include "sandbox/repository_walk.h"

namespace ptybox::sandbox {

// The private tmpfs is mounted here in the launcher's own mount namespace only (the host never
// sees it); sessions cannot write it, and no sandbox root may lie under it.
inline constexpr char kStageMount[] = "/run";  // kStageDir (bwrap_args.h) lies in it

struct StageEntry {
  std::string host_path;   // for messages and the non-root re-open
  std::string stage_path;  // kStageDir/N
  bool directory = true;
  bool follow_links = false;  // only the init binary (an operator path)
  dev_t dev = 0;              // the inode the parent checked
  ino_t ino = 0;
  UniqueFd checked;     // O_PATH; keeps that inode alive until the child has cloned it
  UniqueFd tree;        // root daemon: the detached clone (idmapped for roots and protected paths)
  int child_tree = -1;  // non-root: the clone the child made
};

// A mount composed onto a staged root in the child (mount_plan.h): the destination is opened
// beneath the staged clone of its root (openat2 RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS), checked
// to be the inode the parent checked, and the source attached onto that descriptor with
// move_mount(MOVE_MOUNT_T_EMPTY_PATH): never a path a session could change in between.
struct ComposedEntry {
  size_t root_entry = 0;  // index into StagePlan::entries (a bound root)
  std::string relative;   // beneath it
  NestedMount::Kind kind = NestedMount::Kind::kPin;
  size_t source_entry = 0;  // kInit: the entry whose staged clone is mounted
  dev_t dev = 0;            // the destination's inode as the parent found it
  ino_t ino = 0;
  std::string host_path;  // for messages
  // kPrivateGit: the host entries (kGitReadOnlyEntries names present there) bound read-only
  // over their mount points in the private directory; the host's objects/ goes read-only to
  // kGitHostObjects. `source_entry` is the private directory's staged entry.
  std::vector<std::string> read_only_names;
  // kPrivateGit: directories of the private copy covered by an empty read-only directory.
  std::vector<std::string> covered_names;
  // kPrivateGit: the linked worktrees given a private directory (git_private.h): each attached
  // over `host_dir` (`worktrees/<id>`, inside the host's read-only worktrees/), then the host's
  // `host_files` (beneath the .git) bound read-only over `files` in it. Built before the fork:
  // the child allocates nothing.
  struct Worktree {
    std::string host_dir;            // worktrees/<id>
    std::string private_dir;         // kGitPrivateWorktrees/<id>, beneath the private directory
    std::vector<std::string> files;  // kGitWorktreeReadOnlyFiles the host has
    std::vector<std::string> host_files;  // worktrees/<id>/<file>
  };
  std::vector<Worktree> worktrees;
};

// Where a private git directory shows the host's objects (read-only); its
// objects/info/alternates names it relative to objects/.
inline constexpr char kGitHostObjects[] = "ptybox-host-objects";
inline constexpr char kGitHostObjectsAlternate[] = "../ptybox-host-objects";

// A repository the session writes through a private git directory (git_private.h): the host's
// .git and the private copy, each opened without links, and what the session started from. The
// private directory lives under the daemon's run-time directory (hidden from every session);
// this object owns it and removes it when destroyed (never following a link in it), so the owner
// destroys it only once every process of the session has ended.
struct PrivateGit {
  PrivateGit() = default;
  PrivateGit(PrivateGit&& other) noexcept;
  PrivateGit& operator=(PrivateGit&& other) noexcept;
  PrivateGit(const PrivateGit&) = delete;
  PrivateGit& operator=(const PrivateGit&) = delete;
  ~PrivateGit();

  std::filesystem::path host_git;     // the host's .git
  std::filesystem::path private_dir;  // the private copy; empty once moved from
  UniqueFd host_fd;                   // O_RDONLY | O_DIRECTORY
  UniqueFd private_fd;                // O_RDONLY | O_DIRECTORY
  GitSnapshot snapshot;
};

struct StagePlan {
  bool as_root = false;
  policy::SessionUid session_uid;  // root daemon: the host uid (and gid) of the session
  UniqueFd
      session_uid_lease;  // root daemon: the host-wide lease on session_uid (session_uid_lease.h)
  std::string self_uid_map;  // non-root: the child's own user namespace, its ids 1:1
  std::string self_gid_map;
  std::vector<StageEntry> entries;      // the bound roots first, in order, then the init binary
  std::vector<ComposedEntry> composed;  // in order: parents first
  // The sources of covers, each cloned and made read-only per cover: /dev/null for a file, an
  // empty directory the child makes on the staging tmpfs for a directory.
  std::string cover_file;
  std::string cover_dir;
  // Root daemon: host directories above a bind destination that the session uid cannot search
  // (e.g. /root, mode 0700). Each becomes an empty tmpfs in the launcher's namespace (and so in
  // the sandbox: what they held stays out of sight), holding only the path down to each
  // destination (`skeleton`, parents first; `directory` false for a file's mount point).
  std::vector<std::string> veils;
  struct SkeletonEntry {
    std::string path;
    bool directory = true;
  };
  std::vector<SkeletonEntry> skeleton;
  // Both confined modes: the host's pathname sockets a session could connect to
  // (SandboxSpec::host_sockets), absolute and free of links when the daemon looked. The child
  // opens each from / without following links and covers it with a read-only /dev/null onto
  // that descriptor (move_mount), so bwrap's `--ro-bind / /` carries the covers in; one that is
  // gone, became a link or another kind of file by then is skipped (never fails the launch).
  std::vector<std::string> host_sockets;
  // Workspace-write: each repository's private git directory (kPrivateGit entries).
  std::vector<PrivateGit> private_gits;
  // Workspace-write with Git for agents on: the repositories whose .git the launch left read-only
  // (no private copy could be made or staged: the person's git at work, a split index...).
  size_t gits_left_read_only = 0;
};

// The topmost directory above `destination` (strictly) that an id owning no host file cannot
// search, or empty when every directory above it can be searched. Pure but for stat(2).
std::filesystem::path TopmostVeil(const std::filesystem::path& destination);

// In the parent, before fork: opens and checks every path, fills sandbox.bound_roots (only the
// roots no other root holds), sandbox.bind_sources (and uid_zero_inside for a root daemon) and,
// for a root daemon, makes the idmapped clones (one mapping: the workspace owner's). Protected
// paths and hidden paths inside a bound root move from sandbox.read_only_paths and
// sandbox.hidden into the plan's composed mounts; protected paths that are missing or links are
// dropped (never followed, never bound); a hidden path replaced meanwhile refuses the launch.
// `repositories` is the walk of the writable roots (repository_walk.h), made before: each .git
// it found is protected like the root's own.
Result<StagePlan> PrepareStage(SandboxSpec& sandbox, const std::filesystem::path& init_binary,
                               bool as_root, const policy::SessionUidRange& uids,
                               const LaunchRepositories& repositories);

// In the forked child, async-signal-safe only. True when the stage is in place (and, for a root
// daemon, the process runs as the session uid); false after writing one line to `error_fd`.
bool EnterStage(StagePlan& plan, int error_fd) noexcept;

}  // namespace ptybox::sandbox
