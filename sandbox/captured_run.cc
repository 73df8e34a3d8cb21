#include "sandbox/captured_run.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>

#include "common/unique_fd.h"

namespace ptybox::sandbox {
namespace {

struct Pipe {
  UniqueFd read;
  UniqueFd write;
};

bool OpenPipe(Pipe& pipe) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return false;
  pipe.read.Reset(fds[0]);
  pipe.write.Reset(fds[1]);
  return true;
}

// Runs in the child: only async-signal-safe calls until execv.
[[noreturn]] void StartCapturedChild(char* const* argv, const CaptureOptions& options, int null_fd,
                                     int out_fd, int err_fd, int report_fd) {
  if (::setpgid(0, 0) != 0) FailChild({ChildStage::kProcessGroup, errno}, report_fd);
  if (::dup2(null_fd, STDIN_FILENO) < 0 || ::dup2(out_fd, STDOUT_FILENO) < 0 ||
      ::dup2(err_fd, STDERR_FILENO) < 0) {
    FailChild({ChildStage::kStdio, errno}, report_fd);
  }
  if (options.before_exec) {
    if (std::optional<ChildFailure> failed = options.before_exec()) FailChild(*failed, report_fd);
  }
  for (int fd : options.keep_fds) {
    if (::fcntl(fd, F_SETFD, 0) != 0) FailChild({ChildStage::kDescriptors, errno}, report_fd);
  }
  ::execv(argv[0], argv);
  FailChild({ChildStage::kExec, errno}, report_fd);
}

// Reads stdout, stderr and the report pipe until all three end or the deadline passes.
void Collect(CapturedRun& result, const CaptureOptions& options, std::array<pollfd, 3> fds,
             std::string& report) {
  const auto deadline = std::chrono::steady_clock::now() + options.timeout;
  size_t open_fds = fds.size();
  while (open_fds > 0) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      result.timed_out = true;
      return;
    }
    const int ready = ::poll(fds.data(), fds.size(), static_cast<int>(left.count()));
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) return;
    for (size_t i = 0; i < fds.size(); ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      char buffer[4096];
      const ssize_t n = ::read(fds[i].fd, buffer, sizeof buffer);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        fds[i].fd = -1;
        --open_fds;
        continue;
      }
      std::string& to = i == 0 ? result.out : (i == 1 ? result.err : report);
      const size_t cap = i == 2 ? 64 : options.max_capture;
      if (to.size() < cap) to.append(buffer, std::min(static_cast<size_t>(n), cap - to.size()));
    }
  }
}

}  // namespace

CapturedRun RunCaptured(const std::vector<std::string>& argv, const CaptureOptions& options) {
  CapturedRun result;
  std::vector<char*> cargv;
  for (const std::string& arg : argv) cargv.push_back(const_cast<char*>(arg.c_str()));
  cargv.push_back(nullptr);

  Pipe out;
  Pipe err;
  Pipe report;
  UniqueFd null_fd;
  if (!OpenPipe(out) || !OpenPipe(err) || !OpenPipe(report) ||
      !(null_fd = UniqueFd(::open("/dev/null", O_RDONLY | O_CLOEXEC)))) {
    result.failure = ChildFailure{ChildStage::kFork, errno};
    return result;
  }
  const pid_t pid = ::fork();
  if (pid < 0) {
    result.failure = ChildFailure{ChildStage::kFork, errno};
    return result;
  }
  result.pid = pid;
  if (pid == 0) {
    StartCapturedChild(cargv.data(), options, null_fd.Get(), out.write.Get(), err.write.Get(),
                       report.write.Get());
  }
  out.write.Reset();
  err.write.Reset();
  report.write.Reset();
  null_fd.Reset();

  std::string report_bytes;
  Collect(
      result, options,
      {{{out.read.Get(), POLLIN, 0}, {err.read.Get(), POLLIN, 0}, {report.read.Get(), POLLIN, 0}}},
      report_bytes);
  if (result.timed_out) ::kill(-pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  result.failure = DecodeChildFailure(report_bytes);
  if (result.failure) return result;
  if (WIFEXITED(status)) {
    result.exited = true;
    result.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    result.signal = WTERMSIG(status);
  }
  return result;
}

}  // namespace ptybox::sandbox
