// fork + execv with pipes and a poll loop; the child is its own process group, killed at the
// deadline.
#include "tests/sandbox/process_runner.h"

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>

namespace ptybox::sandbox::testing {

std::string RunResult::Describe() const {
  std::string text;
  if (start_errno != 0) text += "could not start: " + std::string(std::strerror(start_errno));
  if (timed_out) text += "timed out; ";
  text += "exit " + std::to_string(exit_code);
  if (signal != 0) text += ", signal " + std::to_string(signal);
  text += "\nstdout:\n" + out + "\nstderr:\n" + err;
  return text;
}

RunResult RunProcess(const std::vector<std::string>& argv, const RunOptions& options) {
  RunResult result;
  std::vector<char*> cargv;
  for (const auto& arg : argv) cargv.push_back(const_cast<char*>(arg.c_str()));
  cargv.push_back(nullptr);

  int out[2], err[2], exec_err[2];
  if (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0 || pipe2(exec_err, O_CLOEXEC) != 0) {
    result.start_errno = errno;
    return result;
  }
  const int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  const pid_t pid = fork();
  if (pid < 0) {
    result.start_errno = errno;
    return result;
  }
  if (pid == 0) {
    setpgid(0, 0);
    bool ok = dup2(null_fd, 0) == 0 && dup2(out[1], 1) == 1 && dup2(err[1], 2) == 2;
    for (int fd : options.keep_fds) ok = ok && fcntl(fd, F_SETFD, 0) == 0;
    if (ok && options.gid)
      ok = setgroups(0, nullptr) == 0 && setresgid(*options.gid, *options.gid, *options.gid) == 0;
    if (ok && options.uid) ok = setresuid(*options.uid, *options.uid, *options.uid) == 0;
    if (ok) execv(cargv[0], cargv.data());
    const int e = errno;
    ssize_t ignored = write(exec_err[1], &e, sizeof e);
    (void)ignored;
    _exit(127);
  }
  close(out[1]);
  close(err[1]);
  close(exec_err[1]);
  close(null_fd);

  const auto deadline = std::chrono::steady_clock::now() + options.timeout;
  std::array<pollfd, 3> fds{{{out[0], POLLIN, 0}, {err[0], POLLIN, 0}, {exec_err[0], POLLIN, 0}}};
  int open_count = 3;
  std::string exec_bytes;
  while (open_count > 0) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      result.timed_out = true;
      break;
    }
    const int ready = poll(fds.data(), fds.size(), static_cast<int>(left.count()));
    if (ready < 0 && errno != EINTR) break;
    for (size_t i = 0; ready > 0 && i < fds.size(); ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      char buffer[4096];
      const ssize_t n = read(fds[i].fd, buffer, sizeof buffer);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        close(fds[i].fd);
        fds[i].fd = -1;
        --open_count;
        continue;
      }
      std::string& to = i == 0 ? result.out : (i == 1 ? result.err : exec_bytes);
      to.append(buffer, static_cast<size_t>(n));
    }
  }
  for (const pollfd& p : fds) {
    if (p.fd >= 0) close(p.fd);
  }
  if (result.timed_out) kill(-pid, SIGKILL);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (exec_bytes.size() >= sizeof(int)) {
    std::memcpy(&result.start_errno, exec_bytes.data(), sizeof(int));
    return result;
  }
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) result.signal = WTERMSIG(status);
  return result;
}

}  // namespace ptybox::sandbox::testing
