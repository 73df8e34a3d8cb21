// Test support for tests/run: starts a real program (the built or installed ptybox) as a child
// with its stdin, stdout and stderr on pipes, reads each stream incrementally and collects the
// exit status. Every wait is a generous hang guard; tests assert order and content only.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace ptybox::testing {

class ChildProcess final {
 public:
  struct Options {
    std::vector<std::string> argv;      // argv[0] is the program's path
    std::vector<std::string> env;       // the whole environment, "K=V"
    std::filesystem::path cwd;          // empty: inherit
    bool close_stdin = false;           // start with descriptor 0 closed instead of a pipe
    std::filesystem::path stderr_file;  // non-empty: stderr goes to this file, not a pipe
  };
  struct Exit {
    bool exited = false;  // false: killed by a signal (or the hang guard fired)
    int code = -1;        // exit code when `exited`
    int signal = 0;       // terminating signal otherwise
  };

  explicit ChildProcess(Options options);
  ~ChildProcess();  // kills and reaps the child if it is still running
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  [[nodiscard]] pid_t pid() const { return pid_; }

  // Writes to the child's stdin (false if it is closed); CloseStdin sends EOF.
  bool Write(const std::string& bytes);
  void CloseStdin();
  void Signal(int sig);

  // The next complete line of stdout / stderr (without '\n'), or nullopt at EOF or when the
  // hang guard expires. Lines already returned are not returned again.
  std::optional<std::string> ReadStdoutLine(std::chrono::seconds guard = std::chrono::seconds(60));
  std::optional<std::string> ReadStderrLine(std::chrono::seconds guard = std::chrono::seconds(60));

  // Reads both streams to EOF and reaps the child (hang guard: SIGKILL and ADD_FAILURE).
  Exit Wait(std::chrono::seconds guard = std::chrono::seconds(120));

  // Everything read so far (including lines already returned).
  [[nodiscard]] const std::string& out() const { return out_; }
  [[nodiscard]] const std::string& err() const { return err_; }

 private:
  // Reads whatever is available within `until`; false when nothing more can come.
  bool Pump(std::chrono::steady_clock::time_point until);
  std::optional<std::string> ReadLine(bool from_stdout, std::chrono::seconds guard);

  pid_t pid_ = -1;
  int in_ = -1;
  int out_fd_ = -1;
  int err_fd_ = -1;
  std::string out_;
  std::string err_;
  size_t out_consumed_ = 0;
  size_t err_consumed_ = 0;
  std::optional<Exit> exit_;
};

// A minimal environment for the child: PATH, HOME, LANG, PTYBOX_INIT (the built helper) and
// PTYBOX_OPERATOR_POLICY pointing at `no_operator_policy` (a path that does not exist, so the
// host's /etc/ptybox/policy.yaml never leaks into a test), plus `extra`.
std::vector<std::string> TestEnvironment(const std::filesystem::path& no_operator_policy,
                                         const std::vector<std::string>& extra = {});

// A fresh random token for finding a test's processes by environment (ProcessesWithEnv).
std::string NewMarker();

// Polls (hang guard) until no live process carries `marker`; returns the ones left.
std::vector<pid_t> WaitNoneWithEnv(const std::string& marker,
                                   std::chrono::seconds guard = std::chrono::seconds(30));

}  // namespace ptybox::testing
