// Which mounts a confined session gets, decided as pure functions (no filesystem access):
// which roots are bound at all, and which mounts are composed onto a bound root by descriptor
// in the launcher's private mount namespace (sandbox/mount_stage.h) instead of by a path bwrap
// resolves inside a tree the session (or another owner's session) can change.
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>
#include <vector>

#include "policy/mode.h"
#include "sandbox/bwrap_args.h"

namespace ptybox::sandbox {

// The roots that need a bind of their own: the workspace and the extra roots, minus every root
// that lies inside (or equals) another one. Such a root adds no access (its parent's bind grants
// the same: both writable in workspace-write, both read-only in read-only), only a destination
// bwrap would resolve inside a tree a session can change, and a second idmap. Lexical, in input
// order (workspace first), each at most once. The policy still reports the nested ones as
// writable: they are, through their parent.
std::vector<std::filesystem::path> RootsToBind(const std::filesystem::path& workspace,
                                               const std::vector<std::filesystem::path>& extra);

// One mount composed onto a bound root: reached by openat2 beneath the staged root (no links)
// and attached with move_mount, in this order (parents before what lies beneath them).
struct NestedMount {
  enum class Kind {
    kPin,         // the directory cloned onto itself: a mount point the session cannot rename
    kProtected,   // the object cloned read-only over itself (.git, policy files)
    kCoverFile,   // an empty read-only file over it (a hidden file)
    kCoverDir,    // an empty read-only directory over it (a hidden directory)
    kInit,        // the checked clone of ptybox-init over itself, read-only (one inside a root;
                  // added by the launcher last, never by PlanNestedMounts)
    kPrivateGit,  // a repository's .git in workspace-write: the session's private git directory
                  // (git_private.h) over it, with the host's code and configuration entries
                  // and objects bound read-only inside (made by the stage, never by
                  // PlanNestedMounts, which plans kProtected)
  };
  size_t root = 0;                 // index into the bound roots
  std::filesystem::path relative;  // beneath that root, lexically normal, never "." or ".."
  Kind kind = Kind::kPin;
  bool operator==(const NestedMount&) const = default;
};

// The composed mounts of a session: protected paths (workspace-write only: in read-only every
// root is read-only already), hidden paths inside a bound root (both modes) and, in
// workspace-write, a pin on each directory between the root and a hidden path, so that renaming
// a parent of a covered secret fails (EBUSY) instead of moving the cover away from it, and on
// each of `pinned` (submodule directories) and every directory above it, so that none can be
// moved aside for a repository the session makes at its path. A hidden
// directory holding a `granted` path (a root, the starting directory, the init binary) is not
// covered; anything beneath a covered directory needs no mount of its own. Paths outside every
// bound root are not listed (bwrap places those on the read-only host).
std::vector<NestedMount> PlanNestedMounts(policy::Mode mode,
                                          const std::vector<std::filesystem::path>& bound_roots,
                                          const std::vector<std::filesystem::path>& protected_paths,
                                          const std::vector<HiddenPath>& hidden,
                                          const std::vector<std::filesystem::path>& granted,
                                          const std::vector<std::filesystem::path>& pinned = {});

// What a launch counts as granted when it covers hidden directories (PlanNestedMounts'
// `granted`): every root, the starting directory and ptybox-init. A hidden directory holding one
// of them is not covered.
std::vector<std::filesystem::path> GrantedPaths(const SandboxSpec& sandbox,
                                                const std::filesystem::path& init_binary);

// The hidden directories a launch of `sandbox` covers (PlanNestedMounts' kCoverDir entries, with
// GrantedPaths), absolute. Nothing beneath one is in the session; the check after the launch
// (sandbox/repository_walk.h) does not ask a repository beneath one to be protected.
std::vector<std::filesystem::path> CoveredDirectories(const SandboxSpec& sandbox,
                                                      const std::filesystem::path& init_binary);

// The bound root that holds `path` strictly (index), or -1.
int HoldingRoot(const std::vector<std::filesystem::path>& roots, const std::filesystem::path& path,
                std::filesystem::path& relative);

}  // namespace ptybox::sandbox
