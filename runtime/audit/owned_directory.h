// The rule for a directory the daemon creates files in (the socket's, the recordings'), and how
// a missing one is created: only one
// nobody else can rearrange, owned by this uid or root and writable by group or others only when
// sticky (/tmp, a 1777 /run/ptybox). Shared by runtime/rpc_server.cc and
// runtime/audit/audit_files.cc.
#pragma once

#include <sys/stat.h>

#include <filesystem>
#include <string>

#include "common/error.h"

namespace ptybox::runtime {

// "0755": a mode's permission bits, for messages.
std::string ModeText(mode_t mode);

// `st` is of the directory named `what` (e.g. "the socket directory /run/ptybox"); `context` is
// the error's context. Fails, saying owner, mode and the fix, when another user could change it.
Result<void> RequireOwnedDirectory(const struct stat& st, const std::string& what,
                                   const std::string& context);

// Creates `dir` and its missing parents, each 0700 and owned by this uid (so they pass
// RequireOwnedDirectory); nothing when something is there already, a link included (the caller
// checks what it is). `what` and `flag` name it in the error ("the socket directory",
// "--socket path"); `context` is the error's context.
Result<void> CreatePrivateDirectories(const std::filesystem::path& dir, const std::string& what,
                                      const std::string& flag, const std::string& context);

}  // namespace ptybox::runtime
