// `ptybox run` with a real terminal as the caller's: the command turns echo off, resizes the
// terminal and suspends its output; when the run ends, the caller's terminal is as it was.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <pty.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "tests/run/child_process.h"
#include "tests/support/daemon_fixture.h"

namespace ptybox::testing {
namespace {

struct Outcome {
  int status = -1;
  std::string output;  // what the run wrote to the terminal
};

// Runs `ptybox run --mode MODE -- sh -c SCRIPT` with the slave of `slave` as its controlling
// terminal and its stdin, stdout and stderr.
Outcome RunOnTerminal(int master, int slave, const std::string& workspace, const std::string& mode,
                      const std::string& script) {
  const std::string binary = PtyboxBinary().string();
  const std::vector<std::string> env_entries =
      TestEnvironment(std::filesystem::path(workspace) / "no-operator-policy.yaml");
  std::vector<char*> envp;
  for (const std::string& e : env_entries) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  std::vector<std::string> args = {binary, "run", "--mode", mode, "--", "sh", "-c", script};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = ::fork();
  if (pid == 0) {
    ::setsid();
    ::ioctl(slave, TIOCSCTTY, 0);
    for (int fd = 0; fd < 3; ++fd) ::dup2(slave, fd);
    if (::chdir(workspace.c_str()) != 0) ::_exit(120);
    ::execve(binary.c_str(), argv.data(), envp.data());
    ::_exit(121);
  }
  Outcome outcome;
  // Read while it runs so a full terminal buffer can never stall it.
  ::fcntl(master, F_SETFL, O_NONBLOCK);
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(master, buf, sizeof(buf));
    if (n > 0) {
      outcome.output.append(buf, static_cast<size_t>(n));
      continue;
    }
    if (::waitpid(pid, &outcome.status, WNOHANG) == pid) break;
    ::usleep(5000);
  }
  for (ssize_t n; (n = ::read(master, buf, sizeof(buf))) > 0;) {
    outcome.output.append(buf, static_cast<size_t>(n));
  }
  return outcome;
}

class TerminalStateTest : public ::testing::TestWithParam<std::string> {};

TEST_P(TerminalStateTest, CallerTerminalIsRestoredWhateverTheCommandDid) {
  TempDir workspace;
  int master = -1;
  int slave = -1;
  winsize size{};
  size.ws_row = 30;
  size.ws_col = 100;
  ASSERT_EQ(::openpty(&master, &slave, nullptr, nullptr, &size), 0);
  termios before{};
  ASSERT_EQ(::tcgetattr(slave, &before), 0);
  ASSERT_NE(before.c_lflag & ECHO, 0u) << "a fresh terminal echoes";

  // The command changes the terminal, shows that it did, and exits non-zero.
  Outcome run = RunOnTerminal(master, slave, workspace.path().string(), GetParam(),
                              "stty -echo cols 33 rows 11 && stty -a && exit 3");
  ASSERT_TRUE(WIFEXITED(run.status)) << run.status << " " << run.output;
  EXPECT_EQ(WEXITSTATUS(run.status), 3) << run.output;
  EXPECT_NE(run.output.find("-echo"), std::string::npos)
      << "the command turned echo off: " << run.output;
  EXPECT_NE(run.output.find("columns 33"), std::string::npos)
      << "the command resized: " << run.output;

  termios after{};
  ASSERT_EQ(::tcgetattr(slave, &after), 0);
  EXPECT_NE(after.c_lflag & ECHO, 0u) << "echo is back on";
  EXPECT_EQ(after.c_lflag, before.c_lflag);
  EXPECT_EQ(after.c_iflag, before.c_iflag);
  EXPECT_EQ(after.c_oflag, before.c_oflag);
  winsize now{};
  ASSERT_EQ(::ioctl(slave, TIOCGWINSZ, &now), 0);
  EXPECT_EQ(now.ws_row, 30);
  EXPECT_EQ(now.ws_col, 100);
  ::close(master);
  ::close(slave);
}

INSTANTIATE_TEST_SUITE_P(Modes, TerminalStateTest,
                         ::testing::Values("workspace-write", "danger-full-access"), ModeTestName);

}  // namespace
}  // namespace ptybox::testing
