// Race-free opening of the paths a sandbox binds: each is opened once, without following any
// symbolic link, and the descriptor (not the name) is what gets checked and bound later.
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <optional>

#include "common/error.h"
#include "common/unique_fd.h"

namespace ptybox::sandbox {

// One opened path: an O_PATH descriptor and what fstat said about it at that moment.
struct OpenedPath {
  std::filesystem::path path;  // absolute, as it was opened
  UniqueFd fd;                 // O_PATH | O_CLOEXEC
  dev_t dev = 0;
  ino_t ino = 0;
  mode_t type = 0;  // S_IFDIR, S_IFREG, ...
  uid_t owner_uid = 0;
  gid_t owner_gid = 0;
};

// openat2(2) as a raw syscall (glibc has no wrapper): safe in a forked child.
int OpenAt2(int dirfd, const char* path, uint64_t flags, uint64_t resolve) noexcept;

// Opens an absolute directory path in which no component is a symbolic link (a root of the
// sandbox: the workspace or a writable root). A link anywhere, a missing path or a
// non-directory is an error that names the path.
Result<OpenedPath> OpenRootNoFollow(const std::filesystem::path& root);

// Opens `relative` beneath the opened directory `root` without following any symbolic link and
// without leaving `root`. nullopt when it does not exist or is (or passes through) a symbolic
// link: such a path is never bound. Other failures are errors.
Result<std::optional<OpenedPath>> OpenBeneath(const OpenedPath& root,
                                              const std::filesystem::path& relative);

// Opens an operator-controlled file (the init binary) following links, O_PATH.
Result<OpenedPath> OpenFollowing(const std::filesystem::path& path);

}  // namespace ptybox::sandbox
