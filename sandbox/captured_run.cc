#include "sandbox/captured_run.h"

#include <fcntl.h>
#include <linux/sched.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/syscall.h>
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
// `group`: the process group to join (0: a new one of its own).
[[noreturn]] void StartCapturedChild(char* const* argv, const CaptureOptions& options, int null_fd,
                                     int out_fd, int err_fd, int report_fd, pid_t group) {
  if (::setpgid(0, group) != 0) FailChild({ChildStage::kProcessGroup, errno}, report_fd);
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

// The keeper's exit code for a program killed by signal N whose default action is not to end a
// process (the keeper ends by the program's signal otherwise).
constexpr int kKeptSignalBase = 128;

// Runs in the keeper (a copy of one thread of the caller, never exec'd): async-signal-safe calls
// only. Starts the program as its own child in a new process group (the keeper's), waits for it,
// and ends as it did: its exit code, or the signal that killed it.
[[noreturn]] void KeepCapturedChild(char* const* argv, const CaptureOptions& options, int null_fd,
                                    int out_fd, int err_fd, int report_fd) {
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  ::sigaction(SIGCHLD, &dfl, nullptr);  // not the caller's handler: nothing reaches its reactor
  if (::setpgid(0, 0) != 0) FailChild({ChildStage::kProcessGroup, errno}, report_fd);
  const pid_t keeper = ::getpid();
  // vfork: the program's child shares the keeper's memory until it execs. The keeper is already a
  // copy of the caller's whole address space; a second copy (a fork) cost the daemon as much
  // again at every run of git (most of the system time of the Git for agents suites under ASan).
  // The keeper waits meanwhile, and is single-threaded: nothing else runs in that memory.
  const pid_t child = ::vfork();
  if (child < 0) FailChild({ChildStage::kFork, errno}, report_fd);
  if (child == 0) StartCapturedChild(argv, options, null_fd, out_fd, err_fd, report_fd, keeper);
  // Only the program holds the pipes now: their end is its end.
  ::close(out_fd);
  ::close(err_fd);
  ::close(report_fd);
  int status = 0;
  while (::waitpid(child, &status, 0) < 0) {
    if (errno != EINTR) ::_exit(kKeptSignalBase + SIGKILL);
  }
  if (WIFSIGNALED(status)) {
    // Ends by the same signal, its default action, without a core dump of its own.
    const struct rlimit no_core { 0, 0 };
    ::setrlimit(RLIMIT_CORE, &no_core);
    ::sigaction(WTERMSIG(status), &dfl, nullptr);
    sigset_t all;
    sigemptyset(&all);
    ::sigprocmask(SIG_SETMASK, &all, nullptr);
    ::kill(keeper, WTERMSIG(status));
    ::_exit(kKeptSignalBase + WTERMSIG(status));  // a signal whose default is to be ignored
  }
  ::_exit(WEXITSTATUS(status));
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
  // The child is a keeper started like fork but with no exit signal, which never execs (an exec
  // would give it SIGCHLD back): the daemon's reaper (waitpid(-1) without __WALL,
  // backend/child_reaper.h) never reaps it under our waitpid, nor ends it as an adopted orphan
  // (it skips children whose exit signal is 0), when this runs on a worker thread of the daemon
  // (git index-pack for the git copy-back). The keeper starts the program as its own child, in
  // its process group, and ends with the program's status.
  struct clone_args args {};
  args.exit_signal = 0;
  const auto pid = static_cast<pid_t>(::syscall(SYS_clone3, &args, sizeof args));
  if (pid < 0) {
    result.failure = ChildFailure{ChildStage::kFork, errno};
    return result;
  }
  result.pid = pid;
  if (pid == 0) {
    KeepCapturedChild(cargv.data(), options, null_fd.Get(), out.write.Get(), err.write.Get(),
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
  while (::waitpid(pid, &status, __WALL) < 0 && errno == EINTR) {
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
