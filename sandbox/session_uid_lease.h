// Host-wide leases on the session uids of a root daemon: every ptybox process of the host (two
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

// Where the leases live: one file per uid, each held locked for a session's life (the directory
// keeps the name `session-ids`, so daemons of every version see each other's leases).
inline constexpr char kSessionUidLeaseParent[] = "/run/ptybox";
inline constexpr char kSessionUidLeaseDir[] = "session-ids";

// The pure choice: walks the `count` offsets of a range from `start` (mod count), wrapping once,
// and returns the first offset that `take` accepts; nullopt when every offset is refused.
// `take` is called at most `count` times, each offset once.
[[nodiscard]] std::optional<uint64_t> FirstTakenOffset(uint64_t count, uint64_t start,
                                                       const std::function<bool(uint64_t)>& take);

struct SessionUidLease {
  policy::SessionUid uid;
  UniqueFd lock;  // holds the flock: the lease ends when this (and every copy) is closed
};

// Leases a free id of `range`: creates or validates /run/ptybox (root-owned, not a link, no
// group or other write) and /run/ptybox/session-ids (root-owned, not a link, mode 0700), opened
// by descriptor without following links; then tries `flock(LOCK_EX | LOCK_NB)` on each id's
// file from a rotating start. Every id leased: sandbox_unavailable naming `sessionIds`.
[[nodiscard]] Result<SessionUidLease> LeaseSessionUid(const policy::SessionUidRange& range);

}  // namespace ptybox::sandbox
