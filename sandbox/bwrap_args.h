// Policy -> bubblewrap argv, as a pure function: no filesystem access, no processes. Callers
// collect the facts (which protected paths exist) first, with CollectProtectedPaths.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "policy/mode.h"

namespace ptybox::sandbox {

// Where the launcher attaches the checked objects it binds, in its private mount namespace only
// (sandbox/mount_stage.h). Covered with an empty tmpfs inside the sandbox after the binds.
inline constexpr char kStageDir[] = "/run/ptybox-stage";

struct SandboxSpec {
  policy::Mode mode = policy::Mode::kWorkspaceWrite;  // read-only or workspace-write
  std::filesystem::path workspace_root;               // absolute
  std::vector<std::filesystem::path> writable_roots;  // extra writable roots (workspace-write)
  // Existing paths inside writable roots that must stay read-only (.git, policy files).
  std::vector<std::filesystem::path> read_only_paths;
  bool network_allowed = false;
  std::filesystem::path cwd;  // the shell's starting directory
  // Where each bind takes its source: destination -> staged path (sandbox/mount_stage.h, the
  // very object that was checked). A destination absent here is bound from its own path.
  std::map<std::filesystem::path, std::filesystem::path> bind_sources;
  // --uid 0 --gid 0: a root daemon's session is root of its own user namespace only (bwrap runs
  // as the session's unprivileged host id, which it maps to 0).
  bool uid_zero_inside = false;
};

struct BwrapInvocation {
  std::filesystem::path bwrap;        // absolute path of the bwrap binary
  int seccomp_fd = -1;                // inherited fd holding the BPF program (seccomp_export_bpf)
  std::filesystem::path init_binary;  // ptybox-init, bound read-only at its own path inside
  std::vector<std::string> init_args; // arguments after the init binary
};

// The complete argv: bwrap, its options, "--", init_binary, init_args...
std::vector<std::string> BuildBwrapArgv(const SandboxSpec& spec, const BwrapInvocation& invocation);

// The paths of `candidates` plus "<root>/.git" for each writable root that exist on the host as
// a directory or a regular file (a symbolic link is never followed: not a candidate), absolute
// and lexically normal, for SandboxSpec::read_only_paths. The launcher opens each again beneath
// its root without following links before binding it (mount_stage.h).
std::vector<std::filesystem::path> CollectProtectedPaths(
    const std::vector<std::filesystem::path>& writable_roots,
    const std::vector<std::filesystem::path>& candidates);

}  // namespace ptybox::sandbox
