#include "backend/types.h"

#include <signal.h>

#include <array>
#include <utility>

namespace ptybox::backend {

std::string_view ToString(WaitReason reason) {
  switch (reason) {
    case WaitReason::kStdinRead:
      return "stdin_read";
    case WaitReason::kInferredIdle:
      return "inferred_idle";
    case WaitReason::kTimeout:
      return "timeout";
    case WaitReason::kSessionExit:
      return "session_exit";
    case WaitReason::kPattern:
      return "pattern";
  }
  return "timeout";
}

namespace {

constexpr std::array<std::pair<int, std::string_view>, 31> kSignalNames = {{
    {SIGHUP, "SIGHUP"},   {SIGINT, "SIGINT"},       {SIGQUIT, "SIGQUIT"}, {SIGILL, "SIGILL"},
    {SIGTRAP, "SIGTRAP"}, {SIGABRT, "SIGABRT"},     {SIGBUS, "SIGBUS"},   {SIGFPE, "SIGFPE"},
    {SIGKILL, "SIGKILL"}, {SIGUSR1, "SIGUSR1"},     {SIGSEGV, "SIGSEGV"}, {SIGUSR2, "SIGUSR2"},
    {SIGPIPE, "SIGPIPE"}, {SIGALRM, "SIGALRM"},     {SIGTERM, "SIGTERM"}, {SIGSTKFLT, "SIGSTKFLT"},
    {SIGCHLD, "SIGCHLD"}, {SIGCONT, "SIGCONT"},     {SIGSTOP, "SIGSTOP"}, {SIGTSTP, "SIGTSTP"},
    {SIGTTIN, "SIGTTIN"}, {SIGTTOU, "SIGTTOU"},     {SIGURG, "SIGURG"},   {SIGXCPU, "SIGXCPU"},
    {SIGXFSZ, "SIGXFSZ"}, {SIGVTALRM, "SIGVTALRM"}, {SIGPROF, "SIGPROF"}, {SIGWINCH, "SIGWINCH"},
    {SIGIO, "SIGIO"},     {SIGPWR, "SIGPWR"},       {SIGSYS, "SIGSYS"},
}};

}  // namespace

std::string SignalName(int signal) {
  for (const auto& [number, name] : kSignalNames) {
    if (number == signal) return std::string(name);
  }
  return "SIG" + std::to_string(signal);
}

namespace {

constexpr std::array<std::pair<std::string_view, int>, 7> kClientSignals = {{
    {"SIGINT", SIGINT},
    {"SIGTERM", SIGTERM},
    {"SIGKILL", SIGKILL},
    {"SIGQUIT", SIGQUIT},
    {"SIGHUP", SIGHUP},
    {"SIGTSTP", SIGTSTP},
    {"SIGCONT", SIGCONT},
}};

}  // namespace

const std::vector<std::string>& ClientSignalNames() {
  static const std::vector<std::string> kNames = [] {
    std::vector<std::string> names;
    for (const auto& [name, number] : kClientSignals) names.emplace_back(name);
    return names;
  }();
  return kNames;
}

std::optional<int> ParseClientSignal(std::string_view name) {
  for (const auto& [allowed, number] : kClientSignals) {
    if (allowed == name) return number;
  }
  return std::nullopt;
}

}  // namespace ptybox::backend
