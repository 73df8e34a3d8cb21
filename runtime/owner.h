// One owner scope: the sessions a client connection opened, its opens in progress and
// foreground sends (for cancellation), its session names and its mode fence. Nothing here is
// visible to another owner. Over `serve --socket` an owner may outlive its connection (contract
// v1.1): it is then detached, held by the service until a new connection attaches with its
// token or its grace expires (runtime/service.h). The tables change only through the methods
// below, which keep them and the fence in step.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "common/error.h"
#include "policy/mode_fence.h"
#include "policy/policy.h"

namespace ptybox::runtime {

class OpenTicket;

class Owner final : public std::enable_shared_from_this<Owner> {
 public:
  // A published session of this owner.
  struct OwnedSession {
    std::string name;
    policy::Mode mode = policy::Mode::kWorkspaceWrite;
    std::string cwd;
    std::shared_ptr<backend::BackendSession> session;
  };

  // A background send (or a foreground one whose connection ended) that terminal_output reads.
  struct Operation {
    std::string session_id;
    std::weak_ptr<backend::SendOperation> op;
  };

  Owner(uint64_t id, std::string label, std::optional<policy::Mode> initial_mode,
        std::string token = {});

  [[nodiscard]] uint64_t id() const { return id_; }
  [[nodiscard]] const std::string& label() const { return label_; }
  // The owner token: a secret (never logged, never listed), compared with SecretEquals.
  [[nodiscard]] const std::string& token() const { return token_; }
  [[nodiscard]] const policy::ModeFence& fence() const { return fence_; }

  // Settings of the connection that holds the owner; no invariant ties them to the tables.
  // The owner may outlive its connection (a `serve --socket` client).
  bool may_detach = false;
  // Told when this owner's effective policy changes (a mode change).
  std::function<void(const policy::ResolvedPolicy&)> on_policy_changed;

  // --- Lifecycle ---
  [[nodiscard]] bool closed() const { return closed_; }
  [[nodiscard]] bool detached() const { return detached_; }
  // Nothing was ever opened here and nothing is open or opening: owner_attach may replace it.
  [[nodiscard]] bool pristine() const;
  // Bumped when the connection ends: callbacks of its requests no longer touch the owner's
  // per-connection tables (request keys), which a later connection reuses.
  [[nodiscard]] uint64_t connection_generation() const { return connection_generation_; }
  // Disconnect or grace expired: no session is published here any more.
  void MarkClosed() {
    closed_ = true;
    detached_ = false;
  }
  // The connection ended and the owner lives on: opens in progress are canceled with `reason`
  // (nobody would get their answer), foreground sends in flight become operations.
  void Detach(const std::string& reason);
  // A new connection holds the owner: operations no longer readable are forgotten.
  void Attach();
  // Cancels every open in progress with `reason`; their spawns end on their own.
  void CancelOpens(const std::string& reason);

  // The detach grace in force for this owner, fixed the first time its policy resolves (open,
  // owner_info): a disconnect never re-reads it, so no file written later (a repository file
  // with `version: 2`, say) changes how long this owner's detached sessions live.
  [[nodiscard]] std::optional<int64_t> detach_grace_ms() const { return detach_grace_ms_; }
  void FixDetachGrace(int64_t grace_ms);

  // --- Sessions ---
  [[nodiscard]] const std::map<std::string, OwnedSession>& sessions() const { return sessions_; }
  [[nodiscard]] const OwnedSession* FindSession(const std::string& session_id) const;
  // Sessions open plus opens in progress: what limits.maxSessions counts.
  [[nodiscard]] size_t open_and_opening() const { return sessions_.size() + opens_.size(); }
  // A published session's processes are gone: its name is free and the fence forgets it.
  void SessionClosed(const std::string& session_id);

  // --- Opens ---
  // Admits one terminal_open of `mode` (the fence counts it as a spawn from now on) and
  // reserves `name` (empty: none) among this owner's open and opening sessions: kNameTaken when
  // one holds it. The ticket ends the spawn exactly once.
  [[nodiscard]] Result<std::shared_ptr<OpenTicket>> BeginOpen(const std::string& name,
                                                              policy::Mode mode);
  // Cancels the open of request `request_key` with `reason`; false when none is in progress.
  bool CancelOpen(const std::string& request_key, const std::string& reason);
  // Runs `done` once no spawn of this owner is in progress (at once when none is).
  void WhenSpawnsSettled(std::function<void()> done);

  // --- Sends ---
  // A foreground send of request `request_key` runs on `session_id`; returns the connection
  // generation its settlement hands back to ForegroundSendSettled.
  uint64_t TrackForegroundSend(const std::string& request_key, const std::string& session_id);
  void ForegroundSendSettled(const std::string& request_key, uint64_t generation);
  // The session a foreground send of request `request_key` runs on.
  [[nodiscard]] std::optional<std::string> ForegroundSend(const std::string& request_key) const;
  // Keeps `op` readable by terminal_output under a new operation id, returned.
  std::string AddOperation(const std::string& session_id,
                           const std::shared_ptr<backend::SendOperation>& op);
  // Operations a session replaced are no longer readable: forgotten.
  void ForgetReplacedOperations();
  [[nodiscard]] const std::map<std::string, Operation>& operations() const { return operations_; }

  // --- Mode ---
  // Records the owner's mode choice through the fence (kModeFenced when refused).
  [[nodiscard]] Result<void> SetMode(policy::Mode requested, policy::Mode current_effective) {
    return fence_.SetMode(requested, current_effective);
  }

 private:
  friend class OpenTicket;
  // The open of `ticket` answered: it is no longer cancellable.
  void OpenSettled(const std::string& request_key, const backend::PendingSpawn* pending);
  void EndSpawn(policy::Mode mode, bool published);
  void FreeName(const std::string& name, const std::string& held_by);

  uint64_t id_;
  std::string label_;
  policy::ModeFence fence_;
  std::string token_;

  std::map<std::string, OwnedSession> sessions_;  // by session id
  // Opens in progress, by request key (for $/cancelRequest and limits.maxSessions).
  std::map<std::string, std::shared_ptr<backend::PendingSpawn>> opens_;
  std::map<std::string, std::string> foreground_sends_;  // request key -> session id
  // Names of open and opening sessions (contract v1.1, "Names"): name -> session id, "" while
  // the open is in progress.
  std::map<std::string, std::string> names_;
  std::map<std::string, Operation> operations_;  // by operation id
  std::vector<std::function<void()>> spawn_waiters_;

  uint64_t connection_generation_ = 0;
  bool detached_ = false;
  bool closed_ = false;
  // A terminal_open was accepted for this owner: owner_attach is refused from then on.
  bool opened_any_ = false;
  std::optional<int64_t> detach_grace_ms_;
};

// One terminal_open from its admission (Owner::BeginOpen) to its end: it holds the name
// reservation and counts as a spawn in the owner's fence until it is published or ended, so
// the fence's BeginSpawn and EndSpawn are paired by construction. Destroyed unpublished, it
// ends the spawn as failed.
class OpenTicket final {
 public:
  OpenTicket(std::weak_ptr<Owner> owner, std::string name, policy::Mode mode);
  OpenTicket(const OpenTicket&) = delete;
  OpenTicket& operator=(const OpenTicket&) = delete;
  ~OpenTicket();

  [[nodiscard]] const std::string& name() const { return name_; }
  [[nodiscard]] policy::Mode mode() const { return mode_; }

  // Makes the backend's spawn cancellable under `request_key` (CancelOpen, a disconnect);
  // nothing when the spawn has already answered.
  void Track(const std::string& request_key, std::shared_ptr<backend::PendingSpawn> pending);
  // The spawn answered. Returns the owner when it may still take the session (alive, not
  // closed); nullptr otherwise, and the spawn stays in progress until End().
  [[nodiscard]] std::shared_ptr<Owner> Settle();
  // The session is the owner's under `session_id`: its name now maps to it.
  void Publish(const std::string& session_id, std::shared_ptr<backend::BackendSession> session,
               std::string cwd);
  // The spawn failed or its session is closed: the name is free, the spawn no longer counts,
  // and WhenSpawnsSettled waiters run when it was the last. Idempotent.
  void End();

 private:
  std::weak_ptr<Owner> owner_;
  std::string name_;
  policy::Mode mode_;
  std::string request_key_;
  const backend::PendingSpawn* pending_ = nullptr;  // identity only, for OpenSettled
  bool settled_ = false;
  bool ended_ = false;
};

}  // namespace ptybox::runtime
