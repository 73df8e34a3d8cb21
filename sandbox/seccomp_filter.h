// The seccomp filter every confined session runs under, built with libseccomp from one readable
// table (seccomp_filter.cc) and exported as a BPF program for bwrap's --seccomp.
#pragma once

#include <string_view>
#include <vector>

#include "common/error.h"
#include "common/unique_fd.h"

namespace ptybox::sandbox {

struct SeccompOptions {
  bool network_allowed = false;  // when false, socket() for anything but AF_UNIX fails
};

// A sealed memfd (offset 0) holding the exported BPF program.
Result<UniqueFd> BuildSeccompProgram(const SeccompOptions& options);

// One row of the table, for docs and tests: the syscall and what it returns.
struct SeccompRule {
  std::string_view syscall;
  std::string_view action;  // "EPERM", "ENOSYS", "EAFNOSUPPORT"
  std::string_view why;
};
const std::vector<SeccompRule>& SeccompRules();

}  // namespace ptybox::sandbox
