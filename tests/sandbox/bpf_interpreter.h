// A small classic-BPF interpreter for seccomp programs, so tests can ask what an exported
// filter returns for a syscall the running kernel cannot even issue (x32, other arches,
// argument bits above 32).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace ptybox::sandbox::testing {

struct SeccompInput {
  int32_t nr = 0;
  uint32_t arch = 0;  // AUDIT_ARCH_*
  uint64_t instruction_pointer = 0;
  uint64_t args[6] = {};
};

// The SECCOMP_RET_* value `program` (raw sock_filter bytes) returns for `input`; nullopt for
// an instruction this interpreter does not know or a jump out of the program.
std::optional<uint32_t> RunSeccompBpf(const std::vector<uint8_t>& program,
                                      const SeccompInput& input);

}  // namespace ptybox::sandbox::testing
