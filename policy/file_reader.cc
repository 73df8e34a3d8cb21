// open(O_NONBLOCK|O_CLOEXEC[|O_NOFOLLOW]) + fstat checks + a bounded read.
#include "policy/file_reader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "common/propagate.h"
#include "common/unique_fd.h"
#include "policy/schema.h"

namespace ptybox::policy {

namespace {

// "a repository's policy file", "an operator's policy file", or "a policy file".
std::string WhoseFile(std::optional<PolicyRole> role) {
  if (!role) return "a policy file";
  return *role == PolicyRole::kOperator ? "an operator's policy file"
                                        : "a repository's policy file";
}

std::string TooBig(const std::string& name, int64_t max_bytes, std::optional<PolicyRole> role) {
  const std::string size = max_bytes % (1024 * 1024) == 0
                               ? std::to_string(max_bytes / (1024 * 1024)) + " MiB"
                               : std::to_string(max_bytes / 1024) + " KiB";
  return name + ": is larger than " + std::to_string(max_bytes) + " bytes (" + size +
         "), the limit for " + WhoseFile(role) + "; a policy needs a few hundred bytes";
}

}  // namespace

ReadOptions ReadOptions::For(PolicyRole role, bool missing_ok) {
  const bool repository = role == PolicyRole::kRepository;
  return ReadOptions{.follow_symlinks = !repository,
                     .missing_ok = missing_ok,
                     .single_link = repository,
                     .max_bytes = repository ? kMaxRepositoryPolicyFileBytes : kMaxPolicyFileBytes,
                     .role = role};
}

FileIdentity FileIdentity::Of(const struct stat& st) {
  return FileIdentity{st.st_dev, st.st_ino, st.st_size, st.st_mtim, st.st_ctim};
}

bool FileIdentity::operator==(const FileIdentity& other) const {
  auto same = [](const timespec& a, const timespec& b) {
    return a.tv_sec == b.tv_sec && a.tv_nsec == b.tv_nsec;
  };
  return dev == other.dev && ino == other.ino && size == other.size && same(mtime, other.mtime) &&
         same(ctime, other.ctime);
}

Result<std::optional<OpenedPolicyFile>> OpenPolicyFile(const std::filesystem::path& path,
                                                       const ReadOptions& options) {
  const std::string name = path.string();
  int flags = O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK;
  if (!options.follow_symlinks) flags |= O_NOFOLLOW;
  UniqueFd fd(::open(name.c_str(), flags));
  if (!fd) {
    const int err = errno;
    if (options.missing_ok && err == ENOENT) {
      // A dangling symlink is a broken configuration, not an absent file: fail closed.
      struct stat link {};
      if (::lstat(name.c_str(), &link) != 0) return std::nullopt;
      return Fail(ErrorKind::kPolicyError,
                  name +
                      ": is a symbolic link to a file that does not exist; fix or remove the "
                      "link",
                  name);
    }
    if (err == ELOOP && !options.follow_symlinks) {
      return Fail(ErrorKind::kPolicyError,
                  name +
                      ": is a symbolic link; a repository policy must be a regular file in "
                      "the workspace (replace the link with the file itself)",
                  name);
    }
    return std::unexpected(Error::FromErrno(ErrorKind::kPolicyError, "open", name, err));
  }
  struct stat st {};
  if (::fstat(fd.Get(), &st) != 0) {
    return std::unexpected(Error::FromErrno(ErrorKind::kPolicyError, "fstat", name));
  }
  if (!S_ISREG(st.st_mode)) {
    return Fail(ErrorKind::kPolicyError,
                name + ": is not a regular file; a policy must be a plain YAML file", name);
  }
  if (options.single_link && st.st_nlink != 1) {
    // A hard link could make us read (and echo parts of) a file from outside the workspace.
    return Fail(ErrorKind::kPolicyError,
                name + ": has " + std::to_string(st.st_nlink) +
                    " hard links; a repository policy must be a file of its own (copy it "
                    "instead of linking it)",
                name);
  }
  if (st.st_size > options.max_bytes) {
    return Fail(ErrorKind::kPolicyError, TooBig(name, options.max_bytes, options.role), name);
  }
  return OpenedPolicyFile{std::move(fd), FileIdentity::Of(st), options.max_bytes, options.role};
}

Result<std::string> ReadOpenedPolicyFile(const OpenedPolicyFile& file,
                                         const std::filesystem::path& path) {
  const std::string name = path.string();
  std::string text;
  char buffer[16384];
  for (;;) {
    ssize_t n = ::read(file.fd.Get(), buffer, sizeof buffer);
    if (n < 0) {
      if (errno == EINTR) continue;
      return std::unexpected(Error::FromErrno(ErrorKind::kPolicyError, "read", name));
    }
    if (n == 0) break;
    // The file may have grown since fstat: the cap holds for what we actually read.
    if (static_cast<int64_t>(text.size()) + n > file.max_bytes) {
      return Fail(ErrorKind::kPolicyError, TooBig(name, file.max_bytes, file.role), name);
    }
    text.append(buffer, static_cast<size_t>(n));
  }
  return text;
}

Result<std::optional<std::string>> ReadPolicyFile(const std::filesystem::path& path,
                                                  const ReadOptions& options) {
  auto opened = OpenPolicyFile(path, options);
  if (!opened) return Propagate(std::move(opened));
  if (!*opened) return std::nullopt;
  auto text = ReadOpenedPolicyFile(**opened, path);
  if (!text) return Propagate(std::move(text));
  return std::move(*text);
}

}  // namespace ptybox::policy
