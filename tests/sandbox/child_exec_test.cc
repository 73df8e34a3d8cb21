// The one fork/exec helper: named stages, their exit statuses, the failure record between child
// and parent, and the captured run the probes and the tests' runner use, with real children.
#include "sandbox/init/child_exec.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <set>
#include <string>

#include "common/proc_stat.h"
#include "sandbox/captured_run.h"

namespace ptybox::sandbox {
namespace {

TEST(ChildExecTest, EveryStageHasItsOwnExitStatusInTheHelperRange) {
  std::set<int> seen = {kInitExitSetupFailed};
  for (ChildStage stage : kChildStages) {
    const int code = ChildExitCode(stage);
    EXPECT_GE(code, kHelperExitFirst) << ChildStageName(stage);
    EXPECT_LE(code, kHelperExitLast) << ChildStageName(stage);
    EXPECT_TRUE(seen.insert(code).second) << "two helpers exit " << code;
    EXPECT_NE(ChildStageName(stage), "an unknown step");
  }
  EXPECT_GE(kInitExitSetupFailed, kHelperExitFirst);
  EXPECT_LE(kInitExitSetupFailed, kHelperExitLast);
}

TEST(ChildExecTest, DecodeTakesOnlyOneWholeRecordOfAKnownStage) {
  EXPECT_EQ(DecodeChildFailure(""), std::nullopt);  // end of file: the exec happened
  const int32_t record[2] = {static_cast<int32_t>(ChildStage::kDirectory), ENOENT};
  const std::string bytes(reinterpret_cast<const char*>(record), sizeof(record));
  EXPECT_EQ(DecodeChildFailure(bytes), (ChildFailure{ChildStage::kDirectory, ENOENT}));
  EXPECT_EQ(DecodeChildFailure(bytes.substr(0, 5)), std::nullopt);
  EXPECT_EQ(DecodeChildFailure(bytes + "x"), std::nullopt);
  const int32_t unknown[2] = {999, EPERM};
  EXPECT_EQ(DecodeChildFailure(std::string(reinterpret_cast<const char*>(unknown), 8)),
            std::nullopt);
  const int32_t zero[2] = {0, EPERM};
  EXPECT_EQ(DecodeChildFailure(std::string(reinterpret_cast<const char*>(zero), 8)), std::nullopt);
}

TEST(ChildExecTest, DescriptionNamesTheStepAndTheErrno) {
  const std::string text = DescribeChildFailure({ChildStage::kDirectory, ENOENT});
  EXPECT_NE(text.find("changing to the working directory"), std::string::npos) << text;
  EXPECT_NE(text.find("No such file or directory"), std::string::npos) << text;
  EXPECT_EQ(DescribeChildFailure({ChildStage::kMountStage, 0}),
            "entering the staged mount namespace failed");
}

// A real child fails a real chdir: the parent reads the stage and the errno, the exit status
// is that stage's, and the text line says the same.
TEST(ChildExecTest, AFailedStepReachesTheParentAsRecordLineAndStatus) {
  int report[2];
  int text[2];
  ASSERT_EQ(::pipe2(report, O_CLOEXEC), 0);
  ASSERT_EQ(::pipe2(text, O_CLOEXEC), 0);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    if (::chdir("/nonexistent-ptybox-dir") != 0) {
      FailChild({ChildStage::kDirectory, errno}, report[1], text[1]);
    }
    ::_exit(0);
  }
  ::close(report[1]);
  ::close(text[1]);
  const std::optional<ChildFailure> failure = AwaitChildExec(report[0]);
  char line[256] = {};
  const ssize_t n = ::read(text[0], line, sizeof(line) - 1);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ::close(report[0]);
  ::close(text[0]);
  EXPECT_EQ(failure, (ChildFailure{ChildStage::kDirectory, ENOENT}));
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), ChildExitCode(ChildStage::kDirectory));
  ASSERT_GT(n, 0);
  EXPECT_EQ(
      std::string(line, static_cast<size_t>(n)),
      "ptybox: changing to the working directory failed (errno " + std::to_string(ENOENT) + ")\n");
}

TEST(ChildExecTest, AnExecThatHappensLeavesNoRecord) {
  int report[2];
  ASSERT_EQ(::pipe2(report, O_CLOEXEC), 0);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    char* argv[] = {const_cast<char*>("/bin/true"), nullptr};
    ::execv(argv[0], argv);
    FailChild({ChildStage::kExec, errno}, report[1]);
  }
  ::close(report[1]);
  EXPECT_EQ(AwaitChildExec(report[0]), std::nullopt);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ::close(report[0]);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

// The daemon runs RunCaptured on worker threads (git index-pack) while its reaper calls
// waitpid(-1) on SIGCHLD and ends unwatched children: the child is started with no exit signal,
// which waitpid(-1) without __WALL never reaps and the reaper skips. A waitpid(-1) made while it
// runs finds nothing to reap, and the run still gets its own status.
TEST(CapturedRunTest, TheChildHasNoExitSignalAndNoWaitForAnyChildTakesIt) {
  // The program's parent is the keeper RunCaptured starts; the keeper is our child.
  const CapturedRun run =
      RunCaptured({"/bin/sh", "-c", "cat /proc/$PPID/stat; exit 5"}, CaptureOptions{});
  ASSERT_TRUE(run.exited) << run.err;
  EXPECT_EQ(run.exit_code, 5);
  std::optional<proc::StatFields> keeper = proc::ParseStat(run.out);
  ASSERT_TRUE(keeper) << run.out;
  EXPECT_EQ(keeper->ppid, ::getpid()) << run.out;
  EXPECT_EQ(keeper->exit_signal, 0) << run.out;
  const CapturedRun killed = RunCaptured({"/bin/sh", "-c", "kill -TERM $$"}, CaptureOptions{});
  EXPECT_FALSE(killed.exited);
  EXPECT_EQ(killed.signal, SIGTERM);
  // A plain process has SIGCHLD.
  std::optional<proc::StatFields> self = proc::ReadStat(::getpid());
  ASSERT_TRUE(self);
  EXPECT_EQ(self->exit_signal, SIGCHLD);
  int status = 0;
  EXPECT_EQ(::waitpid(-1, &status, WNOHANG), -1);  // no SIGCHLD child left to any waitpid(-1)
}

TEST(CapturedRunTest, CapturesBothStreamsAndTheStatus) {
  const CapturedRun run =
      RunCaptured({"/bin/sh", "-c", "echo out; echo err >&2; exit 3"}, CaptureOptions{});
  EXPECT_EQ(run.failure, std::nullopt);
  EXPECT_TRUE(run.exited);
  EXPECT_EQ(run.exit_code, 3);
  EXPECT_EQ(run.out, "out\n");
  EXPECT_EQ(run.err, "err\n");
  EXPECT_FALSE(run.Succeeded());
}

TEST(CapturedRunTest, AMissingProgramIsAnExecFailureNotAnExitStatus) {
  const CapturedRun run = RunCaptured({"/nonexistent-ptybox-program"}, CaptureOptions{});
  EXPECT_EQ(run.failure, (ChildFailure{ChildStage::kExec, ENOENT}));
  EXPECT_FALSE(run.exited);
  EXPECT_EQ(run.exit_code, -1);
}

TEST(CapturedRunTest, AFailedStepBeforeExecStopsTheProgram) {
  CaptureOptions options;
  options.before_exec = []() -> std::optional<ChildFailure> {
    return ChildFailure{ChildStage::kCredentials, EPERM};
  };
  const CapturedRun run = RunCaptured({"/bin/sh", "-c", "echo ran"}, options);
  EXPECT_EQ(run.failure, (ChildFailure{ChildStage::kCredentials, EPERM}));
  EXPECT_EQ(run.out, "");
}

TEST(CapturedRunTest, KeepsChosenDescriptorsAndCapsTheCapture) {
  int pipe_fds[2];
  ASSERT_EQ(::pipe2(pipe_fds, O_CLOEXEC), 0);
  CaptureOptions options;
  options.keep_fds = {pipe_fds[1]};
  options.max_capture = 4;
  const CapturedRun run = RunCaptured(
      {"/bin/sh", "-c", "echo kept >&" + std::to_string(pipe_fds[1]) + "; echo 0123456789"},
      options);
  ::close(pipe_fds[1]);
  char kept[16] = {};
  const ssize_t n = ::read(pipe_fds[0], kept, sizeof(kept));
  ::close(pipe_fds[0]);
  EXPECT_TRUE(run.Succeeded()) << run.err;
  EXPECT_EQ(run.out, "0123");
  EXPECT_EQ(std::string(kept, n > 0 ? static_cast<size_t>(n) : 0), "kept\n");
}

}  // namespace
}  // namespace ptybox::sandbox
