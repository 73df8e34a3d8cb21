// Landlock through raw syscalls: Debian 12's headers know neither the scoped member of the
// ruleset attribute (ABI 6) nor LANDLOCK_ACCESS_FS_RESOLVE_UNIX (ABI 9), so both are defined
// here with the kernel's values.
#include "sandbox/init/landlock.h"

#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>

#include "common/propagate.h"
#include "common/unique_fd.h"

namespace ptybox::sandbox {
namespace {

#ifndef __NR_landlock_create_ruleset
#define __NR_landlock_create_ruleset 444
#endif
#ifndef __NR_landlock_restrict_self
#define __NR_landlock_restrict_self 446
#endif

constexpr uint32_t kCreateRulesetVersion = 1U << 0;       // LANDLOCK_CREATE_RULESET_VERSION
constexpr uint64_t kScopeAbstractUnixSocket = 1ULL << 0;  // LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET
constexpr uint64_t kAccessFsResolveUnix = 1ULL << 16;     // LANDLOCK_ACCESS_FS_RESOLVE_UNIX
constexpr int kAbiScopes = 6;
constexpr int kAbiResolveUnix = 9;

// struct landlock_ruleset_attr as of ABI 6 (the kernel accepts any size it knows a prefix of).
struct RulesetAttr {
  uint64_t handled_access_fs;
  uint64_t handled_access_net;
  uint64_t scoped;
};

}  // namespace

UnixSocketWalls UnixSocketWallsFor(int abi) {
  UnixSocketWalls walls;
  walls.abi = abi < 0 ? 0 : abi;
  walls.abstract_scoped = abi >= kAbiScopes;
  walls.pathname_restricted = abi >= kAbiResolveUnix;
  return walls;
}

std::string DescribeUnixSocketWalls(const UnixSocketWalls& walls) {
  std::string text = walls.abi == 0 ? std::string("no Landlock on this kernel")
                                    : "Landlock ABI " + std::to_string(walls.abi);
  text += walls.abstract_scoped
              ? "; the host's abstract UNIX sockets are out of reach of a confined session"
              : "; the host's abstract UNIX sockets are out of reach only with the network "
                "denied (a private network namespace; needs Landlock ABI 6, Linux 6.12, for "
                "network: allow)";
  text += walls.pathname_restricted
              ? "; pathname sockets of host services are out of reach"
              : "; pathname sockets bound before a session starts are covered at its launch, "
                "but one a host service binds later that the session can see and whose "
                "permissions let any user connect (e.g. a 0666 socket under /srv) stays "
                "reachable until the session ends: closing that needs "
                "LANDLOCK_ACCESS_FS_RESOLVE_UNIX (Landlock ABI 9, Linux 7.1), or hide its "
                "directory with the policy's `hide`";
  return text;
}

Result<int> LandlockAbi() {
  const long abi = ::syscall(__NR_landlock_create_ruleset, nullptr, 0, kCreateRulesetVersion);
  if (abi >= 0) return static_cast<int>(abi);
  if (errno == ENOSYS || errno == EOPNOTSUPP) return 0;
  return std::unexpected(
      Error::FromErrno(ErrorKind::kSandboxUnavailable, "landlock_create_ruleset(VERSION)"));
}

Result<UnixSocketWalls> RestrictUnixSockets() {
  Result<int> abi = LandlockAbi();
  if (!abi) return Propagate(abi);
  const UnixSocketWalls walls = UnixSocketWallsFor(*abi);
  if (!walls.abstract_scoped && !walls.pathname_restricted) return walls;
  RulesetAttr attr{};
  if (walls.pathname_restricted) attr.handled_access_fs = kAccessFsResolveUnix;
  if (walls.abstract_scoped) attr.scoped = kScopeAbstractUnixSocket;
  // No rule is added: no pathname socket created outside the session's domain is allowed.
  UniqueFd ruleset(
      static_cast<int>(::syscall(__NR_landlock_create_ruleset, &attr, sizeof attr, 0)));
  if (!ruleset) {
    return std::unexpected(
        Error::FromErrno(ErrorKind::kSandboxUnavailable, "landlock_create_ruleset"));
  }
  // Landlock needs no_new_privs without CAP_SYS_ADMIN; bwrap has set it already.
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
    return std::unexpected(
        Error::FromErrno(ErrorKind::kSandboxUnavailable, "prctl(PR_SET_NO_NEW_PRIVS)"));
  }
  if (::syscall(__NR_landlock_restrict_self, ruleset.Get(), 0) != 0) {
    return std::unexpected(Error::FromErrno(ErrorKind::kSandboxUnavailable,
                                            "landlock_restrict_self (no_new_privs must be set)"));
  }
  return walls;
}

}  // namespace ptybox::sandbox
