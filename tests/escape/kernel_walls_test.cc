// Wall 1 of docs/security.md: the kernel's global knobs stay out of reach. Through the real
// daemon and real bash, a session writes /proc/sys/kernel/core_pattern and /proc/sysrq-trigger
// and lists the host's network interfaces in /sys; in both confined modes all of that fails,
// while the CPU count programs need is still right. danger-full-access is the control only
// where that is harmless: it never writes a host setting.
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <fstream>

#include "common/join.h"
#include "tests/escape/walls_support.h"

namespace ptybox::testing {
namespace {

namespace fs = std::filesystem;

class KernelWallsTest : public WallsTest {};

// Puts a host sysctl back from outside whatever the test did or failed to do (root only:
// nobody else can change one anyway).
class SysctlGuard final {
 public:
  explicit SysctlGuard(fs::path path) : path_(std::move(path)), original_(ReadFile(path_)) {}
  ~SysctlGuard() {
    if (::geteuid() != 0 || ReadFile(path_) == original_) return;
    std::ofstream(path_) << original_;
    ADD_FAILURE() << path_ << " was changed from inside a session and has been restored";
  }
  SysctlGuard(const SysctlGuard&) = delete;
  SysctlGuard& operator=(const SysctlGuard&) = delete;
  [[nodiscard]] const std::string& original() const { return original_; }

 private:
  fs::path path_;
  std::string original_;
};

std::string HostMountFlags(const fs::path& path) {
  struct statvfs st {};
  if (::statvfs(path.c_str(), &st) != 0) return "absent";
  return (st.f_flag & ST_RDONLY) != 0 ? "ro" : "rw";
}

TEST_P(KernelWallsTest, CorePatternAndSysrqCannotBeWritten) {
  const fs::path core = "/proc/sys/kernel/core_pattern";
  SysctlGuard guard(core);
  if (Confined()) {
    // The attack (docs/security.md, "Wall 1"): a core_pattern pipe runs a program as host root on a
    // crash.
    Observed w = Run("write-core_pattern",
                     "echo '|/bin/false ptybox-escape' > /proc/sys/kernel/core_pattern");
    EXPECT_EQ(w.exit, 1) << w.Show();
    EXPECT_TRUE(w.Says("Read-only file system")) << w.Show();
    EXPECT_EQ(ReadFile(core), guard.original());
    Observed python = Run("write-core_pattern-python", Walls("write " + core.string() + " x"));
    EXPECT_EQ(python.exit, 1) << python.Show();
    EXPECT_TRUE(python.Says("write: EROFS")) << python.Show();
    // 'h' only prints the help to the kernel log, should the write ever get through.
    Observed sysrq = Run("write-sysrq-trigger", "echo h > /proc/sysrq-trigger");
    EXPECT_EQ(sysrq.exit, 1) << sysrq.Show();
    EXPECT_TRUE(sysrq.Says(fs::exists("/proc/sysrq-trigger") ? "Read-only file system"
                                                             : "No such file or directory"))
        << sysrq.Show();
    EXPECT_EQ(ReadFile(core), guard.original());
  }
  // The mounts themselves, whatever the uid: read-only inside, as on the host outside.
  const std::vector<std::string> paths = {"/proc/sys", "/proc/sysrq-trigger", "/proc/irq",
                                          "/proc/bus", "/proc/fs"};
  std::string specs;
  for (const auto& path : paths) specs += " mount-flags:" + path;
  Observed flags = Run("proc-mount-flags", SandboxProbe(specs));
  auto seen = ProbeDetails(flags.text);
  for (const auto& path : paths) {
    const std::string host = HostMountFlags(path);
    const std::vector<std::string>& inside = seen["mount-flags:" + path];
    ASSERT_FALSE(inside.empty()) << path << ": " << flags.Show();
    if (host == "absent") {
      EXPECT_EQ(inside[0], "ENOENT") << path << ": " << flags.Show();
    } else if (Confined()) {
      EXPECT_EQ(inside, (std::vector<std::string>{"ok", "ro"})) << path << ": " << flags.Show();
    } else {
      EXPECT_EQ(inside, (std::vector<std::string>{"ok", host})) << path << ": " << flags.Show();
    }
  }
}

TEST_P(KernelWallsTest, HostSysIsNotExposed) {
  Observed net = Run("ls-/sys/class/net", "ls /sys/class/net");
  Observed top = Run("ls-/sys", "ls /sys | tr '\\n' ' '");
  if (Confined()) {
    EXPECT_EQ(net.exit, 2) << net.Show();
    EXPECT_TRUE(net.Says("No such file or directory")) << net.Show();
    EXPECT_EQ(top.text, "devices") << top.Show();
    Observed system = Run("ls-/sys/devices/system", "ls /sys/devices/system | tr '\\n' ' '");
    std::vector<std::string> present;
    for (const char* dir : {"cpu", "node"}) {
      if (fs::exists(fs::path("/sys/devices/system") / dir)) present.emplace_back(dir);
    }
    const std::string expected = Join(present, " ");
    EXPECT_EQ(system.text, expected) << system.Show();
    Observed write = Run("write-/sys", "touch /sys/x /sys/devices/system/cpu/x");
    EXPECT_EQ(write.exit, 1) << write.Show();
    EXPECT_TRUE(write.Says("touch: cannot touch '/sys/x': Read-only file system")) << write.Show();
    EXPECT_TRUE(
        write.Says("touch: cannot touch '/sys/devices/system/cpu/x': Read-only file system"))
        << write.Show();
  } else if (fs::exists("/sys/class/net/lo")) {
    // The control: the host's interfaces really are there to be listed.
    EXPECT_EQ(net.exit, 0) << net.Show();
    EXPECT_NE(std::find(Words(net.text).begin(), Words(net.text).end(), "lo"),
              Words(net.text).end())
        << net.Show();
  }
}

TEST_P(KernelWallsTest, CpuCountStillWorks) {
  cpu_set_t set;
  CPU_ZERO(&set);
  ASSERT_EQ(::sched_getaffinity(0, sizeof set, &set), 0);
  const std::string affinity = std::to_string(CPU_COUNT(&set));
  const std::string online = std::to_string(::sysconf(_SC_NPROCESSORS_ONLN));
  Observed nproc = Run("nproc", "nproc");
  EXPECT_EQ(nproc.exit, 0) << nproc.Show();
  EXPECT_EQ(nproc.text, affinity) << nproc.Show();
  Observed python = Run("os.cpu_count", "python3 -c 'import os;print(os.cpu_count())'");
  EXPECT_EQ(python.exit, 0) << python.Show();
  EXPECT_EQ(python.text, online) << python.Show();
  Observed getconf = Run("getconf", "getconf _NPROCESSORS_ONLN");
  EXPECT_EQ(getconf.text, online) << getconf.Show();
}

INSTANTIATE_TEST_SUITE_P(Modes, KernelWallsTest,
                         ::testing::Values("read-only", "workspace-write", "danger-full-access"),
                         ModeTestName);

}  // namespace
}  // namespace ptybox::testing
