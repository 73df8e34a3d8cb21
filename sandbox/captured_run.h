// Runs a program to its end with stdin from /dev/null and its stdout and stderr captured, in a
// process group of its own that is killed at a hard deadline: the host probes (bwrap
// --version, a tiny sandbox) and the tests' process runner. Blocking; never on the reactor.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "sandbox/init/child_exec.h"

namespace ptybox::sandbox {

struct CaptureOptions {
  std::vector<int> keep_fds;  // inherited at the same numbers (FD_CLOEXEC cleared in the child)
  std::chrono::milliseconds timeout{std::chrono::seconds(60)};
  size_t max_capture = std::numeric_limits<size_t>::max();  // per stream; the rest is dropped
  // A step of the child after its stdio is set and before the descriptors are kept and the
  // program exec'd: async-signal-safe calls only. A failure it returns ends the child.
  std::function<std::optional<ChildFailure>()> before_exec;
};

struct CapturedRun {
  // Set when the program never ran: the step that failed, in the child or (kFork) here.
  std::optional<ChildFailure> failure;
  pid_t pid = -1;  // the child's (reaped by now), -1 when none was forked
  bool timed_out = false;
  bool exited = false;
  int exit_code = -1;  // -1 when killed
  int signal = 0;
  std::string out;
  std::string err;

  [[nodiscard]] bool Succeeded() const {
    return !failure && !timed_out && exited && exit_code == 0;
  }
};

// argv[0] is an absolute path (no PATH search); the environment is ours.
[[nodiscard]] CapturedRun RunCaptured(const std::vector<std::string>& argv,
                                      const CaptureOptions& options);

}  // namespace ptybox::sandbox
