// Every repository inside a writable root: a bounded walk for `.git` entries (a directory or a
// gitfile), so that each gets the protection of the root's own .git (docs/security.md,
// "Protected paths"): the host's git run there must not run what a session wrote.
#pragma once

#include <cstddef>
#include <filesystem>
#include <vector>

#include "sandbox/bwrap_args.h"
#include "sandbox/path_open.h"

namespace ptybox::sandbox {

// The walk's bounds: past them the walk stops and what it did not reach is not protected (the
// launch goes on; docs/security.md says so).
inline constexpr size_t kRepositoryWalkMaxEntries = 20000;
inline constexpr size_t kRepositoryWalkMaxDepth = 8;

struct RepositoryWalk {
  std::vector<std::filesystem::path> git_paths;  // absolute: root / ... / .git
  bool truncated = false;                        // a bound was reached
};

// Walks `root` by descriptor (openat O_NOFOLLOW from the root's descriptor): never follows a
// symbolic link, never enters another mount (RESOLVE_NO_XDEV) nor a .git directory. The
// root's own .git is included when present.
RepositoryWalk WalkRepositories(const OpenedPath& root,
                                size_t max_entries = kRepositoryWalkMaxEntries,
                                size_t max_depth = kRepositoryWalkMaxDepth);

// What a launch of `sandbox` would protect as repositories now: the walk of each writable root
// (workspace-write only; empty otherwise, and for a root that cannot be opened), sorted, with
// whether any walk reached a bound. The warm pool compares it before it hands out a shell, so
// that a repository created or removed on the host since the shell's launch means a fresh one.
struct LaunchRepositories {
  std::vector<std::filesystem::path> git_paths;
  bool truncated = false;
  bool operator==(const LaunchRepositories&) const = default;
};
[[nodiscard]] LaunchRepositories RepositoriesOfLaunch(const SandboxSpec& sandbox);

}  // namespace ptybox::sandbox
