// The tests' process runner over the one captured-run helper (sandbox/captured_run.h); the
// drop to another uid is its step before exec.
#include "tests/sandbox/process_runner.h"

#include <grp.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "sandbox/captured_run.h"
#include "sandbox/init/child_exec.h"

namespace ptybox::sandbox::testing {

std::string RunResult::Describe() const {
  std::string text;
  if (start_errno != 0) text += "could not start: " + std::string(std::strerror(start_errno));
  if (failure) text += " (" + DescribeChildFailure(*failure) + "); ";
  if (timed_out) text += "timed out; ";
  text += "exit " + std::to_string(exit_code);
  if (signal != 0) text += ", signal " + std::to_string(signal);
  text += "\nstdout:\n" + out + "\nstderr:\n" + err;
  return text;
}

RunResult RunProcess(const std::vector<std::string>& argv, const RunOptions& options) {
  CaptureOptions capture;
  capture.keep_fds = options.keep_fds;
  capture.timeout = options.timeout;
  if (options.uid || options.gid) {
    const std::optional<uid_t> uid = options.uid;
    const std::optional<gid_t> gid = options.gid;
    capture.before_exec = [uid, gid]() -> std::optional<ChildFailure> {
      if (gid && (::setgroups(0, nullptr) != 0 || ::setresgid(*gid, *gid, *gid) != 0)) {
        return ChildFailure{ChildStage::kCredentials, errno};
      }
      if (uid && ::setresuid(*uid, *uid, *uid) != 0) {
        return ChildFailure{ChildStage::kCredentials, errno};
      }
      return std::nullopt;
    };
  }
  CapturedRun run = RunCaptured(argv, capture);
  RunResult result;
  result.failure = run.failure;
  // Every step failure counts as "could not start", with its errno (or EIO when it had none).
  if (run.failure) result.start_errno = run.failure->err != 0 ? run.failure->err : EIO;
  result.timed_out = run.timed_out;
  result.exit_code = run.exit_code;
  result.signal = run.signal;
  result.out = std::move(run.out);
  result.err = std::move(run.err);
  return result;
}

}  // namespace ptybox::sandbox::testing
