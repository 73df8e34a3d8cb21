// The effective policy of one owner at one spawn: what every other component consumes.
// Produced by the resolver from the operator file, the repository file and built-in defaults.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "policy/host_pattern.h"
#include "policy/limits.h"
#include "policy/mode.h"

namespace ptybox::policy {

struct EnvPolicy {
  // Names copied from the daemon's environment when present (an allow-list).
  std::vector<std::string> pass;
  // Values set explicitly; they win over passed ones.
  std::map<std::string, std::string> set;
  bool operator==(const EnvPolicy&) const = default;
};

// Where the operator policy is read when neither --policy nor PTYBOX_OPERATOR_POLICY names
// another file: the one place this path is written (the inputs carry the path in force).
inline constexpr char kDefaultOperatorPolicy[] = "/etc/ptybox/policy.yaml";

// A session uid: the unprivileged host uid (and gid, the same number) a root daemon's confined
// session runs as. Not the contract's session id (`pty-<hex>`, a string), nor the POSIX session
// of the shell (its session leader's pid): docs/architecture.md, "Vocabulary".
// A type of its own, so that neither an owner's uid nor a count is ever taken for one: built
// only explicitly, read with value().
class SessionUid final {
 public:
  constexpr SessionUid() = default;
  constexpr explicit SessionUid(uint32_t value) : value_(value) {}
  [[nodiscard]] constexpr uint32_t value() const { return value_; }
  constexpr auto operator<=>(const SessionUid&) const = default;

 private:
  uint32_t value_ = 0;
};

// The session uids a root daemon's confined sessions run as (operator policy `sessionIds`, a
// name kept for the policies already written). Each session leases a free uid of the range
// (sandbox/session_uid_lease.h). The default lies above the ranges useradd hands out in
// /etc/subuid (100000-600100000) and below 2^31, where no distribution allocates users.
struct SessionUidRange {
  SessionUid first{2147418112};  // 0x7FFF0000
  uint32_t count = 65536;
  // The uid `offset` places past `first` (offset < count).
  [[nodiscard]] SessionUid At(uint32_t offset) const { return SessionUid(first.value() + offset); }
  // One past the last uid, widened so that a range ending at 2^32 is representable.
  [[nodiscard]] uint64_t End() const { return uint64_t{first.value()} + count; }
  bool operator==(const SessionUidRange&) const = default;
};

// Operator only (`audit`): where the daemon and `ptybox run` keep their audit log, and where
// the daemon records sessions. Read once at startup (docs/security.md).
struct AuditPolicy {
  std::optional<std::filesystem::path> log;         // audit.log
  std::optional<std::filesystem::path> record_dir;  // audit.recordDir
  int64_t record_max_bytes = 64LL * 1024 * 1024;    // audit.recordMaxBytes
};

struct ResolvedPolicy {
  Mode mode = Mode::kWorkspaceWrite;
  Mode ceiling = Mode::kDangerFullAccess;
  std::filesystem::path workspace_root;               // absolute, canonical
  std::vector<std::filesystem::path> writable_roots;  // extra writable roots, absolute
  bool network_allowed = false;                       // true: the host's network (`network: allow`)
  // `network: {allow, deny}`: the session keeps its own network namespace (only `lo`, like
  // `deny`) and reaches the allowed names through ptybox's proxy (runtime/proxy/). Set only
  // when network_allowed is false.
  std::optional<NetworkNames> network_names;
  EnvPolicy env;
  Limits limits;
  SessionUidRange session_uids;  // operator only
  // Paths hidden from confined sessions (`hide`): absolute, or "~/..." for every home
  // directory (expanded at each spawn by sandbox/host_walls.h).
  std::vector<std::string> hidden;
  // Policy files that contributed; inside a writable root they stay read-only.
  std::vector<std::filesystem::path> policy_files;
  // The repository file that was read but not applied: the mode is danger-full-access and the
  // operator does not set `repository.trustInDangerFullAccess: true` (docs/security.md).
  std::optional<std::filesystem::path> ignored_repository_file;
  // Where each top-level value came from: "mode" -> "/repo/.ptybox.yaml:2:7" or "default".
  std::map<std::string, std::string> sources;
  // Every field: the warm pool (backend/warm_pool.h) hands out a shell only to an equal policy.
  bool operator==(const ResolvedPolicy&) const = default;
};

}  // namespace ptybox::policy
