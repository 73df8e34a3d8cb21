// Test support: runs the real `ptybox serve --socket` binary in a temporary workspace and talks
// JSON-RPC to it over its real socket. Waits are hang guards only (generous deadlines); tests
// assert reasons and order, never durations.
#pragma once

#include <gtest/gtest.h>
#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "tests/support/temp_dir.h"

namespace ptybox::testing {

using Json = nlohmann::json;

class RpcClient final {
 public:
  explicit RpcClient(const std::filesystem::path& socket);
  ~RpcClient();
  RpcClient(const RpcClient&) = delete;
  RpcClient& operator=(const RpcClient&) = delete;

  // Sends a request and returns its id.
  int SendRequest(const std::string& method, const Json& params);
  // Sends raw bytes (a line is not terminated for you).
  void SendRaw(const std::string& bytes);
  // Waits for the response to `id` (other messages are kept for later).
  Json WaitResponse(int id, std::chrono::seconds guard = std::chrono::seconds(60));
  // Waits for the next message whatever its id.
  Json WaitAny(std::chrono::seconds guard = std::chrono::seconds(60));
  // Request + response.
  Json Call(const std::string& method, const Json& params,
            std::chrono::seconds guard = std::chrono::seconds(60));
  void Disconnect();

 private:
  std::optional<Json> TakeQueued(std::optional<int> id);
  bool ReadMore(std::chrono::steady_clock::time_point deadline);

  int fd_ = -1;
  int next_id_ = 1000;
  std::string buffer_;
  std::vector<Json> queued_;
};

class Daemon final {
 public:
  struct Options {
    std::vector<std::string> extra_args;  // e.g. {"--policy", path}
    std::vector<std::string> env;         // extra "K=V" for the daemon
    // Non-empty: the workspace is this relative path (made) beneath the fresh temporary directory,
    // so that a test can put a repository around it.
    std::filesystem::path workspace_below{};
  };
  Daemon() : Daemon(Options{}) {}
  explicit Daemon(Options options) : Daemon(std::move(options), {}) {}
  // `socket`: where the socket is; empty for <state dir>/ptybox.sock, a relative path is taken
  // inside the workspace.
  Daemon(Options options, const std::filesystem::path& socket);
  ~Daemon();
  Daemon(const Daemon&) = delete;
  Daemon& operator=(const Daemon&) = delete;

  [[nodiscard]] const std::filesystem::path& workspace() const { return workspace_path_; }
  [[nodiscard]] const std::filesystem::path& socket() const { return socket_; }
  [[nodiscard]] pid_t pid() const { return pid_; }
  // Sends `signal` and waits for the daemon to exit; returns its wait status.
  int Stop(int signal);
  // What the daemon wrote on stderr so far.
  [[nodiscard]] std::string Log() const;

 private:
  TempDir workspace_;
  std::filesystem::path workspace_path_;
  TempDir state_;
  std::filesystem::path socket_;
  std::filesystem::path log_;
  pid_t pid_ = -1;
};

// Test-name suffix for a mode parameter ("workspace-write" -> "workspacewrite").
std::string ModeTestName(const ::testing::TestParamInfo<std::string>& info);

// Paths of the built binaries (from the build system).
std::filesystem::path PtyboxBinary();
std::filesystem::path InitBinary();

// True while /proc/<pid> exists and is not a zombie.
bool ProcessAlive(pid_t pid);
// Waits (hang guard) until `pid` is gone.
bool WaitGone(pid_t pid, std::chrono::seconds guard = std::chrono::seconds(30));
// Every live pid whose environment contains `marker` (a per-test token): finds a test's
// processes wherever they went (setsid, double fork).
std::vector<pid_t> ProcessesWithEnv(const std::string& marker);

// Opens a session in `mode` (after policy_set_mode) and returns its id; fails the test otherwise.
std::string OpenSession(RpcClient& client, const std::string& mode, Json extra = Json::object());
// A session of `mode` whose $SHELL is bash (what `exec $SHELL` runs); in danger-full-access with
// `home`, a fresh directory kept alive by the caller, as HOME: the host's rc files (this machine's
// root runs pyenv's init and its prompt hook there) are not the test's.
std::string OpenBashSession(RpcClient& client, const std::string& mode,
                            std::optional<TempDir>& home);

// A parameterised suite (the parameter is the mode) that shares one daemon across its tests:
// each test talks on its own connection (its own owner scope), so tests share nothing but the
// process. Each derived suite starts and stops the daemon once; gtest runs suites one after
// another, so one static slot serves them all.
class SharedDaemonModeTest : public ::testing::TestWithParam<std::string> {
 protected:
  static void SetUpTestSuite() { daemon_ = new Daemon(); }
  static void TearDownTestSuite() {
    delete daemon_;
    daemon_ = nullptr;
  }
  // A session in the suite's mode on this test's connection.
  std::string Open(Json extra = Json::object()) {
    return OpenSession(client_, GetParam(), std::move(extra));
  }

  inline static Daemon* daemon_ = nullptr;
  RpcClient client_{daemon_->socket()};
};
// terminal_send in the foreground; returns the result object (or the error response). `guard`:
// how long the client waits for the answer (a send given a long timeoutMs needs a longer one).
Json Send(RpcClient& client, const std::string& session, const std::string& input,
          Json extra = Json::object(), std::chrono::seconds guard = std::chrono::seconds(60));

}  // namespace ptybox::testing
