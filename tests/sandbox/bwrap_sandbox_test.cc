// The real thing: bwrap started with BuildBwrapArgv and the exported seccomp program, running
// the probe program inside, in each confined mode. Checks what a process inside sees (uid map,
// its own devpts, writable and read-only paths, private /tmp, network, capabilities, seccomp)
// and what reaches the host.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <iostream>
#include <sstream>

#include "sandbox/bwrap_args.h"
#include "tests/sandbox/sandbox_runner.h"
#include "tests/support/files.h"

namespace ptybox::sandbox {
namespace {

namespace fs = std::filesystem;
using policy::Mode;
using ptybox::testing::ReadFile;
using ptybox::testing::Words;
using testing::RunOptions;
using testing::RunProbesInSandbox;
using testing::SandboxRun;

class BwrapSandboxTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/ptybox-bwrap-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    root_ = pattern;
    // A workspace under /tmp whose name needs argv (a space and a newline), with a git
    // directory and a repository policy that must stay read-only.
    workspace_ = root_ / "my workspace\nline two";
    extra_ = root_ / "extra root";
    fs::create_directories(workspace_ / ".git");
    fs::create_directories(extra_);
    std::ofstream(workspace_ / ".git" / "config") << "[core]\n";
    std::ofstream(workspace_ / ".ptybox.yaml") << "mode: workspace-write\n";
    std::ofstream(workspace_ / "existing.txt") << "hello\n";
    std::ofstream(root_ / "outside.txt") << "host only\n";
    private_tmp_name_ = "/tmp/" + root_.filename().string() + "-private";
  }
  void TearDown() override {
    fs::remove_all(root_);
    fs::remove(private_tmp_name_);
  }

  SandboxSpec Spec(Mode mode, bool network = false) const {
    SandboxSpec spec;
    spec.mode = mode;
    spec.workspace_root = workspace_;
    spec.writable_roots = {extra_};
    spec.read_only_paths =
        CollectProtectedPaths({workspace_, extra_}, {workspace_ / ".ptybox.yaml"});
    spec.network_allowed = network;
    spec.cwd = workspace_;
    return spec;
  }

  SandboxRun Run(const SandboxSpec& spec, const std::vector<std::string>& probes,
                 const RunOptions& options = {}, const fs::path& init = {}) {
    SandboxRun run = RunProbesInSandbox(spec, probes, options, init);
    std::cout << "  " << ToString(spec.mode) << (spec.network_allowed ? " +net" : "") << ":\n";
    for (const auto& line : run.lines) {
      std::cout << "    " << line.spec << " -> " << line.result
                << (line.info.empty() ? "" : " [" + line.info + "]") << "\n";
    }
    EXPECT_EQ(run.process.exit_code, 0) << run.process.Describe();
    EXPECT_EQ(run.lines.size(), probes.size()) << run.process.Describe();
    return run;
  }

  static std::string Host(const char* link) {
    char buffer[256];
    const ssize_t n = readlink(link, buffer, sizeof buffer);
    return n > 0 ? std::string(buffer, static_cast<size_t>(n)) : "";
  }

  fs::path root_, workspace_, extra_;
  std::string private_tmp_name_;
};

TEST_F(BwrapSandboxTest, WorkspaceWrite) {
  const std::string ws = workspace_.string();
  const SandboxRun run =
      Run(Spec(Mode::kWorkspaceWrite), {"ids",
                                        "read:/proc/self/uid_map",
                                        "ls:/dev/pts",
                                        "pty",
                                        "cwd",
                                        "write:" + ws + "/created.txt",
                                        "mkdir:" + ws + "/new dir",
                                        "write:" + ws + "/.git/config",
                                        "mkdir:" + ws + "/.git/hooks2",
                                        "write:" + ws + "/.ptybox.yaml",
                                        "mount-flags:" + ws,
                                        "mount-flags:" + ws + "/.git",
                                        "mount-flags:" + testing::ProbeBinary().string(),
                                        "write:" + extra_.string() + "/x",
                                        "write:" + private_tmp_name_,
                                        "read:" + (root_ / "outside.txt").string(),
                                        "write:/etc/ptybox-probe",
                                        "write:/usr/ptybox-probe",
                                        "socket:inet",
                                        "socket:packet",
                                        "socket:unix",
                                        "unshare",
                                        "mount",
                                        "ioctl:tiocsti",
                                        "caps",
                                        "env",
                                        "netns"});

  // Identity: a user namespace mapping exactly the caller's uid.
  EXPECT_EQ(run.Info("ids").substr(0, run.Info("ids").find(' ')),
            "uid=" + std::to_string(geteuid()));
  const auto map = Words(run.Info("read:/proc/self/uid_map"));
  ASSERT_EQ(map.size(), 3u) << run.Info("read:/proc/self/uid_map");
  EXPECT_EQ(map[0], std::to_string(geteuid()));
  EXPECT_EQ(map[2], "1");
  // A private devpts: empty but for ptmx, and the first PTY is number 0.
  EXPECT_EQ(run.Info("ls:/dev/pts"), "ptmx");
  EXPECT_EQ(run.Result("pty"), "ok");
  EXPECT_EQ(run.Info("pty"), "/dev/pts/0");
  EXPECT_EQ(run.Info("cwd"), ws);

  // The workspace and the extra root are writable, and writes reach the host.
  EXPECT_EQ(run.Result("write:" + ws + "/created.txt"), "ok");
  EXPECT_EQ(ReadFile(workspace_ / "created.txt"), "ptybox\n");
  EXPECT_EQ(run.Result("mkdir:" + ws + "/new dir"), "ok");
  EXPECT_TRUE(fs::is_directory(workspace_ / "new dir"));
  EXPECT_EQ(run.Result("write:" + extra_.string() + "/x"), "ok");
  EXPECT_TRUE(fs::exists(extra_ / "x"));
  EXPECT_EQ(run.Info("mount-flags:" + ws), "rw");
  // .git and the policy file are not.
  EXPECT_EQ(run.Result("write:" + ws + "/.git/config"), "EROFS");
  EXPECT_EQ(run.Result("mkdir:" + ws + "/.git/hooks2"), "EROFS");
  EXPECT_EQ(run.Result("write:" + ws + "/.ptybox.yaml"), "EROFS");
  EXPECT_EQ(ReadFile(workspace_ / ".ptybox.yaml"), "mode: workspace-write\n");
  EXPECT_EQ(run.Info("mount-flags:" + ws + "/.git"), "ro");
  EXPECT_EQ(run.Info("mount-flags:" + testing::ProbeBinary().string()), "ro");
  // /tmp is private: writable, never the host's, and the host's /tmp files are hidden.
  EXPECT_EQ(run.Result("write:" + private_tmp_name_), "ok");
  EXPECT_FALSE(fs::exists(private_tmp_name_));
  EXPECT_EQ(run.Result("read:" + (root_ / "outside.txt").string()), "ENOENT");
  // The rest of the host is read-only.
  EXPECT_EQ(run.Result("write:/etc/ptybox-probe"), "EROFS");
  EXPECT_EQ(run.Result("write:/usr/ptybox-probe"), "EROFS");
  EXPECT_FALSE(fs::exists("/etc/ptybox-probe"));

  // Network denied: a network namespace of its own (only lo), where IP sockets are the
  // loopback's; packet sockets and other families are refused.
  EXPECT_EQ(run.Result("socket:inet"), "ok");
  EXPECT_EQ(run.Result("socket:packet"), "EAFNOSUPPORT");
  EXPECT_EQ(run.Result("socket:unix"), "ok");
  EXPECT_NE(run.Info("netns"), Host("/proc/self/ns/net"));
  // The seccomp filter is active; capabilities are gone.
  EXPECT_EQ(run.Result("unshare"), "EPERM");
  EXPECT_EQ(run.Result("mount"), "EPERM");
  EXPECT_EQ(run.Result("ioctl:tiocsti"), "EPERM");
  EXPECT_EQ(run.Info("caps"),
            "CapInh=0000000000000000 CapPrm=0000000000000000 CapEff=0000000000000000 "
            "CapBnd=0000000000000000 CapAmb=0000000000000000 NoNewPrivs=1 Seccomp=2");
  // Nothing of the daemon's environment: bwrap's --clearenv leaves only the PWD it sets
  // for --chdir (ptybox-init receives the session environment over its socket).
  EXPECT_EQ(run.Info("env"), "1 PWD=" + ws);
}

TEST_F(BwrapSandboxTest, ReadOnly) {
  const std::string ws = workspace_.string();
  const SandboxRun run =
      Run(Spec(Mode::kReadOnly),
          {"ls:" + ws, "read:" + ws + "/existing.txt", "write:" + ws + "/created.txt",
           "mkdir:" + ws + "/d", "write:" + extra_.string() + "/x", "mount-flags:" + ws,
           "write:" + private_tmp_name_, "write:/etc/ptybox-probe", "pty", "cwd", "socket:inet",
           "socket:packet", "caps"});
  // The workspace is visible (it lives under /tmp, which is a private tmpfs) but not writable.
  EXPECT_EQ(run.Info("ls:" + ws), ".git .ptybox.yaml existing.txt");
  EXPECT_EQ(run.Info("read:" + ws + "/existing.txt"), "hello");
  EXPECT_EQ(run.Result("write:" + ws + "/created.txt"), "EROFS");
  EXPECT_EQ(run.Result("mkdir:" + ws + "/d"), "EROFS");
  EXPECT_EQ(run.Result("write:" + extra_.string() + "/x"), "EROFS");
  EXPECT_EQ(run.Info("mount-flags:" + ws), "ro");
  EXPECT_FALSE(fs::exists(workspace_ / "created.txt"));
  EXPECT_FALSE(fs::exists(extra_ / "x"));
  // Only the private /tmp (and /dev/shm) take writes.
  EXPECT_EQ(run.Result("write:" + private_tmp_name_), "ok");
  EXPECT_FALSE(fs::exists(private_tmp_name_));
  EXPECT_EQ(run.Result("write:/etc/ptybox-probe"), "EROFS");
  EXPECT_EQ(run.Result("pty"), "ok");
  EXPECT_EQ(run.Info("cwd"), ws);
  EXPECT_EQ(run.Result("socket:inet"), "ok");
  EXPECT_EQ(run.Result("socket:packet"), "EAFNOSUPPORT");
  EXPECT_NE(run.Info("caps").find("CapEff=0000000000000000"), std::string::npos);
}

TEST_F(BwrapSandboxTest, NetworkAllowedSharesTheHostNetwork) {
  for (Mode mode : {Mode::kReadOnly, Mode::kWorkspaceWrite}) {
    const SandboxRun run = Run(Spec(mode, /*network=*/true), {"netns", "socket:inet", "unshare"});
    EXPECT_EQ(run.Info("netns"), Host("/proc/self/ns/net")) << ToString(mode);
    EXPECT_EQ(run.Result("socket:inet"), "ok") << ToString(mode);
    EXPECT_EQ(run.Result("unshare"), "EPERM") << ToString(mode);
  }
}

TEST_F(BwrapSandboxTest, InitBinaryIsVisibleAndReadOnlyWhereverItLives) {
  // Under /tmp (hidden by the private tmpfs otherwise) in read-only mode...
  const fs::path in_tmp = root_ / "bin dir" / "probe";
  fs::create_directories(in_tmp.parent_path());
  fs::copy_file(testing::ProbeBinary(), in_tmp);
  const SandboxRun hidden =
      Run(Spec(Mode::kReadOnly), {"mount-flags:" + in_tmp.string()}, {}, in_tmp);
  EXPECT_EQ(hidden.Info("mount-flags:" + in_tmp.string()), "ro");
  // ...and inside the writable workspace, where it must still be read-only.
  const fs::path in_ws = workspace_ / "tools" / "probe";
  fs::create_directories(in_ws.parent_path());
  fs::copy_file(testing::ProbeBinary(), in_ws);
  const SandboxRun writable = Run(
      Spec(Mode::kWorkspaceWrite),
      {"mount-flags:" + in_ws.string(), "mount-flags:" + in_ws.parent_path().string()}, {}, in_ws);
  EXPECT_EQ(writable.Info("mount-flags:" + in_ws.string()), "ro");
  EXPECT_EQ(writable.Info("mount-flags:" + in_ws.parent_path().string()), "rw");
}

TEST_F(BwrapSandboxTest, UnprivilegedCallerGetsItsOwnUidAndAWorkingPty) {
  if (geteuid() != 0) {
    GTEST_SKIP() << "this test drops from root to nobody; unprivileged runs already exercise it";
  }
  constexpr uid_t kNobody = 65534;
  for (const auto& entry : fs::recursive_directory_iterator(root_)) {
    ASSERT_EQ(lchown(entry.path().c_str(), kNobody, kNobody), 0) << entry.path();
  }
  ASSERT_EQ(chown(root_.c_str(), kNobody, kNobody), 0);
  RunOptions options;
  options.uid = kNobody;
  options.gid = kNobody;
  const std::string ws = workspace_.string();
  const SandboxRun run =
      Run(Spec(Mode::kWorkspaceWrite),
          {"ids", "read:/proc/self/uid_map", "pty", "write:" + ws + "/mine.txt",
           "write:" + ws + "/.git/config", "socket:inet", "socket:packet", "unshare", "caps"},
          options);
  EXPECT_EQ(run.Info("ids").substr(0, run.Info("ids").find(' ')), "uid=65534");
  EXPECT_EQ(Words(run.Info("read:/proc/self/uid_map")).front(), "65534");
  EXPECT_EQ(run.Info("pty"), "/dev/pts/0");
  EXPECT_EQ(run.Result("write:" + ws + "/mine.txt"), "ok");
  struct stat st {};
  ASSERT_EQ(stat((workspace_ / "mine.txt").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, kNobody);
  EXPECT_EQ(run.Result("write:" + ws + "/.git/config"), "EROFS");
  EXPECT_EQ(run.Result("socket:inet"), "ok");
  EXPECT_EQ(run.Result("socket:packet"), "EAFNOSUPPORT");
  EXPECT_EQ(run.Result("unshare"), "EPERM");
  EXPECT_NE(run.Info("caps").find("CapBnd=0000000000000000"), std::string::npos);
}

}  // namespace
}  // namespace ptybox::sandbox
