// The seccomp program for real: each rule is tried by a forked child that loaded the exported
// program (as bwrap would), ordinary operations must keep working, the exported BPF is also
// run through an interpreter for inputs this kernel cannot produce, and docs/sandbox.md must
// list every rule.
#include "sandbox/seccomp_filter.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/audit.h>
#include <linux/netlink.h>
#include <linux/sched.h>
#include <linux/seccomp.h>
#include <netinet/in.h>
#include <seccomp.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>

#include "tests/sandbox/bpf_interpreter.h"
#include "tests/sandbox/syscall_probes.h"
#include "tests/support/temp_dir.h"

namespace ptybox::sandbox {
namespace {

using testing::ErrnoFromName;
using testing::ErrnoName;
using testing::ProbeOutcome;
using testing::RunProbeInChild;

std::vector<uint8_t> Program(bool network_allowed) {
  auto fd = BuildSeccompProgram({.network_allowed = network_allowed});
  EXPECT_TRUE(fd.has_value()) << (fd ? "" : fd.error().Describe());
  if (!fd) return {};
  return testing::ReadProgram(fd->Get());
}

int ExpectedErrno(const SeccompRule& rule) {
  auto err = ErrnoFromName(rule.action);
  EXPECT_TRUE(err.has_value()) << rule.action;
  return err.value_or(-2);
}

TEST(SeccompFilterTest, ProgramIsASealedMemfdAtOffsetZero) {
  auto fd = BuildSeccompProgram({});
  ASSERT_TRUE(fd.has_value()) << fd.error().Describe();
  EXPECT_EQ(lseek(fd->Get(), 0, SEEK_CUR), 0);
  EXPECT_TRUE(fcntl(fd->Get(), F_GETFD) & FD_CLOEXEC);
  const int seals = fcntl(fd->Get(), F_GET_SEALS);
  EXPECT_EQ(seals & (F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE),
            F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE);
  EXPECT_EQ(write(fd->Get(), "x", 1), -1);
  EXPECT_EQ(errno, EPERM);
  const std::vector<uint8_t> bytes = testing::ReadProgram(fd->Get());
  EXPECT_GT(bytes.size(), 0u);
  EXPECT_EQ(bytes.size() % 8, 0u);  // whole sock_filter instructions
}

// The program is compiled once per process and copied into each launch's memfd: every launch
// gets a memfd of its own (sealed, as above) holding the same program, and the two network
// settings keep their two programs.
TEST(SeccompFilterTest, EveryLaunchGetsItsOwnMemfdWithTheSameProgram) {
  auto first = BuildSeccompProgram({});
  auto second = BuildSeccompProgram({});
  ASSERT_TRUE(first.has_value()) << first.error().Describe();
  ASSERT_TRUE(second.has_value()) << second.error().Describe();
  struct stat a {};
  struct stat b {};
  ASSERT_EQ(fstat(first->Get(), &a), 0);
  ASSERT_EQ(fstat(second->Get(), &b), 0);
  EXPECT_NE(a.st_ino, b.st_ino);
  EXPECT_EQ(testing::ReadProgram(first->Get()), testing::ReadProgram(second->Get()));
  EXPECT_NE(Program(false), Program(true));
  EXPECT_EQ(Program(true), Program(true));
}

TEST(SeccompFilterTest, TableCoversTheRequiredSyscalls) {
  std::set<std::string_view> listed;
  for (const auto& rule : SeccompRules()) {
    listed.insert(rule.syscall);
    EXPECT_TRUE(rule.action == "EPERM" || rule.action == "ENOSYS" ||
                rule.action == "EAFNOSUPPORT" || rule.action == "EPROTONOSUPPORT")
        << rule.syscall << " " << rule.action;
    EXPECT_FALSE(rule.why.empty()) << rule.syscall;
  }
  for (std::string_view name : {"ioctl",
                                "clone",
                                "clone3",
                                "unshare",
                                "setns",
                                "mount",
                                "umount2",
                                "pivot_root",
                                "chroot",
                                "keyctl",
                                "add_key",
                                "request_key",
                                "bpf",
                                "perf_event_open",
                                "kexec_load",
                                "kexec_file_load",
                                "init_module",
                                "finit_module",
                                "delete_module",
                                "userfaultfd",
                                "io_uring_setup",
                                "io_uring_enter",
                                "io_uring_register",
                                "ptrace",
                                "process_vm_readv",
                                "process_vm_writev",
                                "pidfd_getfd",
                                "personality",
                                "open_tree",
                                "move_mount",
                                "fsopen",
                                "fsconfig",
                                "fsmount",
                                "fspick",
                                "mount_setattr",
                                "socket",
                                "socketpair",
                                "chmod",
                                "fchmod",
                                "fchmodat",
                                "open",
                                "openat",
                                "creat",
                                "mkdir",
                                "mkdirat",
                                "mknod",
                                "mknodat",
                                "openat2"}) {
    EXPECT_TRUE(listed.contains(name)) << name << " is missing from the table";
    EXPECT_NE(seccomp_syscall_resolve_name(std::string(name).c_str()), __NR_SCMP_ERROR)
        << name << " is unknown to this libseccomp, so the filter skips it";
  }
}

// Rows refusing privilege bits are probed with a real mode 04755 in a scratch directory.
bool IsSetidRow(const SeccompRule& rule) { return rule.why.find("S_ISUID") != std::string::npos; }

// Every row of the table, tried for real under the filter with the network denied.
TEST(SeccompFilterTest, EveryRuleIsEnforcedForReal) {
  const std::vector<uint8_t> program = Program(/*network_allowed=*/false);
  ASSERT_FALSE(program.empty());
  const ::ptybox::testing::TempDir scratch;
  std::set<std::string_view> seen;
  for (const SeccompRule& rule : SeccompRules()) {
    if (!seen.insert(rule.syscall).second) continue;  // ioctl: its variants are tested below
    // socket: its first row (the domain); the loopback's rows have a test of their own below.
    const std::string spec =
        IsSetidRow(rule) ? "setid:" + std::string(rule.syscall) + ":4755:" + scratch.path().string()
        : rule.syscall == "socket" ? std::string("socket:packet")
                                   : std::string(rule.syscall);
    const ProbeOutcome filtered = RunProbeInChild(spec, &program);
    const ProbeOutcome baseline = RunProbeInChild(spec);
    std::cout << "  " << rule.syscall << ": without filter " << ErrnoName(baseline.err)
              << ", with filter " << ErrnoName(filtered.err) << "\n";
    EXPECT_EQ(ErrnoName(filtered.err), ErrnoName(ExpectedErrno(rule)))
        << rule.syscall << " " << filtered.info;
  }
}

// As root the unfiltered calls succeed or fail differently, so the filter is what refused.
TEST(SeccompFilterTest, TheFilterIsWhatRefuses) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root: unprivileged baselines may be EPERM too";
  const std::vector<uint8_t> program = Program(false);
  for (const char* probe : {"ioctl", "clone", "clone3", "unshare", "mount", "chroot", "open_tree",
                            "keyctl", "ptrace", "process_vm_readv", "socket:packet"}) {
    const ProbeOutcome baseline = RunProbeInChild(probe);
    const ProbeOutcome filtered = RunProbeInChild(probe, &program);
    EXPECT_NE(baseline.err, filtered.err) << probe << ": " << ErrnoName(baseline.err);
  }
}

TEST(SeccompFilterTest, TerminalInjectionIsRefusedIncludingTheHighBitVariant) {
  const std::vector<uint8_t> program = Program(false);
  EXPECT_EQ(ErrnoName(RunProbeInChild("ioctl:tiocsti", &program).err), "EPERM");
  EXPECT_EQ(ErrnoName(RunProbeInChild("ioctl:tiocsti-high", &program).err), "EPERM");
  EXPECT_EQ(ErrnoName(RunProbeInChild("ioctl:tioclinux", &program).err), "EPERM");
  // Other terminal ioctls still work.
  EXPECT_EQ(ErrnoName(RunProbeInChild("ioctl:tiocgwinsz", &program).err), "ok");
}

// personality: only PER_LINUX and the query pass; modify_ldt and TIOCSETD never
// (docs/security.md, "Wall 4").
TEST(SeccompFilterTest, PersonalityLdtAndLineDisciplineAreRefused) {
  const std::vector<uint8_t> program = Program(/*network_allowed=*/false);
  EXPECT_EQ(ErrnoName(RunProbeInChild("personality:query", &program).err), "ok");
  EXPECT_EQ(ErrnoName(RunProbeInChild("personality:linux", &program).err), "ok");
  EXPECT_EQ(ErrnoName(RunProbeInChild("personality", &program).err), "EPERM");
  EXPECT_EQ(ErrnoName(RunProbeInChild("personality:linux32", &program).err), "EPERM");
  EXPECT_EQ(ErrnoName(RunProbeInChild("personality", nullptr).err), "ok");
#if defined(__x86_64__)
  EXPECT_EQ(ErrnoName(RunProbeInChild("modify_ldt", &program).err), "EPERM");
  EXPECT_EQ(ErrnoName(RunProbeInChild("modify_ldt", nullptr).err), "ok");
#endif
  EXPECT_EQ(ErrnoName(RunProbeInChild("ioctl:tiocsetd", &program).err), "EPERM");
  EXPECT_EQ(ErrnoName(RunProbeInChild("ioctl:tiocsetd", nullptr).err), "ok");
  EXPECT_EQ(ErrnoName(RunProbeInChild("pidfd_getfd", &program).err), "EPERM");
  EXPECT_EQ(ErrnoName(RunProbeInChild("pidfd_getfd", nullptr).err), "ok");
}

// No privilege bits: every call that sets a mode, for real, with S_ISUID, S_ISGID, both, and
// the same mode without them (which must work and leave exactly that mode).
TEST(SeccompFilterTest, PrivilegeBitsAreRefusedByEveryCallThatSetsAMode) {
  const std::vector<uint8_t> program = Program(/*network_allowed=*/false);
  const ::ptybox::testing::TempDir scratch;
  ASSERT_FALSE(scratch.path().empty());
  umask(022);
  for (const char* call : {"chmod", "fchmod", "fchmodat", "fchmodat2", "open", "openat",
                           "openat-tmpfile", "creat", "mkdir", "mkdirat", "mknod", "mknodat"}) {
    for (const char* mode : {"4755", "2755", "6755", "4000", "2000"}) {
      const std::string spec =
          std::string("setid:") + call + ":" + mode + ":" + scratch.path().string();
      const ProbeOutcome filtered = RunProbeInChild(spec, &program);
      EXPECT_EQ(ErrnoName(filtered.err), "EPERM") << spec << " left " << filtered.info;
      // What the refused call left: nothing, or the 0644 file the chmod family started from.
      const bool chmod_family = std::string_view(call).find("chmod") != std::string_view::npos;
      if (std::string_view(call) != "openat-tmpfile") {
        EXPECT_EQ(filtered.info, chmod_family ? "644" : "absent") << spec;
      }
    }
    for (const char* mode : {"755", "1777", "700"}) {
      const std::string spec =
          std::string("setid:") + call + ":" + mode + ":" + scratch.path().string();
      const ProbeOutcome filtered = RunProbeInChild(spec, &program);
      EXPECT_EQ(ErrnoName(filtered.err), "ok") << spec << " " << filtered.info;
      // umask 022 leaves 755 and 700 whole and 1777 as 1755 for the creating calls.
      const std::string expected =
          std::string(mode) == "1777" &&
                  std::string_view(call).find("chmod") == std::string_view::npos
              ? "1755"
              : mode;
      EXPECT_EQ(filtered.info, expected) << spec;
    }
  }
  // Without the filter the same calls keep the bits: the probe sees what it claims to refuse.
  const ProbeOutcome control =
      RunProbeInChild("setid:chmod:4755:" + scratch.path().string(), /*program=*/nullptr);
  EXPECT_EQ(ErrnoName(control.err), "ok");
  EXPECT_EQ(control.info, "4755");
  // openat2 cannot be inspected: ENOSYS, whatever the mode, and libc's openat still works.
  EXPECT_EQ(
      ErrnoName(RunProbeInChild("setid:openat2:755:" + scratch.path().string(), &program).err),
      "ENOSYS");
  EXPECT_EQ(ErrnoName(RunProbeInChild("setid:openat2:755:" + scratch.path().string()).err), "ok");
}

TEST(SeccompFilterTest, CloneWithAnyNamespaceFlagIsRefused) {
  const std::vector<uint8_t> program = Program(false);
  for (const char* flag :
       {"newns", "newuts", "newipc", "newuser", "newpid", "newnet", "newcgroup", "newtime"}) {
    EXPECT_EQ(ErrnoName(RunProbeInChild(std::string("clone:") + flag, &program).err), "EPERM")
        << flag;
  }
  EXPECT_EQ(ErrnoName(RunProbeInChild("clone:none", &program).err), "ok");
}

TEST(SeccompFilterTest, NetworkDeniedLeavesUnixAndLoopbackSockets) {
  const std::vector<uint8_t> program = Program(false);
  // What a loopback needs: TCP and UDP over IPv4 and IPv6 (the namespace holds only lo), and
  // NETLINK_ROUTE for `ip addr` and getifaddrs(). The unfiltered answer where the host itself
  // refuses (IPv6 disabled): the filter must not be what refuses.
  for (const char* probe :
       {"socket:inet", "socket:inet:dgram", "socket:inet:stream:6", "socket:inet:dgram:17",
        "socket:inet6", "socket:inet6:dgram", "socket:netlink", "socket:netlink:dgram:0",
        "socket:unix", "socketpair:unix"}) {
    EXPECT_EQ(ErrnoName(RunProbeInChild(probe, &program).err),
              ErrnoName(RunProbeInChild(probe).err))
        << probe;
  }
  EXPECT_EQ(ErrnoName(RunProbeInChild("socket:inet", &program).err), "ok");
  EXPECT_EQ(ErrnoName(RunProbeInChild("socket:netlink", &program).err), "ok");
  // Everything else stays refused.
  EXPECT_EQ(ErrnoName(RunProbeInChild("socket:packet", &program).err), "EAFNOSUPPORT");
  for (const char* probe : {"socket:inet:raw", "socket:inet6:raw", "socket:inet:packet",
                            "socket:inet:seqpacket", "socket:inet6:raw:0"}) {
    EXPECT_EQ(ErrnoName(RunProbeInChild(probe, &program).err), "EPERM") << probe;
  }
  for (const char* probe :
       {"socket:inet:stream:132", "socket:inet6:stream:132", "socket:inet:dgram:1",
        "socket:netlink:raw:12", "socket:netlink:raw:9"}) {
    EXPECT_EQ(ErrnoName(RunProbeInChild(probe, &program).err), "EPROTONOSUPPORT") << probe;
  }
  EXPECT_EQ(ErrnoName(RunProbeInChild("socketpair:inet", &program).err), "EAFNOSUPPORT");
}

TEST(SeccompFilterTest, NetworkAllowedLeavesSocketsAlone) {
  const std::vector<uint8_t> program = Program(true);
  for (const char* probe :
       {"socket:inet", "socket:inet6", "socket:unix", "socketpair:inet", "socketpair:unix"}) {
    // Whatever the host answers without a filter (inet6 may be disabled, AF_INET socketpair
    // is EOPNOTSUPP), the filter must not change it.
    EXPECT_EQ(ErrnoName(RunProbeInChild(probe, &program).err),
              ErrnoName(RunProbeInChild(probe).err))
        << probe;
  }
  EXPECT_EQ(ErrnoName(RunProbeInChild("socket:inet", &program).err), "ok");
  // The rest of the table still applies.
  EXPECT_EQ(ErrnoName(RunProbeInChild("unshare", &program).err), "EPERM");
}

TEST(SeccompFilterTest, OtherAbisAreRefused) {
  const std::vector<uint8_t> program = Program(false);
#if defined(__x86_64__)
  const ProbeOutcome int80_baseline = RunProbeInChild("int80-getpid");
  const ProbeOutcome x32_baseline = RunProbeInChild("x32-getpid");
  std::cout << "  without filter: int $0x80 getpid " << ErrnoName(int80_baseline.err) << " "
            << int80_baseline.info << ", x32 getpid " << ErrnoName(x32_baseline.err) << "\n";
  // A kernel built or booted without IA32 emulation (ia32_emulation=0, or no
  // CONFIG_IA32_EMULATION) kills `int $0x80` before any filter runs: the ABI is unreachable
  // either way, and the filter cannot make it reachable again.
  const std::string int80_expected =
      ErrnoName(int80_baseline.err) == "killed" ? "killed" : "ENOSYS";
  const std::string x32_expected = ErrnoName(x32_baseline.err) == "killed" ? "killed" : "ENOSYS";
  if (int80_expected == "killed" || x32_expected == "killed") {
    std::cout << "  this kernel itself refuses an ABI (killed without the filter): checking that "
                 "the filter keeps it refused\n";
  }
  EXPECT_EQ(ErrnoName(RunProbeInChild("int80-getpid", &program).err), int80_expected);
  EXPECT_EQ(ErrnoName(RunProbeInChild("x32-getpid", &program).err), x32_expected);
#else
  GTEST_SKIP() << "the i386 and x32 probes are x86_64 only";
#endif
}

TEST(SeccompFilterTest, OrdinaryThingsStillWork) {
  for (bool network : {false, true}) {
    const std::vector<uint8_t> program = Program(network);
    for (const char* probe : {"getpid", "open-read-write", "fork-exec-true", "posix-spawn-true",
                              "thread", "pty", "socket:unix"}) {
      const ProbeOutcome outcome = RunProbeInChild(probe, &program);
      EXPECT_EQ(ErrnoName(outcome.err), "ok") << probe << " " << outcome.info;
    }
  }
}

// The exported program, interpreted: inputs the running kernel cannot produce.
class SeccompBpfTest : public ::testing::Test {
 protected:
  std::optional<uint32_t> Run(int nr, std::initializer_list<uint64_t> args = {},
                              uint32_t arch = kNativeArch) {
    testing::SeccompInput input;
    input.nr = nr;
    input.arch = arch;
    size_t i = 0;
    for (uint64_t arg : args) input.args[i++] = arg;
    return testing::RunSeccompBpf(program_, input);
  }
  static constexpr uint32_t Errno(int err) {
    return SECCOMP_RET_ERRNO | static_cast<uint32_t>(err);
  }

#if defined(__x86_64__)
  static constexpr uint32_t kNativeArch = AUDIT_ARCH_X86_64;
#elif defined(__aarch64__)
  static constexpr uint32_t kNativeArch = AUDIT_ARCH_AARCH64;
#else
  static constexpr uint32_t kNativeArch = 0;
#endif
  std::vector<uint8_t> program_ = Program(false);
};

TEST_F(SeccompBpfTest, IoctlRequestIsComparedOnItsLow32Bits) {
  EXPECT_EQ(Run(SYS_ioctl, {0, TIOCSTI}), Errno(EPERM));
  EXPECT_EQ(Run(SYS_ioctl, {0, (1ULL << 32) | TIOCSTI}), Errno(EPERM));
  EXPECT_EQ(Run(SYS_ioctl, {0, 0xFFFFFFFF00000000ULL | TIOCLINUX}), Errno(EPERM));
  EXPECT_EQ(Run(SYS_ioctl, {0, TIOCGWINSZ}), SECCOMP_RET_ALLOW);
}

TEST_F(SeccompBpfTest, PersonalityPassesOnlyLinuxAndTheQueryOnItsLow32Bits) {
  for (uint64_t allowed : {0ULL, 0xFFFFFFFFULL, 1ULL << 32, 0xFFFFFFFFFFFFFFFFULL}) {
    EXPECT_EQ(Run(SYS_personality, {allowed}), SECCOMP_RET_ALLOW) << std::hex << allowed;
  }
  for (uint64_t refused : {0x1ULL, 0x8ULL, 0x40000ULL, 0x0400000ULL, 0x7FFFFFFFULL, 0x80000000ULL,
                           0xFFFFFFFEULL, 0xFFFFFFFF00000008ULL, 0xAAAAAAAAULL, 0x55555555ULL}) {
    EXPECT_EQ(Run(SYS_personality, {refused}), Errno(EPERM)) << std::hex << refused;
  }
}

TEST_F(SeccompBpfTest, CloneFlagsAreCheckedBitByBit) {
  EXPECT_EQ(
      Run(SYS_clone, {CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD |
                      CLONE_SYSVSEM | CLONE_SETTLS | CLONE_PARENT_SETTID | CLONE_CHILD_CLEARTID}),
      SECCOMP_RET_ALLOW);
  EXPECT_EQ(Run(SYS_clone, {CLONE_VM | CLONE_NEWUSER}), Errno(EPERM));
  EXPECT_EQ(Run(SYS_clone, {CLONE_NEWCGROUP | SIGCHLD}), Errno(EPERM));
  EXPECT_EQ(Run(SYS_clone3, {0, 0}), Errno(ENOSYS));
}

TEST_F(SeccompBpfTest, ForeignArchitecturesAndX32AreRefused) {
  if (kNativeArch != AUDIT_ARCH_X86_64) GTEST_SKIP() << "x86_64-specific inputs";
  EXPECT_EQ(Run(20, {}, AUDIT_ARCH_I386), Errno(ENOSYS));  // i386 getpid
  EXPECT_EQ(Run(0x40000000 | SYS_getpid), Errno(ENOSYS));  // x32 getpid
  EXPECT_EQ(Run(0x40000000 | SYS_read), Errno(ENOSYS));
  EXPECT_EQ(Run(SYS_getpid), SECCOMP_RET_ALLOW);
  EXPECT_EQ(Run(SYS_read), SECCOMP_RET_ALLOW);
  EXPECT_EQ(Run(SYS_socket, {AF_UNIX}), SECCOMP_RET_ALLOW);
  EXPECT_EQ(Run(SYS_socket, {AF_INET, SOCK_STREAM}), SECCOMP_RET_ALLOW);
  EXPECT_EQ(Run(SYS_socket, {AF_PACKET}), Errno(EAFNOSUPPORT));
}

// The loopback's rows, value by value: every domain, type and protocol outside the sets.
TEST_F(SeccompBpfTest, OnlyLoopbackSocketsPassWithTheNetworkDenied) {
  for (uint64_t domain = 0; domain < 64; ++domain) {
    const bool allowed =
        domain == AF_UNIX || domain == AF_INET || domain == AF_INET6 || domain == AF_NETLINK;
    EXPECT_EQ(Run(SYS_socket, {domain, SOCK_STREAM, 0}),
              allowed ? std::optional<uint32_t>(SECCOMP_RET_ALLOW) : Errno(EAFNOSUPPORT))
        << domain;
  }
  // Garbage in the upper 32 bits: refused (the safe side), never read as AF_INET.
  EXPECT_EQ(Run(SYS_socket, {(1ULL << 32) | AF_INET, SOCK_STREAM, 0}), Errno(EAFNOSUPPORT));
  EXPECT_EQ(Run(SYS_socket, {~0ULL, SOCK_STREAM, 0}), Errno(EAFNOSUPPORT));
  for (uint64_t domain : {AF_INET, AF_INET6}) {
    for (uint64_t type = 0; type < 16; ++type) {
      const bool allowed = type == SOCK_STREAM || type == SOCK_DGRAM;
      const std::optional<uint32_t> want =
          allowed ? std::optional<uint32_t>(SECCOMP_RET_ALLOW) : Errno(EPERM);
      EXPECT_EQ(Run(SYS_socket, {domain, type, 0}), want) << domain << " " << type;
      // The flags above SOCK_TYPE_MASK do not change the answer.
      EXPECT_EQ(Run(SYS_socket, {domain, type | SOCK_CLOEXEC | SOCK_NONBLOCK, 0}), want)
          << domain << " " << type;
    }
    for (uint64_t protocol = 0; protocol < 300; ++protocol) {
      const bool allowed = protocol == 0 || protocol == IPPROTO_TCP || protocol == IPPROTO_UDP;
      EXPECT_EQ(Run(SYS_socket, {domain, SOCK_STREAM, protocol}),
                allowed ? std::optional<uint32_t>(SECCOMP_RET_ALLOW) : Errno(EPROTONOSUPPORT))
          << domain << " " << protocol;
    }
    EXPECT_EQ(Run(SYS_socket, {domain, SOCK_DGRAM, (1ULL << 32) | IPPROTO_UDP}),
              Errno(EPROTONOSUPPORT));
  }
  EXPECT_EQ(Run(SYS_socket, {AF_NETLINK, SOCK_RAW, NETLINK_ROUTE}), SECCOMP_RET_ALLOW);
  EXPECT_EQ(Run(SYS_socket, {AF_NETLINK, SOCK_DGRAM, NETLINK_ROUTE}), SECCOMP_RET_ALLOW);
  for (uint64_t protocol = 1; protocol < 32; ++protocol) {
    EXPECT_EQ(Run(SYS_socket, {AF_NETLINK, SOCK_RAW, protocol}), Errno(EPROTONOSUPPORT))
        << protocol;
  }
  // The type rows do not touch the other families (AF_UNIX's SOCK_SEQPACKET, netlink's raw).
  EXPECT_EQ(Run(SYS_socket, {AF_UNIX, SOCK_SEQPACKET, 0}), SECCOMP_RET_ALLOW);
  EXPECT_EQ(Run(SYS_socketpair, {AF_INET, SOCK_STREAM, 0}), Errno(EAFNOSUPPORT));
  EXPECT_EQ(Run(SYS_socketpair, {AF_UNIX, SOCK_STREAM, 0}), SECCOMP_RET_ALLOW);
}

TEST_F(SeccompBpfTest, NetworkAllowedAddsNoSocketRule) {
  program_ = Program(true);
  for (uint64_t domain : {AF_INET, AF_INET6, AF_PACKET, AF_NETLINK}) {
    EXPECT_EQ(Run(SYS_socket, {domain, SOCK_RAW, 255}), SECCOMP_RET_ALLOW) << domain;
  }
  EXPECT_EQ(Run(SYS_socketpair, {AF_INET, SOCK_STREAM, 0}), SECCOMP_RET_ALLOW);
}

// Every syscall that takes a mode, each privilege bit alone, together, with other bits, with
// garbage in the upper 32 bits (the kernel reads a umode_t), and for open/openat only when the
// flags create a file.
TEST_F(SeccompBpfTest, PrivilegeBitsInEveryModeArgumentAreRefused) {
#if !defined(__x86_64__)
  GTEST_SKIP() << "the syscall numbers below are x86_64's";
#else
  struct Call {
    long nr;
    unsigned mode_arg;
  };
  const Call calls[] = {{SYS_chmod, 1},   {SYS_fchmod, 1}, {SYS_fchmodat, 2}, {452, 2},
                        {SYS_creat, 1},   {SYS_mkdir, 1},  {SYS_mkdirat, 2},  {SYS_mknod, 1},
                        {SYS_mknodat, 2}, {SYS_open, 2},   {SYS_openat, 3}};
  const uint64_t refused[] = {
      S_ISUID, S_ISGID,       S_ISUID | S_ISGID | 0777,        S_IFREG | 06755,
      04755,   02000 | 01000, 0xFFFFFFFF00000000ULL | S_ISUID, 0xFFFFFFFFFFFFFFFFULL};
  const uint64_t allowed[] = {
      0, 0755, 0777, 01777, S_IFREG | 0644, 0xFFFFFFFF00000000ULL | 0755, 0xFFFFFFFFFFFFF3FFULL};
  for (const Call& call : calls) {
    const bool open_like = call.nr == SYS_open || call.nr == SYS_openat;
    for (uint64_t flags : {uint64_t{O_CREAT | O_WRONLY}, uint64_t{O_TMPFILE | O_RDWR},
                           uint64_t{O_RDONLY}, uint64_t{O_WRONLY | O_TRUNC}}) {
      const bool creates = (flags & (O_CREAT | 020000000)) != 0;  // the kernel's __O_TMPFILE
      for (uint64_t mode : refused) {
        uint64_t args[6] = {};
        args[call.mode_arg] = mode;
        if (open_like) args[call.mode_arg - 1] = flags;
        const auto expected = !open_like || creates ? Errno(EPERM) : SECCOMP_RET_ALLOW;
        EXPECT_EQ(Run(static_cast<int>(call.nr), {args[0], args[1], args[2], args[3]}), expected)
            << "nr " << call.nr << " mode " << std::oct << mode << " flags " << flags;
      }
      for (uint64_t mode : allowed) {
        uint64_t args[6] = {};
        args[call.mode_arg] = mode;
        if (open_like) args[call.mode_arg - 1] = flags;
        EXPECT_EQ(Run(static_cast<int>(call.nr), {args[0], args[1], args[2], args[3]}),
                  SECCOMP_RET_ALLOW)
            << "nr " << call.nr << " mode " << std::oct << mode << " flags " << flags;
      }
      if (!open_like) break;  // flags mean nothing to the others
    }
  }
  // openat2's mode is in memory: refused whole, so libc falls back to openat.
  EXPECT_EQ(Run(437, {0, 0, 0, 24}), Errno(ENOSYS));
  // Other ABIs never reach these rows: refused whole already.
  EXPECT_EQ(Run(15, {0, 04755}, AUDIT_ARCH_I386), Errno(ENOSYS));     // i386 chmod
  EXPECT_EQ(Run(0x40000000 | SYS_chmod, {0, 04755}), Errno(ENOSYS));  // x32 chmod
#endif
}

// The markdown table docs/sandbox.md must contain, rendered from the same list.
std::string RenderSeccompTable() {
  std::ostringstream out;
  out << "| syscall | result | why |\n| --- | --- | --- |\n";
  for (const SeccompRule& rule : SeccompRules()) {
    out << "| `" << rule.syscall << "` | " << rule.action << " | " << rule.why << " |\n";
  }
  return out.str();
}

TEST(SeccompDocTest, DocsListEveryRule) {
  std::ifstream in(std::string(PTYBOX_SOURCE_DIR) + "/docs/sandbox.md");
  ASSERT_TRUE(in) << "docs/sandbox.md is missing";
  std::stringstream doc;
  doc << in.rdbuf();
  const std::string table = RenderSeccompTable();
  EXPECT_NE(doc.str().find(table), std::string::npos)
      << "docs/sandbox.md must contain the seccomp table exactly as generated from "
         "SeccompRules(); replace it with:\n"
      << table;
}

}  // namespace
}  // namespace ptybox::sandbox
