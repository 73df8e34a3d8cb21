// The PTY service: mints session ids, scopes sessions to their owner (one owner per client
// connection), holds each owner's mode fence, resolves policy for every spawn and publishes a
// session only after its backend spawn succeeded. Protocol servers translate to and from it.
// It takes its backends (one per session type) from whoever builds it: the daemon gives it the
// bash backend, tests/runtime/service_test.cc a fake.
#pragma once

#include <asio/io_context.hpp>
#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/off_reactor.h"
#include "backend/shell_session.h"
#include "common/error.h"
#include "policy/mode_fence.h"
#include "policy/policy.h"
#include "policy/resolver.h"
#include "runtime/audit/audit_sink.h"
#include "runtime/watch_hub.h"

namespace ptybox::runtime {

// A 128-bit random id (32 hex digits after "pty-"): names never authorize anything.
std::string NewSessionId();

// Sessions open or opening across every owner of one daemon (serve --max-sessions), on top of
// each owner's limits.maxSessions.
inline constexpr size_t kDefaultMaxTotalSessions = 256;

struct ServiceOptions {
  size_t max_total_sessions = kDefaultMaxTotalSessions;
  std::optional<std::filesystem::path> operator_policy;  // --policy FILE
  std::filesystem::path default_operator_policy = policy::kDefaultOperatorPolicy;
  std::filesystem::path workspace;  // --workspace or the current directory
  bool workspace_from_cli = false;
  std::optional<policy::Mode> mode_override;  // --mode (ptybox run) / initial owner mode
  // --network, --writable, --env, --hide: for serve and mcp, every owner's sessions (the
  // daemon's command line is the operator's invocation).
  policy::CommandLinePolicy command_line;
  backend::ShellBackendOptions shell;
  std::shared_ptr<AuditSink> audit;  // --audit-log, --record; nullptr: nothing is recorded
};

// The policy inputs of this daemon's (or `ptybox run`'s) command line, with the mode asked for.
policy::ResolveInputs ResolveInputsFrom(const ServiceOptions& options,
                                        std::optional<policy::Mode> requested_mode);

// terminal_open's default terminal size.
inline constexpr int kDefaultColumns = 120;
inline constexpr int kDefaultRows = 40;

// terminal_open's params, validated by the contract table (runtime/methods.h): sizes within
// the screen's bounds, env by policy/schema.h's rules.
struct OpenParams {
  std::string type = "shell";
  std::optional<std::string> name;
  std::optional<std::string> cwd;
  int columns = kDefaultColumns;
  int rows = kDefaultRows;
  std::map<std::string, std::string> env;
  std::optional<int64_t> timeout_ms;
};

struct OpenResult {
  std::string session_id;
  std::string name;
  std::string motd;
  std::optional<pid_t> pid;
  policy::Mode mode = policy::Mode::kWorkspaceWrite;
  std::string cwd;
};

struct SessionInfo {
  std::string session_id;
  std::string name;
  policy::Mode mode = policy::Mode::kWorkspaceWrite;
  bool busy = false;
  backend::SessionStatus status;
  std::optional<pid_t> pid;
};

class Owner;

// owner_info (contract v1.1).
struct OwnerInfo {
  std::string token;
  int64_t detach_grace_ms = 0;
};

// owner_attach (contract v1.1): the attached owner's sessions and readable operations.
struct AttachResult {
  std::shared_ptr<Owner> owner;
  std::vector<SessionInfo> sessions;
  std::vector<std::pair<std::string, std::string>> operations;  // operation id, session id
};

// terminal_watch (an extension, docs/protocol.md "Watching a session"): the watch and the
// session's screen at the moment it began; every later byte reaches the watcher's sink.
struct WatchStart {
  uint64_t watch_id = 0;
  SessionInfo session;
  backend::ScreenSnapshot screen;
};

struct SendOutcome {
  std::optional<backend::SendResult> result;  // foreground
  std::optional<std::string> operation_id;    // background
};

// Called when an owner's effective policy changed (MCP announces it).
using PolicyChanged = std::function<void(const policy::ResolvedPolicy&)>;

// The backends of one service, by session type (terminal_open's `type`).
using Backends = std::map<std::string, std::unique_ptr<backend::Backend>, std::less<>>;
// Builds the backends when the service is constructed. `headroom` tells how many more sessions
// the daemon's limit (ServiceOptions::max_total_sessions) leaves room for now: a backend that
// keeps sessions of its own beside the service's (the warm pool) stays within it.
using MakeBackends = std::function<Backends(std::function<size_t()> headroom)>;
// Starts a one-shot timer that calls `fire` after `delay` unless the returned handle is
// destroyed first (a detached owner's grace). Empty: the reactor's steady clock; a test
// injects its own to fire it when it chooses.
using StartTimer = std::function<std::shared_ptr<void>(std::chrono::milliseconds delay,
                                                       std::function<void()> fire)>;

class PtyService final {
 public:
  PtyService(asio::io_context& io, ServiceOptions options, const MakeBackends& make_backends,
             StartTimer start_timer = {});
  PtyService(const PtyService&) = delete;
  PtyService& operator=(const PtyService&) = delete;
  ~PtyService();

  // One owner per client connection.
  std::shared_ptr<Owner> OpenOwner(std::string label);
  // Disconnect: cancels pending spawns, closes every session of the owner, awaited.
  void CloseOwner(const std::shared_ptr<Owner>& owner, std::function<void()> done);
  // The connection of an owner ended. When the owner may outlive it (a socket client) and its
  // policy's limits.detachGraceMs is above 0, the owner is detached: its sessions keep running,
  // a foreground send in flight becomes an operation terminal_output reads, and the grace's end
  // closes it as CloseOwner does; true then. False: nothing was done, call CloseOwner.
  bool DetachOwner(const std::shared_ptr<Owner>& owner);
  // owner_attach: the detached owner with `token`, now attached (its grace stopped). not_found
  // when no detached owner has it, busy when its owner still has a live connection.
  Result<AttachResult> AttachOwner(const std::string& token);
  OwnerInfo Info(Owner& owner);

  // Daemon shutdown: closes every owner.
  void Shutdown(std::function<void()> done);

  // Methods of the contract. `request_key` identifies the request for cancellation.
  void Open(const std::shared_ptr<Owner>& owner, OpenParams params, std::string request_key,
            std::function<void(Result<OpenResult>)> done);
  void Send(const std::shared_ptr<Owner>& owner, const std::string& session_id,
            backend::SendRequest request, bool background, std::string request_key,
            std::function<void(Result<SendOutcome>)> done);
  Result<backend::SendRead> Output(Owner& owner, const std::string& session_id);
  Result<bool> Cancel(Owner& owner, const std::string& session_id);
  Result<backend::ReadResult> Read(Owner& owner, const std::string& session_id,
                                   const backend::ReadRequest& request);
  // Sizes are within the screen's bounds (the contract table checks them).
  Result<void> Resize(Owner& owner, const std::string& session_id, int columns, int rows);
  void Signal(Owner& owner, const std::string& session_id, int signal,
              std::function<void(Result<backend::SignalResult>)> done);
  Result<SessionInfo> Status(Owner& owner, const std::string& session_id);
  void Close(const std::shared_ptr<Owner>& owner, const std::string& session_id, std::string reason,
             std::function<void(Result<backend::SessionStatus>)> done);
  std::vector<SessionInfo> List(Owner& owner);
  Result<policy::ResolvedPolicy> ResolvePolicy(Owner& owner);
  // owner_sessions (`ptybox ls`): terminal_list of the owner holding `token`, live or detached.
  Result<std::vector<SessionInfo>> ListByToken(const std::string& token);
  // terminal_watch: `watcher` watches `session_id` of its own owner, or of the owner holding
  // `token`. `make_sink` builds the sink once the watch id is known; the snapshot and the
  // registration happen in one reactor turn, so no byte falls between them.
  Result<WatchStart> Watch(Owner& watcher, const std::string& session_id,
                           const std::optional<std::string>& token,
                           const std::function<WatchHub::Watcher(uint64_t watch_id)>& make_sink);
  // terminal_unwatch, or the watcher's connection ended: not_found for a watch that is not
  // `watcher`'s (or already ended).
  Result<void> Unwatch(Owner& watcher, uint64_t watch_id);
  // `ptybox attach --write`: the watch `watch_id` of `watcher` takes its session over. While it
  // holds it, the agent's terminal_send and terminal_wait answer `busy` saying a person holds
  // it; `busy` now while a send is active (the person retries once it settled) or another
  // person holds it. Released by Release, and by the end of the watch (detach, disconnect).
  Result<void> TakeOver(Owner& watcher, uint64_t watch_id);
  Result<void> Release(Owner& watcher, uint64_t watch_id);
  // The holder's keystrokes, written to the terminal as they are.
  Result<void> Type(Owner& watcher, uint64_t watch_id, std::string bytes);
  Result<policy::Mode> SetMode(Owner& owner, policy::Mode mode);

  // $/cancelRequest or notifications/cancelled: a pending open is canceled with `reason`; a
  // foreground send is canceled like terminal_cancel. False when nothing matched.
  bool CancelRequest(Owner& owner, const std::string& request_key, const std::string& reason);

  // SIGHUP: policy files are read again on the next spawn; live sessions and fences stay.
  void Reload();

  // Sessions open plus opening, across every owner.
  [[nodiscard]] size_t session_count() const;
  // Owners detached and awaiting owner_attach: each holds a place of serve --max-connections
  // until it is attached or its grace ends (docs/security.md, "Daemon robustness").
  [[nodiscard]] size_t detached_owner_count() const { return detached_.size(); }

 private:
  Result<policy::ResolvedPolicy> Resolve(Owner& owner, std::optional<policy::Mode> requested) const;
  Result<std::shared_ptr<backend::BackendSession>> Find(Owner& owner, const std::string& id);
  Result<policy::Mode> SetModeChecked(Owner& owner, policy::Mode mode);
  // One terminal_open from its admission to its answer (service.cc).
  struct OpenInFlight;
  // terminal_open's checks in the order the contract answers them, then the owner's ticket:
  // the backend to spawn with, `spec` and `open` filled.
  Result<backend::Backend*> Admit(Owner& owner, OpenParams& params, backend::SpawnSpec& spec,
                                  OpenInFlight& open);
  // The backend answered: publish the session, or end the open.
  void OnSpawned(OpenInFlight& open, Result<std::shared_ptr<backend::BackendSession>> spawned);
  // Fixes an owner's detach grace from the operator's file alone when its policy never
  // resolved (a repository file, broken or naming a grace, never decides it); false when the
  // operator's file cannot be read.
  bool FixOperatorDetachGrace(Owner& owner) const;
  // A detached owner's grace ended with no owner_attach: closed as on a disconnect.
  void ExpireDetached(uint64_t owner_id);
  // The live (or detached) owner holding `token`, each token compared in constant time;
  // nullptr when none does.
  std::shared_ptr<Owner> OwnerWithToken(const std::string& token) const;
  // A watch ended (`end`): forgotten and audited.
  void WatchEnded(uint64_t watch_id, WatchEnd end);
  // "the available type is ..." for an unknown terminal_open type.
  [[nodiscard]] std::string AvailableTypes() const;

  asio::io_context& io_;
  ServiceOptions options_;
  Backends backends_;
  std::vector<std::weak_ptr<Owner>> owners_;
  // Detached owners, held here until attached or expired (their grace timer), by owner id.
  struct Detached {
    std::shared_ptr<Owner> owner;
    std::shared_ptr<void> expiry;  // the grace's timer
  };
  std::map<uint64_t, Detached> detached_;
  StartTimer start_timer_;
  // The copy-back of sessions' private git directories after each send (backend/git_copy_back.h):
  // a foreground send is answered once its copy-back is done.
  backend::OffReactor git_copy_back_{io_};
  // What runs once each copy-back is done (the send's answer), kept here on the reactor by id:
  // a copy-back's delivery is destroyed on its worker thread when the service is gone first
  // (backend/off_reactor.h), so it carries only the id, never the answer's callbacks.
  std::map<uint64_t, std::function<void()>> copy_back_waiters_;
  uint64_t next_copy_back_ = 1;
  uint64_t next_owner_ = 1;
  // Each published session's output hub (its watchers), by session id, until it is closed.
  std::map<std::string, std::shared_ptr<WatchHub>> hubs_;
  struct WatchEntry {
    uint64_t watcher = 0;        // the watching owner's id
    uint64_t session_owner = 0;  // the watched session's owner's id
    std::string session_id;
  };
  std::map<uint64_t, WatchEntry> watches_;  // by watch id
  // Sessions a person took over, by session id: the holding watch's id.
  std::map<std::string, uint64_t> holds_;
  // The watch `watch_id` of `watcher`, or not_found.
  Result<WatchEntry*> OwnWatch(Owner& watcher, uint64_t watch_id);
  uint64_t next_watch_ = 1;
  std::shared_ptr<AuditSink> audit_;  // never null (NoAudit())
  // Shutdown began: no open is admitted any more (the backends' drain follows the owners').
  bool stopping_ = false;
};

}  // namespace ptybox::runtime
