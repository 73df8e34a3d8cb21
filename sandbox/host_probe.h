// Can this host sandbox? The probes behind sandbox_unavailable and `ptybox doctor`: bwrap
// present and runnable, user namespaces allowed (sysctls, AppArmor), seccomp usable, a devpts
// instance and /dev/ptmx inside a sandbox.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.h"

namespace ptybox::sandbox {

struct ProbeResult {
  std::string name;  // "bwrap", "user-namespaces", "seccomp", "sandbox-pty", ...
  bool ok = false;
  std::string detail;  // what was found
  std::string fix;     // what to change when !ok; empty when ok
};

// Every probe, in order, each run for real (the last ones start a tiny sandbox).
std::vector<ProbeResult> ProbeHost(const std::filesystem::path& bwrap);
// The first failing probe as a sandbox_unavailable error, or success. Cached per bwrap path by
// the caller if needed; cheap checks first.
Result<void> RequireSandbox(const std::filesystem::path& bwrap);
// Explains why a sandbox could not start, given what bwrap printed: runs the probes and returns
// a sandbox_unavailable error naming the cause and the fix (never a silent fallback).
Error DiagnoseSandboxFailure(const std::filesystem::path& bwrap, std::string_view bwrap_stderr);
// Landlock's UNIX-socket walls on this kernel (sandbox/init/landlock.h): ok when both hold; never
// part of ProbeHost (a kernel without them still sandboxes, with the gap doctor states).
ProbeResult ProbeUnixSocketWalls();
// Where bwrap is: $PTYBOX_BWRAP, else the first "bwrap" on PATH, else /usr/bin/bwrap.
std::filesystem::path FindBwrap();

}  // namespace ptybox::sandbox
