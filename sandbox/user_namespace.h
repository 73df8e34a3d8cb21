// The host ids a root daemon's sessions run as, and the user namespaces that describe an
// idmapped mount: "this directory's on-disk owner is the session's host id".
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/error.h"
#include "common/unique_fd.h"
#include "policy/policy.h"

namespace ptybox::sandbox {

// True when this process is uid 0 of the host's own (initial) user namespace: a root daemon,
// whose confined sessions then run as an id of `sessionIds`. uid 0 of a nested namespace (inside
// a sandbox, a rootless container) is not host root and launches as an ordinary user does.
bool RunsAsHostRoot();

// One line of /proc/PID/uid_map or gid_map: "inside outside count\n".
std::string IdMapLine(uint32_t inside, uint32_t outside, uint32_t count);

// The idmap of one sandbox root: its on-disk owner (uid, gid) appears as the session's host id
// and nothing else is mapped, so the session writes the root as its owner and what it creates
// is owned on disk like the root.
struct RootIdMap {
  std::string uid_map;
  std::string gid_map;
};
RootIdMap RootIdMapFor(uid_t owner_uid, gid_t owner_gid, policy::SessionUid session_uid);

// A user namespace with these maps, held by its /proc/PID/ns/user descriptor. Needs
// CAP_SETUID/CAP_SETGID over the ids (a root daemon). The helper process is reaped here.
Result<UniqueFd> CreateUserNamespace(const RootIdMap& maps);

// Why `range` is unsafe on this host, or nullopt: it must not contain 0, 65534 (nobody) or
// 4294967295, nor overlap a user or group of `passwd`/`group` text, nor a range of `subuid` /
// `subgid` text (the formats of /etc/passwd, /etc/group, /etc/subuid, /etc/subgid).
std::optional<std::string> SessionUidRangeConflict(const policy::SessionUidRange& range,
                                                   std::string_view passwd, std::string_view group,
                                                   std::string_view subuid,
                                                   std::string_view subgid);

// The same against this host's files (missing files count as empty).
std::optional<std::string> SessionUidRangeConflictOnHost(const policy::SessionUidRange& range);

}  // namespace ptybox::sandbox
