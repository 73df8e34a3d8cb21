// Reads one policy file as untrusted input: never blocks on a FIFO, never reads past the size
// cap, only regular files; for repository files no symlink or hard link, so a checkout cannot
// make us read (and echo in errors) a file from outside the workspace such as /etc/shadow.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "common/error.h"

namespace ptybox::policy {

struct ReadOptions {
  bool follow_symlinks = true;  // false: a symlink as the last component is refused
  bool missing_ok = false;      // true: a missing file is nullopt rather than an error
  bool single_link = false;     // true: a file with several hard links is refused
};

// The file's bytes, or nullopt when it is missing and `missing_ok` (a dangling symlink is not
// "missing"). Errors are kPolicyError naming the syscall and the path.
[[nodiscard]] Result<std::optional<std::string>> ReadPolicyFile(const std::filesystem::path& path,
                                                                const ReadOptions& options);

}  // namespace ptybox::policy
