// Executes the subset of classic BPF that seccomp accepts (loads from seccomp_data, ALU,
// jumps, scratch memory, returns) over a seccomp_data built from SeccompInput.
#include "tests/sandbox/bpf_interpreter.h"

#include <linux/filter.h>
#include <linux/seccomp.h>

#include <cstring>

namespace ptybox::sandbox::testing {
namespace {

// The ALU operation `op` on `a` and `operand`; nullopt for one seccomp does not accept. A
// division by zero sets `div_by_zero` instead.
std::optional<uint32_t> Alu(int op, uint32_t a, uint32_t operand, bool& div_by_zero) {
  switch (op) {
    case BPF_ADD:
      return a + operand;
    case BPF_SUB:
      return a - operand;
    case BPF_MUL:
      return a * operand;
    case BPF_DIV:
      if (operand == 0) {
        div_by_zero = true;
        return std::nullopt;
      }
      return a / operand;
    case BPF_AND:
      return a & operand;
    case BPF_OR:
      return a | operand;
    case BPF_LSH:
      return a << (operand & 31);
    case BPF_RSH:
      return a >> (operand & 31);
    case BPF_NEG:
      return 0 - a;
    default:
      return std::nullopt;
  }
}

// Whether the conditional jump `op` is taken; nullopt for a test seccomp does not accept.
std::optional<bool> JumpTaken(int op, uint32_t a, uint32_t operand) {
  switch (op) {
    case BPF_JEQ:
      return a == operand;
    case BPF_JGT:
      return a > operand;
    case BPF_JGE:
      return a >= operand;
    case BPF_JSET:
      return (a & operand) != 0;
    default:
      return std::nullopt;
  }
}

}  // namespace

std::optional<uint32_t> RunSeccompBpf(const std::vector<uint8_t>& program,
                                      const SeccompInput& input) {
  seccomp_data data{};
  data.nr = input.nr;
  data.arch = input.arch;
  data.instruction_pointer = input.instruction_pointer;
  for (int i = 0; i < 6; ++i) data.args[i] = input.args[i];
  uint8_t bytes[sizeof data];
  std::memcpy(bytes, &data, sizeof data);

  const size_t count = program.size() / sizeof(sock_filter);
  std::vector<sock_filter> insns(count);
  std::memcpy(insns.data(), program.data(), count * sizeof(sock_filter));

  uint32_t a = 0, x = 0;
  uint32_t mem[BPF_MEMWORDS] = {};
  for (size_t pc = 0; pc < count; ++pc) {
    const sock_filter& in = insns[pc];
    const uint32_t k = in.k;
    switch (BPF_CLASS(in.code)) {
      case BPF_LD:
        if (in.code == (BPF_LD | BPF_W | BPF_ABS)) {
          if (k % 4 != 0 || k + 4 > sizeof bytes) return std::nullopt;
          std::memcpy(&a, bytes + k, 4);
        } else if (in.code == (BPF_LD | BPF_IMM)) {
          a = k;
        } else if (in.code == (BPF_LD | BPF_MEM) && k < BPF_MEMWORDS) {
          a = mem[k];
        } else if (in.code == (BPF_LD | BPF_W | BPF_LEN)) {
          a = sizeof bytes;
        } else {
          return std::nullopt;
        }
        break;
      case BPF_LDX:
        if (in.code == (BPF_LDX | BPF_IMM)) {
          x = k;
        } else if (in.code == (BPF_LDX | BPF_MEM) && k < BPF_MEMWORDS) {
          x = mem[k];
        } else {
          return std::nullopt;
        }
        break;
      case BPF_ST:
        if (k >= BPF_MEMWORDS) return std::nullopt;
        mem[k] = a;
        break;
      case BPF_STX:
        if (k >= BPF_MEMWORDS) return std::nullopt;
        mem[k] = x;
        break;
      case BPF_ALU: {
        bool div_by_zero = false;
        const std::optional<uint32_t> result =
            Alu(BPF_OP(in.code), a, BPF_SRC(in.code) == BPF_X ? x : k, div_by_zero);
        if (div_by_zero) return 0;  // the kernel returns 0 (kill) on division by zero
        if (!result) return std::nullopt;
        a = *result;
        break;
      }
      case BPF_JMP: {
        if (BPF_OP(in.code) == BPF_JA) {
          pc += k;
          break;
        }
        const std::optional<bool> taken =
            JumpTaken(BPF_OP(in.code), a, BPF_SRC(in.code) == BPF_X ? x : k);
        if (!taken) return std::nullopt;
        pc += *taken ? in.jt : in.jf;
        break;
      }
      case BPF_RET:
        return BPF_RVAL(in.code) == BPF_A ? a : k;
      case BPF_MISC:
        if (BPF_MISCOP(in.code) == BPF_TAX) {
          x = a;
        } else {
          a = x;
        }
        break;
      default:
        return std::nullopt;
    }
  }
  return std::nullopt;  // fell off the end: the kernel rejects such programs
}

}  // namespace ptybox::sandbox::testing
