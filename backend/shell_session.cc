#include "backend/shell_session.h"

#include <signal.h>

#include <algorithm>
#include <asio/post.hpp>
#include <chrono>
#include <cstdlib>
#include <map>
#include <utility>

#include "backend/terminal/key_encoder.h"
#include "common/log.h"
#include "common/propagate.h"
#include "policy/mode.h"
#include "sandbox/bwrap_args.h"
#include "sandbox/init/init_protocol.h"

namespace ptybox::backend {
namespace {

constexpr std::string_view kDefaultPath =
    "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
constexpr size_t kMaxLineBytes = 64 * 1024;
// How long a send may wait for the hook to be given back to a re-exec'd bash (a few ms on an
// idle machine); past it the send starts anyway, without the hook.
constexpr Millis kRebootstrapBudget{5000};
static_assert(kExecCopyFd == sandbox::kShellExecCopyFd, "the hook execs what ptybox-init gives");
constexpr Millis kRebootstrapLookInterval{2};

ReadinessTimings TimingsFrom(const policy::Limits& limits) {
  ReadinessTimings t;
  t.idle_silence = Millis(limits.idle_silence_ms);
  t.handoff_grace = Millis(limits.handoff_grace_ms);
  t.timeout = Millis(limits.timeout_ms);
  t.poll_interval = Millis(limits.poll_interval_ms);
  t.exact_probe_after = Millis(limits.exact_probe_after_ms);
  return t;
}

TerminalDecoder::Options DecoderOptions(const SpawnSpec& spec) {
  TerminalDecoder::Options o;
  o.rows = spec.rows;
  o.columns = spec.columns;
  o.max_sequence_bytes = static_cast<size_t>(spec.policy.limits.max_read_bytes);
  o.max_line_bytes = kMaxLineBytes;
  o.scrollback_lines = static_cast<size_t>(spec.policy.limits.scrollback_lines);
  o.scrollback_bytes = static_cast<size_t>(spec.policy.limits.scrollback_bytes);
  return o;
}

// A rendered screen without its trailing blank rows (rows are already trimmed of blanks).
std::string TrimTrailingRows(std::string screen) {
  while (!screen.empty() && screen.back() == '\n') screen.pop_back();
  return screen;
}

std::string DescribeStatus(const SessionStatus& status) {
  if (status.signal) return "killed by " + SignalName(*status.signal);
  if (status.exit_code) return "exit code " + std::to_string(*status.exit_code);
  return "exited";
}

}  // namespace

ShellSession::ShellSession(asio::io_context& io, ChildReaper& reaper,
                           const ShellBackendOptions& options, SpawnSpec spec)
    : io_(io),
      options_(options),
      spec_(std::move(spec)),
      nonce_(NewPromptNonce()),
      terminal_(io, reaper, *this, options.cgroups),
      decoder_(DecoderOptions(spec_)),
      tracker_(nonce_, std::string(kPromptPs1), *this),
      timer_(io) {
  decoder_.SetObserver(&tracker_);
  decoder_.SetLineListener([this](std::string_view line) {
    if (send_) send_->OnLine(line, decoder_.scrollback().end());
  });
}

ShellSession::~ShellSession() { timer_.cancel(); }

std::vector<std::string> ShellSession::BuildEnvironment(const SpawnSpec& spec) {
  // Built from an allow-list, never the daemon's environment wholesale.
  std::map<std::string, std::string> env;
  env["PATH"] = std::string(kDefaultPath);
  for (const std::string& name : spec.policy.env.pass) {
    if (const char* value = std::getenv(name.c_str())) env[name] = value;
  }
  for (const auto& [name, value] : spec.policy.env.set) env[name] = value;
  for (const auto& [name, value] : spec.env) env[name] = value;
  if (!env.contains("LANG")) env["LANG"] = "C.UTF-8";
  // Owned by the backend: the terminal type we decode, no pagers, the controlled prompt.
  env["TERM"] = "xterm-256color";
  env["PAGER"] = "cat";
  env["GIT_PAGER"] = "cat";
  env["MANPAGER"] = "cat";
  env["PS1"] = std::string(kPromptPs1);
  env["PTYBOX_SANDBOX"] = SandboxSummary(spec.policy);
  if (policy::IsConfined(spec.policy.mode) && spec.policy.network_names &&
      !spec.policy.network_allowed) {
    // Network by name: every tool that honours the proxy variables reaches the allowed names
    // through the session's proxy port; the loopback stays direct.
    const std::string http = "http://127.0.0.1:" + std::to_string(sandbox::kSessionProxyPort);
    const std::string socks = "socks5h://127.0.0.1:" + std::to_string(sandbox::kSessionProxyPort);
    for (const char* name : {"HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy"}) {
      env[name] = http;
    }
    env["ALL_PROXY"] = socks;
    env["all_proxy"] = socks;
    env["NO_PROXY"] = "localhost,127.0.0.1,::1";
    env["no_proxy"] = env["NO_PROXY"];
  }
  // No nonce here: the environment of the shell is readable by the session's other processes.
  env["PROMPT_COMMAND"] = BuildPromptCommand();
  std::vector<std::string> entries;
  entries.reserve(env.size());
  for (const auto& [name, value] : env) entries.push_back(name + "=" + value);
  return entries;
}

std::string ShellSession::SandboxSummary(const policy::ResolvedPolicy& policy) {
  if (!policy::IsConfined(policy.mode)) {
    return "danger-full-access: no ptybox sandbox (the host's filesystem, network and users)";
  }
  std::string text(policy::ToString(policy.mode));
  if (policy.network_allowed) return text + ", network allowed (policy network: allow)";
  if (policy.network_names) {
    return text +
           ", network by name only (policy network: {allow: [...]}): connections go through "
           "ptybox's proxy ($HTTPS_PROXY), which admits only the names the policy lists; "
           "`ptybox policy resolve` shows them: docs/sandbox.md, \"Network by name\"";
  }
  return text +
         ", network denied by the ptybox policy (network: deny): no name resolves and no "
         "connection leaves this session; even as `id` root, no capabilities and a read-only "
         "system (apt-get cannot install): docs/sandbox.md, \"From inside a session\"";
}

sandbox::LaunchSpec ShellSession::BuildLaunch(const SpawnSpec& spec) const {
  const policy::ResolvedPolicy& p = spec.policy;
  sandbox::LaunchSpec launch;
  sandbox::ApplyPolicy(p, spec.cwd, launch);
  launch.bwrap = options_.bwrap;
  launch.sandbox.daemon_socket = options_.daemon_socket;
  for (std::filesystem::path path : options_.daemon_files) {
    std::error_code ec;
    // A held descriptor's name leads to the object wherever it is now (runtime/audit/audit_log.h).
    if (path.parent_path() == "/proc/self/fd") {
      path = std::filesystem::read_symlink(path, ec);
      if (ec || path.is_relative() || path.string().ends_with(" (deleted)")) continue;
    }
    const std::filesystem::file_status status = std::filesystem::symlink_status(path, ec);
    if (ec || !std::filesystem::exists(status)) continue;  // nothing there to read yet
    launch.sandbox.hidden.push_back(
        sandbox::HiddenPath{path, std::filesystem::is_directory(status)});
  }
  launch.init_binary = options_.init_binary;
  launch.command = {options_.shell, "--noprofile", "--norc", "-i"};
  launch.environment = BuildEnvironment(spec);
  launch.rows = spec.rows;
  launch.columns = spec.columns;
  launch.pty = true;
  return launch;
}

void ShellSession::Start(ReadyCallback ready) {
  ready_ = std::move(ready);
  const policy::ResolvedPolicy& p = spec_.policy;
  launched_ = BuildLaunch(spec_);
  const sandbox::LaunchSpec& launch = launched_;

  // The startup deadline covers the launch too (a sandbox that hangs before the shell runs).
  ReadinessTimings timings = TimingsFrom(p.limits);
  timings.timeout = Millis(spec_.timeout_ms.value_or(p.limits.startup_timeout_ms));
  start_time_ = Now();
  startup_timings_ = timings;
  ArmTimer(start_time_ + timings.timeout);
  terminal_.Start(launch);
}

bool ShellSession::QuietAtPrompt() const {
  return published_ && ready_at_prompt_ && !touched_after_ready_ && !closing_ && !closed_ &&
         !terminal_.status().exited && !send_ && !slot_held_;
}

bool ShellSession::MatchesLaunch(const SpawnSpec& spec) const {
  if (!(spec.policy == spec_.policy) || spec.cwd != spec_.cwd || spec.env != spec_.env ||
      spec.rows != spec_.rows || spec.columns != spec_.columns) {
    return false;
  }
  // The host's sockets are read afresh at every launch; a shell that waited in the pool covers
  // those bound before it started (docs/security.md, "No host service over UNIX sockets").
  sandbox::LaunchSpec launch = BuildLaunch(spec);
  launch.sandbox.host_sockets = launched_.sandbox.host_sockets;
  return launch == launched_;
}

std::optional<ShellSession::RepositoryClaim> ShellSession::RepositoryClaimFor(
    const SpawnSpec& spec) const {
  if (launched_.sandbox.mode != policy::Mode::kWorkspaceWrite) return std::nullopt;
  sandbox::LaunchSpec launch = BuildLaunch(spec);
  RepositoryClaim claim{std::move(launch.sandbox),
                        std::move(launch.init_binary),
                        terminal_.shell_pid(),
                        {},
                        terminal_.gits()};
  ::clock_gettime(CLOCK_REALTIME, &claim.claimed);
  return claim;
}

std::optional<std::string> ShellSession::RepositoryClaim::Refusal() const {
  if (std::optional<std::string> refused =
          sandbox::CheckRepositoriesAfterLaunch(sandbox, init_binary, shell, claimed)) {
    return refused;
  }
  if (!gits) return std::nullopt;
  std::lock_guard lock(gits->mutex);
  // A repository the shell's launch left read-only because the person's git was at work then
  // (a lock held: `git commit` with its editor open) would stay so however long ago that was:
  // a fresh launch reads it again (outside review 51).
  if (gits->left_read_only > 0) {
    return "the shell's launch left " + std::to_string(gits->left_read_only) +
           " repository .git (or linked worktree) read-only; a fresh launch tries again";
  }
  for (const sandbox::PrivateGit& git : gits->gits) {
    Result<bool> current = sandbox::HostStillAt(git.host_fd.Get(), git.snapshot);
    if (!current || !*current) {
      return "the repository " + git.host_git.string() +
             " changed since the shell's private copy of its .git was made";
    }
  }
  return std::nullopt;
}

void ShellSession::SetOutputTap(std::function<void(std::string_view)> tap) {
  spec_.output_tap = std::move(tap);
}

void ShellSession::SetNetworkEvents(proxy::ProxyEvents events) {
  spec_.network_events = std::move(events);
}

void ShellSession::OnProxyListener(UniqueFd listener) {
  if (proxy_ || !spec_.policy.network_names) return;
  // The events go through the session, so a pooled shell reports to whoever claimed it.
  std::weak_ptr<ShellSession> weak = weak_from_this();
  proxy::ProxyEvents events;
  events.refused = [weak](const proxy::ProxyRefusal& refusal) {
    auto self = weak.lock();
    if (self && self->spec_.network_events.refused) self->spec_.network_events.refused(refusal);
  };
  events.stopped = [weak](const proxy::ProxyTotals& totals) {
    auto self = weak.lock();
    if (self && self->spec_.network_events.stopped) self->spec_.network_events.stopped(totals);
  };
  Result<std::shared_ptr<proxy::NetworkProxy>> started = proxy::NetworkProxy::Start(
      io_, std::move(listener), *spec_.policy.network_names, std::move(events));
  if (!started) {
    // Without its proxy the session reaches nothing, which is safe; say why.
    LogWarn(started.error().message);
    return;
  }
  proxy_ = std::move(*started);
}

void ShellSession::StopProxy() {
  if (!proxy_) return;
  std::shared_ptr<proxy::NetworkProxy> proxy = std::move(proxy_);
  proxy->Stop();
}

void ShellSession::CancelStart(std::string reason) {
  if (published_ || !ready_) return;
  FailStart(Error{ErrorKind::kCanceled, std::move(reason)});
}

void ShellSession::OnTerminalReady() {
  if (!ready_) return;  // canceled meanwhile; termination is under way
  // The nonce goes to the shell through its terminal, before anything else is written and
  // before any program but the shell runs in the session: the first PROMPT_COMMAND reads it
  // (ECHO is off, so it is never output) and keeps it in its own memory only.
  terminal_.WriteReply(NonceLine(nonce_));
  startup_.emplace(static_cast<ReadinessHost&>(*this),
                   ReadinessEngine(ReadinessEngine::Purpose::kStartup, startup_timings_,
                                   terminal_.shell_pid(), start_time_),
                   [this](WaitReason reason) { OnStartupSettled(reason); });
  startup_->Pump();
}

void ShellSession::OnStartFailed(Error error) { FailStart(std::move(error)); }

void ShellSession::OnOutput(std::string_view bytes) {
  idle_prompt_facts_.reset();  // something happened on the terminal
  const TimePoint now = Now();
  const bool starting = startup_ && !published_;
  if (published_) touched_after_ready_ = true;
  if (starting) startup_->engine().OnOutput(now);
  if (send_ && !send_->settled()) send_->OnOutput();
  if (spec_.output_tap) spec_.output_tap(bytes);
  if (render_) render_->AddBytes(bytes);
  decoder_.Feed(bytes);
  if (std::string replies = decoder_.TakeReplies(); !replies.empty()) {
    terminal_.AnswerQueries(std::move(replies));
  }
  if (starting && startup_) startup_->Pump();
  if (send_ && !send_->settled()) send_->AfterOutput();
}

void ShellSession::OnMarker(const PromptMarker& marker) {
  last_marker_exit_ = marker.exit_code;
  std::string before = decoder_.PendingText();
  if (!published_) pending_before_marker_ = before;
  if (published_ && NoActiveSend()) {
    idle_marker_.emplace(marker, before);
    idle_candidate_ = false;
  }
  if (send_) send_->OnMarker(marker, std::move(before));
}

void ShellSession::OnCandidate() {
  last_prompt_at_ = Now();
  std::optional<pid_t> fg = terminal_.ForegroundPgid();
  std::optional<size_t> unread = terminal_.UnreadInput();
  if (startup_ && !published_) startup_->engine().OnPromptCandidate(Now(), fg, unread);
  if (published_ && NoActiveSend()) idle_candidate_ = idle_marker_.has_value();
  if (send_) send_->OnCandidate(fg, unread);
  if (rebootstrap_ && rebootstrap_->phase == Rebootstrap::Phase::kPrompt) {
    EndRebootstrap(true, "", /*start_now=*/false);  // not inside the decoder's callbacks
  }
}

void ShellSession::OnInvalidated() {
  if (NoActiveSend()) {
    // More output after the prompt: it was not the one a wait may settle at.
    idle_marker_.reset();
    idle_candidate_ = false;
  }
  if (startup_ && !published_) startup_->engine().OnPromptInvalidated();
  if (send_) send_->OnInvalidated();
}

void ShellSession::OnContinuation() {
  if (send_) send_->OnContinuation();
}

void ShellSession::OnShellExit(SessionStatus status) {
  // The output was drained before the exit was reported: the stream has ended.
  decoder_.Finish();
  StopProxy();
  if (!published_) {
    if (startup_) {
      startup_->engine().OnSessionExit();
      startup_->Pump();
    } else {
      FailStart(Error{ErrorKind::kSpawnFailed, "the shell exited before its terminal was ready (" +
                                                   DescribeStatus(status) + ")"});
    }
    return;
  }
  EndRebootstrap(false, "the shell exited");  // its send starts and sees the exit
  if (send_) send_->OnSessionExit();
  CleanUpAfterExit();
}

void ShellSession::CleanUpAfterExit() {
  // The shell is gone; its leftover descendants (disowned, nohup, setsid) end with it.
  if (closing_) return;
  terminal_.Terminate(Millis(spec_.policy.limits.dispose_grace_ms), [](Result<void> result) {
    if (!result) LogWarn("after the shell exited: " + result.error().message);
  });
}

bool ShellSession::InSignalTransition(const ForegroundFacts& facts) {
  const std::optional<LocalTerminal::DeliveredSignal>& signal = terminal_.last_signal();
  if (!signal) return false;
  const bool within_grace = Now() < signal->at + Millis(spec_.policy.limits.handoff_grace_ms);
  // SIGINT sent to the shell's own group (it held the terminal): a prompt decoded after the
  // signal may have been printed before it, and readline takes a SIGINT late (it re-raises it
  // to bash once its own cleanup is done), discarding whatever line it is reading by then: the
  // first bytes of the next command (`leep: command not found`). The shell has taken it once a
  // prompt says so: bash's status after an interrupt is 128 + SIGINT.
  const pid_t shell = terminal_.shell_pid();
  if (shell > 0 && signal->pgid == shell && signal->signal == SIGINT &&
      !(last_prompt_at_ >= signal->at && last_marker_exit_ == 128 + SIGINT)) {
    return within_grace;
  }
  // Settled: the shell printed its whole prompt since (marker and PS1: a write between the
  // two would put the prompt into the next send's output), another group now waits for
  // input, or the handoff grace has passed.
  if (last_prompt_at_ >= signal->at) return false;
  if (facts.foreground_pgid && *facts.foreground_pgid != signal->pgid &&
      facts.waiting_for_input == Finding::kYes) {
    return false;
  }
  return within_grace;
}

void ShellSession::After(Millis delay, std::function<void()> fn) {
  auto timer = std::make_shared<asio::steady_timer>(io_, delay);
  std::weak_ptr<ShellSession> weak = weak_from_this();
  timer->async_wait([timer, weak, fn = std::move(fn)](const std::error_code& ec) {
    if (!ec && !weak.expired()) fn();
  });
}

void ShellSession::ArmTimer(TimePoint at) {
  timer_.expires_at(at);
  std::weak_ptr<ShellSession> weak = weak_from_this();
  timer_.async_wait([weak](const std::error_code& ec) {
    if (ec) return;
    if (std::shared_ptr<ShellSession> self = weak.lock()) self->OnTimer();
  });
}

void ShellSession::CancelTimer() { timer_.cancel(); }

void ShellSession::OnTimer() {
  // A deadline is judged on every byte that arrived, not only on what the reactor got round to
  // reading: with more terminals ready than one reactor turn takes (or a daemon that was not
  // scheduled), this timer can run before the read of output that came in time.
  terminal_.ReadPendingOutput();
  if (!published_) {
    if (startup_) {
      startup_->Pump();
    } else if (ready_ && Now() >= start_time_ + startup_timings_.timeout) {
      FailStart(Error{ErrorKind::kStartupTimeout,
                      "the sandbox did not start the shell within " +
                          std::to_string(startup_timings_.timeout.count()) + " ms"});
    }
    return;
  }
  if (send_ && !send_->settled()) send_->OnTimer();
}

void ShellSession::OnStartupSettled(WaitReason reason) {
  if (reason == WaitReason::kStdinRead || reason == WaitReason::kInferredIdle) {
    published_ = true;
    const bool by_prompt = startup_->engine().settled_by_prompt();
    ready_at_prompt_ = by_prompt && reason == WaitReason::kStdinRead;
    const Scrollback& scrollback = decoder_.scrollback();
    const size_t budget = static_cast<size_t>(spec_.policy.limits.max_result_bytes);
    uint64_t from = scrollback.end() > budget ? scrollback.end() - budget : 0;
    ReadResult page = scrollback.Read(std::max(from, scrollback.begin()), budget,
                                      by_prompt ? pending_before_marker_ : decoder_.PendingText());
    motd_ = page.text;
    while (!motd_.empty() && motd_.back() == '\n') motd_.pop_back();
    RememberIdlePrompt(startup_->engine().verifying_facts());
    // What `exec bash` will be told apart from (rebootstrap.h).
    hooked_exec_ = ReadExecIdentity(terminal_.shell_pid());
    bash_binary_ = FindProgram(options_.shell, kDefaultPath);
    FinishStart({});
    return;
  }
  std::string output = decoder_.scrollback().Read(std::nullopt, 4096, decoder_.PendingText()).text;
  if (!output.empty()) output = "; it printed: " + output;
  if (reason == WaitReason::kTimeout) {
    FailStart(Error{ErrorKind::kStartupTimeout,
                    "the shell showed no prompt within " +
                        std::to_string(startup_timings_.timeout.count()) +
                        " ms (raise startupTimeoutMs or timeoutMs of terminal_open)" + output});
  } else {
    FailStart(Error{
        ErrorKind::kSpawnFailed,
        "the shell exited during startup (" + DescribeStatus(terminal_.status()) + ")" + output});
  }
}

void ShellSession::FailStart(Error error) {
  if (!ready_ || published_) return;
  ReadyCallback ready = std::move(ready_);
  ready_ = nullptr;
  if (startup_) startup_->Stop();
  CancelTimer();
  // No process may outlive a failed or canceled start.
  terminal_.Terminate(Millis(spec_.policy.limits.dispose_grace_ms),
                      [ready = std::move(ready), error](Result<void> cleaned) mutable {
                        if (!cleaned) error.cleanup_failure = cleaned.error().message;
                        ready(std::unexpected(std::move(error)));
                      });
}

void ShellSession::FinishStart(Result<void> result) {
  if (!ready_) return;
  ReadyCallback ready = std::move(ready_);
  ready_ = nullptr;
  ready(std::move(result));
}

std::optional<pid_t> ShellSession::pid() const {
  if (terminal_.shell_pid() > 0) return terminal_.shell_pid();
  return std::nullopt;
}

bool ShellSession::busy() const { return slot_held_; }

Result<std::shared_ptr<SendOperation>> ShellSession::StartSend(SendRequest request) {
  if (closing_ || closed_) {
    return Fail(ErrorKind::kClosed, "the session is closed; open a new one with terminal_open");
  }
  if (terminal_.status().exited) {
    return Fail(ErrorKind::kClosed, "the shell has exited (" + DescribeStatus(terminal_.status()) +
                                        "); close this session and open a new one");
  }
  if (slot_held_) {
    return Fail(ErrorKind::kBusy,
                "a send is already active on this session: wait for it to settle (terminal_output "
                "for a background send) or cancel it with terminal_cancel");
  }
  if (!request.keys.empty()) {
    // Encoded for the modes the program asked for in the output decoded so far: a program
    // that waits for input has been seen asking (readiness decodes output before it settles).
    Result<std::string> bytes =
        EncodeKeys(request.keys, KeyModes{.application_cursor = decoder_.application_cursor()});
    if (!bytes) return Propagate(bytes);
    request.input = std::move(*bytes);
  }
  touched_after_ready_ = true;
  const bool rebootstrap = !request.wait && !rebootstrap_ && NeedsRebootstrap();
  SendOperation::Config config;
  config.timings = TimingsFrom(spec_.policy.limits);
  config.shell_pgid = terminal_.shell_pid();
  config.max_result_bytes = static_cast<size_t>(spec_.policy.limits.max_result_bytes);
  config.max_unconsumed_bytes = static_cast<size_t>(spec_.policy.limits.scrollback_bytes);
  auto op =
      std::make_shared<SendOperation>(static_cast<SendHost&>(*this), config, std::move(request));
  slot_held_ = true;
  std::weak_ptr<ShellSession> weak = weak_from_this();
  op->SetReleasedCallback([weak] {
    if (std::shared_ptr<ShellSession> self = weak.lock()) self->slot_held_ = false;
  });
  if (rebootstrap) {
    BeginRebootstrap(op);
    return op;
  }
  send_ = op;
  op->Start();
  return op;
}

bool ShellSession::NeedsRebootstrap() {
  if (!hooked_exec_ || !bash_binary_ || !ready_at_prompt_) return false;
  // A last send that settled at the verified prompt proves the hook is there: the send path pays
  // no /proc read for this check (exec bash settles without a marker).
  if (send_ && send_->result() && *send_->result() && (*send_->result())->exit_code) return false;
  std::optional<ExecIdentity> now = ReadExecIdentity(terminal_.shell_pid());
  if (!now || *now == *hooked_exec_ || now->exe_dev != bash_binary_->dev ||
      now->exe_ino != bash_binary_->ino) {
    return false;
  }
  // A bash the exec machinery started installed the hook from its rc file with the nonce the
  // tracker follows (the last send may have settled without a marker: a typed-ahead line made
  // readline redraw, or a program ate the input). Typing the bootstrap into it would switch the
  // tracker to a fresh nonce its read-only hook never takes: null for good. So it is never typed
  // into; one whose pipes a program drained keeps null codes (never wrong).
  if (RunsAsExecMachinery(terminal_.shell_pid())) {
    hooked_exec_ = *now;
    return false;
  }
  // Only a bash the shell itself started as a shell (`exec $SHELL`, `builtin exec bash -l`):
  // one a program started (a script run as the shell, a wrapper that hands bash an `eval`
  // function or a loader variable) would run that program's code around the bootstrap.
  const std::optional<std::string> cmdline = ReadProcessFile(terminal_.shell_pid(), "cmdline");
  const std::optional<std::string> environ = ReadProcessFile(terminal_.shell_pid(), "environ");
  std::optional<std::string> refusal = (!cmdline || !environ)
                                           ? std::optional<std::string>("its image is unreadable")
                                           : ImageRefusal(*cmdline, *environ);
  if (refusal) {
    hooked_exec_ = *now;  // this image is never typed into
    LogDebug("exec bash: the prompt hook is not given back: " + *refusal);
    return false;
  }
  return true;
}

void ShellSession::BeginRebootstrap(std::shared_ptr<SendOperation> op) {
  std::optional<ExecIdentity> exec = ReadExecIdentity(terminal_.shell_pid());
  rebootstrap_.emplace();
  rebootstrap_->op = std::move(op);
  rebootstrap_->deadline = Now() + kRebootstrapBudget;
  if (!exec) {
    EndRebootstrap(false, "the shell's exec identity is unreadable");
    return;
  }
  rebootstrap_->exec = *exec;
  // A shell that ran non-dumpable keeps its nonce from its children's reading of its memory.
  // The image `exec $SHELL` starts runs a file its user can read, so it is dumpable: the line
  // moves the nonce on into the unreadable copy at once (BuildRebootstrapLine).
  rebootstrap_->reexec = sandbox::ShellRunsNonDumpable(launched_);
  RebootstrapLook();
}

void ShellSession::RebootstrapLook() {
  std::weak_ptr<ShellSession> weak = weak_from_this();
  terminal_.Inspect([weak](ForegroundFacts facts) {
    if (std::shared_ptr<ShellSession> self = weak.lock())
      self->OnRebootstrapFacts(std::move(facts));
  });
}

void ShellSession::OnRebootstrapFacts(ForegroundFacts facts) {
  if (!rebootstrap_ || rebootstrap_->phase == Rebootstrap::Phase::kPrompt) return;
  const pid_t shell = terminal_.shell_pid();
  if (closing_ || closed_ || terminal_.status().exited) {
    EndRebootstrap(false, "the session ends");
    return;
  }
  Rebootstrap& rb = *rebootstrap_;
  // Still the same program image: one that exec'd again meanwhile is not the one looked at.
  if (ReadExecIdentity(shell) != rb.exec) {
    EndRebootstrap(false, "the shell exec'd again");
    return;
  }
  // Every task of the session is one the look saw: the session's cgroup counts no more. A
  // session without a pids cgroup is refused for it only where the shell runs non-dumpable
  // (elsewhere any program of the session's user can read the shell's memory anyway).
  std::optional<std::string> hidden = TaskCountRefusal(facts, terminal_.SessionTasks());
  if (hidden && !terminal_.SessionTasks() && !rb.reexec) hidden.reset();
  if (rb.phase == Rebootstrap::Phase::kTypeLine) {
    if (std::optional<std::string> refusal = hidden ? hidden : TypeLineRefusal(facts, shell)) {
      // Nothing written: the next send tries again (a background job may have ended by then).
      EndRebootstrap(false, *refusal);
      return;
    }
    if (written_line_open_) {
      // The agent's own unterminated line may be in readline: the bootstrap would join it, and
      // discarding it would lose what the agent typed. Nothing written; the send completes the
      // line, and the next send tries again.
      EndRebootstrap(false, "the agent's last line is not ended yet");
      return;
    }
    // This image is tried once: whatever happens now, it is never typed into twice.
    hooked_exec_ = rb.exec;
    rb.pipe_before = DescriptorLink(shell, kExecPs1Fd);
    // Readline may still hold a line although every byte agents wrote ended one (a program read
    // the rest of it): a space and ^U discard it first, as a send to the line editor does
    // (SendOperation::BytesToWrite), so the bootstrap is never typed onto its end.
    const std::string line = BuildRebootstrapLine();
    terminal_.WriteReply(terminal_.LineDiscardIsInert() ? " \x15" + line : line);
    rb.phase = Rebootstrap::Phase::kPullNonce;
    After(kRebootstrapLookInterval, [this] { RebootstrapLook(); });
    return;
  }
  // kPullNonce: the nonce goes into the line's pipe only once the shell is alone in the session,
  // asleep off the terminal (in the bootstrap's read), with the line read whole; no other process
  // exists that could hold the pipe or read the shell's memory, and the shell forks nothing
  // after the pipe is made.
  std::optional<std::string> refusal = hidden ? hidden : PullRefusal(facts, shell);
  PipeWrite wrote = PipeWrite::kNotYet;
  std::string nonce;
  if (!refusal) {
    nonce = NewPromptNonce();
    wrote = WriteIntoNewPipe(shell, kExecPs1Fd, rb.pipe_before,
                             BuildRebootstrapPayload(nonce, rb.reexec));
  }
  if (wrote == PipeWrite::kFailed) {
    EndRebootstrap(false, "the nonce could not be written into the shell's pipe");
    return;
  }
  if (wrote == PipeWrite::kNotYet) {
    if (Now() >= rb.deadline) {
      // An empty nonce and no code end the loader's reads (the shell keeps its own prompt: exit
      // codes null); they carry nothing. The reads' own timeouts end them otherwise.
      (void)WriteIntoNewPipe(shell, kExecPs1Fd, rb.pipe_before, std::string_view("\n\0", 2));
      EndRebootstrap(false, "gave up: " + refusal.value_or("the line made no pipe"));
      return;
    }
    After(kRebootstrapLookInterval, [this] { RebootstrapLook(); });
    return;
  }
  nonce_ = std::move(nonce);
  tracker_.SetNonce(nonce_);
  rb.phase = Rebootstrap::Phase::kPrompt;
  const Millis left =
      std::chrono::duration_cast<Millis>(std::max(rb.deadline - Now(), Clock::duration::zero()));
  After(left, [this] {
    if (rebootstrap_ && rebootstrap_->phase == Rebootstrap::Phase::kPrompt) {
      EndRebootstrap(false, "no prompt came");
    }
  });
}

void ShellSession::EndRebootstrap(bool hooked, std::string why, bool start_now) {
  if (!rebootstrap_) return;
  std::shared_ptr<SendOperation> op = std::move(rebootstrap_->op);
  const bool reexec = rebootstrap_->reexec;
  rebootstrap_.reset();
  if (hooked && reexec && !RunsAsExecMachinery(terminal_.shell_pid())) {
    // The prompt came from the dumpable image itself (the exec of the copy failed): it holds
    // the nonce, so the tracker follows a fresh one nobody was given (exit codes null).
    nonce_ = NewPromptNonce();
    tracker_.SetNonce(nonce_);
    hooked = false;
    why = "the shell did not exec the unreadable copy";
  }
  if (hooked) {
    LogDebug("exec bash: the prompt hook is back with a fresh nonce");
  } else {
    LogDebug("exec bash: the prompt hook is not given back: " + why);
  }
  // The bootstrap's own prompt reports the bootstrap's status: no wait may settle at it.
  idle_marker_.reset();
  idle_candidate_ = false;
  if (!op) return;
  if (start_now) {
    send_ = op;
    op->Start();
    return;
  }
  std::weak_ptr<ShellSession> weak = weak_from_this();
  asio::post(io_, [weak, op = std::move(op)] {
    std::shared_ptr<ShellSession> self = weak.lock();
    if (!self) return;
    self->send_ = op;
    op->Start();
    // Exited or closed meanwhile: the send learns it as an active send would have.
    if (self->closed_) {
      op->OnClosed();
    } else if (self->terminal_.status().exited) {
      op->OnSessionExit();
    }
  });
}

std::optional<std::string> ShellSession::AlternateScreen() {
  if (!decoder_.alternate_screen()) return std::nullopt;
  return TrimTrailingRows(decoder_.screen().Render());
}

void ShellSession::OnSendBoundary() {
  render_.emplace(decoder_.PendingTextUntrimmed(), decoder_.addressing_events(),
                  decoder_.scrollback().end());
}

std::optional<ForegroundFacts> ShellSession::IdlePromptFacts() {
  // Used once: the send that starts now changes what the terminal shows.
  return std::exchange(idle_prompt_facts_, std::nullopt);
}

void ShellSession::OnSendSettled(const std::optional<ForegroundFacts>& verifying) {
  RememberIdlePrompt(verifying);
  result_end_ = decoder_.scrollback().end();
  result_pending_ = decoder_.PendingTextUntrimmed();
  idle_marker_.reset();
  idle_candidate_ = false;
}

std::vector<std::string> ShellSession::LinesSinceLastResult(std::string* pending_at_result) {
  std::vector<std::string> lines;
  if (!result_end_) return lines;  // no result yet: the wait starts now
  *pending_at_result = result_pending_;
  const Scrollback& scrollback = decoder_.scrollback();
  const uint64_t from = std::max(*result_end_, scrollback.begin());
  if (from >= scrollback.end()) return lines;
  // Committed text only (no pending line); at most what the scrollback keeps.
  ReadResult page = scrollback.Read(from, static_cast<size_t>(scrollback.end() - from), "");
  std::string_view text = page.text;
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    if (nl == std::string_view::npos) break;  // cannot happen: committed lines end in "\n"
    lines.emplace_back(text.substr(0, nl));
    text.remove_prefix(nl + 1);
  }
  return lines;
}

void ShellSession::ReplayIdlePrompt() {
  if (!send_ || !idle_marker_) return;
  auto [marker, before] = std::move(*idle_marker_);
  const bool candidate = idle_candidate_;
  idle_marker_.reset();
  idle_candidate_ = false;
  send_->OnMarker(marker, std::move(before));
  if (candidate) send_->OnCandidate(terminal_.ForegroundPgid(), terminal_.UnreadInput());
}

bool ShellSession::OnlyForeignInputOnLine(const ForegroundFacts& facts) {
  // Every byte agents wrote ended a line, and the terminal holds none of it unread: what the
  // reader has on its line now came from elsewhere.
  if (written_line_open_ || facts.unread_input != size_t{0} || !facts.canonical) return false;
  // The shell alone in the foreground, its own task the one waiting on the terminal: in raw
  // mode readline's wait (pselect; a `read -n1` of the agent's reads instead, and gets no
  // discard), in canonical mode a read of a line.
  const pid_t shell = terminal_.shell_pid();
  if (shell <= 0 || facts.foreground_pgid != shell || facts.waiting_for_input != Finding::kYes ||
      facts.tasks.empty()) {
    return false;
  }
  const TtyWait wanted = *facts.canonical ? TtyWait::kRead : TtyWait::kSelect;
  return std::all_of(facts.tasks.begin(), facts.tasks.end(), [&](const TaskFacts& task) {
    return task.pid == shell && !task.outside_group && task.tty_wait == wanted;
  });
}

void ShellSession::OnInputWritten(std::string_view bytes) {
  if (!bytes.empty()) written_line_open_ = bytes.back() != '\n' && bytes.back() != '\r';
}

void ShellSession::RememberIdlePrompt(const std::optional<ForegroundFacts>& verifying) {
  idle_prompt_facts_.reset();
  const pid_t shell = terminal_.shell_pid();
  if (!verifying || shell <= 0 || verifying->foreground_pgid != shell) return;
  // Only the shell alone in its group (job control keeps background jobs in their own groups):
  // then nothing but the shell itself could change the group's state, and its run time says
  // whether it did.
  for (const TaskFacts& task : verifying->tasks) {
    if (task.pid != shell) return;
  }
  idle_prompt_facts_ = verifying;
}

bool ShellSession::WillRender() { return render_ && render_->Needed(decoder_.addressing_events()); }

std::optional<RenderedViewport> ShellSession::RenderSend(bool at_prompt) {
  if (!render_) return std::nullopt;
  SendRender render = std::move(*render_);
  render_.reset();
  // Plain line output (most sends) stops here: the line path already rendered it.
  if (!render.Needed(decoder_.addressing_events())) return std::nullopt;
  // A full-screen program still shows the alternate screen: the screen is the viewport, and
  // the line path kept nothing of it.
  if (decoder_.alternate_screen()) return std::nullopt;
  const TimePoint began = Clock::now();
  RenderedViewport rendered = ApplyRender(
      decoder_, render, static_cast<size_t>(spec_.policy.limits.max_result_bytes), at_prompt);
  const auto micros =
      std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - began).count();
  LogDebug("send output rendered through a scratch screen: " + std::to_string(render.raw_bytes()) +
           " bytes in " + std::to_string(micros) + " us");
  return rendered;
}

std::optional<ScreenSnapshot> ShellSession::Snapshot() const {
  const Screen& screen = decoder_.screen();
  ScreenSnapshot snapshot;
  snapshot.rows = screen.rows();
  snapshot.columns = screen.columns();
  snapshot.lines.reserve(static_cast<size_t>(screen.rows()));
  for (int row = 0; row < screen.rows(); ++row) {
    snapshot.lines.push_back(screen.RowText(row, 0, screen.columns()));
  }
  const Screen::Position cursor = screen.Cursor();
  snapshot.cursor_row = cursor.row;
  snapshot.cursor_column = cursor.column;
  snapshot.alternate_screen = screen.alternate_screen();
  return snapshot;
}

ReadResult ShellSession::Read(const ReadRequest& request) const {
  const Scrollback& scrollback = decoder_.scrollback();
  const auto limit = static_cast<size_t>(spec_.policy.limits.max_read_bytes);
  size_t max_bytes =
      request.max_bytes ? std::min(static_cast<size_t>(*request.max_bytes), limit) : limit;
  if (request.view == ReadView::kScreen) {
    // The screen (up to 1000 x 500 cells, each with combining marks) within the same bound as
    // a page of lines; `truncated` says a part was dropped.
    ReadResult screen;
    screen.text = SendCapture::Bound(TrimTrailingRows(decoder_.screen().Render()), max_bytes,
                                     &screen.truncated);
    screen.cursor = scrollback.end();
    screen.next_cursor = scrollback.end();
    screen.end = true;
    return screen;
  }
  return scrollback.Read(request.cursor, max_bytes, decoder_.PendingText());
}

Result<void> ShellSession::WriteTyped(std::string bytes) {
  if (closing_ || closed_ || terminal_.status().exited) {
    return Fail(ErrorKind::kClosed, "the session is closed");
  }
  if (slot_held_) {
    return Fail(ErrorKind::kBusy,
                "an agent's send is active on this session: keystrokes wait until it settles");
  }
  // The terminal changed hands: the next send inspects it afresh, never trusting an idle
  // prompt verified before the person typed.
  idle_prompt_facts_.reset();
  // A person's keystrokes may be an unfinished line: never discarded by a later send.
  written_line_open_ = true;
  touched_after_ready_ = true;
  terminal_.Write(std::move(bytes), [](Result<size_t>) {});
  return {};
}

Result<void> ShellSession::Resize(int rows, int columns) {
  idle_prompt_facts_.reset();
  if (closing_ || closed_ || terminal_.status().exited) {
    return Fail(ErrorKind::kClosed, "the session is closed; open a new one with terminal_open");
  }
  touched_after_ready_ = true;
  if (Result<void> resized = terminal_.Resize(rows, columns); !resized) return resized;
  decoder_.Resize(rows, columns);
  spec_.rows = rows;
  spec_.columns = columns;
  return {};
}

void ShellSession::Signal(int signal, std::function<void(Result<SignalResult>)> done) {
  idle_prompt_facts_.reset();
  auto fail = [&](Error error) {
    asio::post(
        io_, [done = std::move(done), error = std::move(error)] { done(std::unexpected(error)); });
  };
  if (closing_ || closed_) {
    fail(Error{ErrorKind::kClosed, "the session is closed; signals are no longer accepted"});
    return;
  }
  if (terminal_.status().exited) {
    fail(Error{ErrorKind::kClosed,
               "the shell has exited (" + DescribeStatus(terminal_.status()) + ")"});
    return;
  }
  if (signal == SIGKILL && terminal_.ForegroundPgid() == terminal_.shell_pid()) {
    fail(Error{ErrorKind::kInvalidParams,
               "SIGKILL would hit the shell itself (it is in the foreground); close the session "
               "with terminal_close instead",
               "signal"});
    return;
  }
  terminal_.SignalForeground(signal, TerminalHandle::SignalFollowLimit::kFixedLook,
                             std::move(done));
}

SessionStatus ShellSession::Status() const { return terminal_.status(); }

void ShellSession::Close(std::string reason, std::function<void(Result<SessionStatus>)> done) {
  if (closed_) {
    asio::post(io_, [done = std::move(done), status = terminal_.status()] { done(status); });
    return;
  }
  close_waiters_.push_back(std::move(done));
  if (closing_) return;
  closing_ = true;
  LogDebug("closing session: " + reason);
  EndRebootstrap(false, "the session closes");
  // Stop readiness polling; the active send settles after quiescence.
  if (send_ && !send_->settled()) send_->StopPolling();
  if (startup_) startup_->Stop();
  std::weak_ptr<ShellSession> weak = weak_from_this();
  terminal_.Terminate(Millis(spec_.policy.limits.dispose_grace_ms), [weak](Result<void> result) {
    std::shared_ptr<ShellSession> self = weak.lock();
    if (!self) return;
    std::vector<std::function<void(Result<SessionStatus>)>> waiters;
    waiters.swap(self->close_waiters_);
    if (!result) {
      self->closing_ = false;  // a retry may succeed
      for (auto& waiter : waiters) waiter(Propagate(result));
      return;
    }
    self->closed_ = true;
    self->StopProxy();
    SessionStatus status = self->terminal_.status();
    if (!status.exited) {
      // The shell ended with the session's process tree (hangup, then kill if needed).
      status.exited = true;
      status.signal = SIGHUP;
    }
    if (self->send_) self->send_->OnClosed();
    self->CancelTimer();
    for (auto& waiter : waiters) waiter(status);
  });
}

namespace {

class ShellPendingSpawn final : public PendingSpawn {
 public:
  explicit ShellPendingSpawn(std::weak_ptr<ShellSession> session) : session_(std::move(session)) {}
  void Cancel(std::string reason) override {
    if (std::shared_ptr<ShellSession> session = session_.lock())
      session->CancelStart(std::move(reason));
  }

 private:
  std::weak_ptr<ShellSession> session_;
};

// An open served by a pooled shell: published on the next turn (or once its claim's walk
// holds) unless canceled first. When the claim fails, the open's own start takes over, and a
// cancel goes to it.
class ClaimedPendingSpawn final : public PendingSpawn {
 public:
  void Cancel(std::string reason) override {
    if (cold) {
      cold->Cancel(std::move(reason));
    } else if (!canceled) {
      canceled = std::move(reason);
    }
  }
  std::optional<std::string> canceled;
  std::shared_ptr<PendingSpawn> cold;
};

// Startup output of a pooled shell, kept for the recording of the session that claims it.
constexpr size_t kMaxPooledStartupBytes = 64 * 1024;

// Refills the pool for `spec` on a later turn of the reactor, never inside an open.
void PostRefill(asio::io_context& io, std::weak_ptr<WarmPool> pool, const SpawnSpec& spec) {
  asio::post(io, [pool = std::move(pool), spec = PoolSpecOf(spec)] {
    if (std::shared_ptr<WarmPool> live = pool.lock()) live->Refill(spec);
  });
}

// One pre-started ShellSession as the warm pool sees it.
class PooledShellSession final : public PooledShell,
                                 public std::enable_shared_from_this<PooledShellSession> {
 public:
  explicit PooledShellSession(asio::io_context& io) : io_(io) {}
  void Adopt(std::shared_ptr<ShellSession> session) { session_ = std::move(session); }
  [[nodiscard]] const ShellSession& session() const { return *session_; }

  [[nodiscard]] bool Pristine() const override {
    return started_ && !overflow_ && session_->QuietAtPrompt();
  }
  [[nodiscard]] bool Matches(const SpawnSpec& spec) const override {
    return session_->MatchesLaunch(spec);
  }
  void Discard(std::string reason, std::function<void()> done) override {
    if (!settled_) {
      // The start's callback ends it (a canceled start leaves no process) and says done.
      discard_done_ = std::move(done);
      session_->CancelStart(std::move(reason));
      return;
    }
    if (!started_) {
      asio::post(io_, std::move(done));
      return;
    }
    std::shared_ptr<ShellSession> session = session_;
    session->Close("pooled shell discarded: " + reason,
                   [session, done = std::move(done)](Result<SessionStatus> closed) {
                     if (!closed) LogWarn("warm pool: " + closed.error().Describe());
                     done();
                   });
  }

  // The startup's outcome (from ShellSession::Start's callback).
  void OnStarted(bool ok) {
    settled_ = true;
    started_ = ok;
    if (!discard_done_) return;
    std::function<void()> done = std::move(discard_done_);
    discard_done_ = nullptr;
    if (!ok) {
      done();
      return;
    }
    started_ = true;
    Discard("discarded while it started", std::move(done));
  }
  void Record(std::string_view bytes) {
    if (startup_bytes_.size() + bytes.size() > kMaxPooledStartupBytes) {
      overflow_ = true;  // never handed out: its recording would be incomplete
      return;
    }
    startup_bytes_.append(bytes);
  }
  // Hands the shell to one session: its recording first gets the startup output.
  std::shared_ptr<ShellSession> TakeFor(const std::function<void(std::string_view)>& tap,
                                        const proxy::ProxyEvents& events) {
    if (tap && !startup_bytes_.empty()) tap(startup_bytes_);
    startup_bytes_.clear();
    session_->SetOutputTap(tap);
    session_->SetNetworkEvents(events);
    return session_;
  }

 private:
  asio::io_context& io_;
  std::shared_ptr<ShellSession> session_;
  bool settled_ = false;
  bool started_ = false;
  bool overflow_ = false;
  std::string startup_bytes_;
  std::function<void()> discard_done_;
};

}  // namespace

ShellBackend::ShellBackend(asio::io_context& io, ChildReaper& reaper, ShellBackendOptions options)
    : io_(io), reaper_(reaper), options_(std::move(options)), off_reactor_(io) {
  WarmPoolOptions pool_options;
  pool_options.headroom = options_.pool_headroom;
  pool_options.idle = options_.pool_idle;
  pool_ = std::make_shared<WarmPool>(
      io_,
      [this](const SpawnSpec& spec,
             std::function<void(bool)> settled) -> std::shared_ptr<PooledShell> {
        auto pooled = std::make_shared<PooledShellSession>(io_);
        std::weak_ptr<PooledShellSession> weak = pooled;
        SpawnSpec pooled_spec = spec;
        pooled_spec.output_tap = [weak](std::string_view bytes) {
          if (std::shared_ptr<PooledShellSession> p = weak.lock()) p->Record(bytes);
        };
        auto session =
            std::make_shared<ShellSession>(io_, reaper_, options_, std::move(pooled_spec));
        pooled->Adopt(session);
        // Holds the pooled shell until its start is decided: a shell discarded while it starts
        // says done from here, once its processes are gone.
        session->Start([session, pooled, settled = std::move(settled)](Result<void> ready) {
          if (ready) {
            LogInfo("warm pool: a pre-started shell is ready (pid " +
                    std::to_string(session->pid().value_or(-1)) + ")");
          }
          pooled->OnStarted(ready.has_value());
          settled(ready.has_value());
        });
        return pooled;
      },
      pool_options);
}

namespace {

// Hands a claimed pooled shell to the open on the next turn, unless the open was canceled first.
void Publish(asio::io_context& io, PooledShellSession& pooled, const SpawnSpec& spec,
             std::shared_ptr<ClaimedPendingSpawn> pending, Backend::SpawnCallback done) {
  std::shared_ptr<ShellSession> session = pooled.TakeFor(spec.output_tap, spec.network_events);
  LogInfo("warm pool: terminal_open served by a pre-started shell (pid " +
          std::to_string(session->pid().value_or(-1)) + ")");
  asio::post(io, [session, pending, done = std::move(done)] {
    if (!pending->canceled) {
      done(std::shared_ptr<BackendSession>(session));
      return;
    }
    // Canceled before it was published: nobody may own it; ended like a canceled start.
    session->Close(*pending->canceled, [session, pending, done](Result<SessionStatus> closed) {
      Error error{ErrorKind::kCanceled, *pending->canceled};
      if (!closed) error.cleanup_failure = closed.error().message;
      done(std::unexpected(std::move(error)));
    });
  });
}

}  // namespace

struct ShellBackend::PendingClaim {
  std::shared_ptr<PooledShellSession> shell;
  SpawnSpec spec;
  std::shared_ptr<ClaimedPendingSpawn> pending;
  SpawnCallback done;
};

ShellBackend::~ShellBackend() = default;

std::shared_ptr<PendingSpawn> ShellBackend::Spawn(SpawnSpec spec, SpawnCallback done) {
  if (shut_down_) {
    // Nothing started now would be awaited by the shutdown: refused, answered off this call.
    asio::post(io_, [done = std::move(done)] {
      done(Fail(ErrorKind::kClosed, "the daemon is shutting down; no shell starts any more"));
    });
    return std::make_shared<ClaimedPendingSpawn>();
  }
  std::shared_ptr<PooledShell> claimed = pool_->Claim(spec);
  if (!claimed) return SpawnCold(std::move(spec), std::move(done));
  auto pooled = std::static_pointer_cast<PooledShellSession>(claimed);
  auto pending = std::make_shared<ClaimedPendingSpawn>();
  std::optional<ShellSession::RepositoryClaim> walk = pooled->session().RepositoryClaimFor(spec);
  if (!walk) {
    Publish(io_, *pooled, spec, pending, std::move(done));
    PostRefill(io_, pool_, spec);
    return pending;
  }
  // The walk may read up to a launch's budget of entries: off the reactor, like a launch's.
  const uint64_t id = next_claim_++;
  claims_.emplace(id, std::make_unique<PendingClaim>(PendingClaim{
                          std::move(pooled), std::move(spec), pending, std::move(done)}));
  Result<void> walking = off_reactor_.Run<std::optional<std::string>>(
      "checks that a pre-started shell protects every repository of its writable roots",
      [walk = std::move(*walk)] { return walk.Refusal(); },
      [this, id](std::optional<std::string> refused) { OnClaimWalked(id, std::move(refused)); });
  if (!walking) {
    // No thread for the walk: the shell is not used and the open starts its own (which says
    // why if it cannot walk either). Nothing here answers the open synchronously.
    LogWarn("warm pool: " + walking.error().message);
    OnClaimWalked(id, walking.error().message);
  }
  return pending;
}

void ShellBackend::OnClaimWalked(uint64_t id, std::optional<std::string> refused) {
  auto node = claims_.extract(id);
  if (node.empty()) return;
  PendingClaim& claim = *node.mapped();
  if (!refused && !claim.pending->canceled && claim.shell->Pristine()) {
    Publish(io_, *claim.shell, claim.spec, claim.pending, std::move(claim.done));
    PostRefill(io_, pool_, claim.spec);
    return;
  }
  const std::string why = refused ? "its session does not protect the writable roots' "
                                    "repositories as they are now: " +
                                        *refused
                                  : "it changed while its claim was checked";
  LogInfo("warm pool: a pre-started shell was not used: " + why);
  // Through the pool: the daemon's shutdown waits until this shell's processes are gone too.
  pool_->DiscardClaimed(std::move(claim.shell), why);
  if (claim.pending->canceled) {
    asio::post(io_, [pending = claim.pending, done = std::move(claim.done)] {
      done(std::unexpected(Error{ErrorKind::kCanceled, *pending->canceled}));
    });
    return;
  }
  claim.pending->cold = SpawnCold(std::move(claim.spec), std::move(claim.done));
}

std::shared_ptr<PendingSpawn> ShellBackend::SpawnCold(SpawnSpec spec, SpawnCallback done) {
  SpawnSpec refill = PoolSpecOf(spec);
  auto session = std::make_shared<ShellSession>(io_, reaper_, options_, std::move(spec));
  auto pending = std::make_shared<ShellPendingSpawn>(session);
  // The callback keeps the session alive until its start is decided.
  session->Start([&io = io_, pool = std::weak_ptr<WarmPool>(pool_), session,
                  refill = std::move(refill), done = std::move(done)](Result<void> ready) {
    if (ready) {
      done(std::shared_ptr<BackendSession>(session));
      // Once this open is answered: the pool never competes with the open it follows.
      PostRefill(io, pool, refill);
    } else {
      done(Propagate(ready));
    }
  });
  return pending;
}

void ShellBackend::Shutdown(std::function<void()> done) {
  shut_down_ = true;
  pool_->Drain(std::move(done));
}

}  // namespace ptybox::backend
