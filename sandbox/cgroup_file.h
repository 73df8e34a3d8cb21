// Reading and writing a cgroup or /proc text file, shared by the host setup
// (sandbox/cgroup_host.cc), the session cgroups (sandbox/cgroup.cc) and the start-up sweep
// (sandbox/cgroup_sweep.cc).
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.h"

namespace ptybox::sandbox::cgroups {

// The whole file with POSIX reads: a cgroup removed (ENODEV) or a process gone (ESRCH) mid-read
// gives an empty or short text, never an exception out of a stream. "" when it cannot be opened.
std::string ReadText(const std::filesystem::path& path);

// The positive pids of a `cgroup.procs` or `tasks` text, in order.
[[nodiscard]] std::vector<pid_t> ParsePids(std::string_view text);

// Writes `text` in one write (cgroup files take one value per write); cleanup_failed with the
// errno and the path otherwise.
[[nodiscard]] Result<void> WriteText(const std::filesystem::path& path, std::string_view text);

}  // namespace ptybox::sandbox::cgroups
