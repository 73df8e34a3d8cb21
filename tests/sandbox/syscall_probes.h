// Tiny real operations ("probes") that sandbox tests try inside a filter or a sandbox, in the
// spirit of Flatpak's try-syscall.c: one per seccomp rule plus filesystem, PTY and identity
// checks. Reused by the seccomp tests, the bwrap tests and the sandbox-probe program.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ptybox::sandbox::testing {

// What a probe did: err == 0 when the operation succeeded, else the errno it failed with.
// A child killed by a signal reports err == kKilledBySignal and the signal in `info`.
struct ProbeOutcome {
  int err = 0;
  std::string info;  // what the probe saw (a path, a uid map, ...); may be empty
};
inline constexpr int kKilledBySignal = -1;

// Every probe name. A probe is called as "name" or "name:arg" (the arg may contain ':').
const std::vector<std::string_view>& ProbeNames();

// Runs `spec` ("name" or "name:arg") in the calling process. Some probes change the caller
// (unshare, setsid, ptrace): run those in a child. nullopt for an unknown name.
std::optional<ProbeOutcome> RunProbe(std::string_view spec);

// Runs `spec` in a forked child; when `program` is given, the child first sets no_new_privs
// and loads that seccomp BPF program (the bytes bwrap would read from --seccomp).
ProbeOutcome RunProbeInChild(std::string_view spec, const std::vector<uint8_t>* program = nullptr);

// The whole content of a seccomp memfd, read with pread (the fd offset is left alone).
std::vector<uint8_t> ReadProgram(int fd);

// "EPERM" for EPERM, "ok" for 0, "killed" for kKilledBySignal, else "errno N".
std::string ErrnoName(int err);
// The inverse of ErrnoName for the names it produces; nullopt when unknown.
std::optional<int> ErrnoFromName(std::string_view name);

// The sandbox-probe program prints one line per probe: spec, result name, info, separated by
// tabs, with '\\', '\n' and '\t' escaped. These two functions write and read that format.
std::string FormatProbeLine(std::string_view spec, const ProbeOutcome& outcome);
struct ProbeLine {
  std::string spec;
  std::string result;  // ErrnoName(outcome.err): "ok", "EPERM", ...
  std::string info;
};
std::vector<ProbeLine> ParseProbeLines(std::string_view output);

}  // namespace ptybox::sandbox::testing
