#include "runtime/run_command.h"

#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "backend/shell_session.h"
#include "common/log.h"
#include "policy/resolver.h"
#include "sandbox/host_probe.h"
#include "sandbox/init_protocol.h"
#include "sandbox/launcher.h"

namespace ptybox::runtime {
namespace {

constexpr int kExitTimeout = 124;
constexpr int kExitSandboxFailed = 125;

void Say(const std::string& line) { std::fprintf(stderr, "ptybox run: %s\n", line.c_str()); }

}  // namespace

int RunCommand(const RunOptions& options) {
  using Clock = std::chrono::steady_clock;
  policy::ResolveInputs inputs;
  inputs.operator_policy = options.service.operator_policy;
  inputs.default_operator_policy = options.service.default_operator_policy;
  inputs.workspace = options.service.workspace;
  inputs.workspace_from_cli = options.service.workspace_from_cli;
  inputs.requested_mode = options.service.mode_override;
  Result<policy::ResolvedPolicy> resolved = policy::Resolve(inputs);
  if (!resolved) {
    Say(resolved.error().Describe());
    return kExitSandboxFailed;
  }
  Result<std::filesystem::path> cwd = policy::ResolveCwd(*resolved, std::nullopt);
  if (!cwd) {
    Say(cwd.error().Describe());
    return kExitSandboxFailed;
  }

  sigset_t handled;
  sigemptyset(&handled);
  sigaddset(&handled, SIGCHLD);
  sigaddset(&handled, SIGTERM);
  sigaddset(&handled, SIGINT);
  sigaddset(&handled, SIGHUP);
  ::sigprocmask(SIG_BLOCK, &handled, nullptr);
  UniqueFd signals(::signalfd(-1, &handled, SFD_CLOEXEC | SFD_NONBLOCK));
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);

  backend::SpawnSpec spec;
  spec.policy = *resolved;
  const policy::ResolvedPolicy& p = *resolved;
  sandbox::LaunchSpec launch;
  launch.mode = p.mode;
  launch.sandbox.mode = p.mode;
  launch.sandbox.workspace_root = p.workspace_root;
  launch.sandbox.writable_roots = p.writable_roots;
  std::vector<std::filesystem::path> writable = p.writable_roots;
  if (p.mode == policy::Mode::kWorkspaceWrite) writable.push_back(p.workspace_root);
  launch.sandbox.read_only_paths = sandbox::CollectProtectedPaths(writable, p.policy_files);
  launch.sandbox.network_allowed = p.network_allowed;
  launch.sandbox.cwd = *cwd;
  launch.bwrap = options.service.shell.bwrap;
  launch.init_binary = options.service.shell.init_binary;
  launch.command = options.command;
  // The same allow-listed environment as a session, minus the interactive prompt.
  for (std::string& entry : backend::ShellSession::BuildEnvironment(spec, "")) {
    if (entry.starts_with("PROMPT_COMMAND=") || entry.starts_with("PS1=")) continue;
    launch.environment.push_back(std::move(entry));
  }
  launch.cwd = *cwd;
  launch.pty = false;
  launch.new_process_group = false;
  const policy::Limits& l = p.limits;
  if (l.max_processes) launch.rlimits.emplace_back("nproc", *l.max_processes);
  if (l.max_open_files) launch.rlimits.emplace_back("nofile", *l.max_open_files);
  if (l.max_memory_bytes) launch.rlimits.emplace_back("as", *l.max_memory_bytes);
  if (l.max_file_bytes) launch.rlimits.emplace_back("fsize", *l.max_file_bytes);
  if (l.max_cpu_seconds) launch.rlimits.emplace_back("cpu", *l.max_cpu_seconds);

  Result<sandbox::LaunchedInit> launched = sandbox::LaunchInit(launch);
  if (!launched) {
    Say(launched.error().Describe());
    return kExitSandboxFailed;
  }
  LogInfo("running in " + std::string(policy::ToString(p.mode)) + " at " + cwd->string());

  const int control = launched->control.Get();
  const auto deadline = options.timeout_seconds
                            ? std::optional(Clock::now() + std::chrono::seconds(*options.timeout_seconds))
                            : std::nullopt;
  const auto grace = std::chrono::milliseconds(p.limits.dispose_grace_ms);
  std::optional<int> exit_code;
  bool terminating = false;
  bool child_gone = false;
  std::optional<Clock::time_point> kill_at;

  auto request_termination = [&](int code_if_unknown) {
    if (!exit_code) exit_code = code_if_unknown;
    if (terminating) return;
    terminating = true;
    sandbox::InitMessage terminate;
    terminate.type = sandbox::InitMessageType::kTerminate;
    terminate.b = grace.count();
    (void)sandbox::SendInitMessage(control, terminate);
    kill_at = Clock::now() + grace + std::chrono::seconds(3);
  };

  bool control_open = true;
  while (!child_gone) {
    int timeout_ms = -1;
    auto now = Clock::now();
    if (deadline && !terminating) {
      timeout_ms = static_cast<int>(std::max<int64_t>(
          0, std::chrono::duration_cast<std::chrono::milliseconds>(*deadline - now).count()));
    }
    if (kill_at) {
      int until_kill = static_cast<int>(std::max<int64_t>(
          0, std::chrono::duration_cast<std::chrono::milliseconds>(*kill_at - now).count()));
      timeout_ms = timeout_ms < 0 ? until_kill : std::min(timeout_ms, until_kill);
    }
    pollfd fds[2] = {{control_open ? control : -1, POLLIN, 0}, {signals.Get(), POLLIN, 0}};
    int ready = ::poll(fds, 2, timeout_ms);
    if (ready < 0 && errno != EINTR) break;
    now = Clock::now();
    if (deadline && !terminating && now >= *deadline) {
      Say("timed out after " + std::to_string(*options.timeout_seconds) +
          " s; ending the command");
      exit_code = kExitTimeout;
      request_termination(kExitTimeout);
    }
    if (kill_at && now >= *kill_at) {
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
        if (m.type == sandbox::InitMessageType::kFailed) {
          Say(m.payload);
          exit_code = kExitSandboxFailed;
        } else if (m.type == sandbox::InitMessageType::kExited) {
          if (!exit_code) exit_code = m.b > 0 ? 128 + static_cast<int>(m.b) : m.a;
          // The command is done; whatever it left running ends now.
          request_termination(*exit_code);
        }
      }
    }
    if (fds[1].revents & POLLIN) {
      signalfd_siginfo info;
      while (::read(signals.Get(), &info, sizeof(info)) == static_cast<ssize_t>(sizeof(info))) {
        if (info.ssi_signo == SIGCHLD) {
          int status = 0;
          pid_t pid;
          while ((pid = ::waitpid(-1, &status, WNOHANG)) > 0) {
            if (pid == launched->pid) child_gone = true;
          }
        } else {
          Say(std::string("received ") + (info.ssi_signo == SIGTERM ? "SIGTERM" : "a signal") +
              "; ending the command");
          request_termination(128 + static_cast<int>(info.ssi_signo));
        }
      }
    }
  }
  if (!exit_code) {
    // The sandbox ended before the command ran: say why.
    std::string why = policy::IsConfined(p.mode)
                          ? sandbox::DiagnoseSandboxFailure(launch.bwrap, "").Describe()
                          : "ptybox-init ended before the command started";
    Say(why);
    return kExitSandboxFailed;
  }
  return *exit_code;
}

}  // namespace ptybox::runtime
