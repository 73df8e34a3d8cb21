// `ptybox run` through the real binary, as a CI job uses it: real bwrap, real processes, pipes
// for stdin/stdout/stderr. Each case runs in every mode it concerns.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/run/child_process.h"
#include "tests/support/daemon_fixture.h"
#include "tests/support/files.h"

namespace ptybox::testing {
namespace {

namespace fs = std::filesystem;

class RunTest : public ::testing::Test {
 protected:
  // Starts `ptybox run <args>` in the workspace.
  std::unique_ptr<ChildProcess> Start(std::vector<std::string> args,
                                      std::vector<std::string> extra_env = {},
                                      bool close_stdin = false) {
    ChildProcess::Options o;
    o.argv = {PtyboxBinary().string(), "run"};
    o.argv.insert(o.argv.end(), args.begin(), args.end());
    o.env = TestEnvironment(state_.path() / "no-operator-policy.yaml", extra_env);
    o.cwd = workspace_.path();
    o.close_stdin = close_stdin;
    return std::make_unique<ChildProcess>(std::move(o));
  }
  // Runs to completion with stdin closed at once (EOF).
  ChildProcess::Exit Run(std::vector<std::string> args, std::vector<std::string> extra_env = {}) {
    child_ = Start(std::move(args), std::move(extra_env));
    child_->CloseStdin();
    return child_->Wait();
  }
  const fs::path& ws() const { return workspace_.path(); }

  TempDir workspace_;
  TempDir state_;
  std::unique_ptr<ChildProcess> child_;
};

// Cases that concern every mode.
class RunModeTest : public RunTest, public ::testing::WithParamInterface<std::string> {
 protected:
  std::vector<std::string> With(std::vector<std::string> command) {
    std::vector<std::string> args = {"--mode", GetParam(), "--"};
    args.insert(args.end(), command.begin(), command.end());
    return args;
  }
};

TEST_P(RunModeTest, ExitCodesPassThrough) {
  for (int code : {0, 1, 3, 255}) {
    ChildProcess::Exit e = Run(With({"sh", "-c", "exit " + std::to_string(code)}));
    EXPECT_TRUE(e.exited);
    EXPECT_EQ(e.code, code) << child_->err();
    EXPECT_EQ(child_->err(), "") << "ptybox added nothing to a successful run's stderr";
  }
}

TEST_P(RunModeTest, KilledBySignalIs128PlusN) {
  for (int sig : {SIGKILL, SIGTERM, SIGUSR1}) {
    ChildProcess::Exit e = Run(With({"sh", "-c", "kill -" + std::to_string(sig) + " $$"}));
    EXPECT_TRUE(e.exited);
    EXPECT_EQ(e.code, 128 + sig) << "signal " << sig << ": " << child_->err();
  }
}

TEST_P(RunModeTest, StdoutAndStderrStreamSeparatelyBeforeTheCommandEnds) {
  // The command cannot end before we answer on its stdin, so each first line we read was
  // streamed while it ran; stdin reaches it.
  auto run = Start(With({"sh", "-c",
                         "echo first; echo err-first >&2; read answer; echo \"second $answer\"; "
                         "echo err-second >&2; exit 5"}));
  EXPECT_EQ(run->ReadStdoutLine(), "first");
  EXPECT_EQ(run->ReadStderrLine(), "err-first");
  ASSERT_TRUE(run->Write("forty-two\n"));
  EXPECT_EQ(run->ReadStdoutLine(), "second forty-two");
  EXPECT_EQ(run->ReadStderrLine(), "err-second");
  ChildProcess::Exit e = run->Wait();
  EXPECT_EQ(e.code, 5);
  EXPECT_EQ(run->out(), "first\nsecond forty-two\n");
  EXPECT_EQ(run->err(), "err-first\nerr-second\n");
}

TEST_P(RunModeTest, StdinPassesThroughByteExact) {
  auto run = Start(With({"sh", "-c", "wc -c; echo done >&2"}));
  std::string megabyte(1 << 20, 'x');
  for (size_t i = 0; i < megabyte.size(); i += 4093) megabyte[i] = static_cast<char>(i % 251);
  ASSERT_TRUE(run->Write(megabyte));
  run->CloseStdin();
  ChildProcess::Exit e = run->Wait();
  EXPECT_EQ(e.code, 0) << run->err();
  EXPECT_EQ(run->out(), std::to_string(1 << 20) + "\n");
}

TEST_P(RunModeTest, TimeoutIs124WithAMessageAndNothingLeft) {
  const std::string mark = NewMarker();
  ChildProcess::Exit e =
      Run({"--mode", GetParam(), "--timeout", "2", "--", "sh", "-c",
           "env RUNTEST_MARK=" + mark + " sleep 300 & echo started; env RUNTEST_MARK=" + mark +
               " sleep 301"});
  EXPECT_EQ(e.code, 124) << child_->err();
  EXPECT_NE(child_->err().find("ptybox run: timed out after 2 s"), std::string::npos)
      << child_->err();
  EXPECT_EQ(ProcessesWithEnv(mark), std::vector<pid_t>{}) << "left running after the timeout";
}

// A command that ignores SIGHUP still gets SIGTERM before the grace runs out, and a shell that
// handles it runs its trap whole (it got one terminating signal at a time).
TEST_P(RunModeTest, ACommandIgnoringSighupGetsSigtermAndItsTrapRunsWhole) {
  const std::string script =
      "trap '' HUP; trap 'echo got-term; echo trap-done; exit 0' TERM; "
      "echo started; while :; do sleep 0.1; done";
  ChildProcess::Exit e = Run({"--mode", GetParam(), "--timeout", "1", "--", "bash", "-c", script});
  EXPECT_EQ(e.code, 124) << child_->err();
  EXPECT_EQ(child_->out(), "started\ngot-term\ntrap-done\n")
      << "the command was killed without SIGTERM, or its trap was cut short";
}

TEST_P(RunModeTest, LeftoverBackgroundProcessesEndWithTheCommand) {
  const std::string mark = NewMarker();
  const std::string env = "env RUNTEST_MARK=" + mark + " ";
  // Each job says it started (a file) before it execs; the command waits for all four.
  const std::string script =
      "d=$(mktemp -d); "
      "(touch $d/1; exec " +
      env +
      "sleep 300) & "
      "setsid sh -c \"touch $d/2; exec " +
      env +
      "sleep 301\" & "
      "nohup sh -c \"touch $d/3; exec " +
      env +
      "sleep 302\" >/dev/null 2>&1 & "
      "(trap '' HUP TERM INT; touch $d/4; exec " +
      env +
      "sleep 303) & "
      "for f in 1 2 3 4; do while [ ! -e $d/$f ]; do sleep 0.05; done; done; "
      "rm -rf $d; echo started";
  ChildProcess::Exit e = Run(With({"sh", "-c", script}));
  EXPECT_EQ(e.code, 0) << child_->err();
  EXPECT_EQ(child_->out(), "started\n");
  EXPECT_EQ(ProcessesWithEnv(mark), std::vector<pid_t>{}) << "leftovers outlived the command";
}

TEST_P(RunModeTest, SignalToRunEndsTheCommandWith128PlusN) {
  for (int sig : {SIGTERM, SIGINT}) {
    const std::string mark = NewMarker();
    auto run =
        Start(With({"sh", "-c", "env RUNTEST_MARK=" + mark + " sleep 300 & echo started; wait"}));
    ASSERT_EQ(run->ReadStdoutLine(), "started");
    run->Signal(sig);
    ChildProcess::Exit e = run->Wait();
    EXPECT_TRUE(e.exited) << "ptybox run exits by itself, it is not killed";
    EXPECT_EQ(e.code, 128 + sig) << run->err();
    EXPECT_NE(run->err().find(sig == SIGTERM ? "received SIGTERM" : "received SIGINT"),
              std::string::npos)
        << run->err();
    EXPECT_EQ(ProcessesWithEnv(mark), std::vector<pid_t>{});
  }
}

TEST_P(RunModeTest, ACommandIgnoringSignalsIsStillEnded) {
  const std::string mark = NewMarker();
  auto run = Start(
      With({"sh", "-c",
            "trap '' HUP TERM INT; env RUNTEST_MARK=" + mark + " sleep 300 & echo started; wait"}));
  ASSERT_EQ(run->ReadStdoutLine(), "started");
  run->Signal(SIGTERM);
  ChildProcess::Exit e = run->Wait();
  EXPECT_EQ(e.code, 128 + SIGTERM) << run->err();
  EXPECT_EQ(ProcessesWithEnv(mark), std::vector<pid_t>{});
}

TEST_P(RunModeTest, KillingRunItselfLeavesNothingRunning) {
  const std::string mark = NewMarker();
  auto run =
      Start(With({"sh", "-c", "env RUNTEST_MARK=" + mark + " sleep 300 & echo started; wait"}));
  ASSERT_EQ(run->ReadStdoutLine(), "started");
  // "started" may come before the background job has exec'd into its marked environment.
  const auto guard = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (ProcessesWithEnv(mark).empty() && std::chrono::steady_clock::now() < guard) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_FALSE(ProcessesWithEnv(mark).empty()) << "the marked process never ran";
  run->Signal(SIGKILL);
  run->Wait();
  // Nobody is left to wait for: the sandbox dies with its parent (bwrap --die-with-parent),
  // or ptybox-init ends the session when its control socket closes.
  EXPECT_EQ(WaitNoneWithEnv(mark), std::vector<pid_t>{});
}

TEST_P(RunModeTest, OurEnvironmentStaysOutOfTheCommand) {
  ChildProcess::Exit e =
      Run(With({"sh", "-c", "env | sort"}), {"RUNTEST_SECRET=hunter2", "TERM=xterm"});
  EXPECT_EQ(e.code, 0) << child_->err();
  EXPECT_EQ(child_->out().find("hunter2"), std::string::npos) << child_->out();
  // The daemon's own PTYBOX_* stay out; the one the backend sets says which sandbox this is.
  std::string ours = child_->out();
  const size_t sandbox = ours.find("PTYBOX_SANDBOX=");
  ASSERT_NE(sandbox, std::string::npos) << ours;
  ours.erase(sandbox, ours.find('\n', sandbox) - sandbox);
  EXPECT_EQ(ours.find("PTYBOX_"), std::string::npos) << child_->out();
  EXPECT_NE(child_->out().find("TERM=dumb\n"), std::string::npos) << child_->out();
  EXPECT_NE(child_->out().find("PATH="), std::string::npos) << child_->out();
}

TEST_P(RunModeTest, CommandNotFoundIs127AndNotExecutableIs126) {
  ChildProcess::Exit e = Run(With({"no-such-command-ptybox"}));
  EXPECT_EQ(e.code, 127) << child_->err();
  EXPECT_NE(child_->err().find("no-such-command-ptybox"), std::string::npos) << child_->err();
  WriteFile(ws() / "not-executable", "#!/bin/sh\necho ran\n");
  e = Run(With({"./not-executable"}));
  EXPECT_EQ(e.code, 126) << child_->err();
  EXPECT_EQ(child_->out(), "");
}

TEST_P(RunModeTest, ClosedStdinReadsAsEmpty) {
  child_ = Start(With({"sh", "-c", "cat; echo cat=$?"}), {}, /*close_stdin=*/true);
  ChildProcess::Exit e = child_->Wait();
  EXPECT_EQ(e.code, 0) << child_->err();
  EXPECT_EQ(child_->out(), "cat=0\n");
}

INSTANTIATE_TEST_SUITE_P(Modes, RunModeTest,
                         ::testing::Values("read-only", "workspace-write", "danger-full-access"),
                         ModeTestName);

// --- What each mode allows -------------------------------------------------------------------

TEST_F(RunTest, ReadOnlyRefusesEveryWrite) {
  ChildProcess::Exit e = Run({"--mode", "read-only", "--", "sh", "-c", "echo x > file"});
  EXPECT_NE(e.code, 0);
  EXPECT_NE(child_->err().find("Read-only file system"), std::string::npos) << child_->err();
  EXPECT_FALSE(fs::exists(ws() / "file"));
}

// A directory outside the workspace that the sandbox can see (the host's /tmp it cannot).
class OutsideDir final {
 public:
  OutsideDir() : path_("/var/tmp/ptybox-run-test-" + NewMarker()) { fs::create_directories(path_); }
  ~OutsideDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  [[nodiscard]] const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

TEST_F(RunTest, WorkspaceWriteWritesTheWorkspaceButNotGitNorOutside) {
  fs::create_directory(ws() / ".git");
  OutsideDir outside;
  ChildProcess::Exit e = Run({"--mode", "workspace-write", "--", "sh", "-c",
                              "echo built > artifact && echo ok; "
                              "echo x > .git/hooked || echo git-refused; "
                              "echo x > " +
                                  outside.path().string() + "/escaped || echo outside-refused"});
  EXPECT_EQ(e.code, 0) << child_->err();
  EXPECT_EQ(child_->out(), "ok\ngit-refused\noutside-refused\n") << child_->err();
  EXPECT_EQ(ReadFile(ws() / "artifact"), "built\n");
  EXPECT_FALSE(fs::exists(ws() / ".git/hooked"));
  EXPECT_FALSE(fs::exists(outside.path() / "escaped"));
}

// Git for agents under `ptybox run` (docs/security.md): the command's commits are in the host's
// .git when `run` exits (the last copy-back is waited for), and the run leaves no private copy
// behind in its git work directory.
TEST_F(RunTest, WorkspaceWriteCommitsAreInTheHostsGitWhenRunExits) {
  auto git = [&](const std::string& args) {
    ChildProcess host(
        {.argv = {"/bin/sh", "-c", "git -c user.name=host -c user.email=h@example.com " + args},
         .env = {"PATH=/usr/bin:/bin", "HOME=" + state_.path().string(), "GIT_CONFIG_NOSYSTEM=1"},
         .cwd = ws(),
         .close_stdin = false,
         .stderr_file = {}});
    host.CloseStdin();
    host.Wait();
    return host.out();
  };
  git("init -q -b main");
  git("commit -q --allow-empty -m host");
  child_ = Start({"--mode", "workspace-write", "--", "sh", "-c",
                  "echo x > made.txt && git add made.txt && "
                  "git -c user.name=agent -c user.email=a@example.com commit -qm from-run && "
                  "echo committed"},
                 {"PTYBOX_GIT_WRITE=1"});
  child_->CloseStdin();
  const pid_t run_pid = child_->pid();
  ChildProcess::Exit e = child_->Wait();
  EXPECT_EQ(e.code, 0) << child_->err();
  EXPECT_EQ(child_->out(), "committed\n") << child_->err();
  EXPECT_EQ(git("log --format=%s main"), "from-run\nhost\n") << child_->err();
  EXPECT_EQ(git("status --porcelain"), "");
  // Its work directory (git_work_dir.h) is there, empty: the private copy went with the session.
  const uid_t uid = ::geteuid();
  size_t found = 0;
  for (const fs::path& parent :
       {fs::path("/run/ptybox/git"), fs::path("/run/user/" + std::to_string(uid) + "/ptybox/git"),
        fs::path("/tmp/ptybox-git-" + std::to_string(uid))}) {
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(parent, ec)) {
      if (!entry.path().filename().string().starts_with("p-" + std::to_string(run_pid) + "-")) {
        continue;
      }
      ++found;
      EXPECT_TRUE(fs::is_empty(entry.path())) << entry.path() << " holds a private copy";
    }
  }
  EXPECT_EQ(found, 1u) << "no git work directory of the run (pid " << run_pid << ")";
}

TEST_F(RunTest, DangerFullAccessWritesAnywhereTheUserMay) {
  fs::create_directory(ws() / ".git");
  OutsideDir outside;
  ChildProcess::Exit e =
      Run({"--mode", "danger-full-access", "--", "sh", "-c",
           "echo x > .git/hooked && echo x > " + outside.path().string() + "/written && echo ok"});
  EXPECT_EQ(e.code, 0) << child_->err();
  EXPECT_EQ(child_->out(), "ok\n");
  EXPECT_TRUE(fs::exists(ws() / ".git/hooked"));
  EXPECT_TRUE(fs::exists(outside.path() / "written"));
}

// No privilege bits leave a session under `ptybox run` either (the same launcher and seccomp
// filter as the daemon's): `cp /bin/dash x && chmod 4755 x` in the workspace (or, read-only, in
// the sandbox's /tmp) fails with EPERM and the host finds no set-id file; the control keeps it.
TEST_F(RunTest, NoPrivilegeBitsUnderRun) {
  for (const std::string mode : {"read-only", "workspace-write", "danger-full-access"}) {
    const std::string dir = "setid-" + mode;
    ChildProcess::Exit e =
        Run({"--mode", mode, "--", "sh", "-c",
             "d=" + dir +
                 "; mkdir -p $d 2>/dev/null && touch $d/.w 2>/dev/null || d=$(mktemp -d); "
                 "cp \"$(readlink -f /bin/sh)\" $d/x && chmod 4755 $d/x; echo rc=$?; "
                 "chmod g+s $d/x; echo rc=$?; stat -c mode=%a $d/x"});
    EXPECT_EQ(e.code, 0) << mode << ": " << child_->err();
    if (mode != "danger-full-access") {
      EXPECT_EQ(child_->out(), "rc=1\nrc=1\nmode=755\n") << mode << ": " << child_->err();
      EXPECT_NE(child_->err().find("Operation not permitted"), std::string::npos) << child_->err();
    } else {
      EXPECT_EQ(child_->out(), "rc=0\nrc=0\nmode=6755\n") << child_->err();
    }
  }
  std::vector<std::string> setid;
  for (const auto& entry : fs::recursive_directory_iterator(ws())) {
    struct stat st {};
    if (::lstat(entry.path().c_str(), &st) == 0 && (st.st_mode & (S_ISUID | S_ISGID)) != 0) {
      setid.push_back(entry.path().lexically_relative(ws()).string());
    }
  }
  // Only the control's copy carries the bits on the host.
  EXPECT_EQ(setid, std::vector<std::string>{"setid-danger-full-access/x"});
}

TEST_F(RunTest, DefaultModeWithoutPolicyFilesIsWorkspaceWrite) {
  fs::create_directory(ws() / ".git");
  ChildProcess::Exit e =
      Run({"--", "sh", "-c", "touch made && (touch .git/x 2>/dev/null || echo git-refused)"});
  EXPECT_EQ(e.code, 0) << child_->err();
  EXPECT_EQ(child_->out(), "git-refused\n");
  EXPECT_TRUE(fs::exists(ws() / "made"));
}

// --- Policy files ------------------------------------------------------------------------------

TEST_F(RunTest, OperatorPolicyFileSetsModeAndEnvironment) {
  const fs::path policy = state_.path() / "operator.yaml";
  WriteFile(policy,
            "version: 1\nmode: read-only\nceiling: workspace-write\n"
            "env:\n  set:\n    FROM_OPERATOR: \"yes\"\n");
  ChildProcess::Exit e = Run({"--policy", policy.string(), "--", "sh", "-c",
                              "echo \"op=$FROM_OPERATOR\"; touch x 2>/dev/null || echo refused"});
  EXPECT_EQ(e.code, 0) << child_->err();
  EXPECT_EQ(child_->out(), "op=yes\nrefused\n");
  // The ceiling holds against --mode.
  e = Run({"--policy", policy.string(), "--mode", "danger-full-access", "--", "true"});
  EXPECT_EQ(e.code, 125);
  EXPECT_NE(child_->err().find("danger-full-access"), std::string::npos) << child_->err();
  EXPECT_EQ(child_->out(), "");
}

TEST_F(RunTest, RepositoryPolicyNarrowsAndCannotWiden) {
  WriteFile(ws() / ".ptybox.yaml", "version: 1\nmode: read-only\n");
  ChildProcess::Exit e = Run({"--", "sh", "-c", "touch x 2>/dev/null || echo refused"});
  EXPECT_EQ(e.code, 0) << child_->err();
  EXPECT_EQ(child_->out(), "refused\n");

  const fs::path policy = state_.path() / "operator.yaml";
  WriteFile(policy, "version: 1\nmode: workspace-write\nceiling: workspace-write\n");
  WriteFile(ws() / ".ptybox.yaml", "version: 1\nmode: danger-full-access\n");
  e = Run({"--policy", policy.string(), "--", "sh", "-c", "echo ran"});
  EXPECT_EQ(e.code, 125) << child_->err();
  EXPECT_NE(child_->err().find(".ptybox.yaml"), std::string::npos) << child_->err();
  EXPECT_EQ(child_->out(), "") << "the command never runs when the policy is denied";
}

TEST_F(RunTest, PolicyErrorIs125WithFileLineColumn) {
  WriteFile(ws() / ".ptybox.yaml", "version: 1\nmode: wat\n");
  ChildProcess::Exit e = Run({"--", "sh", "-c", "echo ran"});
  EXPECT_EQ(e.code, 125);
  EXPECT_NE(child_->err().find((ws() / ".ptybox.yaml").string() + ":2:7:"), std::string::npos)
      << child_->err();
  EXPECT_EQ(child_->out(), "");
  // A missing explicit --policy file is an error too, never "no policy".
  e = Run({"--policy", (state_.path() / "missing.yaml").string(), "--", "true"});
  EXPECT_EQ(e.code, 125);
  EXPECT_NE(child_->err().find("missing.yaml"), std::string::npos) << child_->err();
}

// --- Usage and host errors ---------------------------------------------------------------------

TEST_F(RunTest, UsageErrorsExit2WithAMessage) {
  struct Case {
    std::vector<std::string> args;
    std::string says;
  };
  const std::vector<Case> cases = {
      {{"--mode", "bogus", "--", "true"}, "unknown --mode \"bogus\""},
      {{"--mode", "Read-Only", "--", "true"}, "read-only, workspace-write or danger-full-access"},
      {{"--timeout", "0", "--", "true"}, "--timeout must be between 1 and"},
      {{"--timeout", "99999999999", "--", "true"}, "--timeout must be between 1 and"},
      {{"--timeout", "1.5", "--", "true"}, "--timeout"},
      {{"--no-such-flag", "--", "true"}, "--no-such-flag"},
      {{}, "command is required"},
  };
  for (const Case& c : cases) {
    ChildProcess::Exit e = Run(c.args);
    EXPECT_EQ(e.code, 2) << ::testing::PrintToString(c.args) << ": " << child_->err();
    EXPECT_NE(child_->err().find(c.says), std::string::npos)
        << ::testing::PrintToString(c.args) << ": " << child_->err();
    EXPECT_EQ(child_->out(), "");
  }
}

TEST_F(RunTest, MissingBwrapIs125AndNeverRunsUnconfined) {
  for (const char* mode : {"read-only", "workspace-write"}) {
    ChildProcess::Exit e = Run({"--mode", mode, "--", "sh", "-c", "echo ran; touch ran"},
                               {"PTYBOX_BWRAP=/nonexistent/bwrap"});
    EXPECT_EQ(e.code, 125) << mode << ": " << child_->err();
    EXPECT_NE(child_->err().find("sandbox could not start"), std::string::npos) << child_->err();
    EXPECT_NE(child_->err().find("/nonexistent/bwrap"), std::string::npos) << child_->err();
    EXPECT_NE(child_->err().find("never falls back"), std::string::npos) << child_->err();
    EXPECT_EQ(child_->out(), "");
    EXPECT_FALSE(fs::exists(ws() / "ran"));
  }
  // danger-full-access needs no bwrap: it is the operator's explicit choice of no sandbox.
  ChildProcess::Exit e = Run({"--mode", "danger-full-access", "--", "sh", "-c", "echo ran"},
                             {"PTYBOX_BWRAP=/nonexistent/bwrap"});
  EXPECT_EQ(e.code, 0) << child_->err();
  EXPECT_EQ(child_->out(), "ran\n");
}

// --- A CI job ------------------------------------------------------------------------------------

TEST_F(RunTest, MakeTestExitCodeAndOutputPassThrough) {
  if (::access("/usr/bin/make", X_OK) != 0)
    GTEST_SKIP() << "make is not installed (build-essential)";
  WriteFile(ws() / "Makefile",
            "test:\n"
            "\techo building > build.log\n"
            "\t@echo running tests\n"
            "\t@echo 'test_parse: FAILED' >&2\n"
            "\tfalse\n"
            "\t@echo never printed\n");
  ChildProcess::Exit e = Run({"--", "make", "test"});
  EXPECT_EQ(e.code, 2) << "make's own exit code: " << child_->err();
  EXPECT_EQ(ReadFile(ws() / "build.log"), "building\n");
  EXPECT_NE(child_->out().find("running tests\n"), std::string::npos) << child_->out();
  EXPECT_EQ(child_->out().find("never printed"), std::string::npos);
  EXPECT_NE(child_->err().find("test_parse: FAILED\n"), std::string::npos) << child_->err();
  EXPECT_NE(child_->err().find("Error 1"), std::string::npos) << child_->err();
  EXPECT_EQ(child_->err().find("ptybox run:"), std::string::npos) << child_->err();
}

TEST_F(RunTest, WorkspaceFlagAndArgumentsThatLookLikeOptions) {
  TempDir other;
  ChildProcess::Exit e = Run({"--workspace", other.path().string(), "--", "sh", "-c",
                              "pwd; echo \"$@\"", "sh", "--mode", "x", "--", "--timeout"});
  EXPECT_EQ(e.code, 0) << child_->err();
  EXPECT_EQ(child_->out(), other.path().string() + "\n--mode x -- --timeout\n");
}

}  // namespace
}  // namespace ptybox::testing
