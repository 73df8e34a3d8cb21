// Reads one policy file as untrusted input: never blocks on a FIFO, never reads past the size
// cap, only regular files; for repository files no symlink or hard link, so a checkout cannot
// make us read (and echo in errors) a file from outside the workspace such as /etc/shadow.
#pragma once

#include <sys/stat.h>

#include <filesystem>
#include <optional>
#include <string>

#include "common/error.h"
#include "common/unique_fd.h"
#include "policy/schema.h"

namespace ptybox::policy {

struct ReadOptions {
  bool follow_symlinks = true;              // false: a symlink as the last component is refused
  bool missing_ok = false;                  // true: a missing file is nullopt rather than an error
  bool single_link = false;                 // true: a file with several hard links is refused
  int64_t max_bytes = kMaxPolicyFileBytes;  // a larger file is refused
  // Whose file it is, named in the messages; nullopt: a file of no stated role.
  std::optional<PolicyRole> role = std::nullopt;
  // How a file in `role` is read: a repository's never through a link (symbolic or hard) and
  // at most kMaxRepositoryPolicyFileBytes; an operator's through links, at most 1 MiB.
  static ReadOptions For(PolicyRole role, bool missing_ok);
};

// What tells one version of a file from another without reading it: a write changes the size
// or the times, a replacement the inode (policy/parse_cache.h).
struct FileIdentity {
  dev_t dev = 0;
  ino_t ino = 0;
  off_t size = 0;
  timespec mtime{};
  timespec ctime{};
  static FileIdentity Of(const struct stat& st);
  bool operator==(const FileIdentity& other) const;
};

// A policy file opened and checked (regular, links, size), not read yet.
struct OpenedPolicyFile {
  UniqueFd fd;
  FileIdentity identity;
  int64_t max_bytes = kMaxPolicyFileBytes;        // from the ReadOptions it was opened with
  std::optional<PolicyRole> role = std::nullopt;  // as well
};

// The checks of ReadPolicyFile without the read; nullopt as there.
[[nodiscard]] Result<std::optional<OpenedPolicyFile>> OpenPolicyFile(
    const std::filesystem::path& path, const ReadOptions& options);
// Reads an opened file, at most its max_bytes (it may have grown since it was opened).
[[nodiscard]] Result<std::string> ReadOpenedPolicyFile(const OpenedPolicyFile& file,
                                                       const std::filesystem::path& path);

// The file's bytes, or nullopt when it is missing and `missing_ok` (a dangling symlink is not
// "missing"). Errors are kPolicyError naming the syscall and the path.
[[nodiscard]] Result<std::optional<std::string>> ReadPolicyFile(const std::filesystem::path& path,
                                                                const ReadOptions& options);

}  // namespace ptybox::policy
