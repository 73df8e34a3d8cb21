#include "runtime/audit/owned_directory.h"

#include <unistd.h>

#include <cstdio>

namespace ptybox::runtime {

std::string ModeText(mode_t mode) {
  char text[8];
  std::snprintf(text, sizeof(text), "%04o", static_cast<unsigned>(mode & 07777));
  return text;
}

Result<void> RequireOwnedDirectory(const struct stat& st, const std::string& what,
                                   const std::string& context) {
  if ((st.st_uid != ::geteuid() && st.st_uid != 0) ||
      ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0 && (st.st_mode & S_ISVTX) == 0)) {
    return Fail(ErrorKind::kInternal,
                what + " (owner uid " + std::to_string(st.st_uid) + ", mode " +
                    ModeText(st.st_mode) +
                    ") could be changed by another user; use a directory owned by uid " +
                    std::to_string(::geteuid()) + " (or root) that only its owner can write",
                context);
  }
  return {};
}

Result<void> CreatePrivateDirectories(const std::filesystem::path& dir, const std::string& what,
                                      const std::string& flag, const std::string& context) {
  std::error_code ec;
  if (dir.empty() || std::filesystem::exists(std::filesystem::symlink_status(dir, ec))) return {};
  const mode_t old_mask = ::umask(0077);
  std::filesystem::create_directories(dir, ec);
  ::umask(old_mask);
  if (ec) {
    return Fail(ErrorKind::kInternal,
                "cannot create " + what + " " + dir.string() + ": " + ec.message() +
                    "; create it (mkdir -p, owned by uid " + std::to_string(::geteuid()) +
                    ", mode 0700) or choose another " + flag,
                context);
  }
  return {};
}

}  // namespace ptybox::runtime
