#include "tests/support/daemon_fixture.h"

#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "tests/support/files.h"

namespace ptybox::testing {

std::string ModeTestName(const ::testing::TestParamInfo<std::string>& info) {
  std::string name = info.param;
  std::erase(name, '-');
  return name;
}

std::filesystem::path PtyboxBinary() { return PTYBOX_TEST_BINARY; }
std::filesystem::path InitBinary() { return PTYBOX_TEST_INIT; }

RpcClient::RpcClient(const std::filesystem::path& socket) {
  fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, socket.c_str(), sizeof(addr.sun_path) - 1);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      throw std::runtime_error("cannot connect to " + socket.string());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

RpcClient::~RpcClient() { Disconnect(); }

void RpcClient::Disconnect() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

int RpcClient::SendRequest(const std::string& method, const Json& params) {
  int id = next_id_++;
  Json request{{"jsonrpc", "2.0"}, {"id", id}, {"method", method}, {"params", params}};
  SendRaw(request.dump() + "\n");
  return id;
}

void RpcClient::SendRaw(const std::string& bytes) {
  size_t off = 0;
  while (off < bytes.size()) {
    ssize_t n = ::send(fd_, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
    if (n <= 0) throw std::runtime_error("send to ptybox failed");
    off += static_cast<size_t>(n);
  }
}

std::optional<Json> RpcClient::TakeQueued(std::optional<int> id) {
  for (auto it = queued_.begin(); it != queued_.end(); ++it) {
    if (!id || (it->contains("id") && (*it)["id"] == *id)) {
      Json found = *it;
      queued_.erase(it);
      return found;
    }
  }
  return std::nullopt;
}

bool RpcClient::ReadMore(std::chrono::steady_clock::time_point deadline) {
  for (;;) {
    size_t newline = buffer_.find('\n');
    if (newline != std::string::npos) {
      queued_.push_back(Json::parse(buffer_.substr(0, newline)));
      buffer_.erase(0, newline + 1);
      return true;
    }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    char chunk[65536];
    ssize_t n = ::recv(fd_, chunk, sizeof(chunk), 0);
    if (n <= 0) return false;
    buffer_.append(chunk, static_cast<size_t>(n));
  }
}

Json RpcClient::WaitResponse(int id, std::chrono::seconds guard) {
  auto deadline = std::chrono::steady_clock::now() + guard;
  for (;;) {
    if (std::optional<Json> found = TakeQueued(id)) return *found;
    if (!ReadMore(deadline)) {
      ADD_FAILURE() << "no response to request " << id << " within the hang guard";
      return Json{{"error", {{"message", "hang guard"}}}};
    }
  }
}

Json RpcClient::WaitAny(std::chrono::seconds guard) {
  auto deadline = std::chrono::steady_clock::now() + guard;
  for (;;) {
    if (std::optional<Json> found = TakeQueued(std::nullopt)) return *found;
    if (!ReadMore(deadline)) {
      ADD_FAILURE() << "no message within the hang guard";
      return Json{{"error", {{"message", "hang guard"}}}};
    }
  }
}

Json RpcClient::Call(const std::string& method, const Json& params, std::chrono::seconds guard) {
  return WaitResponse(SendRequest(method, params), guard);
}

Daemon::Daemon(Options options, const std::filesystem::path& socket) {
  workspace_path_ = workspace_.path();
  if (!options.workspace_below.empty()) {
    workspace_path_ /= options.workspace_below;
    std::filesystem::create_directories(workspace_path_);
  }
  socket_ = socket.empty() ? state_.path() / "ptybox.sock" : workspace_path_ / socket;
  log_ = state_.path() / "daemon.log";
  std::vector<std::string> args = {
      PtyboxBinary().string(), "serve",       "--socket",
      socket_.string(),        "--workspace", workspace_path_.string()};
  args.insert(args.end(), options.extra_args.begin(), options.extra_args.end());
  pid_ = ::fork();
  if (pid_ == 0) {
    int log = ::open(log_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ::dup2(log, STDERR_FILENO);
    int devnull = ::open("/dev/null", O_RDWR);
    ::dup2(devnull, STDIN_FILENO);
    ::dup2(devnull, STDOUT_FILENO);
    ::setenv("PTYBOX_LOG", "info", 1);
    ::setenv("PTYBOX_INIT", InitBinary().c_str(), 1);
    // No operator policy from the host unless a test gives one.
    ::setenv("PTYBOX_OPERATOR_POLICY", (state_.path() / "no-operator-policy.yaml").c_str(), 1);
    for (const std::string& kv : options.env) ::putenv(const_cast<char*>(kv.c_str()));
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!std::filesystem::exists(socket_)) {
    if (std::chrono::steady_clock::now() > deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (!std::filesystem::exists(socket_)) {
    // Once in a full run (recording_test_unprivileged) a daemon made no socket at all: say
    // whether it ended and what it logged, instead of a bare "cannot connect" later.
    int status = 0;
    const pid_t ended = ::waitpid(pid_, &status, WNOHANG);
    ADD_FAILURE() << "ptybox serve made no socket at " << socket_ << " within 30 s ("
                  << (ended == pid_ ? "it ended, wait status " + std::to_string(status)
                                    : std::string("it still runs"))
                  << "); its log:\n"
                  << Log();
    if (ended == pid_) pid_ = -1;
  }
}

namespace {

// What a sanitizer build's daemon wrote to its report files (ASAN_OPTIONS' and UBSAN_OPTIONS'
// `log_path`, scripts/test-sanitized.sh): empty outside such a run or when it reported nothing.
// The daemon's exit status alone does not name a leak found at its exit, and the file names the
// process only by pid; checked here, the test that ran the daemon fails and shows the report.
std::string SanitizerReportOf(pid_t pid) {
  std::string report;
  for (const char* variable : {"ASAN_OPTIONS", "UBSAN_OPTIONS"}) {
    const char* options = ::getenv(variable);
    if (options == nullptr) continue;
    const std::string text = options;
    const size_t at = text.find("log_path=");
    if (at == std::string::npos) continue;
    const size_t from = at + std::strlen("log_path=");
    const std::string path =
        text.substr(from, text.find(':', from) - from) + "." + std::to_string(pid);
    if (!std::filesystem::exists(path)) continue;
    std::string head = ReadFile(path);
    if (head.size() > 6000) head = head.substr(0, 6000) + "\n[...]";
    report += "=== " + path + "\n" + head;
  }
  return report;
}

}  // namespace

Daemon::~Daemon() {
  if (pid_ > 0) Stop(SIGTERM);
}

int Daemon::Stop(int signal) {
  if (pid_ <= 0) return 0;
  ::kill(pid_, signal);
  int status = 0;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (::waitpid(pid_, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      ADD_FAILURE() << "ptybox did not exit after signal " << signal;
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (std::string report = SanitizerReportOf(pid_); !report.empty()) {
    ADD_FAILURE() << "ptybox serve (pid " << pid_ << ") left a sanitizer report:\n" << report;
  }
  pid_ = -1;
  return status;
}

std::string Daemon::Log() const { return ReadFile(log_); }

bool ProcessAlive(pid_t pid) {
  const std::string text = ReadFile("/proc/" + std::to_string(pid) + "/stat");
  size_t paren = text.rfind(')');
  return paren != std::string::npos && paren + 2 < text.size() && text[paren + 2] != 'Z';
}

bool WaitGone(pid_t pid, std::chrono::seconds guard) {
  auto deadline = std::chrono::steady_clock::now() + guard;
  while (ProcessAlive(pid)) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

std::vector<pid_t> ProcessesWithEnv(const std::string& marker) {
  std::vector<pid_t> found;
  DIR* dir = ::opendir("/proc");
  if (dir == nullptr) return found;
  while (dirent* entry = ::readdir(dir)) {
    pid_t pid = static_cast<pid_t>(std::atoi(entry->d_name));
    if (pid <= 0 || !ProcessAlive(pid)) continue;
    // read(2), not a stream: a process that exits while we read gives ESRCH, which a stream
    // buffer turns into an exception.
    std::string env;
    int fd = ::open(("/proc/" + std::to_string(pid) + "/environ").c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    char buf[4096];
    for (ssize_t n; (n = ::read(fd, buf, sizeof(buf))) > 0;)
      env.append(buf, static_cast<size_t>(n));
    ::close(fd);
    if (env.find(marker) != std::string::npos) found.push_back(pid);
  }
  ::closedir(dir);
  return found;
}

std::string OpenSession(RpcClient& client, const std::string& mode, Json extra) {
  Json set = client.Call("policy_set_mode", Json{{"mode", mode}});
  EXPECT_TRUE(set.contains("result")) << set.dump();
  Json opened = client.Call("terminal_open", extra);
  EXPECT_TRUE(opened.contains("result")) << opened.dump();
  if (!opened.contains("result")) return "";
  EXPECT_EQ(opened["result"]["mode"], mode);
  return opened["result"]["sessionId"].get<std::string>();
}

std::string OpenBashSession(RpcClient& client, const std::string& mode,
                            std::optional<TempDir>& home) {
  Json env{{"SHELL", "/bin/bash"}};
  if (mode == "danger-full-access") {
    home.emplace();
    env["HOME"] = home->path().string();
  }
  return OpenSession(client, mode, Json{{"env", env}});
}

Json Send(RpcClient& client, const std::string& session, const std::string& input, Json extra,
          std::chrono::seconds guard) {
  Json params = extra;
  params["sessionId"] = session;
  params["input"] = input;
  Json reply = client.Call("terminal_send", params, guard);
  if (reply.contains("result")) return reply["result"];
  return reply;
}

}  // namespace ptybox::testing
