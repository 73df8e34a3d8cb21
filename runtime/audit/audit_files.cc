#include "runtime/audit/audit_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "common/log.h"
#include "common/propagate.h"
#include "runtime/audit/owned_directory.h"
#include "sandbox/launcher.h"

namespace ptybox::runtime {
namespace {

// `path` made absolute and free of links, as far as it exists.
std::filesystem::path Resolved(const std::filesystem::path& path) {
  std::error_code ec;
  std::filesystem::path resolved = std::filesystem::weakly_canonical(path, ec);
  return ec ? path.lexically_normal() : resolved;
}

// `path` is `root` or lies below it (both absolute and normal).
bool Inside(const std::filesystem::path& path, const std::filesystem::path& root) {
  const std::filesystem::path relative = path.lexically_relative(root);
  return !relative.empty() && *relative.begin() != "..";
}

}  // namespace

Result<UniqueFd> OpenAuditLogFile(const std::filesystem::path& path) {
  // A missing directory is created as the recordings' is (README: --audit-log
  // /var/log/ptybox/audit.jsonl on a fresh machine).
  if (Result<void> made = CreatePrivateDirectories(path.parent_path(), "the audit log's directory",
                                                   "--audit-log file", path.parent_path().string());
      !made) {
    return Propagate(made);
  }
  const int flags = O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK;
  UniqueFd fd(::open(path.c_str(), flags, 0600));
  if (!fd) {
    const int error = errno;
    std::string why = std::strerror(error);
    if (error == ELOOP) why = "it is a symbolic link, which is never followed";
    if (error == EISDIR) why = "it is a directory";
    return Fail(ErrorKind::kInternal,
                "cannot open the audit log " + path.string() + ": " + why +
                    "; name a regular file in a directory this user can write (--audit-log or "
                    "the operator policy's audit.log)",
                path.string());
  }
  struct stat st {};
  if (::fstat(fd.Get(), &st) != 0 || !S_ISREG(st.st_mode)) {
    return Fail(ErrorKind::kInternal,
                "the audit log " + path.string() +
                    " is not a regular file (a FIFO or a device would block or lose the record); "
                    "name a regular file (--audit-log or the operator policy's audit.log)",
                path.string());
  }
  // A regular file never blocks; writes are plain blocking writes on the writer's thread.
  ::fcntl(fd.Get(), F_SETFL, ::fcntl(fd.Get(), F_GETFL) & ~O_NONBLOCK);
  if ((st.st_mode & 077) != 0) {
    LogWarn(path.string() + " is readable or writable by other users (mode " +
            ModeText(st.st_mode) + "); `chmod 600` it");
  }
  return fd;
}

Result<std::shared_ptr<const UniqueFd>> OpenRecordDirectory(const std::filesystem::path& path) {
  if (Result<void> made = CreatePrivateDirectories(path, "the recordings' directory",
                                                   "--record directory", path.string());
      !made) {
    return Propagate(made);
  }
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd) {
    const int error = errno;
    std::string why = std::strerror(error);
    struct stat link {};
    // O_DIRECTORY|O_NOFOLLOW answers ENOTDIR for a link: tell which it is.
    if (error == ELOOP || (::lstat(path.c_str(), &link) == 0 && S_ISLNK(link.st_mode))) {
      why = "it is a symbolic link, which is never followed";
    } else if (error == ENOTDIR) {
      why = "it is not a directory";
    }
    return Fail(ErrorKind::kInternal,
                "cannot open the recordings' directory " + path.string() + ": " + why +
                    "; name a directory itself (--record or the operator policy's "
                    "audit.recordDir)",
                path.string());
  }
  // Checked through the descriptor: exactly the directory every recording is created in.
  struct stat st {};
  if (::fstat(fd.Get(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return Fail(ErrorKind::kInternal,
                "the recordings' directory " + path.string() + " is not a directory",
                path.string());
  }
  if (Result<void> owned =
          RequireOwnedDirectory(st, "the recordings' directory " + path.string(), path.string());
      !owned) {
    return Propagate(owned);
  }
  if (::faccessat(fd.Get(), ".", W_OK | X_OK, AT_EACCESS) != 0) {
    return Fail(ErrorKind::kInternal,
                "the recordings' directory " + path.string() + " (owner uid " +
                    std::to_string(st.st_uid) + ", mode " + ModeText(st.st_mode) +
                    ") is not writable by uid " + std::to_string(::geteuid()) +
                    "; chown it to this uid or choose another --record directory",
                path.string());
  }
  return std::make_shared<const UniqueFd>(std::move(fd));
}

Result<void> CheckOutsideSessionRoots(std::string_view what, const std::filesystem::path& path,
                                      const std::vector<std::filesystem::path>& roots) {
  const std::filesystem::path target = Resolved(path);
  for (const std::filesystem::path& root : roots) {
    sandbox::SandboxSpec alone;
    alone.workspace_root = root;
    if (!sandbox::CheckSandboxRoots(alone)) continue;  // never a session's root
    const std::filesystem::path resolved = Resolved(root);
    if (!Inside(target, resolved)) continue;
    return Fail(ErrorKind::kPolicyDenied,
                std::string(what) + " " + path.string() + " lies inside " + resolved.string() +
                    ", which sessions of this daemon can write (the workspace or a writable "
                    "root): a session could rename or replace its directories, read it or fill "
                    "it. Put it where no session can write (e.g. /var/log/ptybox), or start the "
                    "daemon with another --workspace",
                path.string());
  }
  return {};
}

}  // namespace ptybox::runtime
