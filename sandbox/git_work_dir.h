// Where a ptybox process keeps the private git directories of its sessions and its scratch files
// for checking what they copy back (docs/security.md, "Git for agents"): one directory of its own,
// `<parent>/p-<pid>-XXXXXX`, under `<run-time directory>/git` (or, for an ordinary user without
// one, `/tmp/ptybox-git-<uid>`), mode 0700, the daemon's uid, never a link.
//
// The process holds an exclusive flock on its directory for as long as it lives, so a daemon or
// `ptybox run` that ended without removing its copies (killed, a crash, an exit before a worker
// finished) leaves a directory nobody holds: the next process that makes one removes it, under a
// lock on the parent, so that it never takes a directory another process has just made and not
// locked yet. Several daemons of one user share the parent and never remove each other's.
#pragma once

#include <filesystem>
#include <optional>

namespace ptybox::sandbox {

// This process's directory, made (and the stale ones swept) at the first call; nullopt, with a
// warning logged once, when no parent of mode 0700 owned by this uid can be had.
[[nodiscard]] std::optional<std::filesystem::path> GitWorkDirectory();

// Removes every `p-*` directory of `parent` that no live process holds (the sweep above), with the
// parent locked. Returns how many were removed. For the tests; GitWorkDirectory runs it.
size_t SweepStaleGitWorkDirectories(const std::filesystem::path& parent);

}  // namespace ptybox::sandbox
