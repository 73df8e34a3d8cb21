// Landlock's walls around UNIX sockets, applied by ptybox-init to itself before it starts the
// shell of a confined session: the session reaches no abstract socket of the host (Landlock ABI
// 6, Linux 6.12) and, where the kernel has it, no pathname socket it did not create itself
// (LANDLOCK_ACCESS_FS_RESOLVE_UNIX, ABI 9, Linux 7.1). Sockets among the session's own
// processes keep working: both walls only refuse servers created outside the session's domain.
#pragma once

#include <string>

#include "common/error.h"

namespace ptybox::sandbox {

// What a kernel with Landlock ABI `abi` (0: no Landlock) lets a session hold.
struct UnixSocketWalls {
  int abi = 0;
  bool abstract_scoped = false;      // ABI 6: LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET
  bool pathname_restricted = false;  // ABI 9: LANDLOCK_ACCESS_FS_RESOLVE_UNIX with no rule
  [[nodiscard]] bool Complete() const { return abstract_scoped && pathname_restricted; }
};
[[nodiscard]] UnixSocketWalls UnixSocketWallsFor(int abi);

// One line for doctor and the docs: what holds, what does not, and why.
[[nodiscard]] std::string DescribeUnixSocketWalls(const UnixSocketWalls& walls);

// The running kernel's Landlock ABI: 0 when Landlock is not built in or not enabled at boot
// (ENOSYS, EOPNOTSUPP), an error for anything else.
[[nodiscard]] Result<int> LandlockAbi();

// Restricts the calling thread and its future children (setting no_new_privs, which bwrap has
// set already) with every UNIX-socket wall the kernel has; returns what now holds. Nothing to apply
// is not an error (walls.abi == 0 or < 6): doctor says so.
[[nodiscard]] Result<UnixSocketWalls> RestrictUnixSockets();

}  // namespace ptybox::sandbox
