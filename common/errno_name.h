// The one errno-name table: the C library's own (strerrorname_np, glibc 2.32), so neither the
// seccomp table, the host probes nor the tests spell a value and its name apart.
#pragma once

#include <cstring>
#include <string>

namespace ptybox {

// "EPERM" for EPERM; "errno N" for a value the C library has no name for.
[[nodiscard]] inline std::string ErrnoName(int err) {
  if (const char* name = ::strerrorname_np(err)) return name;
  return "errno " + std::to_string(err);
}

}  // namespace ptybox
