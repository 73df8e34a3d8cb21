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

// The typed loader: one short line, no hook and no nonce in it; it reads them from its pipe.
TEST(RebootstrapLineTest, OneShortLineThatReadsEverythingFromItsPipe) {
  const std::string line = BuildRebootstrapLine();
  ASSERT_FALSE(line.empty());
  EXPECT_LT(line.size(), 512u) << line;
  EXPECT_EQ(line.back(), '\n');
  EXPECT_EQ(line.find('\n'), line.size() - 1);
  EXPECT_TRUE(line.starts_with("{ [[ -o history")) << line;
  EXPECT_NE(line.find("history -d -1"), std::string::npos);
  EXPECT_EQ(line.find('!'), std::string::npos);  // history expansion is on in the new shell
  EXPECT_EQ(line.find("PROMPT_COMMAND"), std::string::npos);
  EXPECT_EQ(line.find("__ptybox_prompt"), std::string::npos);
  // Tracing off before anything is read; the pipe made without a fork and closed before the
  // code runs; the code is the pipe's.
  const size_t quiet = line.find("set +xvT;");
  const size_t pipe = line.find("\\exec 11<<<''; \\exec 11<>/proc/self/fd/11;");
  const size_t reads = line.find(
      "IFS= \\read -r -u 11 __ptybox_n || :; IFS= \\read -r -t 10 -u 11 __ptybox_n || :; IFS= "
      "\\read -r -d '' -t 10 -u 11 __ptybox_c || :; \\exec 11<&-; } 2>/dev/null; \\eval "
      "\"$__ptybox_c\"\n");
  ASSERT_NE(quiet, std::string::npos) << line;
  ASSERT_NE(pipe, std::string::npos) << line;
  ASSERT_NE(reads, std::string::npos) << line;
  EXPECT_LT(quiet, pipe);
  EXPECT_LT(pipe, reads);
  EXPECT_TRUE(line.ends_with("\\eval \"$__ptybox_c\"\n")) << line;
}

// What goes into the pipe: the nonce line, the bootstrap that keeps the user's hooks, a NUL.
TEST(RebootstrapLineTest, ThePayloadKeepsTheUsersHooks) {
  constexpr std::string_view kNonce = "0123456789abcdef0123456789abcdef";
  for (bool reexec : {false, true}) {
    const std::string payload = BuildRebootstrapPayload(kNonce, reexec);
    ASSERT_TRUE(payload.starts_with(std::string(kNonce) + "\n")) << payload;
    ASSERT_EQ(payload.back(), '\0');
    const std::string code = payload.substr(kNonce.size() + 1, payload.size() - kNonce.size() - 2);
    EXPECT_EQ(code.find('\0'), std::string::npos);
    EXPECT_EQ(code.find('\n'), std::string::npos);
    EXPECT_EQ(code.find(kNonce), std::string::npos);  // the code names the variable only
    EXPECT_TRUE(code.starts_with("{ unset __ptybox_c; ")) << code;
    // The loader saved the options and read the nonce: the code does neither again (the rc
    // file it keeps for the next `exec bash` does).
    const std::string own = code.substr(0, code.find("declare -gr __ptybox_rc="));
    EXPECT_EQ(own.find("__ptybox_o=$-"), std::string::npos) << own;
    EXPECT_EQ(own.find("read -r __ptybox_n"), std::string::npos) << own;
    EXPECT_NE(code.find("PROMPT_COMMAND[" + std::to_string(kPromptHookIndex) + "]"),
              std::string::npos);
    EXPECT_EQ(code.find("unset PROMPT_COMMAND"), std::string::npos);
    // Only a shell that ran non-dumpable moves on into the unreadable copy, after the group
    // whose stderr is /dev/null, and keeps a nonce only when the copy is there.
    const size_t chain = code.find("\\exec __ptybox_bash 10<<<");
    EXPECT_EQ(chain != std::string::npos, reexec) << code;
    if (reexec) {
      EXPECT_GT(chain, code.rfind("} 2>/dev/null"));
      EXPECT_NE(code.find("[[ -x /proc/self/fd/13 ]] || __ptybox_n=; [[ -r /proc/self/fd/13 ]] "
                          "&& __ptybox_n=;"),
                std::string::npos);
    }
  }
  EXPECT_EQ(BuildPromptCommand().find("history -d"), std::string::npos);
  EXPECT_NE(BuildPromptCommand().find("unset PROMPT_COMMAND"), std::string::npos);
}

constexpr pid_t kShell = 100;

ForegroundFacts ShellAloneReading() {
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
  facts.canonical = false;
  return facts;
}

// The shell in the bootstrap's read of its pipe: asleep, not on the terminal.
ForegroundFacts ShellAloneInItsRead() {
  ForegroundFacts facts = ShellAloneReading();
  facts.waiting_for_input = Finding::kNo;
  facts.tasks[0].tty_wait = TtyWait::kNone;
  facts.canonical.reset();  // whatever the terminal is in
  return facts;
}

TEST(RebootstrapRefusalTest, TheShellAloneMayBeTypedIntoAndGivenTheNonce) {
  EXPECT_EQ(TypeLineRefusal(ShellAloneReading(), kShell), std::nullopt);
  // readline waits in pselect before it reads.
  ForegroundFacts select = ShellAloneReading();
  select.tasks[0].tty_wait = TtyWait::kSelect;
  EXPECT_EQ(TypeLineRefusal(select, kShell), std::nullopt);
  EXPECT_EQ(PullRefusal(ShellAloneInItsRead(), kShell), std::nullopt);
}

TEST(RebootstrapRefusalTest, EveryOtherPossibleReaderRefuses) {
  for (bool pull : {false, true}) {
    auto refused = [&](auto change) {
      ForegroundFacts facts = pull ? ShellAloneInItsRead() : ShellAloneReading();
      change(facts);
      return (pull ? PullRefusal(facts, kShell) : TypeLineRefusal(facts, kShell)).has_value();
    };
    EXPECT_TRUE(refused([](ForegroundFacts& f) { f.foreground_pgid = 200; }));
    EXPECT_TRUE(refused([](ForegroundFacts& f) { f.foreground_pgid.reset(); }));
    EXPECT_TRUE(refused([](ForegroundFacts& f) { f.waiting_for_input = Finding::kUnknown; }));
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
    EXPECT_TRUE(refused([](ForegroundFacts& f) { f.tasks.clear(); }));
    // Any other live process of the session: a background job, a sleeper holding the terminal
    // (or, for the nonce, the pipe), a child that could read the shell's memory.
    EXPECT_TRUE(refused([](ForegroundFacts& f) { f.other_processes = 1; }));
    EXPECT_TRUE(refused([](ForegroundFacts& f) { f.other_processes.reset(); }));
    EXPECT_TRUE(refused([](ForegroundFacts& f) { f.unread_input = 3; }));
    EXPECT_TRUE(refused([](ForegroundFacts& f) { f.unread_input.reset(); }));
  }
  // The line goes only to readline: reading, in raw mode.
  auto typed_refused = [](auto change) {
    ForegroundFacts facts = ShellAloneReading();
    change(facts);
    return TypeLineRefusal(facts, kShell).has_value();
  };
  EXPECT_TRUE(typed_refused([](ForegroundFacts& f) { f.waiting_for_input = Finding::kNo; }));
  EXPECT_TRUE(typed_refused([](ForegroundFacts& f) { f.tasks[0].tty_wait = TtyWait::kNone; }));
  EXPECT_TRUE(typed_refused([](ForegroundFacts& f) { f.canonical = true; }));
  EXPECT_TRUE(typed_refused([](ForegroundFacts& f) { f.canonical.reset(); }));
  EXPECT_TRUE(TypeLineRefusal(ShellAloneReading(), 0));
  // The nonce goes only to a shell asleep off the terminal, after a complete look.
  auto pull_refused = [](auto change) {
    ForegroundFacts facts = ShellAloneInItsRead();
    change(facts);
    return PullRefusal(facts, kShell).has_value();
  };
  EXPECT_TRUE(pull_refused([](ForegroundFacts& f) { f.waiting_for_input = Finding::kYes; }));
  EXPECT_TRUE(pull_refused([](ForegroundFacts& f) { f.tasks[0].running = true; }));
  EXPECT_TRUE(pull_refused([](ForegroundFacts& f) { f.tasks[0].tty_wait = TtyWait::kRead; }));
  EXPECT_TRUE(PullRefusal(ShellAloneInItsRead(), 0));
}

// The session's cgroup must count exactly the chain the walk saw: a thread of a process whose
// leader exited (a zombie to the walk), or a job that forks on between the walk's reads, is
// counted there (the fifth outside review's attacks).
TEST(RebootstrapRefusalTest, ATaskTheWalkDidNotSeeRefuses) {
  ForegroundFacts facts = ShellAloneInItsRead();
  facts.chain_processes = 3;  // bwrap, ptybox-init, the shell
  EXPECT_EQ(TaskCountRefusal(facts, 3), std::nullopt);
  EXPECT_TRUE(TaskCountRefusal(facts, 4).has_value());
  EXPECT_TRUE(TaskCountRefusal(facts, 2).has_value());
  EXPECT_TRUE(TaskCountRefusal(facts, std::nullopt).has_value());  // no pids cgroup
  facts.chain_processes.reset();
  EXPECT_TRUE(TaskCountRefusal(facts, 3).has_value());  // the walk was incomplete
}

// Only a bash started as an interactive shell, with an environment that runs nothing in it, is
// typed into: not a script run as the shell, not bash started by a program with an exported
// function or a loader variable (the fifth outside review's third attack).
TEST(RebootstrapRefusalTest, OnlyABashStartedAsAShellIsTypedInto) {
  using namespace std::string_literals;
  const std::string env = "PATH=/usr/bin\0HOME=/run/ptybox-home\0TERM=xterm-256color\0"s;
  for (const std::string& cmdline :
       {"bash\0"s, "/bin/bash\0"s, "-bash\0"s, "bash\0-l\0"s, "bash\0--login\0"s,
        "bash\0-i\0--norc\0"s, "bash\0--noprofile\0-il\0"s, "bash\0-O\0extglob\0"s}) {
    EXPECT_EQ(ImageRefusal(cmdline, env), std::nullopt) << cmdline;
  }
  for (const std::string& cmdline :
       {""s, "bash\0fake_shell.sh\0"s, "/bin/bash\0/ws/fake_shell.sh\0"s, "bash\0-c\0x\0"s,
        "bash\0-O\0"s, "bash\0-O\0/x\0"s, "bash\0--rcfile\0/tmp/rc\0"s, "bash\0--posix\0"s}) {
    EXPECT_TRUE(ImageRefusal(cmdline, env).has_value()) << cmdline;
  }
  for (const std::string& extra :
       {"BASH_FUNC_eval%%=() { :; }\0"s, "LD_PRELOAD=/ws/x.so\0"s, "LD_AUDIT=/ws/a.so\0"s,
        "BASH_ENV=/ws/rc\0"s, "ENV=/ws/rc\0"s, "PROMPT_COMMAND=steal\0"s, "PS0=x\0"s,
        "PS1=${PROMPT_COMMAND:=steal}\0"s, "SHELLOPTS=xtrace\0"s, "BASHOPTS=extdebug\0"s,
        "BASH_XTRACEFD=3\0"s, "PS4=x\0"s, "INPUTRC=/ws/i\0"s, "MAILPATH=/tmp/m?$(exit 42)\0"s,
        "MAIL=/tmp/m\0"s, "GCONV_PATH=/ws\0"s}) {
    EXPECT_TRUE(ImageRefusal("bash\0"s, env + extra).has_value()) << extra;
  }
}

// The nonce is written only into an anonymous pipe the descriptor did not hold before: never a
// named FIFO (anyone allowed may open it), never the pipe that was there already.
TEST(RebootstrapPipeTest, OnlyANewAnonymousPipeGetsTheLine) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const int at = ::dup(fds[0]);  // the pipe at a descriptor of this process, read side
  ASSERT_GE(at, 0);
  const std::string link = DescriptorLink(::getpid(), at);
  ASSERT_TRUE(link.starts_with("pipe:[")) << link;
  EXPECT_EQ(WriteIntoNewPipe(::getpid(), at, link, "x\n"), PipeWrite::kNotYet);
  EXPECT_EQ(WriteIntoNewPipe(::getpid(), at, "pipe:[1]", "0123\n"), PipeWrite::kWritten);
  char buf[8] = {};
  EXPECT_EQ(::read(fds[0], buf, sizeof buf), 5);
  EXPECT_EQ(std::string(buf, 5), "0123\n");
  EXPECT_EQ(WriteIntoNewPipe(::getpid(), 1000, "", "x\n"), PipeWrite::kNotYet);  // no descriptor
  ::close(at);
  ::close(fds[0]);
  ::close(fds[1]);
  // A named FIFO is a path, not a pipe: never written to.
  char dir[] = "/tmp/ptybox-fifo-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  const std::string fifo = std::string(dir) + "/f";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const int named = ::open(fifo.c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_GE(named, 0);
  EXPECT_EQ(WriteIntoNewPipe(::getpid(), named, "", "x\n"), PipeWrite::kNotYet);
  ::close(named);
  ::unlink(fifo.c_str());
  ::rmdir(dir);
}

}  // namespace
}  // namespace ptybox::backend
