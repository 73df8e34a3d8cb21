// The mode fence of one owner (seeds/001): a change to a different effective mode is refused
// while the owner has an open session or a spawn in progress. Owned by the owner scope itself,
// so it outlives any provider reload that keeps the owner's sessions.
#pragma once

#include <optional>

#include "common/error.h"
#include "policy/mode.h"

namespace ptybox::policy {

// So a terminal opened with wider access cannot survive a downgrade. The daemon is
// single-threaded (one reactor): a check and its commit are atomic as long as no await
// separates them. Call SetMode() and publish the new mode in the same handler, and call
// BeginSpawn() in the same handler that resolved the spawn's mode. policy_set_mode is:
// Resolve() with the requested mode (above the ceiling: kPolicyDenied), Resolve() with
// requested_mode() for the current effective mode, then SetMode(requested, current).
class ModeFence final {
 public:
  explicit ModeFence(std::optional<Mode> requested = {});

  // The owner's policy_set_mode choice; nullopt: the policy files decide.
  [[nodiscard]] std::optional<Mode> requested_mode() const { return requested_; }

  // A spawn resolved its mode and is starting; ends with EndSpawn exactly once.
  void BeginSpawn();
  // The spawn settled: published (the session is now open) or failed/canceled.
  void EndSpawn(bool published);
  // A published session closed (its processes are gone).
  void SessionClosed();

  [[nodiscard]] int open_sessions() const { return open_sessions_; }
  [[nodiscard]] int spawns_in_progress() const { return spawns_in_progress_; }
  [[nodiscard]] bool fenced() const { return open_sessions_ + spawns_in_progress_ > 0; }

  // Records `requested` as the owner's mode. kModeFenced when it differs from
  // `current_effective` while fenced(); choosing the mode already in effect always succeeds.
  [[nodiscard]] Result<void> SetMode(Mode requested, Mode current_effective);

 private:
  std::optional<Mode> requested_;
  int open_sessions_ = 0;
  int spawns_in_progress_ = 0;
};

}  // namespace ptybox::policy
