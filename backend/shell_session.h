// One bash session of the `shell` backend: its local terminal, the output decoder and
// scrollback, the prompt tracker, the startup readiness wait and the one active send. Created
// unpublished by ShellBackend::Spawn; published once the shell is ready.
#pragma once

#include <asio/io_context.hpp>
#include <asio/steady_timer.hpp>
#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/child_reaper.h"
#include "backend/local_terminal.h"
#include "backend/off_reactor.h"
#include "backend/proxy/network_proxy.h"
#include "backend/readiness/prompt_protocol.h"
#include "backend/readiness/readiness_driver.h"
#include "backend/readiness/rebootstrap.h"
#include "backend/send_render.h"
#include "backend/terminal/terminal_decoder.h"
#include "backend/warm_pool.h"
#include "sandbox/launcher.h"
#include "sandbox/repository_walk.h"

namespace ptybox::backend {

struct ShellBackendOptions {
  std::filesystem::path init_binary;  // ptybox-init
  std::filesystem::path bwrap;        // for confined modes
  std::string shell = "bash";
  std::filesystem::path daemon_socket;  // hidden inside confined sessions (docs/security.md)
  // The daemon's own files (the audit log, the recordings' directory): hidden inside confined
  // sessions like the socket, so a session never reads another's recording. An entry
  // /proc/self/fd/N is read at each spawn: the place of that descriptor's object now.
  std::vector<std::filesystem::path> daemon_files;
  // The warm pool's bound beside the daemon's sessions (backend/warm_pool.h); empty: none.
  std::function<size_t()> pool_headroom;
  // A ready pooled shell nobody claimed for this long is ended.
  std::chrono::milliseconds pool_idle{60'000};
  // The host's cgroup setup, made once by whoever starts sessions (the daemon: runtime/
  // daemon.cc) and shared by every session; null: no session cgroups (the subreaper rule).
  std::shared_ptr<const sandbox::CgroupHost> cgroups;
};

class ShellSession final : public BackendSession,
                           public std::enable_shared_from_this<ShellSession>,
                           private LocalTerminal::Listener,
                           private PromptTracker::Listener,
                           private SendHost {
 public:
  using ReadyCallback = std::function<void(Result<void>)>;

  ShellSession(asio::io_context& io, ChildReaper& reaper, const ShellBackendOptions& options,
               SpawnSpec spec);
  ~ShellSession() override;

  // Launches the shell; `ready` runs once: published-ready, or the error (resources cleaned).
  void Start(ReadyCallback ready);
  // Cancels an unpublished start (see PendingSpawn::Cancel).
  void CancelStart(std::string reason);

  // BackendSession.
  [[nodiscard]] const std::string& motd() const override { return motd_; }
  [[nodiscard]] std::optional<pid_t> pid() const override;
  Result<std::shared_ptr<SendOperation>> StartSend(SendRequest request) override;
  [[nodiscard]] std::shared_ptr<SendOperation> last_send() const override { return send_; }
  [[nodiscard]] bool busy() const override;
  [[nodiscard]] const policy::ResolvedPolicy& policy() const override { return spec_.policy; }
  [[nodiscard]] ReadResult Read(const ReadRequest& request) const override;
  [[nodiscard]] std::optional<ScreenSnapshot> Snapshot() const override;
  Result<void> WriteTyped(std::string bytes) override;
  Result<void> Resize(int rows, int columns) override;
  void Signal(int signal, std::function<void(Result<SignalResult>)> done) override;
  [[nodiscard]] SessionStatus Status() const override;
  [[nodiscard]] std::shared_ptr<SessionGits> gits() const override { return terminal_.gits(); }
  void Close(std::string reason, std::function<void(Result<SessionStatus>)> done) override;

  // The environment the shell starts with (for tests and docs).
  static std::vector<std::string> BuildEnvironment(const SpawnSpec& spec);
  // PTYBOX_SANDBOX, the sandbox a session runs in as one line for whoever is inside (a model
  // whose `curl` says only "Could not resolve host"): the mode and whether the network is
  // denied, and by what (docs/sandbox.md, "From inside a session").
  static std::string SandboxSummary(const policy::ResolvedPolicy& policy);

  // The warm pool (backend/warm_pool.h). Published after a startup settled at the verified
  // prompt, alive, nothing printed, nothing sent and no resize since.
  [[nodiscard]] bool QuietAtPrompt() const;
  // The spec asks for exactly this shell: the same policy, directory, environment and size,
  // and a launch built for it now (host facts collected afresh, this shell's own nonce) equals
  // the launch this shell was started with. Cheap: runs on the reactor at every claim.
  [[nodiscard]] bool MatchesLaunch(const SpawnSpec& spec) const;
  // What a claim must still prove before a workspace-write shell serves `spec`: the check a
  // launch makes once ready (sandbox::CheckRepositoriesAfterLaunch), made again now against the
  // pooled shell's own mounts, with the claim as the launch's start: every repository the roots
  // hold now (walked with each directory watched) is a mount point of the shell's session, or
  // was born after the claim began. Comparing a second walk with the shell's first one is not
  // enough: both can miss a repository a concurrent session keeps moving, or see one whose
  // mount in the session was detached (docs/security.md, "The warm pool"). Copied so that the
  // walk runs off the reactor; nullopt when the launch protected none by walking (read-only).
  struct RepositoryClaim {
    sandbox::SandboxSpec sandbox;
    std::filesystem::path init_binary;  // the launch's ptybox-init (what it covered)
    pid_t shell = 0;                    // the pooled shell (host pid): its mountinfo is read
    struct timespec claimed {};         // CLOCK_REALTIME when the claim began
    // Its private git directories: each must still match its host repository (a pooled
    // shell's copy is as old as the shell).
    std::shared_ptr<SessionGits> gits;
    // Walks the roots: off the reactor only. Why the shell must not serve, or nullopt.
    [[nodiscard]] std::optional<std::string> Refusal() const;
  };
  [[nodiscard]] std::optional<RepositoryClaim> RepositoryClaimFor(const SpawnSpec& spec) const;
  // The tap of the session that claimed this shell; sees every byte from now on.
  void SetOutputTap(std::function<void(std::string_view)> tap);
  // The audit of the session's proxy events (a pooled shell gets its session's at claim).
  void SetNetworkEvents(proxy::ProxyEvents events);

 private:
  // LocalTerminal::Listener.
  void OnTerminalReady() override;
  void OnStartFailed(Error error) override;
  void OnOutput(std::string_view bytes) override;
  void OnShellExit(SessionStatus status) override;
  void OnProxyListener(UniqueFd listener) override;
  void StopProxy();
  // PromptTracker::Listener.
  void OnMarker(const PromptMarker& marker) override;
  void OnCandidate() override;
  void OnInvalidated() override;
  void OnContinuation() override;
  // SendHost / ReadinessHost.
  TimePoint Now() override { return Clock::now(); }
  void ArmTimer(TimePoint at) override;
  void CancelTimer() override;
  TerminalHandle& terminal() override { return terminal_; }
  // A full screen: the alternate screen, or this send's output addressed the cursor (top draws
  // on the normal screen with cursor moves and erases).
  std::optional<bool> ShowsAlternateScreen() override {
    return decoder_.alternate_screen() ||
           (render_ && render_->Needed(decoder_.addressing_events()));
  }
  std::string PendingText() override { return decoder_.PendingText(); }
  std::string PendingTextUntrimmed() override { return decoder_.PendingTextUntrimmed(); }
  std::optional<std::string> AlternateScreen() override;
  SessionStatus CurrentStatus() override { return terminal_.status(); }
  bool InSignalTransition(const ForegroundFacts& facts) override;
  void After(Millis delay, std::function<void()> fn) override;
  void OnSendBoundary() override;
  std::optional<RenderedViewport> RenderSend(bool at_prompt) override;
  bool WillRender() override;
  std::optional<ForegroundFacts> IdlePromptFacts() override;
  bool OnlyForeignInputOnLine(const ForegroundFacts& facts) override;
  void OnInputWritten(std::string_view bytes) override;
  void OnSendSettled(const std::optional<ForegroundFacts>& verifying) override;
  std::vector<std::string> LinesSinceLastResult(std::string* pending_at_result) override;
  void ReplayIdlePrompt() override;
  // No send takes the terminal's events (none started, it has not reached its boundary yet, or
  // it settled).
  [[nodiscard]] bool NoActiveSend() const {
    return !send_ || send_->settled() || !send_->past_boundary();
  }
  // Keeps `verifying` when it shows the shell alone in its group, waiting at its prompt.
  void RememberIdlePrompt(const std::optional<ForegroundFacts>& verifying);

  // Everything the launch depends on, collected now (a pure function of the spec, the options,
  // the nonce and the host facts ApplyPolicy collects).
  [[nodiscard]] sandbox::LaunchSpec BuildLaunch(const SpawnSpec& spec) const;
  void OnTimer();
  void OnStartupSettled(WaitReason reason);
  // The shell replaced itself by a bash (`exec bash`) that has no hook yet: its exec identity
  // differs from the one the hook was given to, and it runs the bash ptybox started.
  [[nodiscard]] bool NeedsRebootstrap();
  // Gives the hook back before `op` starts (backend/readiness/rebootstrap.h): one look, the
  // bootstrap line, looks until the shell alone waits in the bootstrap's read of its pipe, the
  // fresh nonce written into that pipe, the marker. `op` starts when that ends, whichever way.
  void BeginRebootstrap(std::shared_ptr<SendOperation> op);
  void RebootstrapLook();
  void OnRebootstrapFacts(ForegroundFacts facts);
  // Starts the waiting send: at once, or on the next turn of the reactor (from inside the
  // decoder's callbacks).
  void EndRebootstrap(bool hooked, std::string why, bool start_now = true);
  void FailStart(Error error);
  void FinishStart(Result<void> result);
  void CleanUpAfterExit();

  asio::io_context& io_;
  ShellBackendOptions options_;
  SpawnSpec spec_;
  std::string nonce_;
  LocalTerminal terminal_;
  // Network by name: the session's proxy, from init's listener until the shell ends.
  std::shared_ptr<proxy::NetworkProxy> proxy_;
  TerminalDecoder decoder_;
  PromptTracker tracker_;
  asio::steady_timer timer_;

  // Startup.
  std::optional<ReadinessDriver> startup_;
  TimePoint start_time_{};
  ReadinessTimings startup_timings_;
  ReadyCallback ready_;
  bool published_ = false;
  std::string pending_before_marker_;
  TimePoint last_prompt_at_{};  // the last marker + PS1 decoded
  int last_marker_exit_ = 0;    // the exit status the last marker carried
  // The facts of the look that verified the shell idle at its prompt when the last send (or
  // the startup) settled there; dropped by any output, signal or resize since.
  std::optional<ForegroundFacts> idle_prompt_facts_;
  // Bytes written by sends or typed keystrokes may still be unfinished on the line: the last
  // send's input did not end a line (Enter), or a person typed since.
  bool written_line_open_ = false;
  sandbox::LaunchSpec launched_;      // what was launched (the warm pool compares it)
  bool ready_at_prompt_ = false;      // the startup settled at the verified prompt
  bool touched_after_ready_ = false;  // output, a send or a resize after the startup

  // Sends.
  std::shared_ptr<SendOperation> send_;
  bool slot_held_ = false;
  // Where the last send's result ended (scrollback offset and the unterminated line then), and
  // a prompt (marker, the line before it, whether its candidate followed) that came since: a
  // terminal_wait starts from them.
  std::optional<uint64_t> result_end_;
  std::string result_pending_;
  std::optional<std::pair<PromptMarker, std::string>> idle_marker_;
  bool idle_candidate_ = false;
  // The active send's raw output since its write boundary, until it settles.
  std::optional<SendRender> render_;

  // `exec bash`: the exec identity of the shell that holds the hook, the bash ptybox starts, and
  // a re-bootstrap under way (its phase, deadline and the send that waits for it).
  std::optional<ExecIdentity> hooked_exec_;
  std::optional<FileIdentity> bash_binary_;
  struct Rebootstrap {
    // Declared so that clang sees it constructible inside ShellSession (its implicit one waits
    // for the enclosing class, and std::optional::emplace asked too early).
    Rebootstrap() {}  // NOLINT(modernize-use-equals-default)
    enum class Phase { kTypeLine, kPullNonce, kPrompt } phase = Phase::kTypeLine;
    ExecIdentity exec;
    // What the shell's descriptor kExecPs1Fd was before the line: the pipe must be new.
    std::string pipe_before;
    // The line execs the unreadable copy (a shell that ran non-dumpable): the prompt must come
    // from an image of the exec machinery.
    bool reexec = false;
    TimePoint deadline{};
    std::shared_ptr<SendOperation> op;
  };
  std::optional<Rebootstrap> rebootstrap_;

  // Close.
  bool closing_ = false;
  bool closed_ = false;
  std::vector<std::function<void(Result<SessionStatus>)>> close_waiters_;
  std::string motd_;
};

class ShellBackend final : public Backend {
 public:
  ShellBackend(asio::io_context& io, ChildReaper& reaper, ShellBackendOptions options);
  ~ShellBackend() override;
  [[nodiscard]] std::string_view type() const override { return "shell"; }
  // Claims a matching pooled shell when there is one, else starts a shell; either way the pool
  // is refilled for this spec afterwards, off the open's path. A workspace-write claim walks
  // the writable roots off the reactor first; a shell that no longer protects what is there
  // is discarded and the open starts its own.
  std::shared_ptr<PendingSpawn> Spawn(SpawnSpec spec, SpawnCallback done) override;
  void Shutdown(std::function<void()> done) override;
  [[nodiscard]] WarmPool::Counters pool_counters() const { return pool_->counters(); }

 private:
  struct PendingClaim;
  std::shared_ptr<PendingSpawn> SpawnCold(SpawnSpec spec, SpawnCallback done);
  void OnClaimWalked(uint64_t id, std::optional<std::string> refused);

  asio::io_context& io_;
  ChildReaper& reaper_;
  ShellBackendOptions options_;
  std::shared_ptr<WarmPool> pool_;
  // Claims whose walk runs off the reactor, by id (the walk's result carries only the id).
  std::map<uint64_t, std::unique_ptr<PendingClaim>> claims_;
  uint64_t next_claim_ = 1;
  // Shutdown was called: Spawn refuses (the pool's drain would not await a shell started now).
  bool shut_down_ = false;
  OffReactor off_reactor_;
};

}  // namespace ptybox::backend
