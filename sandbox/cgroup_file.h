// Reading a cgroup or /proc text file, shared by the session cgroups (sandbox/cgroup.cc) and the
// start-up sweep (sandbox/cgroup_sweep.cc).
#pragma once

#include <filesystem>
#include <string>

namespace ptybox::sandbox::cgroups {

// The whole file with POSIX reads: a cgroup removed (ENODEV) or a process gone (ESRCH) mid-read
// gives an empty or short text, never an exception out of a stream. "" when it cannot be opened.
std::string ReadText(const std::filesystem::path& path);

}  // namespace ptybox::sandbox::cgroups
