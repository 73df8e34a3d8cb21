// End-to-end readiness latency through the real binary: the time from sending a terminal_send
// line on `ptybox serve --stdio` to reading its answer, per kind of readiness evidence and per
// mode. Not a test: run build/bench/latency_bench (see docs/readiness.md for recorded figures).
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

namespace {

using Json = nlohmann::json;

class StdioDaemon final {
 public:
  explicit StdioDaemon(const std::string& mode) {
    char pattern[] = "/tmp/ptybox-bench-XXXXXX";
    workspace_ = ::mkdtemp(pattern);
    int to[2];
    int from[2];
    if (::pipe2(to, O_CLOEXEC) != 0 || ::pipe2(from, O_CLOEXEC) != 0)
      throw std::runtime_error("pipe");
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(to[0], 0);
      ::dup2(from[1], 1);
      ::setenv("PTYBOX_INIT", PTYBOX_BENCH_INIT, 1);
      ::execl(PTYBOX_BENCH_BINARY, "ptybox", "serve", "--stdio", "--workspace", workspace_.c_str(),
              static_cast<char*>(nullptr));
      ::_exit(127);
    }
    ::close(to[0]);
    ::close(from[1]);
    in_ = to[1];
    out_ = from[0];
    Call("policy_set_mode", Json{{"mode", mode}});
    Json opened = Call("terminal_open", Json::object());
    if (!opened.contains("result")) throw std::runtime_error("open: " + opened.dump());
    session_ = opened["result"]["sessionId"];
  }
  ~StdioDaemon() {
    ::close(in_);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    ::close(out_);
    std::error_code ec;
    std::filesystem::remove_all(workspace_, ec);
  }

  Json Call(const std::string& method, Json params) {
    Json request{{"jsonrpc", "2.0"}, {"id", ++id_}, {"method", method}, {"params", params}};
    std::string line = request.dump() + "\n";
    if (::write(in_, line.data(), line.size()) != static_cast<ssize_t>(line.size())) {
      throw std::runtime_error("write");
    }
    for (;;) {
      size_t nl = buffer_.find('\n');
      if (nl != std::string::npos) {
        Json reply = Json::parse(buffer_.substr(0, nl));
        buffer_.erase(0, nl + 1);
        if (reply.value("id", Json()) == id_) return reply;
        continue;
      }
      char chunk[65536];
      ssize_t n = ::read(out_, chunk, sizeof(chunk));
      if (n <= 0) throw std::runtime_error("ptybox closed the stream");
      buffer_.append(chunk, static_cast<size_t>(n));
    }
  }
  // One send; returns its result.
  Json Send(const std::string& input) {
    Json reply = Call("terminal_send", Json{{"sessionId", session_}, {"input", input}});
    if (!reply.contains("result")) throw std::runtime_error("send: " + reply.dump());
    return reply["result"];
  }

 private:
  std::string workspace_;
  pid_t pid_ = -1;
  int in_ = -1;
  int out_ = -1;
  int id_ = 0;
  std::string buffer_;
  std::string session_;
};

StdioDaemon& DaemonFor(const std::string& mode) {
  static std::map<std::string, std::unique_ptr<StdioDaemon>> daemons;
  auto& d = daemons[mode];
  if (!d) d = std::make_unique<StdioDaemon>(mode);
  return *d;
}

// Times `measured` only; `setup` and `teardown` run around it, untimed.
template <typename Setup, typename Measured, typename Teardown>
void Measure(benchmark::State& state, Setup setup, Measured measured, Teardown teardown) {
  for (auto _ : state) {
    setup();
    auto start = std::chrono::steady_clock::now();
    Json result = measured();
    auto elapsed = std::chrono::steady_clock::now() - start;
    if (result["waitReason"] != "stdin_read") {
      state.SkipWithError(("unexpected wait reason: " + result.dump()).c_str());
      return;
    }
    state.SetIterationTime(std::chrono::duration<double>(elapsed).count());
    teardown();
  }
}

const char* ModeOf(const benchmark::State& state) {
  return state.range(0) == 0 ? "danger-full-access" : "workspace-write";
}

// Verified prompt: the marker settles the send the moment it is decoded.
void BM_PromptEcho(benchmark::State& state) {
  StdioDaemon& d = DaemonFor(ModeOf(state));
  Measure(
      state, [] {}, [&] { return d.Send("echo hi\n"); }, [] {});
}

// Exact stdin wait in a new foreground group: `cat` blocked in read(2).
void BM_StdinWaitCat(benchmark::State& state) {
  StdioDaemon& d = DaemonFor(ModeOf(state));
  Measure(
      state, [] {}, [&] { return d.Send("cat\n"); }, [&] { d.Send("\x04"); });
}

// Exact stdin wait of the shell itself: the `read` builtin.
void BM_StdinWaitReadBuiltin(benchmark::State& state) {
  StdioDaemon& d = DaemonFor(ModeOf(state));
  Measure(
      state, [] {}, [&] { return d.Send("read x\n"); }, [&] { d.Send("v\n"); });
}

// A REPL waiting in select(2): python3 evaluating one expression.
void BM_PythonReplEval(benchmark::State& state) {
  StdioDaemon& d = DaemonFor(ModeOf(state));
  static bool started[2] = {false, false};
  if (!started[state.range(0)]) {
    d.Send("python3 -q\n");
    started[state.range(0)] = true;
  }
  Measure(
      state, [] {}, [&] { return d.Send("6*7\n"); }, [] {});
}

BENCHMARK(BM_PromptEcho)
    ->Arg(0)
    ->Arg(1)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->Iterations(200);
BENCHMARK(BM_StdinWaitCat)
    ->Arg(0)
    ->Arg(1)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->Iterations(100);
BENCHMARK(BM_StdinWaitReadBuiltin)
    ->Arg(0)
    ->Arg(1)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->Iterations(100);
BENCHMARK(BM_PythonReplEval)
    ->Arg(0)
    ->Arg(1)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->Iterations(100);

}  // namespace

BENCHMARK_MAIN();
