#include "tests/run/child_process.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <random>
#include <thread>

#include "tests/support/daemon_fixture.h"

namespace ptybox::testing {
namespace {

using Clock = std::chrono::steady_clock;

void CloseFd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

}  // namespace

ChildProcess::ChildProcess(Options options) {
  // A write to a child that is gone must fail with EPIPE, not kill the test.
  ::signal(SIGPIPE, SIG_IGN);
  int in[2] = {-1, -1};
  int out[2];
  int err[2] = {-1, -1};
  if ((!options.close_stdin && ::pipe2(in, O_CLOEXEC) != 0) || ::pipe2(out, O_CLOEXEC) != 0 ||
      (options.stderr_file.empty() && ::pipe2(err, O_CLOEXEC) != 0)) {
    ADD_FAILURE() << "pipe2 failed";
    return;
  }
  int err_file = -1;
  if (!options.stderr_file.empty()) {
    err_file = ::open(options.stderr_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  }
  std::vector<char*> argv;
  for (std::string& a : options.argv) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (std::string& e : options.env) envp.push_back(e.data());
  envp.push_back(nullptr);

  pid_ = ::fork();
  if (pid_ == 0) {
    // Our own signal mask and dispositions must not leak into the program under test.
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::signal(SIGPIPE, SIG_DFL);
    if (options.close_stdin) {
      ::close(STDIN_FILENO);
    } else {
      ::dup2(in[0], STDIN_FILENO);
    }
    ::dup2(out[1], STDOUT_FILENO);
    ::dup2(err_file >= 0 ? err_file : err[1], STDERR_FILENO);
    if (!options.cwd.empty() && ::chdir(options.cwd.c_str()) != 0) ::_exit(126);
    ::execve(argv[0], argv.data(), envp.data());
    ::_exit(127);
  }
  if (in[0] >= 0) ::close(in[0]);
  ::close(out[1]);
  if (err[1] >= 0) ::close(err[1]);
  if (err_file >= 0) ::close(err_file);
  in_ = in[1];
  out_fd_ = out[0];
  err_fd_ = err[0];
  ::fcntl(out_fd_, F_SETFL, O_NONBLOCK);
  if (err_fd_ >= 0) ::fcntl(err_fd_, F_SETFL, O_NONBLOCK);
}

ChildProcess::~ChildProcess() {
  if (pid_ > 0 && !exit_) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  CloseFd(in_);
  CloseFd(out_fd_);
  CloseFd(err_fd_);
}

bool ChildProcess::Write(const std::string& bytes) {
  size_t off = 0;
  while (off < bytes.size()) {
    if (in_ < 0) return false;
    ssize_t n = ::write(in_, bytes.data() + off, bytes.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  return true;
}

void ChildProcess::CloseStdin() { CloseFd(in_); }

void ChildProcess::Signal(int sig) {
  if (pid_ > 0 && !exit_) ::kill(pid_, sig);
}

bool ChildProcess::Pump(Clock::time_point until) {
  pollfd fds[2] = {{out_fd_, POLLIN, 0}, {err_fd_, POLLIN, 0}};
  if (out_fd_ < 0 && err_fd_ < 0) return false;
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now()).count();
  if (left < 0) left = 0;
  int ready = ::poll(fds, 2, static_cast<int>(left));
  if (ready <= 0) return ready < 0 && errno == EINTR;
  struct Stream {
    int& fd;
    std::string& buffer;
  };
  Stream streams[2] = {{out_fd_, out_}, {err_fd_, err_}};
  for (int i = 0; i < 2; ++i) {
    if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
    char chunk[65536];
    ssize_t n = ::read(streams[i].fd, chunk, sizeof(chunk));
    if (n > 0) {
      streams[i].buffer.append(chunk, static_cast<size_t>(n));
    } else if (n == 0 || errno != EAGAIN) {
      CloseFd(streams[i].fd);
    }
  }
  return true;
}

std::optional<std::string> ChildProcess::ReadLine(bool from_stdout, std::chrono::seconds guard) {
  const auto deadline = Clock::now() + guard;
  std::string& buffer = from_stdout ? out_ : err_;
  size_t& consumed = from_stdout ? out_consumed_ : err_consumed_;
  for (;;) {
    size_t newline = buffer.find('\n', consumed);
    if (newline != std::string::npos) {
      std::string line = buffer.substr(consumed, newline - consumed);
      consumed = newline + 1;
      return line;
    }
    int fd = from_stdout ? out_fd_ : err_fd_;
    if (fd < 0 || Clock::now() >= deadline) return std::nullopt;
    Pump(deadline);
  }
}

std::optional<std::string> ChildProcess::ReadStdoutLine(std::chrono::seconds guard) {
  return ReadLine(true, guard);
}

std::optional<std::string> ChildProcess::ReadStderrLine(std::chrono::seconds guard) {
  return ReadLine(false, guard);
}

ChildProcess::Exit ChildProcess::Wait(std::chrono::seconds guard) {
  if (exit_) return *exit_;
  const auto deadline = Clock::now() + guard;
  while ((out_fd_ >= 0 || err_fd_ >= 0) && Clock::now() < deadline) Pump(deadline);
  int status = 0;
  while (::waitpid(pid_, &status, WNOHANG) == 0) {
    if (Clock::now() >= deadline) {
      ADD_FAILURE() << "the child did not exit within the hang guard; killing it";
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (out_fd_ >= 0 || err_fd_ >= 0) {
    ADD_FAILURE() << "the child's output stayed open within the hang guard (a process that "
                     "inherited it is still running)";
  }
  Exit e;
  e.exited = WIFEXITED(status);
  e.code = e.exited ? WEXITSTATUS(status) : -1;
  e.signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  exit_ = e;
  CloseFd(in_);
  return e;
}

std::vector<std::string> TestEnvironment(const std::filesystem::path& no_operator_policy,
                                         const std::vector<std::string>& extra) {
  std::vector<std::string> env = {
      "PATH=/usr/local/bin:/usr/bin:/bin",
      "HOME=/root",
      "LANG=C.UTF-8",
      "PTYBOX_INIT=" + InitBinary().string(),
      "PTYBOX_OPERATOR_POLICY=" + no_operator_policy.string(),
  };
  if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0') {
    env[1] = std::string("HOME=") + home;
  }
  env.insert(env.end(), extra.begin(), extra.end());
  return env;
}

std::string NewMarker() {
  std::random_device rd;
  std::uniform_int_distribution<uint64_t> dist;
  char buf[40];
  std::snprintf(buf, sizeof(buf), "runmark%016llx", static_cast<unsigned long long>(dist(rd)));
  return buf;
}

std::vector<pid_t> WaitNoneWithEnv(const std::string& marker, std::chrono::seconds guard) {
  const auto deadline = Clock::now() + guard;
  for (;;) {
    std::vector<pid_t> left = ProcessesWithEnv(marker);
    if (left.empty() || Clock::now() >= deadline) return left;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace ptybox::testing
