// Race-free opening with openat2(2): RESOLVE_NO_SYMLINKS refuses a link in any component, so
// the descriptor names exactly the object whose path was checked; RESOLVE_BENEATH keeps a
// protected path inside its root even through "..".
#include "sandbox/path_open.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

#include "common/propagate.h"

namespace ptybox::sandbox {
namespace {

Result<OpenedPath> Describe(std::filesystem::path path, int fd) {
  OpenedPath opened;
  opened.path = std::move(path);
  opened.fd.Reset(fd);
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    return std::unexpected(
        Error::FromErrno(ErrorKind::kSpawnFailed, "fstat", opened.path.string()));
  }
  opened.dev = st.st_dev;
  opened.ino = st.st_ino;
  opened.type = st.st_mode & S_IFMT;
  opened.owner_uid = st.st_uid;
  opened.owner_gid = st.st_gid;
  return opened;
}

constexpr uint64_t kNoLinks = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;

}  // namespace

int OpenAt2(int dirfd, const char* path, uint64_t flags, uint64_t resolve) noexcept {
  struct open_how how {};
  how.flags = flags;
  how.resolve = resolve;
  return static_cast<int>(::syscall(SYS_openat2, dirfd, path, &how, sizeof how));
}

Result<OpenedPath> OpenRootNoFollow(const std::filesystem::path& root) {
  if (!root.is_absolute()) {
    return Fail(ErrorKind::kPolicyDenied,
                "the sandbox root " + root.string() + " is not an absolute path", root.string());
  }
  const int fd = OpenAt2(AT_FDCWD, root.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC, kNoLinks);
  if (fd < 0) {
    const int saved = errno;
    if (saved == ELOOP) {
      return Fail(ErrorKind::kPolicyDenied,
                  "the sandbox root " + root.string() +
                      " is or passes through a symbolic link now (it was replaced after the "
                      "policy was resolved?); a root is bound only when no component of its "
                      "path is a link: name the real directory",
                  root.string());
    }
    if (saved == ENOSYS) {
      return Fail(ErrorKind::kSandboxUnavailable,
                  "openat2(2) answers ENOSYS, and the sandbox's roots are bound without a "
                  "race only through it: either the kernel is older than Linux 5.6 (upgrade "
                  "it) or a seccomp filter refuses the call (a container engine's profile: run "
                  "the container with the seccomp profile docs/container.md names; or this runs "
                  "inside a ptybox sandbox, whose filter refuses it: nested sandboxes are not "
                  "supported)",
                  root.string());
    }
    Error error = Error::FromErrno(ErrorKind::kPolicyDenied, "openat2", root.string());
    error.message = "cannot open the sandbox root " + root.string() + ": " + error.message;
    return std::unexpected(error);
  }
  Result<OpenedPath> opened = Describe(root, fd);
  if (opened && opened->type == S_IFLNK) {
    return Fail(ErrorKind::kPolicyDenied,
                "the sandbox root " + root.string() +
                    " is a symbolic link now (replaced after the policy was resolved?); a link "
                    "is never bound: name the real directory",
                root.string());
  }
  if (opened && opened->type != S_IFDIR) {
    return Fail(ErrorKind::kPolicyDenied,
                "the sandbox root " + root.string() + " is not a directory", root.string());
  }
  return opened;
}

Result<std::optional<OpenedPath>> OpenBeneath(const OpenedPath& root,
                                              const std::filesystem::path& relative) {
  const int fd = OpenAt2(root.fd.Get(), relative.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC,
                         kNoLinks | RESOLVE_BENEATH);
  if (fd < 0) {
    const int saved = errno;
    // Missing, a link on the way (ELOOP), or a way out of the root (EXDEV): never bound.
    if (saved == ENOENT || saved == ENOTDIR || saved == ELOOP || saved == EXDEV) {
      return std::optional<OpenedPath>();
    }
    return std::unexpected(
        Error::FromErrno(ErrorKind::kSpawnFailed, "openat2", (root.path / relative).string()));
  }
  Result<OpenedPath> opened = Describe(root.path / relative, fd);
  if (!opened) return Propagate(opened);
  // O_PATH | O_NOFOLLOW opens a final link itself: a link is never followed, so not bound.
  if (opened->type != S_IFDIR && opened->type != S_IFREG) return std::optional<OpenedPath>();
  return std::optional<OpenedPath>(std::move(*opened));
}

Result<OpenedPath> OpenFollowing(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_PATH | O_CLOEXEC);
  if (fd < 0)
    return std::unexpected(Error::FromErrno(ErrorKind::kSpawnFailed, "open", path.string()));
  return Describe(path, fd);
}

}  // namespace ptybox::sandbox
