// The seccomp table of every confined session and its compilation with libseccomp into a BPF
// program in a sealed memfd. kRules is the single source of truth: the filter, SeccompRules()
// and the table in docs/sandbox.md all come from it.
#include "sandbox/seccomp_filter.h"

#include <fcntl.h>
#include <linux/netlink.h>
#include <linux/sched.h>
#include <netinet/in.h>
#include <seccomp.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <optional>
#include <span>
#include <string>

#include "common/log.h"
#include "common/propagate.h"

namespace ptybox::sandbox {
namespace {

// Which arguments a row looks at. kAlways matches every call of the syscall.
enum class Match {
  kAlways,
  kIoctlRequest,        // arg1, low 32 bits only (the kernel truncates the request to int)
  kCloneNamespaceFlag,  // any CLONE_NEW* bit in the flags argument
  kDomainNotUnix,       // arg0 != AF_UNIX; only when the network is denied
  kArgNotIn,            // `only.arg` outside `only.allowed` (see ArgSet); network denied only
  kPersonalityChange,   // arg0 other than PER_LINUX (0) and the query 0xffffffff
  kSetidMode,           // S_ISUID or S_ISGID in the mode argument (arg `mode_arg`)
  kSetidCreateMode,     // the same, only when the flags argument (arg `mode_arg` - 1) creates
};

// kArgNotIn: the call is refused unless argument `arg` (masked with `mask`, when not 0) is one of
// `allowed`; with `domain` set, only calls whose arg0 (the socket domain) equals it are looked at.
struct ArgSet {
  unsigned arg = 0;
  uint64_t mask = 0;
  std::span<const uint64_t> allowed{};
  int64_t domain = -1;
};

struct Row {
  std::string_view syscall;
  int error;  // its name, for docs and tests, is the C library's (common/errno_name.h)
  Match match;
  uint64_t request;  // kIoctlRequest: the ioctl request
  std::string_view why;
  unsigned mode_arg = 0;  // kSetidMode, kSetidCreateMode: which argument holds the mode
  ArgSet only{};          // kArgNotIn
};

// With the network denied the session's network namespace holds only `lo` (bwrap brings it up),
// so IP sockets reach nothing but the session itself: dev servers and test databases work, and
// nothing leaves. NETLINK_ROUTE lets `ip addr` and getifaddrs() see that `lo`; it changes only
// this namespace. Every other family (AF_PACKET, AF_NETLINK's netfilter, xfrm, audit, ...) stays
// refused: kernel attack surface with nothing a loopback needs.
constexpr uint64_t kLoopbackDomains[] = {AF_UNIX, AF_INET, AF_INET6, AF_NETLINK};
// Stream and datagram only: SOCK_RAW needs no CAP_NET_RAW in the session's own user namespace,
// and SOCK_PACKET on AF_INET is a packet socket under another name.
constexpr uint64_t kInetTypes[] = {SOCK_STREAM, SOCK_DGRAM};
constexpr uint64_t kSockTypeMask = 0xf;  // the kernel's SOCK_TYPE_MASK; the rest are flags
// TCP and UDP (0 picks one of them): other protocols (SCTP, DCCP, L2TP, ...) would make the
// kernel load their modules, a classic route to kernel bugs.
constexpr uint64_t kInetProtocols[] = {0, IPPROTO_TCP, IPPROTO_UDP};
constexpr uint64_t kNetlinkProtocols[] = {NETLINK_ROUTE};

// fchmodat2 (Linux 6.6) is newer than Debian 12's headers; its number is the same on every
// architecture that uses the generic table (and on x86_64).
#ifndef __NR_fchmodat2
#define __NR_fchmodat2 452
#endif

// The mode bits that would carry a privilege out of a session: a file set-user-id or
// set-group-id on a host mount (root daemon: on-disk uid 0 is the session's uid 0 through the
// idmap) runs with its owner's identity for whoever starts it on the host.
constexpr uint64_t kSetidBits[] = {S_ISUID, S_ISGID};
// open/openat read their mode only when the flags create a file: O_CREAT, or O_TMPFILE, whose
// own bit is the kernel's __O_TMPFILE (glibc's __O_TMPFILE also holds O_DIRECTORY, which any
// directory open carries). A mode with garbage bits is harmless otherwise.
constexpr uint64_t kTmpfileBit = 020000000;
constexpr uint64_t kCreateFlags[] = {O_CREAT, kTmpfileBit};

#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080
#endif

constexpr uint64_t kCloneNamespaceFlags[] = {
    CLONE_NEWNS,  CLONE_NEWUTS, CLONE_NEWIPC,    CLONE_NEWUSER,
    CLONE_NEWPID, CLONE_NEWNET, CLONE_NEWCGROUP, CLONE_NEWTIME,
};

// clone(2)'s flags are the first argument everywhere but on s390, where they are the second.
#if defined(__s390__) || defined(__s390x__)
constexpr unsigned kCloneFlagsArg = 1;
#else
constexpr unsigned kCloneFlagsArg = 0;
#endif

// clang-format off
constexpr Row kRules[] = {
  // Terminal injection: push bytes into the input queue of a terminal the shell shares.
  {"ioctl", EPERM, Match::kIoctlRequest, TIOCSTI,
   "TIOCSTI (arg1, low 32 bits): injects keystrokes into a terminal's input"},
  {"ioctl", EPERM, Match::kIoctlRequest, TIOCLINUX,
   "TIOCLINUX (arg1, low 32 bits): console selection paste can inject input"},
  {"ioctl", EPERM, Match::kIoctlRequest, TIOCSETD,
   "TIOCSETD (arg1, low 32 bits): switching line discipline loads rarely used kernel code"},
  // Namespaces: the sandbox's own namespaces are final.
  {"clone", EPERM, Match::kCloneNamespaceFlag, 0,
   "with any CLONE_NEW* flag: no new namespaces inside the sandbox"},
  {"clone3", ENOSYS, Match::kAlways, 0,
   "its flags live in memory seccomp cannot read; libc falls back to clone"},
  {"unshare", EPERM, Match::kAlways, 0, "no new namespaces inside the sandbox"},
  {"setns", EPERM, Match::kAlways, 0, "no joining other namespaces"},
  // Mounts: the mount table is fixed by bwrap.
  {"mount", EPERM, Match::kAlways, 0, "the mount table is fixed by bwrap"},
  {"umount2", EPERM, Match::kAlways, 0, "would uncover what bwrap mounted over"},
  {"pivot_root", EPERM, Match::kAlways, 0, "the root is fixed by bwrap"},
  {"chroot", EPERM, Match::kAlways, 0, "the root is fixed by bwrap"},
  {"open_tree", ENOSYS, Match::kAlways, 0, "new mount API; ENOSYS sends tools back to mount(2)"},
  {"move_mount", ENOSYS, Match::kAlways, 0, "new mount API; ENOSYS sends tools back to mount(2)"},
  {"fsopen", ENOSYS, Match::kAlways, 0, "new mount API; ENOSYS sends tools back to mount(2)"},
  {"fsconfig", ENOSYS, Match::kAlways, 0, "new mount API; ENOSYS sends tools back to mount(2)"},
  {"fsmount", ENOSYS, Match::kAlways, 0, "new mount API; ENOSYS sends tools back to mount(2)"},
  {"fspick", ENOSYS, Match::kAlways, 0, "new mount API; ENOSYS sends tools back to mount(2)"},
  {"mount_setattr", ENOSYS, Match::kAlways, 0, "new mount API; ENOSYS sends tools back to mount(2)"},
  // Kernel attack surface a shell never needs.
  {"keyctl", EPERM, Match::kAlways, 0, "kernel keyrings are not namespaced"},
  {"add_key", EPERM, Match::kAlways, 0, "kernel keyrings are not namespaced"},
  {"request_key", EPERM, Match::kAlways, 0, "kernel keyrings are not namespaced"},
  {"bpf", EPERM, Match::kAlways, 0, "eBPF programs and maps"},
  {"perf_event_open", EPERM, Match::kAlways, 0, "performance counters leak host state"},
  {"userfaultfd", EPERM, Match::kAlways, 0, "a common kernel exploit primitive"},
  {"io_uring_setup", EPERM, Match::kAlways, 0,
   "io_uring bypasses per-syscall filtering"},
  {"io_uring_enter", EPERM, Match::kAlways, 0,
   "io_uring bypasses per-syscall filtering"},
  {"io_uring_register", EPERM, Match::kAlways, 0,
   "io_uring bypasses per-syscall filtering"},
  {"kexec_load", EPERM, Match::kAlways, 0, "loads a new kernel"},
  {"kexec_file_load", EPERM, Match::kAlways, 0, "loads a new kernel"},
  {"init_module", EPERM, Match::kAlways, 0, "loads kernel modules"},
  {"finit_module", EPERM, Match::kAlways, 0, "loads kernel modules"},
  {"delete_module", EPERM, Match::kAlways, 0, "unloads kernel modules"},
  {"personality", EPERM, Match::kPersonalityChange, 0,
   "any persona but PER_LINUX (0); the query 0xffffffff works: flags such as "
   "ADDR_NO_RANDOMIZE and READ_IMPLIES_EXEC weaken exploit mitigations"},
  {"modify_ldt", EPERM, Match::kAlways, 0,
   "x86 local descriptor tables: old kernel attack surface, needed only by 16-bit code"},
  // Other processes' memory and descriptors.
  {"ptrace", EPERM, Match::kAlways, 0, "no tracing (debuggers and strace fail)"},
  {"process_vm_readv", EPERM, Match::kAlways, 0, "reads another process's memory"},
  {"process_vm_writev", EPERM, Match::kAlways, 0, "writes another process's memory"},
  {"pidfd_getfd", EPERM, Match::kAlways, 0,
   "copies another process's descriptor (ptybox-init's control socket)"},
  // Privilege bits: no file leaves a session set-user-id or set-group-id (docs/security.md, "No
  // privilege bits leave a session"). EPERM is what the kernel itself answers a caller who may
  // not change a file's mode, so tools report "Operation not permitted" and go on.
  {"chmod", EPERM, Match::kSetidMode, 0,
   "with S_ISUID or S_ISGID in the mode (arg1): no privilege bits leave a session", 1},
  {"fchmod", EPERM, Match::kSetidMode, 0,
   "with S_ISUID or S_ISGID in the mode (arg1): no privilege bits leave a session", 1},
  {"fchmodat", EPERM, Match::kSetidMode, 0,
   "with S_ISUID or S_ISGID in the mode (arg2): no privilege bits leave a session", 2},
  {"fchmodat2", EPERM, Match::kSetidMode, 0,
   "with S_ISUID or S_ISGID in the mode (arg2): no privilege bits leave a session", 2},
  {"open", EPERM, Match::kSetidCreateMode, 0,
   "with O_CREAT or O_TMPFILE (arg1) and S_ISUID or S_ISGID in the mode (arg2)", 2},
  {"openat", EPERM, Match::kSetidCreateMode, 0,
   "with O_CREAT or O_TMPFILE (arg2) and S_ISUID or S_ISGID in the mode (arg3)", 3},
  {"creat", EPERM, Match::kSetidMode, 0,
   "with S_ISUID or S_ISGID in the mode (arg1)", 1},
  {"mkdir", EPERM, Match::kSetidMode, 0,
   "with S_ISUID or S_ISGID in the mode (arg1)", 1},
  {"mkdirat", EPERM, Match::kSetidMode, 0,
   "with S_ISUID or S_ISGID in the mode (arg2)", 2},
  {"mknod", EPERM, Match::kSetidMode, 0,
   "with S_ISUID or S_ISGID in the mode (arg1), e.g. a regular file 06755", 1},
  {"mknodat", EPERM, Match::kSetidMode, 0,
   "with S_ISUID or S_ISGID in the mode (arg2), e.g. a regular file 06755", 2},
  {"openat2", ENOSYS, Match::kAlways, 0,
   "its mode lives in a struct seccomp cannot read; libc falls back to openat"},
  // Network, when the policy denies it (the network namespace is empty as well).
  {"socket", EAFNOSUPPORT, Match::kArgNotIn, 0,
   "network denied: any domain but AF_UNIX, AF_INET, AF_INET6 and AF_NETLINK", 0,
   {.arg = 0, .allowed = kLoopbackDomains}},
  {"socket", EPERM, Match::kArgNotIn, 0,
   "network denied: AF_INET with a type (arg1) other than SOCK_STREAM, SOCK_DGRAM (no raw)", 0,
   {.arg = 1, .mask = kSockTypeMask, .allowed = kInetTypes, .domain = AF_INET}},
  {"socket", EPERM, Match::kArgNotIn, 0,
   "network denied: AF_INET6 with a type (arg1) other than SOCK_STREAM, SOCK_DGRAM (no raw)", 0,
   {.arg = 1, .mask = kSockTypeMask, .allowed = kInetTypes, .domain = AF_INET6}},
  {"socket", EPROTONOSUPPORT, Match::kArgNotIn, 0,
   "network denied: AF_INET with a protocol (arg2) other than 0, TCP, UDP", 0,
   {.arg = 2, .allowed = kInetProtocols, .domain = AF_INET}},
  {"socket", EPROTONOSUPPORT, Match::kArgNotIn, 0,
   "network denied: AF_INET6 with a protocol (arg2) other than 0, TCP, UDP", 0,
   {.arg = 2, .allowed = kInetProtocols, .domain = AF_INET6}},
  {"socket", EPROTONOSUPPORT, Match::kArgNotIn, 0,
   "network denied: AF_NETLINK with a protocol (arg2) other than NETLINK_ROUTE", 0,
   {.arg = 2, .allowed = kNetlinkProtocols, .domain = AF_NETLINK}},
  {"socketpair", EAFNOSUPPORT, Match::kDomainNotUnix, 0,
   "network denied: any domain but AF_UNIX"},
};
// clang-format on

// Frees the libseccomp context on every path.
class FilterContext final {
 public:
  FilterContext() : ctx_(seccomp_init(SCMP_ACT_ALLOW)) {}
  FilterContext(const FilterContext&) = delete;
  FilterContext& operator=(const FilterContext&) = delete;
  ~FilterContext() {
    if (ctx_ != nullptr) seccomp_release(ctx_);
  }
  [[nodiscard]] scmp_filter_ctx Get() const { return ctx_; }

 private:
  scmp_filter_ctx ctx_;
};

std::unexpected<Error> LibseccompError(std::string_view call, std::string_view what, int rc) {
  std::string message = "libseccomp " + std::string(call);
  if (!what.empty()) message += " (" + std::string(what) + ")";
  message += ": ";
  message += std::strerror(-rc);
  message += "; the seccomp filter could not be built, so no confined session can start";
  return Fail(ErrorKind::kSandboxUnavailable, std::move(message));
}

// One rule per refused value (rules of one syscall are ORed; libseccomp cannot AND two
// comparisons of one argument, so "not in the set" is spelled out). With a mask, every masked
// value outside the set; without, every value below the set's largest and all above it (a value
// with garbage in the upper 32 bits is refused, which errs on the safe side).
int AddArgNotIn(scmp_filter_ctx ctx, uint32_t action, int nr, const ArgSet& only) {
  const auto allowed = [&](uint64_t v) {
    return std::ranges::find(only.allowed, v) != only.allowed.end();
  };
  const auto add = [&](scmp_arg_cmp refused) {
    if (only.domain < 0) return seccomp_rule_add(ctx, action, nr, 1, refused);
    return seccomp_rule_add(ctx, action, nr, 2,
                            SCMP_A0(SCMP_CMP_EQ, static_cast<uint64_t>(only.domain)), refused);
  };
  int rc = 0;
  if (only.mask != 0) {
    for (uint64_t v = 0; v <= only.mask && rc == 0; ++v) {
      if (!allowed(v)) rc = add(scmp_arg_cmp{only.arg, SCMP_CMP_MASKED_EQ, only.mask, v});
    }
    return rc;
  }
  const uint64_t largest = std::ranges::max(only.allowed);
  for (uint64_t v = 0; v < largest && rc == 0; ++v) {
    if (!allowed(v)) rc = add(scmp_arg_cmp{only.arg, SCMP_CMP_EQ, v, 0});
  }
  if (rc == 0) rc = add(scmp_arg_cmp{only.arg, SCMP_CMP_GT, largest, 0});
  return rc;
}

Result<void> AddRow(scmp_filter_ctx ctx, const Row& row, const SeccompOptions& options) {
  if ((row.match == Match::kDomainNotUnix || row.match == Match::kArgNotIn) &&
      options.network_allowed) {
    return {};
  }
  int nr = seccomp_syscall_resolve_name(std::string(row.syscall).c_str());
  // libseccomp before 2.5.5 does not know fchmodat2; the native number is the kernel's.
  if ((nr == __NR_SCMP_ERROR || nr < 0) && row.syscall == "fchmodat2") nr = __NR_fchmodat2;
  if (nr == __NR_SCMP_ERROR || nr < 0) {
    // Unknown to this libseccomp, or absent on this architecture: nothing to filter.
    LogDebug("seccomp: skipping " + std::string(row.syscall) +
             ": unknown to libseccomp on this architecture");
    return {};
  }
  const uint32_t action = SCMP_ACT_ERRNO(static_cast<uint16_t>(row.error));
  int rc = 0;
  switch (row.match) {
    case Match::kAlways:
      rc = seccomp_rule_add(ctx, action, nr, 0);
      break;
    case Match::kIoctlRequest:
      rc = seccomp_rule_add(ctx, action, nr, 1,
                            SCMP_A1(SCMP_CMP_MASKED_EQ, 0xFFFFFFFFu, row.request));
      break;
    case Match::kCloneNamespaceFlag:
      // One rule per flag: libseccomp ORs rules of the same syscall.
      for (uint64_t flag : kCloneNamespaceFlags) {
        const scmp_arg_cmp cmp{kCloneFlagsArg, SCMP_CMP_MASKED_EQ, flag, flag};
        rc = seccomp_rule_add(ctx, action, nr, 1, cmp);
        if (rc != 0) break;
      }
      break;
    case Match::kDomainNotUnix:
      rc = seccomp_rule_add(ctx, action, nr, 1, SCMP_A0(SCMP_CMP_NE, AF_UNIX));
      break;
    case Match::kArgNotIn:
      rc = AddArgNotIn(ctx, action, nr, row.only);
      break;
    case Match::kPersonalityChange:
      // The kernel reads the low 32 bits. A 32-bit value other than 0 and 0xffffffff has a
      // set bit followed (cyclically) by a clear one: one masked rule per such pair. libseccomp
      // cannot AND two comparisons of one argument.
      for (unsigned bit = 0; bit < 32 && rc == 0; ++bit) {
        const uint64_t set = uint64_t{1} << bit;
        const uint64_t clear = uint64_t{1} << ((bit + 1) % 32);
        rc = seccomp_rule_add(ctx, action, nr, 1, SCMP_A0(SCMP_CMP_MASKED_EQ, set | clear, set));
      }
      break;
    case Match::kSetidMode:
      // One rule per bit (rules of one syscall are ORed). The kernel reads the mode as a
      // umode_t; a masked compare ignores every other bit, whatever the upper 32 hold.
      for (uint64_t bit : kSetidBits) {
        const scmp_arg_cmp cmp{row.mode_arg, SCMP_CMP_MASKED_EQ, bit, bit};
        rc = seccomp_rule_add(ctx, action, nr, 1, cmp);
        if (rc != 0) break;
      }
      break;
    case Match::kSetidCreateMode:
      // Comparisons within one rule are ANDed: a creating flag and a privilege bit.
      for (uint64_t flag : kCreateFlags) {
        for (uint64_t bit : kSetidBits) {
          const scmp_arg_cmp creates{row.mode_arg - 1, SCMP_CMP_MASKED_EQ, flag, flag};
          const scmp_arg_cmp setid{row.mode_arg, SCMP_CMP_MASKED_EQ, bit, bit};
          rc = seccomp_rule_add(ctx, action, nr, 2, creates, setid);
          if (rc != 0) break;
        }
        if (rc != 0) break;
      }
      break;
  }
  if (rc != 0) return LibseccompError("seccomp_rule_add", row.syscall, rc);
  return {};
}

}  // namespace

namespace {

// The program libseccomp compiles from the table for `options`, as BPF bytes.
Result<std::string> CompileProgram(const SeccompOptions& options) {
  FilterContext ctx;
  if (ctx.Get() == nullptr) {
    return Fail(ErrorKind::kSandboxUnavailable,
                "libseccomp seccomp_init failed; the seccomp filter could not be built");
  }
  // Only the native ABI: i386 (int $0x80) and x32 calls fail as if the kernel lacked them.
  // libseccomp sends x32 syscall numbers (bit 0x40000000) on x86_64 to this action as well.
  int rc = seccomp_attr_set(ctx.Get(), SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_ERRNO(ENOSYS));
  if (rc != 0) return LibseccompError("seccomp_attr_set", "SCMP_FLTATR_ACT_BADARCH", rc);

  for (const Row& row : kRules) {
    if (auto added = AddRow(ctx.Get(), row, options); !added) return Propagate(added);
  }

  UniqueFd fd(memfd_create("ptybox-seccomp-export", MFD_CLOEXEC));
  if (!fd) return std::unexpected(Error::FromErrno(ErrorKind::kSandboxUnavailable, "memfd_create"));
  rc = seccomp_export_bpf(ctx.Get(), fd.Get());
  if (rc != 0) return LibseccompError("seccomp_export_bpf", "", rc);
  std::string program;
  char buffer[4096];
  for (off_t at = 0;;) {
    const ssize_t got = ::pread(fd.Get(), buffer, sizeof buffer, at);
    if (got < 0) return std::unexpected(Error::FromErrno(ErrorKind::kSandboxUnavailable, "pread"));
    if (got == 0) break;
    program.append(buffer, static_cast<size_t>(got));
    at += got;
  }
  return program;
}

// The program for `options`, compiled once per process: the table and the architecture are
// fixed, so every launch with the same options gets the same bytes (compiling costs more than
// the rest of a launch's preparation on the reactor).
Result<std::string> ProgramFor(const SeccompOptions& options) {
  static std::mutex mutex;
  static std::optional<std::string> programs[2];
  std::lock_guard lock(mutex);
  std::optional<std::string>& cached = programs[options.network_allowed ? 1 : 0];
  if (!cached) {
    Result<std::string> compiled = CompileProgram(options);
    if (!compiled) return Propagate(compiled);
    cached = std::move(*compiled);
  }
  return *cached;
}

}  // namespace

Result<UniqueFd> BuildSeccompProgram(const SeccompOptions& options) {
  Result<std::string> program = ProgramFor(options);
  if (!program) return Propagate(program);
  UniqueFd fd(memfd_create("ptybox-seccomp", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (!fd) return std::unexpected(Error::FromErrno(ErrorKind::kSandboxUnavailable, "memfd_create"));
  for (size_t done = 0; done < program->size();) {
    const ssize_t wrote = ::write(fd.Get(), program->data() + done, program->size() - done);
    if (wrote < 0) {
      if (errno == EINTR) continue;
      return std::unexpected(Error::FromErrno(ErrorKind::kSandboxUnavailable, "write", "memfd"));
    }
    done += static_cast<size_t>(wrote);
  }
  if (fcntl(fd.Get(), F_ADD_SEALS, F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE) != 0) {
    return std::unexpected(
        Error::FromErrno(ErrorKind::kSandboxUnavailable, "fcntl(F_ADD_SEALS)", "memfd"));
  }
  if (lseek(fd.Get(), 0, SEEK_SET) != 0) {
    return std::unexpected(Error::FromErrno(ErrorKind::kSandboxUnavailable, "lseek", "memfd"));
  }
  return fd;
}

const std::vector<SeccompRule>& SeccompRules() {
  static const std::vector<SeccompRule> rules = [] {
    std::vector<SeccompRule> out;
    for (const Row& row : kRules)
      out.push_back({row.syscall, ::strerrorname_np(row.error), row.why});
    return out;
  }();
  return rules;
}

}  // namespace ptybox::sandbox
