// A breadth-first walk with one directory open at a time: each directory is opened with openat2
// beneath the root's descriptor (no links, no other mount), so neither a link nor a rename
// elsewhere can lead the walk outside the root.
#include "sandbox/repository_walk.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <string>
#include <utility>

#include "common/unique_fd.h"

namespace ptybox::sandbox {

LaunchRepositories RepositoriesOfLaunch(const SandboxSpec& sandbox) {
  LaunchRepositories found;
  if (sandbox.mode != policy::Mode::kWorkspaceWrite) return found;
  std::vector<std::filesystem::path> roots = {sandbox.workspace_root};
  roots.insert(roots.end(), sandbox.writable_roots.begin(), sandbox.writable_roots.end());
  for (const std::filesystem::path& root : roots) {
    Result<OpenedPath> opened = OpenRootNoFollow(root.lexically_normal());
    if (!opened) continue;  // the launch refuses it; nothing to compare
    RepositoryWalk walk = WalkRepositories(*opened);
    found.truncated = found.truncated || walk.truncated;
    found.git_paths.insert(found.git_paths.end(), walk.git_paths.begin(), walk.git_paths.end());
  }
  std::sort(found.git_paths.begin(), found.git_paths.end());
  found.git_paths.erase(std::unique(found.git_paths.begin(), found.git_paths.end()),
                        found.git_paths.end());
  return found;
}

RepositoryWalk WalkRepositories(const OpenedPath& root, size_t max_entries, size_t max_depth) {
  RepositoryWalk walk;
  struct Pending {
    std::filesystem::path relative;
    size_t depth;
  };
  std::deque<Pending> queue;
  queue.push_back({{}, 0});
  size_t entries = 0;
  while (!queue.empty()) {
    const Pending dir = std::move(queue.front());
    queue.pop_front();
    const int fd = dir.relative.empty()
                       ? ::openat(root.fd.Get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
                       : OpenAt2(root.fd.Get(), dir.relative.c_str(),
                                 O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC,
                                 RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS |
                                     RESOLVE_NO_XDEV);
    if (fd < 0) continue;  // gone, unreadable, a link or another mount now: not walked
    DIR* stream = ::fdopendir(fd);
    if (stream == nullptr) {
      ::close(fd);
      continue;
    }
    while (const dirent* entry = ::readdir(stream)) {
      const char* name = entry->d_name;
      if (std::strcmp(name, ".") == 0 || std::strcmp(name, "..") == 0) continue;
      if (++entries > max_entries) {
        walk.truncated = true;
        break;
      }
      // The entry's type from readdir where the filesystem gives it (no stat per entry: the
      // walk runs at every launch); another mount is refused when the directory is opened.
      unsigned char type = entry->d_type;
      if (type == DT_UNKNOWN) {
        struct stat st {};
        if (::fstatat(::dirfd(stream), name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
        type = S_ISDIR(st.st_mode) ? DT_DIR : S_ISREG(st.st_mode) ? DT_REG : DT_LNK;
      }
      if (std::strcmp(name, ".git") == 0) {
        if (type == DT_DIR || type == DT_REG) {
          walk.git_paths.push_back(root.path / dir.relative / name);
        }
        continue;  // never walked into: it is protected as a whole
      }
      if (type != DT_DIR) continue;  // links, files, devices
      if (dir.depth + 1 > max_depth) {
        walk.truncated = true;
        continue;
      }
      queue.push_back({dir.relative / name, dir.depth + 1});
    }
    ::closedir(stream);
    if (walk.truncated && entries > max_entries) break;
  }
  return walk;
}

}  // namespace ptybox::sandbox
