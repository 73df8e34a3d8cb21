#include "runtime/cli/run_command.h"

#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <asio/io_context.hpp>
#include <asio/signal_set.hpp>
#include <asio/steady_timer.hpp>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "backend/init_session.h"
#include "backend/proxy/network_proxy.h"
#include "backend/shell_session.h"
#include "common/log.h"
#include "policy/resolver.h"
#include "sandbox/cgroup.h"
#include "sandbox/launcher.h"
#include "sandbox/repository_walk.h"

namespace ptybox::runtime {
namespace {

using Clock = std::chrono::steady_clock;
using Millis = std::chrono::milliseconds;

void Say(const std::string& line) { std::fprintf(stderr, "ptybox run: %s\n", line.c_str()); }

std::string SignalName(int sig) {
  const char* abbrev = ::sigabbrev_np(sig);
  return abbrev != nullptr ? std::string("SIG") + abbrev : "signal " + std::to_string(sig);
}

// A closed standard descriptor would be taken by the next descriptor we (or the command) open,
// and output meant for stdout would land in it. Give each closed one /dev/null instead. These
// are inherited on purpose (no O_CLOEXEC): the command gets them.
void EnsureStandardDescriptors() {
  for (int fd = 0; fd <= 2; ++fd) {
    if (::fcntl(fd, F_GETFD) != -1 || errno != EBADF) continue;
    int null_fd = ::open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY);  // lowest free: `fd`
    if (null_fd >= 0 && null_fd != fd) {
      ::dup2(null_fd, fd);
      ::close(null_fd);
    }
  }
}

// The same allow-listed environment as a session, minus what only an interactive terminal
// needs: no prompt, and TERM the caller's when the policy passes TERM (the output goes wherever
// our stdout goes, which we do not decode), else "dumb".
std::vector<std::string> RunEnvironment(const policy::ResolvedPolicy& p) {
  backend::SpawnSpec spec;
  spec.policy = p;
  std::vector<std::string> env;
  for (std::string& entry : backend::ShellSession::BuildEnvironment(spec)) {
    if (entry.starts_with("PROMPT_COMMAND=") || entry.starts_with("PS1=") ||
        entry.starts_with("TERM=")) {
      continue;
    }
    env.push_back(std::move(entry));
  }
  // TERM is reserved in env.set (policy/schema.h): the caller's terminal type, when passed.
  std::string term = "dumb";
  if (std::ranges::find(p.env.pass, "TERM") != p.env.pass.end()) {
    if (const char* value = std::getenv("TERM"); value != nullptr && *value != '\0') term = value;
  }
  env.push_back("TERM=" + term);
  return env;
}

sandbox::LaunchSpec BuildLaunch(const RunOptions& options, const policy::ResolvedPolicy& p,
                                const std::filesystem::path& cwd) {
  sandbox::LaunchSpec launch;
  sandbox::ApplyPolicy(p, cwd, launch);
  launch.bwrap = options.service.shell.bwrap;
  launch.init_binary = options.service.shell.init_binary;
  launch.command = options.command;
  launch.environment = RunEnvironment(p);
  launch.pty = false;                // the command inherits our stdin, stdout and stderr
  launch.new_process_group = false;  // a terminal's ^C reaches us and the command alike
  return launch;
}

// The command's status as init reported it, as a shell would pass it on.
int ExitCodeOf(const backend::SessionStatus& status) {
  if (status.signal && *status.signal > 0 && *status.signal < 128) return 128 + *status.signal;
  if (status.exit_code && *status.exit_code >= 0 && *status.exit_code <= 255) {
    return *status.exit_code;
  }
  return kRunExitSandbox;
}

// The caller's terminal, when one of our standard descriptors is one: its settings and size
// are put back when the run ends, whatever the command did to them (stty -echo, a resize, a
// suspended output), as a shell does for a job that leaves its terminal in a mess.
class CallerTerminal final {
 public:
  CallerTerminal() {
    for (int fd = 0; fd <= 2; ++fd) {
      if (::isatty(fd) == 1 && ::tcgetattr(fd, &saved_) == 0) {
        fd_ = fd;
        has_size_ = ::ioctl(fd, TIOCGWINSZ, &size_) == 0;
        return;
      }
    }
  }
  CallerTerminal(const CallerTerminal&) = delete;
  CallerTerminal& operator=(const CallerTerminal&) = delete;

  void Restore() const {
    if (fd_ < 0) return;
    // As a background job we would be stopped by SIGTTOU for touching the terminal: not now.
    sigset_t ttou;
    sigset_t previous;
    sigemptyset(&ttou);
    sigaddset(&ttou, SIGTTOU);
    ::sigprocmask(SIG_BLOCK, &ttou, &previous);
    termios now{};
    if (::tcgetattr(fd_, &now) != 0 || std::memcmp(&now, &saved_, sizeof(now)) != 0) {
      ::tcsetattr(fd_, TCSANOW, &saved_);
    }
    ::tcflow(fd_, TCOON);  // output suspended by the command (^S, tcflow) resumes
    winsize size{};
    if (has_size_ && ::ioctl(fd_, TIOCGWINSZ, &size) == 0 &&
        (size.ws_row != size_.ws_row || size.ws_col != size_.ws_col)) {
      ::ioctl(fd_, TIOCSWINSZ, &size_);
    }
    ::sigprocmask(SIG_SETMASK, &previous, nullptr);
  }

 private:
  int fd_ = -1;
  termios saved_{};
  winsize size_{};
  bool has_size_ = false;
};

// One command in the sandbox, on the reactor: the InitSession, the deadline, our signals.
class RunDriver final : private backend::InitSession::Listener {
 public:
  RunDriver(asio::io_context& io, backend::ChildReaper& reaper, const RunOptions& options,
            Millis grace, std::shared_ptr<const sandbox::CgroupHost> cgroups)
      : io_(io),
        options_(options),
        grace_(grace),
        init_(io, reaper, *this, "the command", std::move(cgroups)),
        deadline_(io),
        signals_(io, SIGTERM, SIGINT, SIGHUP) {
    signals_.add(SIGQUIT);
  }

  void Start(const sandbox::LaunchSpec& launch, const std::optional<policy::NetworkNames>& names) {
    names_ = names;
    ArmSignals();
    if (options_.timeout_seconds) {
      deadline_.expires_after(std::chrono::seconds(*options_.timeout_seconds));
      deadline_.async_wait([this](const std::error_code& ec) {
        if (ec || terminating_) return;
        Say("timed out after " + std::to_string(*options_.timeout_seconds) +
            " s; ending the command (exit " + std::to_string(kRunExitTimeout) + ")");
        RequestTermination(kRunExitTimeout);
      });
    }
    init_.Start(launch);
  }

  [[nodiscard]] int exit_code() const { return exit_code_.value_or(kRunExitSandbox); }

 private:
  void OnReady(const sandbox::ReadyMessage&, UniqueFd) override {}

  // Network by name: `run` serves the command's proxy on its own reactor, like the daemon.
  void OnProxyListener(uint16_t /*port*/, UniqueFd listener) override {
    if (proxy_ || !names_) return;
    backend::proxy::ProxyEvents events;
    // Recorded like the daemon's sessions (`network_denied`, `network_closed`), the same
    // rate limit included (the proxy applies it).
    events.refused = [audit = options_.audit](const backend::proxy::ProxyRefusal& refusal) {
      LogInfo("network_denied: " + refusal.reason);
      if (audit) audit->RunNetworkDenied(refusal);
    };
    events.stopped = [audit = options_.audit](const backend::proxy::ProxyTotals& totals) {
      if (audit) audit->RunNetworkClosed(totals);
    };
    auto started =
        backend::proxy::NetworkProxy::Start(io_, std::move(listener), *names_, std::move(events));
    if (!started) {
      LogWarn(started.error().message);
      return;
    }
    proxy_ = std::move(*started);
  }

  void OnStartFailed(Error error) override {
    if (exit_code_) return;
    if (error.sys_errno == ENOENT) {
      exit_code_ = kRunExitNotFound;  // as a shell reports it
    } else if (error.sys_errno != 0) {
      exit_code_ = kRunExitCannotExec;
    } else {
      exit_code_ = kRunExitSandbox;
    }
    // ptybox-init already said why on our stderr, which it shares; a sandbox that ended
    // before init ran did not, nor did a launch refused before anything started: say why,
    // never fall back to running unconfined.
    if (init_.init_exited() || !init_.started()) Say(error.Describe());
    // Refused before a process existed: no exit will come to end the run.
    if (!init_.started()) {
      terminating_ = true;
      init_.Terminate(grace_, [this](Result<void> ended) { Done(std::move(ended)); });
    }
  }

  void OnProgramExit(backend::SessionStatus status) override {
    // The command is done; whatever it left running ends now.
    RequestTermination(ExitCodeOf(status));
  }

  void OnInitExit(int) override {
    if (!exit_code_) {
      Say("ptybox-init ended before the command finished");
      exit_code_ = kRunExitSandbox;
    }
    // Waits for the orphans' end (a no-op when init ended them, as it normally does).
    init_.Terminate(grace_, [this](Result<void> ended) { Done(std::move(ended)); });
  }

  void ArmSignals() {
    signals_.async_wait([this](const std::error_code& ec, int sig) {
      if (ec) return;
      if (!terminating_) {
        Say("received " + SignalName(sig) + "; ending the command (exit " +
            std::to_string(128 + sig) + ")");
        RequestTermination(128 + sig);
      } else if (!killed_) {
        // A second signal while the command is being ended: no more grace.
        Say("received " + SignalName(sig) + " again; killing the sandbox");
        killed_ = true;
        init_.KillNow();
      }
      ArmSignals();
    });
  }

  void RequestTermination(int code_if_undecided) {
    if (!exit_code_) exit_code_ = code_if_undecided;
    if (terminating_) return;
    terminating_ = true;
    deadline_.cancel();
    init_.Terminate(grace_, [this](Result<void> ended) { Done(std::move(ended)); });
  }

  void Done(Result<void> ended) {
    if (done_) return;
    done_ = true;
    if (!ended)
      Say("some processes the command started could not be ended: " + ended.error().message);
    deadline_.cancel();
    signals_.cancel();
    // Its totals reach the audit log before `run_ended`.
    if (proxy_) std::exchange(proxy_, nullptr)->Stop();
    io_.stop();
  }

  asio::io_context& io_;
  const RunOptions& options_;
  const Millis grace_;
  backend::InitSession init_;
  asio::steady_timer deadline_;
  asio::signal_set signals_;
  std::optional<policy::NetworkNames> names_;
  std::shared_ptr<backend::proxy::NetworkProxy> proxy_;
  std::optional<int> exit_code_;  // decided by the first of: exit, failure, timeout, signal
  bool terminating_ = false;
  bool killed_ = false;
  bool done_ = false;
};

}  // namespace

int RunCommand(const RunOptions& options) {
  EnsureStandardDescriptors();
  if (options.command.empty()) {
    Say("no command given: ptybox run [options] -- CMD [ARG...]");
    return kRunExitUsage;
  }
  if (options.timeout_seconds &&
      (*options.timeout_seconds <= 0 || *options.timeout_seconds > kRunMaxTimeoutSeconds)) {
    Say("--timeout must be between 1 and " + std::to_string(kRunMaxTimeoutSeconds) + " seconds");
    return kRunExitUsage;
  }

  Result<policy::ResolvedPolicy> resolved =
      policy::Resolve(ResolveInputsFrom(options.service, options.service.mode_override));
  if (!resolved) {
    Say(resolved.error().Describe());
    if (options.audit) options.audit->RunRefused(resolved.error());
    return kRunExitSandbox;
  }
  const policy::ResolvedPolicy& p = *resolved;
  Result<std::filesystem::path> cwd = policy::ResolveCwd(p, std::nullopt);
  if (!cwd) {
    Say(cwd.error().Describe());
    if (options.audit) options.audit->RunRefused(cwd.error());
    return kRunExitSandbox;
  }
  if (options.audit) options.audit->RunStarted(options.command, p, *cwd);

  const CallerTerminal terminal;
  // The check after the launch ends its watch without holding our exit (the grace period of a
  // fanotify group's close).
  sandbox::EndWatchesInAHelperProcess();
  // Whatever escapes ptybox-init re-parents to us, never to the host's init; and as a
  // container's PID 1 we reap everything anyway (the reaper below).
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);
  asio::io_context io(1);
  backend::ChildReaper reaper(io);
  // The cgroup setup `run` starts its one session in; its directories go with it.
  const std::shared_ptr<const sandbox::CgroupHost> cgroups = sandbox::CgroupHost::SetUp();
  reaper.KillAdoptedChildren(!cgroups->support().cgroups);
  RunDriver driver(io, reaper, options, Millis(p.limits.dispose_grace_ms), cgroups);
  driver.Start(BuildLaunch(options, p, *cwd), p.network_names);
  LogInfo("running in " + std::string(policy::ToString(p.mode)) + " at " + cwd->string());
  io.run();
  terminal.Restore();
  if (options.audit) options.audit->RunEnded(driver.exit_code());
  return driver.exit_code();
}

}  // namespace ptybox::runtime
