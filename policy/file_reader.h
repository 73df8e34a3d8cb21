// Reads one policy file with the care untrusted input needs: never blocks on a FIFO, never
// reads more than the size cap, refuses anything that is not a regular file, and can refuse
// to follow a symbolic link (repository files, so a checkout cannot point us at /etc/shadow).
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "common/error.h"

namespace ptybox::policy {

struct ReadOptions {
  bool follow_symlinks = true;  // false: a symlink as the last component is refused
  bool missing_ok = false;      // true: a missing file is nullopt rather than an error
};

// The file's bytes, or nullopt when it is missing and `missing_ok`. Errors are kPolicyError
// naming the syscall and the path.
[[nodiscard]] Result<std::optional<std::string>> ReadPolicyFile(const std::filesystem::path& path,
                                                                const ReadOptions& options);

}  // namespace ptybox::policy
