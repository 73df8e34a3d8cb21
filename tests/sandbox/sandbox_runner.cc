// Glue between the production argv/filter builders and the probe program.
#include "tests/sandbox/sandbox_runner.h"

#include "sandbox/host_probe.h"
#include "sandbox/seccomp_filter.h"

namespace ptybox::sandbox::testing {

std::string SandboxRun::Result(const std::string& spec) const {
  auto it = by_spec.find(spec);
  return it == by_spec.end() ? "missing" : it->second.result;
}

std::string SandboxRun::Info(const std::string& spec) const {
  auto it = by_spec.find(spec);
  return it == by_spec.end() ? "" : it->second.info;
}

std::filesystem::path ProbeBinary() { return PTYBOX_SANDBOX_PROBE; }

SandboxRun RunProbesInSandbox(const SandboxSpec& spec, const std::vector<std::string>& probes,
                              const RunOptions& options, const std::filesystem::path& init) {
  SandboxRun run;
  auto program = BuildSeccompProgram({.network_allowed = spec.network_allowed});
  if (!program) {
    run.process.err = program.error().Describe();
    return run;
  }
  BwrapInvocation invocation{FindBwrap(), program->Get(), init.empty() ? ProbeBinary() : init,
                             probes};
  run.argv = BuildBwrapArgv(spec, invocation);
  RunOptions with_fd = options;
  with_fd.keep_fds.push_back(program->Get());
  run.process = RunProcess(run.argv, with_fd);
  run.lines = ParseProbeLines(run.process.out);
  for (const ProbeLine& line : run.lines) run.by_spec[line.spec] = line;
  return run;
}

}  // namespace ptybox::sandbox::testing
