#include "runtime/cli/demo.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

namespace ptybox::runtime {
namespace {

using Json = nlohmann::json;

class Client final {
 public:
  Client(int to_server, int from_server) : to_(to_server), from_(from_server) {}

  Json Call(const std::string& method, Json params) {
    Json request{{"jsonrpc", "2.0"}, {"id", ++id_}, {"method", method}, {"params", params}};
    std::string line = request.dump() + "\n";
    if (::write(to_, line.data(), line.size()) != static_cast<ssize_t>(line.size())) return {};
    for (;;) {
      size_t newline = buffer_.find('\n');
      if (newline != std::string::npos) {
        Json reply = Json::parse(buffer_.substr(0, newline), nullptr, false);
        buffer_.erase(0, newline + 1);
        if (!reply.is_discarded() && reply.value("id", Json()) == id_) return reply;
        continue;
      }
      char chunk[65536];
      ssize_t n = ::read(from_, chunk, sizeof(chunk));
      if (n <= 0) return {};
      buffer_.append(chunk, static_cast<size_t>(n));
    }
  }

 private:
  int to_;
  int from_;
  int id_ = 0;
  std::string buffer_;
};

void Show(const std::string& method, const Json& params, const Json& reply, double ms) {
  std::printf("\n--> %s %s\n", method.c_str(), params.dump().c_str());
  if (reply.contains("error")) {
    std::printf("<-- error after %.1f ms: %s\n", ms, reply["error"].dump().c_str());
    return;
  }
  Json result = reply.value("result", Json());
  if (method == "policy_resolve") {
    // The full answer also says where every value came from; the summary is enough here.
    result = Json{{"mode", result["mode"]},
                  {"workspaceRoot", result["workspaceRoot"]},
                  {"writableRoots", result["writableRoots"]},
                  {"network", result["network"]}};
  }
  std::printf("<-- %.1f ms: %s\n", ms, result.dump().c_str());
}

}  // namespace

int Demo(const std::string& self, const ServiceOptions& options) {
  int to_server[2];
  int from_server[2];
  if (::pipe2(to_server, O_CLOEXEC) != 0 || ::pipe2(from_server, O_CLOEXEC) != 0) {
    std::perror("ptybox demo: pipe2");
    return 1;
  }
  std::string workspace = options.workspace.string();
  std::string policy = options.operator_policy ? options.operator_policy->string() : "";
  pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(to_server[0], STDIN_FILENO);
    ::dup2(from_server[1], STDOUT_FILENO);
    std::vector<const char*> argv = {self.c_str(), "serve", "--stdio", "--workspace",
                                     workspace.c_str()};
    if (!policy.empty()) {
      argv.push_back("--policy");
      argv.push_back(policy.c_str());
    }
    argv.push_back(nullptr);
    ::execv("/proc/self/exe", const_cast<char* const*>(argv.data()));
    ::_exit(127);
  }
  ::close(to_server[0]);
  ::close(from_server[1]);
  Client client(to_server[1], from_server[0]);

  std::printf("ptybox demo: a sandboxed bash in %s, driven over JSON-RPC (ptybox serve --stdio)\n",
              workspace.c_str());
  auto call = [&](const std::string& method, Json params) {
    auto start = std::chrono::steady_clock::now();
    Json reply = client.Call(method, params);
    double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    Show(method, params, reply, ms);
    return reply;
  };

  Json resolved = call("policy_resolve", Json::object());
  Json opened = call("terminal_open", Json{{"name", "demo"}});
  int status = 1;
  if (opened.contains("result")) {
    std::string id = opened["result"]["sessionId"];
    auto send = [&](const std::string& input) {
      return call("terminal_send", Json{{"sessionId", id}, {"input", input}});
    };
    send("pwd; ls | head -n 5\n");
    send("touch /usr/ptybox-demo-probe\n");
    send("ps -e -o pid,comm | head -n 5\n");
    send("read -p 'your name? ' name\n");
    send("Ada\n");
    send("echo \"hello, $name\"; false\n");
    send("sleep 1; echo slept\n");
    call("terminal_read", Json{{"sessionId", id}, {"maxBytes", 400}});
    Json closed = call("terminal_close", Json{{"sessionId", id}});
    status = closed.contains("result") ? 0 : 1;
  }
  ::close(to_server[1]);
  int wait_status = 0;
  ::waitpid(pid, &wait_status, 0);
  std::printf("\nptybox demo: %s\n", status == 0 ? "done" : "failed (see the errors above)");
  (void)resolved;
  return status;
}

}  // namespace ptybox::runtime
