// Policy -> bubblewrap argv, as a pure function: no filesystem access, no processes. Callers
// collect the facts (which protected paths exist) first, with CollectProtectedPaths.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "policy/mode.h"

namespace ptybox::sandbox {

struct SandboxSpec {
  policy::Mode mode = policy::Mode::kWorkspaceWrite;  // read-only or workspace-write
  std::filesystem::path workspace_root;               // absolute
  std::vector<std::filesystem::path> writable_roots;  // extra writable roots (workspace-write)
  // Existing paths inside writable roots that must stay read-only (.git, policy files).
  std::vector<std::filesystem::path> read_only_paths;
  bool network_allowed = false;
  std::filesystem::path cwd;  // the shell's starting directory
};

struct BwrapInvocation {
  std::filesystem::path bwrap;        // absolute path of the bwrap binary
  int seccomp_fd = -1;                // inherited fd holding the BPF program (seccomp_export_bpf)
  std::filesystem::path init_binary;  // ptybox-init, bound read-only at its own path inside
  std::vector<std::string> init_args; // arguments after the init binary
};

// The complete argv: bwrap, its options, "--", init_binary, init_args...
std::vector<std::string> BuildBwrapArgv(const SandboxSpec& spec, const BwrapInvocation& invocation);

// The paths of `candidates` plus "<root>/.git" for each writable root that exist on the host,
// for SandboxSpec::read_only_paths.
std::vector<std::filesystem::path> CollectProtectedPaths(
    const std::vector<std::filesystem::path>& writable_roots,
    const std::vector<std::filesystem::path>& candidates);

}  // namespace ptybox::sandbox
