// Attack: a program forges the shell's verified prompt. It looks for the session's nonce in its
// parent shell's environment and memory, joins the shell's process group, takes the terminal's
// foreground (SIGTTOU ignored), prints a marker with exit code 0 and "$ ", and blocks in
// read(0). In the confined modes of a root daemon it must not find the nonce. The send must not
// settle with the forger's exit code; after the forger reads a line and exits, the command behind
// it reports its real status. Through the real binary in every mode (the prompt rule holds
// everywhere), as root and as an ordinary user's daemon (the
// `_unprivileged` variant).
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include "tests/support/daemon_fixture.h"
#include "tests/support/files.h"

namespace ptybox::testing {
namespace {

constexpr const char* kForger = R"PY(import os, re, signal, sys
ppid = os.getppid()
pattern = re.compile(rb"6973;([0-9a-f]{32});")
nonce, where = None, "none"
try:
    m = pattern.search(open("/proc/%d/environ" % ppid, "rb").read())
    if m:
        nonce, where = m.group(1), "environ"
except OSError:
    pass
if nonce is None:
    try:
        with open("/proc/%d/maps" % ppid) as maps, open("/proc/%d/mem" % ppid, "rb") as mem:
            for line in maps:
                fields = line.split()
                if fields[1][0] != "r":
                    continue
                lo, hi = (int(x, 16) for x in fields[0].split("-"))
                if hi - lo > (64 << 20):
                    continue
                try:
                    mem.seek(lo)
                    m = pattern.search(mem.read(hi - lo))
                except (OSError, ValueError, OverflowError):
                    continue
                if m:
                    nonce, where = m.group(1), "mem"
                    break
    except OSError:
        pass
sys.stdout.write("forger found:%s\n" % where)
sys.stdout.flush()
shell_pgid = os.getpgid(ppid)
signal.signal(signal.SIGTTOU, signal.SIG_IGN)
os.setpgid(0, shell_pgid)
os.tcsetpgrp(0, shell_pgid)
n = (nonce or b"0" * 32).decode()
sys.stdout.write("\033]6973;%s;0;'/forged'\a$ " % n)
sys.stdout.flush()
os.read(0, 100)
)PY";

// Attack on the hook after `exec bash` (the exec machinery, and the daemon's typed bootstrap in
// danger-full-access, backend/readiness/rebootstrap.h): a program started before the exec
// leaves the shell's group and session (setsid), keeps the terminal open and, until it is killed,
// reads the terminal (a blocking read in a thread: whatever the daemon types next), the shell's
// environ, cmdline and descriptors, the pipes among them (what `exec bash` hands over) and opens
// its memory, keeping everything in argv[1]. It announces itself with argv[2].
constexpr const char* kThief = R"PY(import os, sys, threading
loot_path, ready_path = sys.argv[1], sys.argv[2]
shell = os.getppid()
if os.fork():  # a job leads its own group, and a group leader cannot setsid
    os._exit(0)
os.setsid()
loot = open(loot_path, "ab", buffering=0)
def steal_terminal():
    while True:
        data = os.read(0, 4096)
        if not data:
            return
        loot.write(b"terminal:" + data + b"\n")
threading.Thread(target=steal_terminal, daemon=True).start()
open(ready_path, "w").close()
while True:
    for name in ("environ", "cmdline"):
        try:
            loot.write(b"%s:" % name.encode() + open("/proc/%d/%s" % (shell, name), "rb").read() + b"\n")
        except OSError:
            pass
    try:
        for fd in os.listdir("/proc/%d/fd" % shell):
            link = os.readlink("/proc/%d/fd/%s" % (shell, fd))
            loot.write(b"fd:" + link.encode() + b"\n")
            if link.startswith("pipe:"):  # what `exec bash` hands over, while it is there
                try:
                    p = os.open("/proc/%d/fd/%s" % (shell, fd), os.O_RDONLY | os.O_NONBLOCK)
                    loot.write(b"pipe:" + os.read(p, 65536) + b"\n")
                    os.close(p)
                except OSError:
                    pass
    except OSError:
        pass
    try:
        with open("/proc/%d/mem" % shell, "rb") as mem:
            loot.write(b"mem:opened\n")
    except OSError:
        pass
    threading.Event().wait(0.005)
)PY";

// The attack of the sixth round's outside review, across owners: a program of another owner's
// session listens on a socket in the shared workspace (argv[1]), receives a terminal descriptor
// over it, and reads that terminal until it is killed, keeping what it reads in argv[2]. It
// announces itself with argv[3].
constexpr const char* kTerminalReceiver = R"PY(import array, os, socket, sys
path, loot_path, ready_path = sys.argv[1:4]
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind(path)
os.chmod(path, 0o777)
s.listen(1)
open(ready_path, "w").close()
c, _ = s.accept()
msg, anc, flags, addr = c.recvmsg(1, socket.CMSG_LEN(4))
fd = array.array("i", anc[0][2][:4])[0]
loot = open(loot_path, "ab", buffering=0)
loot.write(b"got-terminal\n")
while True:
    data = os.read(fd, 4096)
    if not data:
        break
    loot.write(b"terminal:" + data + b"\n")
)PY";

// Sends its own stdin (the session's terminal) over the socket argv[1], then exits.
constexpr const char* kTerminalSender = R"PY(import array, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(sys.argv[1])
s.sendmsg([b"x"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [0]))])
)PY";

// Prints a marker with exit code 42 and "$ " for every 32-hex-digit string in argv[1] (and one of
// its own), then waits in read(0) while the shell waits for it.
constexpr const char* kLootForger = R"PY(import os, re, sys
found = set(re.findall(rb"[0-9a-f]{32}", open(sys.argv[1], "rb").read())) | {b"0" * 32}
sys.stdout.write("forging with %d\n" % len(found))
for n in sorted(found):
    sys.stdout.write("\033]6973;%s;42;'/forged'\a$ " % n.decode())
sys.stdout.flush()
os.read(0, 100)
)PY";

// The processes whose command line holds `needle` (the test sees the session's processes from
// outside: as root every one, as the ordinary user the daemon's own).
std::vector<pid_t> ProcessesWith(const std::string& needle) {
  std::vector<pid_t> found;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const std::string cmdline = ReadFile(entry.path() / "cmdline");  // "" once it is gone
    if (cmdline.find(needle) != std::string::npos) found.push_back(std::stoi(name));
  }
  return found;
}

// Whether every read the terminal receiver kept (`terminal:` DATA `\n` in its loot, after
// `got-terminal`) is the tail of one of `lines`: what it takes when readline has read that line's
// head.
bool EveryReadIsATailOf(const std::string& loot, const std::vector<std::string>& lines) {
  const std::string mark = "terminal:";
  for (size_t at = loot.find(mark); at != std::string::npos;) {
    const size_t next = loot.find(mark, at + mark.size());
    const size_t end = next == std::string::npos ? loot.size() : next;
    std::string data = loot.substr(at + mark.size(), end - at - mark.size());
    if (!data.empty() && data.back() == '\n') data.pop_back();  // the receiver's own
    bool tail = false;
    for (const std::string& line : lines) {
      tail = tail || (data.size() <= line.size() &&
                      line.compare(line.size() - data.size(), data.size(), data) == 0);
    }
    if (!tail) return false;
    at = next;
  }
  return true;
}

class ForgedPromptTest : public ::testing::TestWithParam<std::string> {
 protected:
  static void SetUpTestSuite() {
    daemon_ = new Daemon();
    std::ofstream(daemon_->workspace() / "forger.py") << kForger;
    std::ofstream(daemon_->workspace() / "thief.py") << kThief;
    std::ofstream(daemon_->workspace() / "loot_forger.py") << kLootForger;
    std::ofstream(daemon_->workspace() / "receiver.py") << kTerminalReceiver;
    std::ofstream(daemon_->workspace() / "sender.py") << kTerminalSender;
  }
  static void TearDownTestSuite() {
    delete daemon_;
    daemon_ = nullptr;
  }

  std::string OpenWithTestHome(std::optional<TempDir>& home) {
    return OpenBashSession(client_, GetParam(), home);
  }

  static Daemon* daemon_;
  RpcClient client_{daemon_->socket()};
};

Daemon* ForgedPromptTest::daemon_ = nullptr;

TEST_P(ForgedPromptTest, AProgramCannotSettleASendWithAForgedPrompt) {
  const std::string id = OpenSession(client_, GetParam());
  // A large silence bound: whatever settles this send is exact evidence, never silence.
  const Json slow{{"silenceMs", 20000}, {"timeoutMs", 30000}};
  Json r = Send(client_, id, "python3 forger.py; (exit 3)\n", slow);
  ASSERT_TRUE(r.contains("waitReason")) << r.dump();
  const std::string viewport = r["viewport"].is_string() ? r["viewport"].get<std::string>() : "";
  ASSERT_NE(viewport.find("forger found:"), std::string::npos) << r.dump();
  // The forger waits in read(0): a program's stdin wait, never the shell's prompt.
  EXPECT_EQ(r["waitReason"], "stdin_read") << r.dump();
  EXPECT_TRUE(r["exitCode"].is_null()) << r.dump();
  EXPECT_TRUE(r["cwd"].is_null()) << r.dump();
  // The nonce is in no environment. In a confined mode the shell runs non-dumpable, so its
  // memory is closed to its children too; danger-full-access is the positive control: there
  // the forger does read the nonce from the shell's memory, and still cannot settle the send.
  // An ordinary user's daemon keeps the shell dumpable (it could not inspect it otherwise):
  // there the forger finds the nonce in every mode, and still cannot settle the send.
  if (GetParam() != "danger-full-access" && ::geteuid() == 0) {
    EXPECT_NE(viewport.find("forger found:none"), std::string::npos) << r.dump();
  } else {
    EXPECT_NE(viewport.find("forger found:mem"), std::string::npos) << r.dump();
  }
  // The forger reads this line and exits; `(exit 3)` runs and the real prompt reports it.
  r = Send(client_, id, "x\n", slow);
  EXPECT_EQ(r["waitReason"], "stdin_read") << r.dump();
  EXPECT_EQ(r["exitCode"], 3) << r.dump();
  r = Send(client_, id, "echo after; (exit 4)\n", slow);
  EXPECT_EQ(r["exitCode"], 4) << r.dump();
  EXPECT_EQ(r["viewport"], "after") << r.dump();
}

TEST_P(ForgedPromptTest, ExecBashNeverHandsTheFreshNonceToAnotherProgram) {
  // `exec bash` reads ~/.bashrc: in danger-full-access a home of the test's.
  std::optional<TempDir> home;
  const std::string id = OpenWithTestHome(home);
  const Json slow{{"silenceMs", 20000}, {"timeoutMs", 30000}};
  // Unique per run: the thief's command line names it, and its loot stays inside the session.
  const std::string tag = "thief-" + std::to_string(::getpid()) + "-" + GetParam();
  const std::string loot = "/tmp/" + tag + ".loot";
  Json r = Send(client_, id,
                "python3 thief.py " + loot + " /tmp/" + tag + ".ready & while [ ! -e /tmp/" + tag +
                    ".ready ]; do sleep 0.01; done; exec bash\n",
                slow);
  EXPECT_EQ(r["waitReason"], "stdin_read") << r.dump();
  // Nothing is typed while the thief lives; the new image has the hook already. This send's own
  // input goes to the shell or to the thief (both read the terminal): its own exit code or none.
  r = Send(client_, id, "echo one; (exit 4)\n", Json{{"silenceMs", 1500}, {"timeoutMs", 30000}});
  EXPECT_TRUE(r["exitCode"].is_null() || r["exitCode"] == 4) << r.dump();
  const std::vector<pid_t> thieves = ProcessesWith(tag + ".loot");
  ASSERT_EQ(thieves.size(), 1u);
  // Let it have looked at the new image once (every 5 ms it tries; its command line, readable
  // in every mode, names the rc file): the sends above can all settle within a few milliseconds
  // of the exec. Its loot is read through its own root.
  const std::string thief_loot = "/proc/" + std::to_string(thieves[0]) + "/root" + loot;
  for (int i = 0; i < 3000; ++i) {
    const std::string text = ReadFile(thief_loot);
    const size_t seen = text.find("--rcfile");
    if (seen != std::string::npos && text.find("\ncmdline:", seen) != std::string::npos) break;
    ::usleep(10000);
  }
  ASSERT_EQ(::kill(thieves[0], SIGKILL), 0);
  for (int i = 0; i < 2000 && !ProcessesWith(tag + ".loot").empty(); ++i) ::usleep(5000);
  ASSERT_TRUE(ProcessesWith(tag + ".loot").empty());
  // A line the thief may not have left whole: ends whatever readline holds, then exact again.
  // Readline reads a byte at a time and the thief what is there: bash may hold the head of
  // `echo one; (exit 4)` (the thief took its tail), which the line ends inside the subshell's
  // parentheses, where every later line is a continuation: ^C abandons that.
  Send(client_, id, "\n", Json{{"silenceMs", 1500}, {"timeoutMs", 30000}});
  Send(client_, id, "\x03", Json{{"silenceMs", 1500}, {"timeoutMs", 30000}});
  // The hook is there in every mode (docs/readiness.md, "exec bash"). Where the shell runs
  // non-dumpable (the confined modes of a root daemon) the new image does too: nothing of it
  // could be read.
  const bool closed = GetParam() != "danger-full-access" && ::geteuid() == 0;
  // Where the new image is dumpable (as the first shell was) the thief may drain the pipes before
  // the new image reads them: that image then has no hook, and exit codes stay null, never wrong.
  const bool may_lose_the_hook = !closed;
  auto expect_exit = [may_lose_the_hook](const Json& result, int code) {
    if (may_lose_the_hook && result["exitCode"].is_null()) return;
    EXPECT_EQ(result["exitCode"], code) << result.dump();
  };
  r = Send(client_, id, "echo two; (exit 4)\n", slow);
  EXPECT_EQ(r["waitReason"], "stdin_read") << r.dump();
  expect_exit(r, 4);
  EXPECT_EQ(r["viewport"], "two") << r.dump();
  // What the thief got: nothing typed by the daemon from the terminal (neither a bootstrap nor a
  // nonce line). Where the shell is closed, not one read of its environ, memory or pipes; where
  // it is dumpable (as the first shell was) it did read the shell.
  r = Send(client_, id,
           "grep -c -e '^environ:' -e '^mem:' -e '^pipe:' " + loot + "; grep -a '^terminal:' " +
               loot + " | grep -c -e __ptybox -e '[0-9a-f]\\{32\\}'\n",
           slow);
  expect_exit(r, 1);  // the last grep found nothing
  ASSERT_TRUE(r["viewport"].is_string()) << r.dump();
  const std::string counts = r["viewport"].get<std::string>();
  ASSERT_NE(counts.find('\n'), std::string::npos) << r.dump();
  if (closed) {
    EXPECT_EQ(counts.substr(0, counts.find('\n')), "0") << r.dump();
  } else {
    EXPECT_NE(counts.substr(0, counts.find('\n')), "0") << r.dump();  // it did read the shell
  }
  EXPECT_EQ(counts.substr(counts.find('\n') + 1), "0") << r.dump();
  if (HasFailure()) {
    // Once in CI (ASan, danger-full-access) every grep was "command not found" after the exec:
    // what the shell's lookup state was then, for the next time.
    const Json state = Send(client_, id,
                            "declare -p PATH; type -a grep; alias; hash; echo \"$- $BASH $0\"; "
                            "tr '\\0' '\\n' < /proc/$$/cmdline\n",
                            slow);
    ADD_FAILURE() << "the shell after the exec: " << state.dump();
  }
  // And whatever it kept cannot forge the prompt of the hooked shell.
  r = Send(client_, id, "python3 loot_forger.py " + loot + "; (exit 3)\n", slow);
  EXPECT_EQ(r["waitReason"], "stdin_read") << r.dump();
  EXPECT_TRUE(r["exitCode"].is_null()) << r.dump();
  r = Send(client_, id, "x\n", slow);
  expect_exit(r, 3);
  // A child reading the new image's environ and memory: closed where the first shell was
  // (the new image runs from the daemon's execute-only copy); elsewhere it finds the nonce, as in
  // the first shell, and still cannot settle a send at its imitation: the shell itself must be
  // the reader.
  r = Send(client_, id, "python3 forger.py; (exit 5)\n", slow);
  EXPECT_NE(r["viewport"].get<std::string>().find(closed ? "forger found:none" : "forger found:"),
            std::string::npos)
      << r.dump();
  EXPECT_EQ(r["waitReason"], "stdin_read") << r.dump();
  EXPECT_TRUE(r["exitCode"].is_null()) << r.dump();
  r = Send(client_, id, "x\n", slow);
  expect_exit(r, 5);
}

// A bash started around the exec machinery (`exec $SHELL`, `builtin exec bash`, `exec /bin/bash`)
// runs a file its user can read: dumpable. The daemon gives it the hook back with a fresh nonce
// written into a pipe of its own, and where the first shell ran non-dumpable (the confined
// modes of a root daemon) the shell moves the nonce on at once into the unreadable copy of
// bash: a child reading the shell's environ and memory finds nothing there, and no child can
// settle a send; elsewhere it finds the nonce, as in the first shell, and still cannot.
TEST_P(ForgedPromptTest, ExecAroundTheMachineryKeepsTheNonceWhereTheFirstShellDid) {
  const Json slow{{"silenceMs", 20000}, {"timeoutMs", 30000}};
  const bool closed = GetParam() != "danger-full-access" && ::geteuid() == 0;
  // `exec $SHELL -l`: an interactive login bash marks descriptors 3-19 close-on-exec, the copy's
  // included; the image after it, and the one after the next `exec bash`, still run from it.
  for (const std::string change :
       {"exec $SHELL\n", "builtin exec bash\n", "exec /bin/bash\n", "exec $SHELL -l\n"}) {
    SCOPED_TRACE(change);
    std::optional<TempDir> home;
    const std::string id = OpenWithTestHome(home);
    Json r = Send(client_, id, change, slow);
    EXPECT_EQ(r["waitReason"], "stdin_read") << r.dump();
    r = Send(client_, id, "echo one; (exit 4)\n", slow);
    EXPECT_EQ(r["exitCode"], 4) << r.dump();
    // A child reads the shell's environ and memory and prints markers with what it found: it
    // finds nothing where the shell is closed, and settles nothing either way.
    auto forger_settles_nothing = [&](int code) {
      Json f = Send(client_, id, "python3 forger.py; (exit " + std::to_string(code) + ")\n", slow);
      ASSERT_TRUE(f["viewport"].is_string()) << f.dump();
      EXPECT_NE(
          f["viewport"].get<std::string>().find(closed ? "forger found:none" : "forger found:"),
          std::string::npos)
          << f.dump();
      EXPECT_EQ(f["waitReason"], "stdin_read") << f.dump();
      EXPECT_TRUE(f["exitCode"].is_null()) << f.dump();
      f = Send(client_, id, "x\n", slow);
      EXPECT_EQ(f["exitCode"], code) << f.dump();
    };
    forger_settles_nothing(5);
    // The next `exec bash` goes through the machinery from there: as closed as before.
    r = Send(client_, id, "exec bash\n", slow);
    EXPECT_EQ(r["waitReason"], "stdin_read") << r.dump();
    forger_settles_nothing(7);
    r = Send(client_, id, "cd /tmp; (exit 6)\n", slow);
    EXPECT_EQ(r["exitCode"], 6) << r.dump();
    EXPECT_EQ(r["cwd"], "/tmp") << r.dump();
    Json closed_result = client_.Call("terminal_close", Json{{"sessionId", id}});
    EXPECT_TRUE(closed_result.contains("result")) << closed_result.dump();
  }
}

// A program of another owner's session holds this session's terminal (its descriptor passed over
// a socket in the shared workspace by a program of this session that has ended since) and reads
// it through the exec and the sends after it. `exec bash`: nothing is typed for it to read (the
// new image gets the nonce through a pipe). `exec $SHELL` (around the machinery): the daemon types
// a loader that holds no nonce, and writes the nonce into a pipe of the shell's own. Either way
// its loot holds no nonce, no exit code is wrong, and once it is gone every exit code is exact
// (after `exec $SHELL`, unless it took the loader: then that image keeps null codes).
TEST_P(ForgedPromptTest, AnotherOwnersSessionHoldingTheTerminalGetsNoNonce) {
  const Json slow{{"silenceMs", 20000}, {"timeoutMs", 30000}};
  for (const std::string change : {"exec bash\n", "exec $SHELL\n"}) {
    SCOPED_TRACE(change);
    const std::string tag = "receiver-" + std::to_string(::getpid()) + "-" + GetParam() +
                            (change == "exec bash\n" ? "-machinery" : "-around");
    // The other owner: its own connection, a workspace-write session in the same workspace.
    RpcClient other(daemon_->socket());
    const std::string thief = OpenSession(other, "workspace-write");
    Json r = Send(other, thief,
                  "python3 receiver.py " + tag + ".sock " + tag + ".loot " + tag +
                      ".ready & while [ ! -e " + tag + ".ready ]; do sleep 0.01; done\n",
                  slow);
    ASSERT_EQ(r["waitReason"], "stdin_read") << r.dump();
    std::optional<TempDir> home;
    const std::string id = OpenWithTestHome(home);
    r = Send(client_, id, "python3 sender.py " + tag + ".sock\n", slow);
    EXPECT_EQ(r["exitCode"], 0) << r.dump();
    const std::filesystem::path loot = daemon_->workspace() / (tag + ".loot");
    for (int i = 0; i < 3000 && ReadFile(loot).find("got-terminal") == std::string::npos; ++i) {
      ::usleep(10000);
    }
    ASSERT_NE(ReadFile(loot).find("got-terminal"), std::string::npos);
    // The exec and sends while the other owner reads: the input may be its, the code never
    // wrong. Readline reads a byte at a time and the reader what is there, so bash may get the
    // head of a line without its end and run it joined to the next one (`(exit 4)echo one;
    // ...` would be a syntax error, status 2). Every line is written so that any head of the
    // ones before it joined to it runs its own last command last, or waits for more: `: ;`
    // first (after `exec `, a failed exec; an interactive shell goes on), no parentheses, and
    // the quotes closed.
    const Json quick{{"silenceMs", 1500}, {"timeoutMs", 30000}};
    const std::vector<std::string> typed = {change, ": ; echo one; sh -c 'exit 4'\n",
                                            ": ; echo one; sh -c 'exit 6'\n"};
    r = Send(client_, id, typed[0], quick);
    EXPECT_TRUE(r["exitCode"].is_null() || r["exitCode"] == 0) << r.dump();
    r = Send(client_, id, typed[1], quick);
    EXPECT_TRUE(r["exitCode"].is_null() || r["exitCode"] == 4) << r.dump();
    r = Send(client_, id, typed[2], quick);
    EXPECT_TRUE(r["exitCode"].is_null() || r["exitCode"] == 6) << r.dump();
    // The other owner's session ends (its program with it).
    Json closed = other.Call("terminal_close", Json{{"sessionId", thief}});
    ASSERT_TRUE(closed.contains("result")) << closed.dump();
    // A line the reader may not have left whole: ends whatever readline holds. What it took
    // may also have left bash inside a compound command or a subshell (it read a `)` or `}`:
    // "terminal: (exit 4)"), where every later line is a continuation and answers no exit
    // code: ^C abandons that, as a person at the terminal would.
    Send(client_, id, "\n", quick);
    Send(client_, id, "\x03", quick);
    const std::string text = ReadFile(loot);
    // What it read of the terminal: what the agent typed, at most the loader; never a nonce,
    // never the hook.
    EXPECT_EQ(text.find("__ptybox_prompt"), std::string::npos) << text;
    EXPECT_EQ(text.find("PROMPT_COMMAND"), std::string::npos) << text;
    bool hex = false;
    for (size_t i = 0, run = 0; i < text.size(); ++i) {
      const char c = text[i];
      run = ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')) ? run + 1 : 0;
      if (run >= 32) hex = true;
    }
    EXPECT_FALSE(hex) << text;
    r = Send(client_, id, "echo two; (exit 4)\n", slow);
    EXPECT_EQ(r["waitReason"], "stdin_read") << r.dump();
    // Any piece of the loader (its start holds no `__ptybox`: `{ [[ -o history ...`): what is
    // left of it in readline may hold the next lines (an open `{`).
    bool took_loader = false;
    for (const char* piece : {"__ptybox", "HISTIGNORE", "history", "[[", "{ ", "printf", "exec 11",
                              "/dev/null", "eval", "read -r"}) {
      took_loader = took_loader || text.find(piece) != std::string::npos;
    }
    if (change == "exec bash\n") {
      EXPECT_FALSE(took_loader) << text;  // nothing was typed
    }
    if (took_loader) {
      EXPECT_TRUE(r["exitCode"].is_null()) << r.dump();
      continue;
    }
    // A read of the reader's that is not the tail of one line of ours may hold the loader's
    // last bytes (`c"` and the newline: no piece above): bash then ran the loader joined to a
    // line of ours, or not at all. Either way no code is wrong; it may be missing.
    const bool took_unknown = change != "exec bash\n" && !EveryReadIsATailOf(text, typed);
    if (took_unknown && r["exitCode"].is_null()) continue;
    EXPECT_EQ(r["viewport"], "two") << r.dump() << "\nthe other owner read: " << text;
    EXPECT_EQ(r["exitCode"], 4) << r.dump();
    r = Send(client_, id, "cd /tmp; false\n", slow);
    EXPECT_EQ(r["exitCode"], 1) << r.dump();
    EXPECT_EQ(r["cwd"], "/tmp") << r.dump();
  }
}

INSTANTIATE_TEST_SUITE_P(Modes, ForgedPromptTest,
                         ::testing::Values("read-only", "workspace-write", "danger-full-access"),
                         ModeTestName);

}  // namespace
}  // namespace ptybox::testing
