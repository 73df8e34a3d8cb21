// Host-wide session uid leases (session_uid_lease.h): a lock file per id under a root-only
// directory, reached by descriptor so no link or foreign directory is ever followed.
#include "sandbox/session_uid_lease.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <string>

#include "common/propagate.h"

namespace ptybox::sandbox {
namespace {

std::string Join(const char* dir, const char* name) { return std::string(dir) + "/" + name; }

// Opens (creating with `mode` when missing) the directory `name` beneath `parent` without
// following a link, and checks it is root's and writable by nobody else; `exact_mode` also
// requires exactly that mode (the lease directory: 0700).
Result<UniqueFd> OpenRootDirectory(int parent, const char* name, const std::string& where,
                                   mode_t mode, bool exact_mode) {
  if (::mkdirat(parent, name, mode) != 0 && errno != EEXIST) {
    return std::unexpected(Error::FromErrno(ErrorKind::kSandboxUnavailable, "mkdir", where));
  }
  UniqueFd fd(::openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd) {
    return std::unexpected(Error::FromErrno(
        ErrorKind::kSandboxUnavailable,
        "open (it must be a directory, not a symbolic link; remove it to let ptybox recreate it)",
        where));
  }
  struct stat st {};
  if (::fstat(fd.Get(), &st) != 0) {
    return std::unexpected(Error::FromErrno(ErrorKind::kSandboxUnavailable, "fstat", where));
  }
  const mode_t perms = st.st_mode & 07777;
  const bool wrong_mode = exact_mode ? perms != mode : (perms & 022) != 0;
  if (st.st_uid != 0 || wrong_mode) {
    return Fail(ErrorKind::kSandboxUnavailable,
                "the session uid leases of a root daemon live in " + where +
                    ", which must be a directory owned by root with mode " +
                    (exact_mode ? "0700" : "0755 or narrower") +
                    "; it is not (fix it with: chown root:root " + where + " && chmod " +
                    (exact_mode ? "0700 " : "0755 ") + where + ")",
                where);
  }
  return fd;
}

// Where the walk starts: random per process (two daemons started together do not race for the
// same ids), then rotating, so ids are reused as late as possible.
uint64_t NextStart(uint64_t count) {
  static std::atomic<uint64_t> next = [] {
    uint64_t seed = 0;
    if (::getrandom(&seed, sizeof seed, GRND_NONBLOCK) != sizeof seed) seed = ::getpid();
    return seed;
  }();
  return next.fetch_add(1) % count;
}

}  // namespace

std::optional<uint64_t> FirstTakenOffset(uint64_t count, uint64_t start,
                                         const std::function<bool(uint64_t)>& take) {
  for (uint64_t i = 0; i < count; ++i) {
    const uint64_t offset = (start % count + i) % count;
    if (take(offset)) return offset;
  }
  return std::nullopt;
}

Result<SessionUidLease> LeaseSessionUid(const policy::SessionUidRange& range) {
  const uint64_t count = range.count == 0 ? 1 : range.count;
  UniqueFd root(::open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!root) return std::unexpected(Error::FromErrno(ErrorKind::kSandboxUnavailable, "open", "/"));
  UniqueFd run(::openat(root.Get(), "run", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!run)
    return std::unexpected(Error::FromErrno(ErrorKind::kSandboxUnavailable, "open", "/run"));
  const std::string parent_path = kSessionUidLeaseParent;
  Result<UniqueFd> parent =
      OpenRootDirectory(run.Get(), parent_path.c_str() + 5, parent_path, 0755, false);
  if (!parent) return Propagate(parent);
  const std::string dir_path = Join(kSessionUidLeaseParent, kSessionUidLeaseDir);
  Result<UniqueFd> dir =
      OpenRootDirectory(parent->Get(), kSessionUidLeaseDir, dir_path, 0700, true);
  if (!dir) return Propagate(dir);

  std::optional<Error> failure;
  SessionUidLease lease;
  const std::optional<uint64_t> taken =
      FirstTakenOffset(count, NextStart(count), [&](uint64_t offset) {
        if (failure) return false;
        const std::string name = std::to_string(range.At(static_cast<uint32_t>(offset)).value());
        UniqueFd fd(::openat(dir->Get(), name.c_str(),
                             O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, 0600));
        struct stat st {};
        if (!fd || ::fstat(fd.Get(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != 0) {
          failure = Error::FromErrno(ErrorKind::kSandboxUnavailable,
                                     "open a regular root-owned lease file", dir_path + "/" + name);
          return false;
        }
        if (::flock(fd.Get(), LOCK_EX | LOCK_NB) != 0) {
          if (errno == EWOULDBLOCK) return false;  // another live session holds it
          failure =
              Error::FromErrno(ErrorKind::kSandboxUnavailable, "flock", dir_path + "/" + name);
          return false;
        }
        lease.uid = range.At(static_cast<uint32_t>(offset));
        lease.lock = std::move(fd);
        return true;
      });
  if (failure) return std::unexpected(*failure);
  if (!taken) {
    return Fail(ErrorKind::kSandboxUnavailable,
                "every session uid of `sessionIds` (" + std::to_string(range.first.value()) + ", " +
                    std::to_string(count) +
                    " ids) is held by a live session of a ptybox on this host, so a new session "
                    "would share a host uid with one of them; end a session, or widen "
                    "`sessionIds: {first: N, count: M}` in the operator policy",
                "sessionIds");
  }
  return lease;
}

}  // namespace ptybox::sandbox
