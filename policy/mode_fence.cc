// Counting open sessions and spawns by mode; refusing mode changes that would leave one of them
// in another mode than the owner's.
#include "policy/mode_fence.h"

#include <string>
#include <vector>

#include "common/join.h"
#include "common/log.h"
#include "policy/mode_names.h"

namespace ptybox::policy {
namespace {

std::string Plural(int n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

}  // namespace

ModeFence::ModeFence(std::optional<Mode> requested) : requested_(requested) {}

void ModeFence::BeginSpawn(Mode mode) { ++At(spawning_, mode); }

void ModeFence::EndSpawn(Mode mode, bool published) {
  if (At(spawning_, mode) == 0) {
    // A caller bug; keep the counts meaningful rather than going negative.
    LogError("ModeFence::EndSpawn without a matching BeginSpawn");
    return;
  }
  --At(spawning_, mode);
  if (published) ++At(open_, mode);
}

void ModeFence::SessionClosed(Mode mode) {
  if (At(open_, mode) == 0) {
    LogError("ModeFence::SessionClosed without an open session");
    return;
  }
  --At(open_, mode);
}

bool ModeFence::LiveOtherThan(Mode mode) const {
  for (Mode other : kModes) {
    if (other == mode) continue;
    if (open_[static_cast<size_t>(other)] + spawning_[static_cast<size_t>(other)] > 0) return true;
  }
  return false;
}

Result<void> ModeFence::SetMode(Mode requested, Mode current_effective) {
  const std::string counts = Plural(open_sessions(), "open session", "open sessions") + " and " +
                             Plural(spawns_in_progress(), "spawn", "spawns") + " in progress";
  if (requested != current_effective && fenced()) {
    return Fail(ErrorKind::kModeFenced,
                "cannot change the mode from `" + std::string(ToString(current_effective)) +
                    "` to `" + std::string(ToString(requested)) + "` while this owner has " +
                    counts +
                    ": wait for terminal_open to settle, close the sessions "
                    "(terminal_close), then change the mode, so no terminal keeps the old "
                    "access");
  }
  if (LiveOtherThan(requested)) {
    // The effective mode changed under live sessions (a repository file): choosing it now
    // would claim a mode that a live terminal does not have.
    std::vector<std::string> live;
    for (Mode other : kModes) {
      if (other == requested) continue;
      const size_t at = static_cast<size_t>(other);
      if (open_[at] + spawning_[at] == 0) continue;
      live.push_back("`" + std::string(ToString(other)) + "`");
    }
    const std::string modes = Join(live);
    return Fail(ErrorKind::kModeFenced,
                "cannot set the mode `" + std::string(ToString(requested)) +
                    "` while this owner has " + counts + " in " + modes +
                    ": close those sessions (terminal_close) and wait for terminal_open to "
                    "settle, then set the mode, so no terminal keeps other access");
  }
  requested_ = requested;
  return {};
}

}  // namespace ptybox::policy
