#include "runtime/run_command.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>

#include "backend/proc_parse.h"
#include "backend/shell_session.h"
#include "common/log.h"
#include "policy/resolver.h"
#include "sandbox/host_probe.h"
#include "sandbox/init_protocol.h"
#include "sandbox/launcher.h"

namespace ptybox::runtime {
namespace {

using Clock = std::chrono::steady_clock;
using Millis = std::chrono::milliseconds;

// After the grace of a termination, how long ptybox-init may take to report quiet before we
// SIGKILL it (and with it, through --die-with-parent or our sweep, whatever is left).
constexpr Millis kInitQuietSlack{3000};

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
  for (std::string& entry : backend::ShellSession::BuildEnvironment(spec, "")) {
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

// The command's wait status as init reported it: a = exit code (or -1), b = signal (or 0).
int ExitCodeOf(const sandbox::InitMessage& exited) {
  if (exited.b > 0 && exited.b < 128) return 128 + static_cast<int>(exited.b);
  if (exited.a >= 0 && exited.a <= 255) return exited.a;
  return kRunExitSandbox;
}

// A setup failure reported by init: a = execve's errno when the command itself could not be
// started (as a shell reports it: 127 not found, 126 not executable), else 0.
int ExitCodeOfFailure(const sandbox::InitMessage& failed) {
  if (failed.a == ENOENT) return kRunExitNotFound;
  if (failed.a != 0) return kRunExitCannotExec;
  return kRunExitSandbox;
}

// Our children right now (we are single-threaded, so our one task lists them all).
std::vector<pid_t> OurChildren() {
  const std::string self = std::to_string(::getpid());
  std::ifstream in("/proc/" + self + "/task/" + self + "/children");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<pid_t> children;
  if (!backend::proc::ParsePidList(text, children)) children.clear();
  return children;
}

// Only needed when ptybox-init died before ending the session (killed from outside, or by us
// after it stopped answering): its orphans re-parented to us, the subreaper. End them, and
// theirs as they re-parent in turn, until we have no child left.
void EndOrphans() {
  for (int round = 0; round < 500; ++round) {
    while (::waitpid(-1, nullptr, WNOHANG) > 0) {
    }
    std::vector<pid_t> left = OurChildren();
    if (left.empty()) return;
    for (pid_t pid : left) ::kill(pid, SIGKILL);
    ::usleep(10'000);
  }
  Say("some processes the command started could not be ended");
}

int ToPollTimeout(std::optional<Clock::time_point> at, Clock::time_point now) {
  if (!at) return -1;
  auto left = std::chrono::duration_cast<Millis>(*at - now).count();
  return static_cast<int>(std::clamp<int64_t>(left + 1, 0, 24 * 3600 * 1000));
}

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

  policy::ResolveInputs inputs;
  inputs.operator_policy = options.service.operator_policy;
  inputs.default_operator_policy = options.service.default_operator_policy;
  inputs.workspace = options.service.workspace;
  inputs.workspace_from_cli = options.service.workspace_from_cli;
  inputs.requested_mode = options.service.mode_override;
  Result<policy::ResolvedPolicy> resolved = policy::Resolve(inputs);
  if (!resolved) {
    Say(resolved.error().Describe());
    return kRunExitSandbox;
  }
  const policy::ResolvedPolicy& p = *resolved;
  Result<std::filesystem::path> cwd = policy::ResolveCwd(p, std::nullopt);
  if (!cwd) {
    Say(cwd.error().Describe());
    return kRunExitSandbox;
  }

  // Signals come through a signalfd, in order with the control socket. They are blocked before
  // the launch; the launcher restores the default mask in the child.
  sigset_t handled;
  sigemptyset(&handled);
  for (int sig : {SIGCHLD, SIGTERM, SIGINT, SIGHUP, SIGQUIT}) sigaddset(&handled, sig);
  if (::sigprocmask(SIG_BLOCK, &handled, nullptr) != 0) {
    Say(Error::FromErrno(ErrorKind::kSpawnFailed, "sigprocmask").Describe());
    return kRunExitSandbox;
  }
  UniqueFd signals(::signalfd(-1, &handled, SFD_CLOEXEC | SFD_NONBLOCK));
  if (!signals) {
    Say(Error::FromErrno(ErrorKind::kSpawnFailed, "signalfd").Describe());
    return kRunExitSandbox;
  }
  // Whatever escapes ptybox-init re-parents to us, never to the host's init; and as a
  // container's PID 1 we reap everything anyway (waitpid(-1) below).
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);

  const sandbox::LaunchSpec launch = BuildLaunch(options, p, *cwd);
  Result<sandbox::LaunchedInit> launched = sandbox::LaunchInit(launch);
  if (!launched) {
    Say(launched.error().Describe());
    return kRunExitSandbox;
  }
  LogInfo("running in " + std::string(policy::ToString(p.mode)) + " at " + cwd->string());

  const int control = launched->control.Get();
  const std::optional<Clock::time_point> deadline =
      options.timeout_seconds
          ? std::optional(Clock::now() + std::chrono::seconds(*options.timeout_seconds))
          : std::nullopt;
  const Millis grace(p.limits.dispose_grace_ms);

  std::optional<int> exit_code;  // decided by the first of: exit, failure, timeout, signal
  bool terminating = false;      // kTerminate sent
  bool init_gone = false;        // our direct child (bwrap or ptybox-init) was reaped
  bool init_quiet = false;       // init reported that every process of the command ended
  bool control_open = true;
  std::optional<Clock::time_point> kill_at;

  auto request_termination = [&](int code_if_undecided) {
    if (!exit_code) exit_code = code_if_undecided;
    if (terminating) return;
    terminating = true;
    sandbox::InitMessage terminate;
    terminate.type = sandbox::InitMessageType::kTerminate;
    terminate.b = grace.count();
    (void)sandbox::SendInitMessage(control, terminate);
    kill_at = Clock::now() + grace + kInitQuietSlack;
  };

  while (!init_gone) {
    Clock::time_point now = Clock::now();
    int timeout_ms = ToPollTimeout(terminating ? std::nullopt : deadline, now);
    if (kill_at) {
      int until_kill = ToPollTimeout(kill_at, now);
      timeout_ms = timeout_ms < 0 ? until_kill : std::min(timeout_ms, until_kill);
    }
    pollfd fds[2] = {{control_open ? control : -1, POLLIN, 0}, {signals.Get(), POLLIN, 0}};
    if (::poll(fds, 2, timeout_ms) < 0 && errno != EINTR) {
      // Cannot happen with valid descriptors; if it does, end everything rather than spin.
      Say(Error::FromErrno(ErrorKind::kSpawnFailed, "poll").Describe() + "; killing the sandbox");
      ::kill(launched->pid, SIGKILL);
      ::waitpid(launched->pid, nullptr, 0);
      EndOrphans();
      return exit_code.value_or(kRunExitSandbox);
    }
    now = Clock::now();
    if (deadline && !terminating && now >= *deadline) {
      Say("timed out after " + std::to_string(*options.timeout_seconds) +
          " s; ending the command (exit " + std::to_string(kRunExitTimeout) + ")");
      request_termination(kRunExitTimeout);
    }
    if (kill_at && now >= *kill_at) {
      Say("ptybox-init did not end the command in time; killing the sandbox");
      ::kill(launched->pid, SIGKILL);
      kill_at.reset();
    }
    if (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) {
      Result<std::optional<sandbox::ReceivedInitMessage>> received =
          sandbox::ReceiveInitMessage(control);
      if (!received || !*received) {
        control_open = false;
      } else {
        const sandbox::InitMessage& m = (**received).message;
        switch (m.type) {
          case sandbox::InitMessageType::kFailed:
            // ptybox-init already said why on our stderr, which it shares.
            if (!exit_code) exit_code = ExitCodeOfFailure(m);
            break;
          case sandbox::InitMessageType::kExited:
            // The command is done; whatever it left running ends now.
            request_termination(ExitCodeOf(m));
            break;
          case sandbox::InitMessageType::kQuiet:
            init_quiet = true;
            break;
          default:
            break;
        }
      }
    }
    if (fds[1].revents & POLLIN) {
      signalfd_siginfo info;
      while (::read(signals.Get(), &info, sizeof(info)) == static_cast<ssize_t>(sizeof(info))) {
        const int sig = static_cast<int>(info.ssi_signo);
        if (sig == SIGCHLD) {
          int status = 0;
          pid_t pid;
          while ((pid = ::waitpid(-1, &status, WNOHANG)) > 0) {
            if (pid == launched->pid) init_gone = true;
          }
        } else if (!terminating) {
          Say("received " + SignalName(sig) + "; ending the command (exit " +
              std::to_string(128 + sig) + ")");
          request_termination(128 + sig);
        } else if (kill_at) {
          // A second signal while the command is being ended: no more grace.
          Say("received " + SignalName(sig) + " again; killing the sandbox");
          ::kill(launched->pid, SIGKILL);
          kill_at.reset();
        }
      }
    }
  }
  // ptybox-init normally ends every process and says so; if it did not, orphans are ours.
  if (!init_quiet) EndOrphans();

  if (!exit_code) {
    // The sandbox ended before the command ran: say why, never fall back to running unconfined.
    std::string why = policy::IsConfined(p.mode)
                          ? sandbox::DiagnoseSandboxFailure(launch.bwrap, "").Describe()
                          : "ptybox-init ended before the command started";
    Say(why);
    return kRunExitSandbox;
  }
  return *exit_code;
}

}  // namespace ptybox::runtime
