// Counting open sessions and spawns in progress; refusing mode changes while either is non-zero.
#include "policy/mode_fence.h"

#include <string>

#include "common/log.h"

namespace ptybox::policy {

ModeFence::ModeFence(std::optional<Mode> requested) : requested_(requested) {}

void ModeFence::BeginSpawn() { ++spawns_in_progress_; }

void ModeFence::EndSpawn(bool published) {
  if (spawns_in_progress_ == 0) {
    // A caller bug; keep the counts meaningful rather than going negative.
    LogError("ModeFence::EndSpawn without a matching BeginSpawn");
    return;
  }
  --spawns_in_progress_;
  if (published) ++open_sessions_;
}

void ModeFence::SessionClosed() {
  if (open_sessions_ == 0) {
    LogError("ModeFence::SessionClosed without an open session");
    return;
  }
  --open_sessions_;
}

Result<void> ModeFence::SetMode(Mode requested, Mode current_effective) {
  if (requested != current_effective && fenced()) {
    auto plural = [](int n, const char* one, const char* many) {
      return std::to_string(n) + " " + (n == 1 ? one : many);
    };
    return Fail(ErrorKind::kModeFenced,
                "cannot change the mode from `" + std::string(ToString(current_effective)) +
                    "` to `" + std::string(ToString(requested)) + "` while this owner has " +
                    plural(open_sessions_, "open session", "open sessions") + " and " +
                    plural(spawns_in_progress_, "spawn", "spawns") +
                    " in progress: wait for terminal_open to settle, close the sessions "
                    "(terminal_close), then change the mode, so no terminal keeps the old "
                    "access");
  }
  requested_ = requested;
  return {};
}

}  // namespace ptybox::policy
