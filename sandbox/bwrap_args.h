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
// One host path hidden from a session: a directory becomes an empty read-only tmpfs, anything
// else is covered by /dev/null.
struct HiddenPath {
  std::filesystem::path path;
  bool directory = false;
  bool operator==(const HiddenPath&) const = default;
};

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
  // The roots bwrap binds, set by the launcher's staging (sandbox/mount_stage.h): only those no
  // other root holds; the rest are reached through their parent, and everything inside a root
  // (protected paths, covers) is composed onto the staged root before bwrap runs, carried by
  // its recursive bind. Empty: the workspace and every writable root, as listed.
  std::vector<std::filesystem::path> bound_roots;
  // ptybox-init lies inside a bound root and was composed onto it (read-only) by descriptor:
  // bwrap does not bind it again.
  bool init_composed = false;

  // Walls against the host (docs/security.md). Facts collected by sandbox/host_walls.h.
  // Host run-time directories (/run, and /var/run when it is not a link into /run): an empty
  // tmpfs each, so no host service socket is reachable.
  std::vector<std::filesystem::path> run_dirs = {"/run"};
  // The daemon's own socket; empty when there is none (stdio, mcp, ptybox run).
  std::filesystem::path daemon_socket;
  // Host paths hidden from the session (secrets): existing paths, canonical.
  std::vector<HiddenPath> hidden;
  // Pathname sockets host services had bound at the launch that a session could connect to,
  // outside /run, /tmp and the roots (sandbox/host_walls.h, AddHostSockets). Not bwrap's: the
  // launcher covers each with /dev/null by descriptor in its mount namespace, skipping one that
  // is gone by then (mount_stage.h, StagePlan::host_sockets). A warm pool's shell is claimed
  // whatever sockets were bound while it waited (ShellSession::MatchesLaunch).
  std::vector<std::filesystem::path> host_sockets;
  // An ordinary user's daemon: its own home directories that hold a granted path
  // (sandbox/host_walls.h, CoverOfHome). Each is an empty tmpfs made before the binds, which put
  // the roots back into it, with the starting directory bound back read-only when no root holds
  // it; read-only after the last mount. What the host creates in the home after the launch is
  // never in it.
  std::vector<std::filesystem::path> veiled_homes;
  // The session's private home (sandbox/session_home.h): an empty tmpfs of mode 0700 there;
  // empty for none.
  std::filesystem::path session_home;
  bool operator==(const SandboxSpec&) const = default;
};

struct BwrapInvocation {
  std::filesystem::path bwrap;         // absolute path of the bwrap binary
  int seccomp_fd = -1;                 // inherited fd holding the BPF program (seccomp_export_bpf)
  std::filesystem::path init_binary;   // ptybox-init, bound read-only at its own path inside
  std::vector<std::string> init_args;  // arguments after the init binary
};

// The complete argv: bwrap, its options, "--", init_binary, init_args...
std::vector<std::string> BuildBwrapArgv(const SandboxSpec& spec, const BwrapInvocation& invocation);

// The paths of `candidates` plus "<root>/.git" for each writable root that exist on the host as
// a directory or a regular file (a symbolic link is never followed: not a candidate), absolute
// and lexically normal, for SandboxSpec::read_only_paths. The launcher opens each again beneath
// its root without following links before binding it (mount_stage.h).
// The /proc entries made read-only (runc's and podman's readonlyPaths) and the /sys
// directories kept visible inside (read-only) over an empty /sys.
const std::vector<std::filesystem::path>& ReadOnlyProcPaths();
const std::vector<std::filesystem::path>& VisibleSysPaths();

// Whether the daemon socket's directory can be hidden as a whole (an empty tmpfs), or only the
// socket file itself (covered by /dev/null): the directory is hidden unless it is a system
// directory, holds or lies inside the workspace, a writable root or the init binary.
bool SocketDirectoryHideable(const SandboxSpec& spec, const std::filesystem::path& init_binary);

// The paths of `candidates` plus "<root>/.git" for each writable root that exist on the host,
// for SandboxSpec::read_only_paths.
std::vector<std::filesystem::path> CollectProtectedPaths(
    const std::vector<std::filesystem::path>& writable_roots,
    const std::vector<std::filesystem::path>& candidates);

}  // namespace ptybox::sandbox
