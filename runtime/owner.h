// One owner scope: the sessions a client connection opened, its pending spawns and foreground
// sends (for cancellation), and its mode fence. Nothing here is visible to another owner.
// Over `serve --socket` an owner may outlive its connection (contract v1.1): it is then
// detached, held by the service until a new connection attaches with its token or its grace
// expires (runtime/service.h).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "policy/mode_fence.h"
#include "policy/policy.h"

namespace ptybox::runtime {

class Owner final {
 public:
  struct Entry {
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
        std::string token = {})
      : id_(id), label_(std::move(label)), fence_(initial_mode), token_(std::move(token)) {}

  [[nodiscard]] uint64_t id() const { return id_; }
  [[nodiscard]] const std::string& label() const { return label_; }
  // The owner token: a secret (never logged, never listed), compared with SecretEquals.
  [[nodiscard]] const std::string& token() const { return token_; }
  [[nodiscard]] policy::ModeFence& fence() { return fence_; }
  [[nodiscard]] const policy::ModeFence& fence() const { return fence_; }

  std::map<std::string, Entry> sessions;  // by session id
  std::map<std::string, std::shared_ptr<backend::PendingSpawn>> pending_opens;  // by request key
  std::map<std::string, std::string> foreground_sends;  // request key -> session id
  // Names of open and opening sessions (contract v1.1, "Names"): name -> session id, "" while
  // the open is in progress.
  std::map<std::string, std::string> names;
  std::map<std::string, Operation> operations;  // by operation id
  // Bumped when the connection ends: callbacks of its requests no longer touch the owner's
  // per-connection tables (request keys), which a later connection reuses.
  uint64_t connection_generation = 0;
  // The owner may outlive its connection (a `serve --socket` client), and is now detached.
  bool may_detach = false;
  bool detached = false;
  // The detach grace in force for this owner, fixed the first time its policy resolves (open,
  // owner_info): a disconnect never re-reads it, so no file written later (a repository file
  // with `version: 2`, say) changes how long this owner's detached sessions live.
  std::optional<int64_t> detach_grace_ms;
  // A terminal_open was accepted for this owner: owner_attach is refused from then on.
  bool opened_any = false;

  // Runs `done` once no spawn of this owner is in progress (at once when none is).
  void WhenSpawnsSettled(std::function<void()> done) {
    if (fence_.spawns_in_progress() == 0) {
      done();
      return;
    }
    spawn_waiters_.push_back(std::move(done));
  }
  // A spawn ended (fence().EndSpawn was called): wakes WhenSpawnsSettled waiters when it was
  // the last one.
  void SpawnSettled() {
    if (fence_.spawns_in_progress() != 0 || spawn_waiters_.empty()) return;
    std::vector<std::function<void()>> waiters;
    waiters.swap(spawn_waiters_);
    for (auto& waiter : waiters) waiter();
  }
  bool closed = false;
  // Told when this owner's effective policy changes (a mode change).
  std::function<void(const policy::ResolvedPolicy&)> on_policy_changed;

 private:
  uint64_t id_;
  std::string label_;
  policy::ModeFence fence_;
  std::string token_;
  std::vector<std::function<void()>> spawn_waiters_;
};

}  // namespace ptybox::runtime
