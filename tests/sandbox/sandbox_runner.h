// Runs the sandbox-probe program as the "init binary" of a real bwrap sandbox built exactly as
// the daemon builds it (BuildBwrapArgv + BuildSeccompProgram), and returns what each probe saw.
// For the sandbox tests now and the escape suite later.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "sandbox/bwrap_args.h"
#include "tests/sandbox/process_runner.h"
#include "tests/sandbox/syscall_probes.h"

namespace ptybox::sandbox::testing {

struct SandboxRun {
  RunResult process;              // bwrap's exit and output
  std::vector<std::string> argv;  // the bwrap argv that ran
  std::vector<ProbeLine> lines;   // one per probe, in order
  std::map<std::string, ProbeLine> by_spec;

  // The result name of `spec` ("ok", "EPERM", ...), or "missing".
  [[nodiscard]] std::string Result(const std::string& spec) const;
  [[nodiscard]] std::string Info(const std::string& spec) const;
};

// The sandbox-probe binary built with the tests.
std::filesystem::path ProbeBinary();

// Runs `probes` inside a sandbox for `spec` (network from spec.network_allowed). `init`
// defaults to ProbeBinary(); pass a copy elsewhere to test where the init binary may live.
SandboxRun RunProbesInSandbox(const SandboxSpec& spec, const std::vector<std::string>& probes,
                              const RunOptions& options = {},
                              const std::filesystem::path& init = {});

}  // namespace ptybox::sandbox::testing
