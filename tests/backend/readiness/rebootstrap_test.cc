// Giving the hook back after `exec bash`: the exec identity that tells one program image from
// the next, the program lookup, the typed bootstrap line, and the rule that decides when the
// daemon may write into the re-exec'd shell (only the shell itself can read it).
#include "backend/readiness/rebootstrap.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

#include "backend/readiness/prompt_protocol.h"

namespace ptybox::backend {
namespace {

// A /proc/<pid>/stat line whose fields 28, 48 and 50 hold the given values (others are 1), with
// a name that holds spaces and parentheses.
std::string StatLine(uint64_t stack, uint64_t arg, uint64_t env, int fields = 52) {
  std::string line = "42 (a) b (c) S";
  for (int field = 4; field <= fields; ++field) {
    uint64_t value = field == 28 ? stack : field == 48 ? arg : field == 50 ? env : 1;
    line += " " + std::to_string(value);
  }
  return line + "\n";
}

TEST(ExecIdentityTest, ParsesTheAddressFieldsAfterTheName) {
  std::optional<ExecIdentity> id = ParseExecAddresses(StatLine(140000, 150000, 160000));
  ASSERT_TRUE(id.has_value());
  EXPECT_EQ(id->start_stack, 140000u);
  EXPECT_EQ(id->arg_start, 150000u);
  EXPECT_EQ(id->env_start, 160000u);
}

TEST(ExecIdentityTest, HiddenOrMissingFieldsAreUnknown) {
  // Without ptrace access the kernel shows 0: no identity, so no re-bootstrap.
  EXPECT_FALSE(ParseExecAddresses(StatLine(0, 0, 0)).has_value());
  EXPECT_FALSE(ParseExecAddresses(StatLine(1, 2, 3, 44)).has_value());  // an old kernel
  EXPECT_FALSE(ParseExecAddresses("42 (x S 1 2").has_value());
}

TEST(ExecIdentityTest, StableForOneImageAndNewAfterExec) {
  std::optional<ExecIdentity> self = ReadExecIdentity(::getpid());
  ASSERT_TRUE(self.has_value());
  EXPECT_EQ(ReadExecIdentity(::getpid()), self);

  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(ready[0]);
    ::fcntl(ready[1], F_SETFD, FD_CLOEXEC);
    ::execl("/bin/sleep", "sleep", "30", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::close(ready[1]);
  char byte;
  EXPECT_EQ(::read(ready[0], &byte, 1), 0);  // closed by the exec
  ::close(ready[0]);
  std::optional<ExecIdentity> exec = ReadExecIdentity(child);
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  ASSERT_TRUE(exec.has_value());
  EXPECT_NE(*exec, *self);
  struct stat sleep_st {};
  ASSERT_EQ(::stat("/bin/sleep", &sleep_st), 0);
  EXPECT_EQ(exec->exe_ino, sleep_st.st_ino);
}

TEST(FindProgramTest, SearchesThePathList) {
  struct stat st {};
  ASSERT_EQ(::stat("/usr/bin/bash", &st), 0);
  std::optional<FileIdentity> bash = FindProgram("bash", "/nonexistent::/usr/bin:/bin");
  ASSERT_TRUE(bash.has_value());
  EXPECT_EQ(bash->ino, st.st_ino);
  EXPECT_EQ(bash->dev, st.st_dev);
  EXPECT_TRUE(FindProgram("/usr/bin/bash", "").has_value());
  EXPECT_FALSE(FindProgram("no-such-program-ptybox", "/usr/bin:/bin").has_value());
  EXPECT_FALSE(FindProgram("bash", "/nonexistent").has_value());
}

// The image the exec machinery starts is told by its command line alone; anything else (a
// bypassed `exec bash`, another option list) is not, and may get the typed bootstrap.
TEST(ExecMachineryCommandLineTest, OnlyTheLaunchersOwnArgumentsAreTheMachinerys) {
  using namespace std::string_literals;
  EXPECT_TRUE(IsExecMachineryCommandLine("bash\0--rcfile\0/proc/self/fd/10\0-i\0"s));
  EXPECT_TRUE(IsExecMachineryCommandLine("/usr/bin/bash\0--rcfile\0/proc/self/fd/10\0-i\0"s));
  EXPECT_FALSE(IsExecMachineryCommandLine("bash\0"s));
  EXPECT_FALSE(IsExecMachineryCommandLine("bash\0--rcfile\0/proc/self/fd/10\0"s));
  EXPECT_FALSE(IsExecMachineryCommandLine("bash\0--rcfile\0/proc/self/fd/10\0-i\0-l\0"s));
  EXPECT_FALSE(IsExecMachineryCommandLine("bash\0--rcfile\0/tmp/rc\0-i\0"s));
  EXPECT_FALSE(IsExecMachineryCommandLine("\0--rcfile\0/proc/self/fd/10\0-i\0"s));
  EXPECT_FALSE(IsExecMachineryCommandLine(""));
}

TEST(RebootstrapLineTest, OneLineWithoutANonceThatKeepsTheUsersHooks) {
  const std::string line = BuildRebootstrapLine();
  ASSERT_FALSE(line.empty());
  EXPECT_EQ(line.back(), '\n');
  EXPECT_EQ(line.find('\n'), line.size() - 1);
  EXPECT_TRUE(line.starts_with("{ [[ -o history")) << line;
  EXPECT_NE(line.find("history -d -1"), std::string::npos);
  EXPECT_NE(line.find("PROMPT_COMMAND[" + std::to_string(kPromptHookIndex) + "]"),
            std::string::npos);
  EXPECT_EQ(line.find("unset PROMPT_COMMAND"), std::string::npos);
  EXPECT_EQ(line.find('!'), std::string::npos);  // history expansion is on in the new shell
  EXPECT_EQ(BuildPromptCommand().find("history -d"), std::string::npos);
  EXPECT_NE(BuildPromptCommand().find("unset PROMPT_COMMAND"), std::string::npos);
}

constexpr pid_t kShell = 100;

ForegroundFacts ShellAloneReading(bool canonical) {
  ForegroundFacts facts;
  facts.foreground_pgid = kShell;
  facts.waiting_for_input = Finding::kYes;
  TaskFacts task;
  task.pid = kShell;
  task.tid = kShell;
  task.tty_wait = TtyWait::kRead;
  facts.tasks.push_back(task);
  facts.other_processes = 0;
  facts.unread_input = 0;
  facts.canonical = canonical;
  return facts;
}

TEST(RebootstrapRefusalTest, TheShellAloneReadingMayBeWrittenTo) {
  EXPECT_EQ(RebootstrapRefusal(RebootstrapStep::kTypeLine, ShellAloneReading(false), kShell),
            std::nullopt);
  EXPECT_EQ(RebootstrapRefusal(RebootstrapStep::kWriteNonce, ShellAloneReading(true), kShell),
            std::nullopt);
}

TEST(RebootstrapRefusalTest, EveryOtherPossibleReaderRefuses) {
  for (RebootstrapStep step : {RebootstrapStep::kTypeLine, RebootstrapStep::kWriteNonce}) {
    const bool canonical = step == RebootstrapStep::kWriteNonce;
    auto refused = [&](auto change) {
      ForegroundFacts facts = ShellAloneReading(canonical);
      change(facts);
      return RebootstrapRefusal(step, facts, kShell).has_value();
    };
    EXPECT_TRUE(refused([](ForegroundFacts& f) { f.foreground_pgid = 200; }));
    EXPECT_TRUE(refused([](ForegroundFacts& f) { f.foreground_pgid.reset(); }));
    EXPECT_TRUE(refused([](ForegroundFacts& f) { f.waiting_for_input = Finding::kUnknown; }));
    EXPECT_TRUE(refused([](ForegroundFacts& f) { f.waiting_for_input = Finding::kNo; }));
    // A program that joined the shell's group, or another thread.
    EXPECT_TRUE(refused([](ForegroundFacts& f) {
      TaskFacts joiner = f.tasks[0];
      joiner.pid = joiner.tid = 101;
      f.tasks.push_back(joiner);
    }));
    EXPECT_TRUE(refused([](ForegroundFacts& f) { f.tasks[0].tid = 101; }));
    // A reader outside the group (setsid, the terminal still open).
    EXPECT_TRUE(refused([](ForegroundFacts& f) {
      f.tasks[0].pid = f.tasks[0].tid = 300;
      f.tasks[0].outside_group = true;
    }));
    EXPECT_TRUE(refused([](ForegroundFacts& f) { f.tasks[0].outside_group = true; }));
    EXPECT_TRUE(refused([](ForegroundFacts& f) { f.tasks[0].tty_wait = TtyWait::kNone; }));
    EXPECT_TRUE(refused([](ForegroundFacts& f) { f.tasks.clear(); }));
    // Any other live process of the session: a background job, a sleeper holding the terminal.
    EXPECT_TRUE(refused([](ForegroundFacts& f) { f.other_processes = 1; }));
    EXPECT_TRUE(refused([](ForegroundFacts& f) { f.other_processes.reset(); }));
    EXPECT_TRUE(refused([](ForegroundFacts& f) { f.unread_input = 3; }));
    EXPECT_TRUE(refused([](ForegroundFacts& f) { f.unread_input.reset(); }));
    EXPECT_TRUE(refused([&](ForegroundFacts& f) { f.canonical = !canonical; }));
    EXPECT_TRUE(refused([](ForegroundFacts& f) { f.canonical.reset(); }));
  }
  EXPECT_TRUE(RebootstrapRefusal(RebootstrapStep::kTypeLine, ShellAloneReading(false), 0));
  // readline waits in pselect before it reads; the nonce goes only to a plain read.
  ForegroundFacts select = ShellAloneReading(false);
  select.tasks[0].tty_wait = TtyWait::kSelect;
  EXPECT_EQ(RebootstrapRefusal(RebootstrapStep::kTypeLine, select, kShell), std::nullopt);
  select.canonical = true;
  EXPECT_TRUE(RebootstrapRefusal(RebootstrapStep::kWriteNonce, select, kShell));
}

}  // namespace
}  // namespace ptybox::backend
