// Host-wide leases on the session ids of a root daemon: every ptybox process of the host (two
// daemons, a daemon and a root `ptybox run`) takes an id of `sessionIds` only by holding an
// exclusive flock on that id's file in a root-only directory, so no two live sessions share a
// host uid (per-uid limits such as inotify instances and RLIMIT_NPROC, and signals, stay within
// one session). The kernel drops the lock when its holder dies: no lease outlives its owner.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>

#include "common/error.h"
#include "common/unique_fd.h"
#include "policy/policy.h"

namespace ptybox::sandbox {

// Where the leases live: one file per id, each held locked for a session's life.
inline constexpr char kSessionIdLeaseParent[] = "/run/ptybox";
inline constexpr char kSessionIdLeaseDir[] = "session-ids";

// The pure choice: walks the `count` offsets of a range from `start` (mod count), wrapping once,
// and returns the first offset that `take` accepts; nullopt when every offset is refused.
// `take` is called at most `count` times, each offset once.
[[nodiscard]] std::optional<uint64_t> FirstTakenOffset(uint64_t count, uint64_t start,
                                                       const std::function<bool(uint64_t)>& take);

struct SessionIdLease {
  uint32_t id = 0;
  UniqueFd lock;  // holds the flock: the lease ends when this (and every copy) is closed
};

// Leases a free id of `range`: creates or validates /run/ptybox (root-owned, not a link, no
// group or other write) and /run/ptybox/session-ids (root-owned, not a link, mode 0700), opened
// by descriptor without following links; then tries `flock(LOCK_EX | LOCK_NB)` on each id's
// file from a rotating start. Every id leased: sandbox_unavailable naming `sessionIds`.
[[nodiscard]] Result<SessionIdLease> LeaseSessionId(const policy::SessionIdRange& range);

}  // namespace ptybox::sandbox
