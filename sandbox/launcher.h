// Starts ptybox-init for one session: inside bwrap with a seccomp program in a confined mode,
// directly in danger-full-access (same helper, same PTY path). The control socket is inherited
// at a fixed descriptor; the environment goes over it, never on a command line.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "common/error.h"
#include "common/unique_fd.h"
#include "policy/mode.h"
#include "policy/policy.h"
#include "sandbox/bwrap_args.h"
#include "sandbox/cgroup_layout.h"
#include "sandbox/init/resource_limits.h"
#include "sandbox/mount_stage.h"
#include "sandbox/repository_walk.h"

namespace ptybox::sandbox {

struct LaunchSpec {
  policy::Mode mode = policy::Mode::kWorkspaceWrite;
  SandboxSpec sandbox;                   // read when the mode is confined
  std::filesystem::path bwrap;           // read when the mode is confined
  std::filesystem::path init_binary;     // ptybox-init
  std::vector<std::string> command;      // the program init starts
  std::vector<std::string> environment;  // "NAME=value" entries for the program
  std::filesystem::path cwd;
  int rows = 40;
  int columns = 120;
  bool pty = true;  // false: the program inherits our stdin/stdout/stderr (ptybox run)
  // Network by name (confined only): init binds 127.0.0.1:proxy_port in the session's network
  // namespace and hands the listener to the daemon's proxy (backend/proxy/). 0: none.
  uint16_t proxy_port = 0;
  std::vector<ResourceLimit> rlimits;
  // What the session's cgroup holds it to (sandbox/cgroup.h); the launching side adds rlimits
  // for what no cgroup of this host can hold (backend/init_session.cc).
  cgroups::SessionLimits limits;
  // `cgroup.procs` of the session's cgroup in each hierarchy (SessionCgroup::OpenPlacement;
  // owned by the caller): the child writes "0" to each right after fork, before anything else,
  // so it and all it starts are inside and the daemon never is. A write that fails ends the
  // child (exit 124, a line on the diagnostics pipe): a session never runs outside its caps.
  std::vector<int> cgroup_procs;
  bool new_process_group = true;  // keep terminal signals of the daemon away from the session
  // A root daemon's confined sessions run as the next id of this range (policy `sessionIds`).
  policy::SessionUidRange session_uids;
  // Every input of a launch: a pooled shell is claimed only when a fresh launch would be equal.
  bool operator==(const LaunchSpec&) const = default;
};

struct LaunchedInit {
  pid_t pid = -1;        // our direct child: bwrap (confined) or ptybox-init
  UniqueFd control;      // our end of the control socket
  UniqueFd diagnostics;  // read end of the child's stderr (PTY sessions only)
  // Root daemon, confined: the host-wide lease on the session's host id (session_uid_lease.h).
  // The caller keeps it until every process of the session has ended.
  UniqueFd session_uid_lease;
  // Workspace-write: each repository's private git directory (mount_stage.h). The caller copies
  // them back (git_private.h) and destroys them once every process of the session has ended.
  std::vector<PrivateGit> private_gits;
  // The repositories (and linked worktrees) of the roots whose .git the launch left read-only
  // though Git for agents is on (MountPlan::gits_left_read_only).
  size_t gits_left_read_only = 0;
};

// The port of the session's proxy on its own loopback (HTTP_PROXY=http://127.0.0.1:3128).
inline constexpr uint16_t kSessionProxyPort = 3128;

// Fills what the policy decides: the mode, the sandbox (roots, protected paths, network, the
// starting directory) and the resource limits. The caller adds the program, its environment,
// the binaries and the terminal.
void ApplyPolicy(const policy::ResolvedPolicy& policy, const std::filesystem::path& cwd,
                 LaunchSpec& launch);

// Checks everything first (roots, environment size, every bind opened without following links:
// sandbox/mount_stage.h), then forks and execs; the start message (environment) is sent before
// returning. With the daemon as root, a confined session runs as an unprivileged host id from
// `session_uids`, never as host root. The caller reaps `pid` (see backend/child_reaper.h).
// `repositories` is RepositoriesOfLaunch(spec.sandbox), walked by the caller (off the daemon's
// reactor): a workspace-write launch without a complete walk is refused (policy_denied).
Result<LaunchedInit> LaunchInit(const LaunchSpec& spec, const LaunchRepositories& repositories);

// Refuses roots that cannot be sandboxed: /, anything under /proc, /dev, /sys, /run (the
// launcher's staging place), and the shared /tmp and /var/tmp themselves (policy_denied).
Result<void> CheckSandboxRoots(const SandboxSpec& sandbox);

// The init argv after the binary: --control-fd 3 [--confined] ... -- command...
// Whether the session's shell runs from an unreadable copy, so non-dumpable (a confined shell
// of a root daemon, init_main.cc UnreadableCopy): its children cannot read its memory.
[[nodiscard]] bool ShellRunsNonDumpable(const LaunchSpec& spec);
std::vector<std::string> BuildInitArgs(const LaunchSpec& spec);

inline constexpr int kInitControlFd = 3;
inline constexpr int kSeccompFd = 4;
// A confined launch without a PTY (`ptybox run`): the caller's stderr, passed through bwrap at
// this number while bwrap's own stderr is the diagnostics pipe, so that a sandbox that cannot
// start is explained once, by ptybox; ptybox-init puts it back on 2 before anything runs.
inline constexpr int kCallerStderrFd = 5;
// A confined PTY launch of a root daemon (ShellRunsNonDumpable): an O_PATH descriptor of the
// daemon's sealed, execute-only (0111) copy of bash, owned by host root (unmapped in the
// sandbox, so no session process can chmod it), passed through bwrap at this number;
// ptybox-init gives it to the shell at backend::kExecCopyFd for `exec bash` (docs/readiness.md).
inline constexpr int kExecCopyInheritFd = 6;
// That copy, made once per daemon (nullopt-like -1 with a logged reason when it cannot be):
// memfd_create, the program's bytes, fchmod 0111, every seal, then an O_PATH descriptor.
[[nodiscard]] Result<int> SharedExecCopy(const std::string& program);

}  // namespace ptybox::sandbox
