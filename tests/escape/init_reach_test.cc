// Walls 4 and 5 of docs/security.md. ptybox-init is unreachable from the session it anchors:
// the attack (pidfd_open + pidfd_getfd of init's control socket, fd 3, then a forged
// "exited 0" message) and reading /proc/<init>/mem both fail in both confined modes, in
// `serve` and in `ptybox run`; no process of the sandbox runs without the seccomp filter; and
// the new seccomp rows (personality, modify_ldt, TIOCSETD, pidfd_getfd) refuse from inside.
#include <gtest/gtest.h>
#include <unistd.h>

#include "tests/escape/walls_support.h"
#include "tests/sandbox/process_runner.h"

namespace ptybox::testing {
namespace {

namespace fs = std::filesystem;
using sandbox::testing::RunProcess;
using sandbox::testing::RunResult;

class InitReachTest : public WallsTest {};

TEST_P(InitReachTest, InitControlSocketAndMemoryAreOutOfReach) {
  // bash's parent is ptybox-init; confined, it is the namespace's pid 1.
  Observed parent = Run("init", "echo $PPID $(cat /proc/$PPID/comm)");
  if (Confined()) {
    EXPECT_EQ(parent.text, "1 ptybox-init") << parent.Show();
  } else {
    EXPECT_EQ(Words(parent.text).back(), "ptybox-init") << parent.Show();
  }
  if (Confined()) {
    Observed o = Run("steal-init-socket",
                     SandboxProbe("pidfd_getfd:$PPID:3 forge-exit:$PPID proc-mem:$PPID"));
    auto seen = ProbeDetails(o.text);
    EXPECT_EQ(seen["pidfd_getfd:1:3"].front(), "EPERM") << o.Show();
    EXPECT_EQ(seen["forge-exit:1"].front(), "EPERM") << o.Show();
    EXPECT_EQ(seen["proc-mem:1"].front(), "EACCES") << o.Show();
    // From the shell too: the memory of init (and so of pid 1) is not readable.
    Observed mem = Run("read-init-mem", "head -c1 /proc/1/mem");
    EXPECT_EQ(mem.exit, 1) << mem.Show();
    EXPECT_TRUE(mem.Says("Permission denied")) << mem.Show();
    // The forged message did not end the session: it answers (RunInSession checks running).
    Observed after = Run("after", "echo alive");
    EXPECT_EQ(after.text, "alive") << after.Show();
  } else {
    // The control (no forgery: that would end this session). Root holds CAP_SYS_PTRACE, so
    // non-dumpable alone does not stop it; an ordinary user is stopped by non-dumpable.
    Observed o = Run("steal-init-socket", SandboxProbe("pidfd_getfd:$PPID:3 proc-mem:$PPID"));
    auto seen = ProbeDetails(o.text);
    const std::string pid = Words(parent.text).front();
    const bool root = ::geteuid() == 0;
    EXPECT_EQ(seen["pidfd_getfd:" + pid + ":3"].front(), root ? "ok" : "EPERM") << o.Show();
    EXPECT_EQ(seen["proc-mem:" + pid].front(), root ? "ok" : "EACCES") << o.Show();
  }
  // A process's own children stay readable: same uid, dumpable, one session (docs/sandbox.md).
  // Read once the child runs `sleep`: until its exec it is a fork of the shell, which a root
  // daemon's session makes non-dumpable (the nonce), and that fork is rightly unreadable.
  Observed own = Run("read-own-child-mem",
                     "(sleep 30 & c=$!; for i in $(seq 5000); do "
                     "[ \"$(cat /proc/$c/comm 2>/dev/null)\" = sleep ] && break; done; " +
                         SandboxProbe("proc-mem:$c") + " | cut -f2; kill $c)");
  EXPECT_EQ(own.text, "ok") << own.Show();
}

TEST_P(InitReachTest, EveryProcessInTheSandboxRunsUnderTheFilter) {
  if (!Confined()) GTEST_SKIP() << "danger-full-access has no filter";
  // bwrap's own reaper used to be pid 1, outside the filter and writable through /proc/1/mem.
  Observed o = Run("seccomp-of-all",
                   "for p in /proc/[0-9]*; do grep -h '^Seccomp:' $p/status; done 2>/dev/null "
                   "| sort | uniq -c | awk '{print $2, $3}'");
  EXPECT_EQ(o.text, "Seccomp: 2") << o.Show();
  Observed comm = Run("pid-1", "cat /proc/1/comm");
  EXPECT_EQ(comm.text, "ptybox-init") << comm.Show();
}

TEST_P(InitReachTest, NewSeccompRowsRefuseFromInside) {
  Observed o = Run("seccomp-probes",
                   SandboxProbe("personality personality:linux32 personality:query "
                                "personality:linux modify_ldt ioctl:tiocsetd pidfd_getfd"));
  auto seen = ProbeDetails(o.text);
  EXPECT_EQ(seen["personality:query"].front(), "ok") << o.Show();
  EXPECT_EQ(seen["personality:linux"].front(), "ok") << o.Show();
  for (const char* spec :
       {"personality", "personality:linux32", "modify_ldt", "ioctl:tiocsetd", "pidfd_getfd"}) {
    ASSERT_FALSE(seen[spec].empty()) << spec << ": " << o.Show();
    if (Confined()) {
      EXPECT_EQ(seen[spec].front(), "EPERM") << spec << ": " << o.Show();
    } else {
      // The control: without the filter each call works (pidfd_getfd on itself).
      EXPECT_EQ(seen[spec].front(), "ok") << spec << ": " << o.Show();
    }
  }
}

// `ptybox run` passes the command's exit status through: a command that exits 1 after trying to
// forge "exited 0" on init's stolen control socket must still make `ptybox run` exit 1.
TEST_P(InitReachTest, RunExitStatusCannotBeForged) {
  if (!Confined()) GTEST_SKIP() << "the forgery works without the walls: nothing to check";
  const std::string probe = (workspace() / ".escape" / "ptybox-sandbox-probe").string();
  const std::string script = "cd " + Quote(workspace()) + " && exec env -i PATH=/usr/bin:/bin " +
                             "PTYBOX_INIT=" + Quote(InitBinary()) +
                             " PTYBOX_OPERATOR_POLICY=/nonexistent/ptybox-policy.yaml " +
                             Quote(PtyboxBinary()) + " run --mode " + Mode() + " -- sh -c " +
                             Quote(Quote(probe) + " forge-exit:$PPID; exit 1");
  RunResult run = RunProcess({"/bin/sh", "-c", script});
  EXPECT_EQ(run.exit_code, 1) << run.out << run.err;
  EXPECT_NE(run.out.find("forge-exit:1\tEPERM"), std::string::npos) << run.out << run.err;
}

INSTANTIATE_TEST_SUITE_P(Modes, InitReachTest,
                         ::testing::Values("read-only", "workspace-write", "danger-full-access"),
                         ModeTestName);

}  // namespace
}  // namespace ptybox::testing
