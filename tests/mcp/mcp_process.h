// One `ptybox mcp` child spoken to line by line over its real stdin and stdout (pipes), for the
// GoogleTest suites of tests/mcp. Every wait has a hang guard only; nothing asserts durations.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/daemon_fixture.h"

namespace ptybox::testing {

using Clock = std::chrono::steady_clock;
inline constexpr auto kGuard = std::chrono::seconds(60);  // hang guard only

// One `ptybox mcp` child with pipes on its stdin and stdout; stderr goes to a log file.
class McpProcess final {
 public:
  // `workspace`: the --workspace given (default: a fresh temporary directory of its own).
  explicit McpProcess(std::vector<std::string> extra_args = {},
                      const std::filesystem::path& workspace = {}) {
    int in[2];
    int out[2];
    EXPECT_EQ(::pipe2(in, O_CLOEXEC), 0);
    EXPECT_EQ(::pipe2(out, O_CLOEXEC), 0);
    log_ = state_.path() / "stderr.log";
    std::vector<std::string> args = {
        PtyboxBinary().string(), "mcp", "--workspace",
        workspace.empty() ? workspace_.path().string() : workspace.string()};
    args.insert(args.end(), extra_args.begin(), extra_args.end());
    const std::string no_policy =
        "PTYBOX_OPERATOR_POLICY=" + (state_.path() / "no-operator-policy.yaml").string();
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(in[0], STDIN_FILENO);
      ::dup2(out[1], STDOUT_FILENO);
      int err = ::open(log_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
      if (err >= 0) ::dup2(err, STDERR_FILENO);
      ::putenv(const_cast<char*>(no_policy.c_str()));
      std::vector<char*> argv;
      for (std::string& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    ::close(in[0]);
    ::close(out[1]);
    to_server_ = in[1];
    from_server_ = out[0];
  }

  ~McpProcess() {
    CloseInput();
    if (pid_ > 0 && !exited_) {
      ::kill(pid_, SIGTERM);
      int status = 0;
      ::waitpid(pid_, &status, 0);
    }
    if (from_server_ >= 0) ::close(from_server_);
  }
  McpProcess(const McpProcess&) = delete;
  McpProcess& operator=(const McpProcess&) = delete;

  [[nodiscard]] const std::filesystem::path& workspace() const { return workspace_.path(); }

  void SendRaw(const std::string& bytes) {
    size_t off = 0;
    while (off < bytes.size()) {
      ssize_t n = ::write(to_server_, bytes.data() + off, bytes.size() - off);
      ASSERT_GT(n, 0) << "write to ptybox mcp failed";
      off += static_cast<size_t>(n);
    }
  }
  void Notify(const std::string& method, const Json& params) {
    SendRaw(Json{{"jsonrpc", "2.0"}, {"method", method}, {"params", params}}.dump() + "\n");
  }
  int SendRequest(const std::string& method, const Json& params) {
    int id = next_id_++;
    SendRaw(Json{{"jsonrpc", "2.0"}, {"id", id}, {"method", method}, {"params", params}}.dump() +
            "\n");
    return id;
  }
  Json Request(const std::string& method, const Json& params = Json::object()) {
    return WaitFor([id = SendRequest(method, params)](const Json& m) {
      return m.contains("id") && m["id"] == id && !m.contains("method");
    });
  }
  Json Initialize(const std::string& version = "2025-11-25",
                  const Json& capabilities = Json::object()) {
    Json r = Request("initialize", Json{{"protocolVersion", version},
                                        {"capabilities", capabilities},
                                        {"clientInfo", {{"name", "gtest"}, {"version", "1"}}}});
    Notify("notifications/initialized", Json::object());
    return r;
  }
  // Answers a request of the server (elicitation/create) with a result or an error object.
  void Respond(const Json& id, const Json& result) {
    SendRaw(Json{{"jsonrpc", "2.0"}, {"id", id}, {"result", result}}.dump() + "\n");
  }
  void RespondError(const Json& id, const Json& error) {
    SendRaw(Json{{"jsonrpc", "2.0"}, {"id", id}, {"error", error}}.dump() + "\n");
  }
  // tools/call; returns the CallToolResult (or the whole message when it is an error).
  Json Tool(const std::string& name, const Json& arguments = Json::object()) {
    Json r = Request("tools/call", Json{{"name", name}, {"arguments", arguments}});
    return r.contains("result") ? r["result"] : r;
  }

  // The next message that satisfies `match`; earlier ones are kept in seen().
  Json WaitFor(const std::function<bool(const Json&)>& match) {
    for (size_t i = checked_; i < seen_.size(); ++i) {
      if (match(seen_[i])) return seen_[i];
    }
    auto deadline = Clock::now() + kGuard;
    for (;;) {
      size_t before = seen_.size();
      if (!ReadMore(deadline)) {
        ADD_FAILURE() << "hang guard: no matching message from ptybox mcp; stderr:\n" << Log();
        return Json();
      }
      for (size_t i = before; i < seen_.size(); ++i) {
        if (match(seen_[i])) return seen_[i];
      }
    }
  }
  // The next message in arrival order.
  Json Next() {
    auto deadline = Clock::now() + kGuard;
    while (checked_ >= seen_.size()) {
      if (!ReadMore(deadline)) {
        ADD_FAILURE() << "hang guard: ptybox mcp sent nothing; stderr:\n" << Log();
        return Json();
      }
    }
    return seen_[checked_++];
  }
  [[nodiscard]] const std::vector<Json>& seen() const { return seen_; }

  void CloseInput() {
    if (to_server_ >= 0) ::close(to_server_);
    to_server_ = -1;
  }
  // Waits (hang guard) for the server to exit; its wait status, or nullopt on the guard.
  std::optional<int> WaitExit() {
    auto deadline = Clock::now() + kGuard;
    while (Clock::now() < deadline) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        exited_ = true;
        return status;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return std::nullopt;
  }
  [[nodiscard]] std::string Log() const {
    std::ifstream in(log_);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  }

 private:
  bool ReadMore(Clock::time_point deadline) {
    for (;;) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      if (left.count() <= 0) return false;
      pollfd p{from_server_, POLLIN, 0};
      int ready = ::poll(&p, 1, static_cast<int>(left.count()));
      if (ready <= 0) continue;
      char chunk[65536];
      ssize_t n = ::read(from_server_, chunk, sizeof chunk);
      if (n <= 0) return false;
      buffer_.append(chunk, static_cast<size_t>(n));
      bool got = false;
      for (size_t nl; (nl = buffer_.find('\n')) != std::string::npos;) {
        std::string line = buffer_.substr(0, nl);
        buffer_.erase(0, nl + 1);
        Json message = Json::parse(line, nullptr, false);
        EXPECT_FALSE(message.is_discarded()) << "stdout carried a line that is not JSON: " << line;
        seen_.push_back(message);
        got = true;
      }
      if (got) return true;
    }
  }

  TempDir workspace_;
  TempDir state_;
  std::filesystem::path log_;
  pid_t pid_ = -1;
  bool exited_ = false;
  int to_server_ = -1;
  int from_server_ = -1;
  int next_id_ = 1;
  std::string buffer_;
  std::vector<Json> seen_;
  size_t checked_ = 0;
};

inline bool IsResponseTo(const Json& m, const Json& id) {
  return m.contains("id") && m["id"] == id && !m.contains("method");
}

inline std::string Text(const Json& tool_result) {
  if (!tool_result.contains("content") || tool_result["content"].empty()) return "";
  return tool_result["content"][0].value("text", "");
}

}  // namespace ptybox::testing
