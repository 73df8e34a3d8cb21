#include "backend/contract_types.h"

#include <signal.h>

#include <array>
#include <utility>

namespace ptybox::backend {

std::string_view ToString(WaitReason reason) {
  const auto index = static_cast<size_t>(reason);
  return index < kWaitReasonTokens.size() ? kWaitReasonTokens[index].name : "timeout";
}

std::vector<std::string> WaitReasonNames() {
  std::vector<std::string> names;
  for (const WaitReasonToken& token : kWaitReasonTokens) names.emplace_back(token.name);
  return names;
}

namespace {

// Each signal with its name as one token (common/tokens.h): SIGNAL_TOKEN(SIGINT) is
// {SIGINT, "SIGINT"}. The one signal table: names for results and the contract's list below.
#define SIGNAL_TOKEN(s) \
  NameToken<int> { s, #s }
// clang-format off
constexpr std::array<NameToken<int>, 31> kSignalNames = {{
    SIGNAL_TOKEN(SIGHUP),
    SIGNAL_TOKEN(SIGINT),
    SIGNAL_TOKEN(SIGQUIT),
    SIGNAL_TOKEN(SIGILL),
    SIGNAL_TOKEN(SIGTRAP),
    SIGNAL_TOKEN(SIGABRT),
    SIGNAL_TOKEN(SIGBUS),
    SIGNAL_TOKEN(SIGFPE),
    SIGNAL_TOKEN(SIGKILL),
    SIGNAL_TOKEN(SIGUSR1),
    SIGNAL_TOKEN(SIGSEGV),
    SIGNAL_TOKEN(SIGUSR2),
    SIGNAL_TOKEN(SIGPIPE),
    SIGNAL_TOKEN(SIGALRM),
    SIGNAL_TOKEN(SIGTERM),
    SIGNAL_TOKEN(SIGSTKFLT),
    SIGNAL_TOKEN(SIGCHLD),
    SIGNAL_TOKEN(SIGCONT),
    SIGNAL_TOKEN(SIGSTOP),
    SIGNAL_TOKEN(SIGTSTP),
    SIGNAL_TOKEN(SIGTTIN),
    SIGNAL_TOKEN(SIGTTOU),
    SIGNAL_TOKEN(SIGURG),
    SIGNAL_TOKEN(SIGXCPU),
    SIGNAL_TOKEN(SIGXFSZ),
    SIGNAL_TOKEN(SIGVTALRM),
    SIGNAL_TOKEN(SIGPROF),
    SIGNAL_TOKEN(SIGWINCH),
    SIGNAL_TOKEN(SIGIO),
    SIGNAL_TOKEN(SIGPWR),
    SIGNAL_TOKEN(SIGSYS),
}};
// clang-format on
#undef SIGNAL_TOKEN

// The signals the contract lets a client send (terminal_signal), in the contract's order; their
// names are kSignalNames'.
constexpr std::array<int, 7> kClientSignals = {SIGINT, SIGTERM, SIGKILL, SIGQUIT,
                                               SIGHUP, SIGTSTP, SIGCONT};

}  // namespace

std::string SignalName(int signal) {
  for (const NameToken<int>& token : kSignalNames) {
    if (token.value == signal) return std::string(token.name);
  }
  return "SIG" + std::to_string(signal);
}

const std::vector<std::string>& ClientSignalNames() {
  static const std::vector<std::string> kNames = [] {
    std::vector<std::string> names;
    for (int signal : kClientSignals) names.push_back(SignalName(signal));
    return names;
  }();
  return kNames;
}

std::optional<int> ParseClientSignal(std::string_view name) {
  for (int signal : kClientSignals) {
    if (SignalName(signal) == name) return signal;
  }
  return std::nullopt;
}

}  // namespace ptybox::backend
