// Runs a program (bwrap, a fake bwrap, the sandbox-probe program) for tests: argv without a
// shell, chosen fds inherited at their own numbers, stdout/stderr captured, a hard deadline
// that only guards against hangs, and optionally a drop to another uid first.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "sandbox/init/child_exec.h"

namespace ptybox::sandbox::testing {

struct RunOptions {
  std::vector<int> keep_fds;  // inherited at the same numbers (FD_CLOEXEC cleared in the child)
  std::chrono::seconds timeout{60};
  // When set (and the caller is root), the child drops to this uid/gid (no supplementary
  // groups) before exec: how an unprivileged daemon would start bwrap.
  std::optional<uid_t> uid;
  std::optional<gid_t> gid;
};

struct RunResult {
  int start_errno = 0;                  // fork/exec failure, else 0
  std::optional<ChildFailure> failure;  // the step that failed before exec
  bool timed_out = false;
  int exit_code = -1;  // -1 when killed
  int signal = 0;
  std::string out;
  std::string err;

  [[nodiscard]] std::string Describe() const;  // for assertion messages
};

RunResult RunProcess(const std::vector<std::string>& argv, const RunOptions& options = {});

}  // namespace ptybox::sandbox::testing
