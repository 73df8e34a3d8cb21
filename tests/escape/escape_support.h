// The escape suite's fixture: one real daemon (with a secret in its environment) and one real
// bash session in the mode under test, over a workspace that holds a git repository, a
// repository policy and the probe programs. Run() types a command and records what it saw.
#pragma once

#include <gtest/gtest.h>
#include <sys/types.h>

#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "tests/support/daemon_fixture.h"
#include "tests/support/files.h"

namespace ptybox::testing {

// The repository policy the workspace holds (it narrows nothing; it must only stay unchanged).
inline constexpr std::string_view kRepoPolicy = "version: 1\n";

// One command typed into a session and what came back.
struct Observed {
  std::string mode;
  std::string name;  // the case, e.g. "write-.git"
  std::string command;
  Json result;       // the terminal_send result (or the error response)
  int exit = -1;     // result.exitCode, -1 when null
  std::string text;  // result.viewport

  [[nodiscard]] bool Says(std::string_view needle) const {
    return text.find(needle) != std::string::npos;
  }
  // One line for assertion messages and the observation log.
  [[nodiscard]] std::string Show() const;
};

// Types `command` (plus Enter) into `session` and checks the structured result that every case
// needs: the verified prompt came back (stdin_read) and the shell still runs.
Observed RunInSession(RpcClient& client, const std::string& session, const std::string& mode,
                      const std::string& name, const std::string& command);

// Gives a fresh workspace a git repository (one commit: tracked.txt and .ptybox.yaml), a
// `mnt` directory, and the probe programs under `.escape/` (excluded from git).
void PrepareWorkspace(const std::filesystem::path& workspace);

class EscapeTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override;

  [[nodiscard]] const std::string& Mode() const { return GetParam(); }
  [[nodiscard]] bool Confined() const { return Mode() != "danger-full-access"; }
  [[nodiscard]] const std::filesystem::path& workspace() const { return daemon_.workspace(); }
  Observed Run(const std::string& name, const std::string& command) {
    return RunInSession(client_, session_, Mode(), name, command);
  }
  // The command line of tests/escape/escape_probe.py with `args`.
  [[nodiscard]] std::string Probe(const std::string& args) const;
  // A name unique to this test process and mode, for files outside the workspace.
  [[nodiscard]] std::string Unique() const;

  // A per-test token: the daemon has it in two variables of its environment (one with the
  // PTYBOX_ prefix, one without), the session must not find it anywhere.
  const std::string secret_ = NewSecret();
  Daemon daemon_{Daemon::Options{
      .extra_args = {},
      .env = {"ESCAPE_TEST_SECRET=" + secret_, "PTYBOX_TEST_SECRET_xyz=" + secret_}}};
  RpcClient client_{daemon_.socket()};
  std::string session_;

 private:
  static std::string NewSecret();
};

// A TCP listener on the host's 127.0.0.1 (an ephemeral port), owned by the test process.
class Listener final {
 public:
  Listener();
  ~Listener();
  Listener(const Listener&) = delete;
  Listener& operator=(const Listener&) = delete;
  [[nodiscard]] int port() const { return port_; }
  // True when a connection has arrived (accepted without blocking, then closed).
  [[nodiscard]] bool HasPendingConnection();

 private:
  int fd_ = -1;
  int port_ = 0;
};

// A PTY of the host, opened by the test process.
class HostPty final {
 public:
  HostPty();
  ~HostPty();
  HostPty(const HostPty&) = delete;
  HostPty& operator=(const HostPty&) = delete;
  [[nodiscard]] bool ok() const { return master_ >= 0; }
  [[nodiscard]] const std::string& number() const { return number_; }  // "N" of /dev/pts/N

 private:
  int master_ = -1;
  int slave_ = -1;
  std::string number_;
};

std::string Quote(const std::filesystem::path& path);  // single-quoted for bash
bool IsUnder(const std::filesystem::path& path, const std::filesystem::path& dir);
// A host directory outside every writable root (the build tree of this test).
std::filesystem::path OutsideDir();
// "Name:\tvalue" lines of /proc/<pid>/status -> {Name: value}.
std::map<std::string, std::string> StatusFields(const std::string& text);
// ptybox-sandbox-probe output -> {spec: result}, whitespace-separated (the terminal may have
// turned its tabs into spaces).
std::map<std::string, std::string> ProbeResults(const std::string& text);

}  // namespace ptybox::testing
