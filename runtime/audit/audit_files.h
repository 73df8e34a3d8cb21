// The audit log and the recordings' directory, opened once when the daemon (or `ptybox run`)
// starts and reached only through those descriptors afterwards (docs/security.md, "Audit files
// are reached by descriptor"): a session that renames or replaces a parent directory, or plants
// a link, cannot redirect a later write. Startup refuses, with what, where and how to fix, a log
// or directory that cannot be opened, that another user could rearrange, or that lies inside a
// root sessions can write.
#pragma once

#include <filesystem>
#include <memory>
#include <string_view>
#include <vector>

#include "common/error.h"
#include "common/unique_fd.h"

namespace ptybox::runtime {

// The audit log: opened (created 0600) with O_APPEND and O_NOFOLLOW, a regular file only.
// A mode that lets others read or write it is kept and warned about.
Result<UniqueFd> OpenAuditLogFile(const std::filesystem::path& path);

// The recordings' directory: created 0700 when missing, then opened with O_DIRECTORY and
// O_NOFOLLOW and checked like the socket's directory: owned by this uid or root, writable by
// group or others only when sticky, and writable by this uid.
Result<std::shared_ptr<const UniqueFd>> OpenRecordDirectory(const std::filesystem::path& path);

// `what` ("the audit log", "the recordings' directory") at `path` must not lie inside (or be)
// any of `roots`, the workspace and writable roots sessions of this daemon get. Roots that no
// session can get (/, /proc, ... : sandbox::CheckSandboxRoots) are skipped.
Result<void> CheckOutsideSessionRoots(std::string_view what, const std::filesystem::path& path,
                                      const std::vector<std::filesystem::path>& roots);

}  // namespace ptybox::runtime
