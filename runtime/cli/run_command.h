// `ptybox run -- CMD`: one command in the resolved sandbox for CI jobs. Its output is streamed
// (it inherits our stdin/stdout/stderr), its exit status passed through (128+N when killed by
// signal N), and nothing it started outlives it. Exit codes of our own are listed below.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "runtime/audit/audit_log.h"
#include "runtime/service.h"

namespace ptybox::runtime {

// Exit codes `ptybox run` uses for itself; every other code is the command's own.
inline constexpr int kRunExitUsage = 2;         // bad command line (before anything ran)
inline constexpr int kRunExitTimeout = 124;     // --timeout expired; the command was ended
inline constexpr int kRunExitSandbox = 125;     // policy error/denial, sandbox could not start
inline constexpr int kRunExitCannotExec = 126;  // the command exists but cannot be executed
inline constexpr int kRunExitNotFound = 127;    // the command was not found (in the sandbox)
// --timeout is bounded so the deadline arithmetic cannot overflow: 30 days.
inline constexpr int64_t kRunMaxTimeoutSeconds = 30LL * 24 * 3600;

struct RunOptions {
  ServiceOptions service;
  std::optional<int64_t> timeout_seconds;  // 1..kRunMaxTimeoutSeconds; nullopt: no deadline
  std::vector<std::string> command;
  std::shared_ptr<AuditLog> audit;  // --audit-log / audit.log: records the command and its end
};

// Runs the command to completion and returns the exit code for the process to exit with.
// Messages of our own go to stderr, prefixed "ptybox run: ".
[[nodiscard]] int RunCommand(const RunOptions& options);

}  // namespace ptybox::runtime
