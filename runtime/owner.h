// One owner scope: the sessions a client connection opened, its pending spawns and foreground
// sends (for cancellation), and its mode fence. Nothing here is visible to another owner.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
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

  Owner(uint64_t id, std::string label, std::optional<policy::Mode> initial_mode)
      : id_(id), label_(std::move(label)), fence_(initial_mode) {}

  [[nodiscard]] uint64_t id() const { return id_; }
  [[nodiscard]] const std::string& label() const { return label_; }
  [[nodiscard]] policy::ModeFence& fence() { return fence_; }
  [[nodiscard]] const policy::ModeFence& fence() const { return fence_; }

  std::map<std::string, Entry> sessions;  // by session id
  std::map<std::string, std::shared_ptr<backend::PendingSpawn>> pending_opens;  // by request key
  std::map<std::string, std::string> foreground_sends;  // request key -> session id

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
  std::vector<std::function<void()>> spawn_waiters_;
};

}  // namespace ptybox::runtime
