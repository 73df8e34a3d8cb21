// The mode fence of one owner (docs/policy.md, "Changing modes safely"): a change to a different
// effective mode is refused while the owner has an open session or a spawn in progress, and so is
// any mode change that would leave a live session or spawn in another mode than the one chosen.
// Owned by the owner scope itself, so it outlives any provider reload that keeps the owner's
// sessions.
#pragma once

#include <array>
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
//
// The fence remembers the mode of every live session and spawn, not only how many there are:
// the effective mode can change under it (a repository file written by a session), and a
// change "to the mode already in effect" must still be refused while a session of another mode
// lives on.
class ModeFence final {
 public:
  explicit ModeFence(std::optional<Mode> requested = {});

  // The owner's policy_set_mode choice; nullopt: the policy files decide.
  [[nodiscard]] std::optional<Mode> requested_mode() const { return requested_; }

  // A spawn resolved `mode` and is starting; ends with EndSpawn (same mode) exactly once.
  void BeginSpawn(Mode mode);
  // The spawn settled: published (the session is now open) or failed/canceled.
  void EndSpawn(Mode mode, bool published);
  // A published session of `mode` closed (its processes are gone).
  void SessionClosed(Mode mode);

  [[nodiscard]] int open_sessions() const { return Sum(open_); }
  [[nodiscard]] int spawns_in_progress() const { return Sum(spawning_); }
  [[nodiscard]] bool fenced() const { return open_sessions() + spawns_in_progress() > 0; }
  // True when a live session or spawn runs in a mode other than `mode`.
  [[nodiscard]] bool LiveOtherThan(Mode mode) const;

  // Records `requested` as the owner's mode. kModeFenced while fenced() when it differs from
  // `current_effective` or from the mode of any live session or spawn; otherwise succeeds.
  [[nodiscard]] Result<void> SetMode(Mode requested, Mode current_effective);

 private:
  using Counts = std::array<int, 3>;  // by Mode
  static int Sum(const Counts& counts) { return counts[0] + counts[1] + counts[2]; }
  static int& At(Counts& counts, Mode mode) { return counts[static_cast<size_t>(mode)]; }

  std::optional<Mode> requested_;
  Counts open_{};
  Counts spawning_{};
};

}  // namespace ptybox::policy
