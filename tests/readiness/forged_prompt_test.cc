// Attack: a program forges the shell's verified prompt. It looks for the session's nonce in its
// parent shell's environment and memory, joins the shell's process group, takes the terminal's
// foreground (SIGTTOU ignored), prints a marker with exit code 0 and "$ ", and blocks in
// read(0). In the confined modes of a root daemon it must not find the nonce. The send must not
// settle with the forger's exit code; after the forger reads a line and exits, the command behind
// it reports its real status. Through the real binary in every mode (the prompt rule holds
// everywhere), as root and as an ordinary user's daemon (the
// `_unprivileged` variant).
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/daemon_fixture.h"

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

// Attack on the hook given back after `exec bash` (backend/readiness/rebootstrap.h): a program
// started before the exec leaves the shell's group and session (setsid), keeps the terminal
// open and, until it is killed, reads the terminal (a blocking read in a thread: whatever the
// daemon types next) and the shell's environ, cmdline and descriptors, keeping everything in
// argv[1]. It announces itself with argv[2].
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
            loot.write(b"fd:" + os.readlink("/proc/%d/fd/%s" % (shell, fd)).encode() + b"\n")
    except OSError:
        pass
    threading.Event().wait(0.005)
)PY";

// A program of the session that knocks on the rekey listener (argv[2]: the ports, comma
// separated) with the shell's own request, again and again until argv[3] exists (and it got in
// once), then writes
// how often it got in and how many bytes it received to argv[1].
constexpr const char* kKnocker = R"PY(import os, socket, sys, time
out, ports, stop = sys.argv[1], [int(p) for p in sys.argv[2].split(",")], sys.argv[3]
connected, received, rounds = 0, b"", 0
# Until told to stop, and at least until it got in once (a bounded number of rounds).
while (not connected and rounds < 500) or not os.path.exists(stop):
    rounds += 1
    for port in ports:
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=2)
        except OSError:
            continue
        connected += 1
        try:
            s.sendall(b"ptybox-rekey\n")
            received += s.recv(256)
        except OSError:
            pass
        s.close()
    time.sleep(0.01)
open(out + ".tmp", "w").write("connected=%d received=%d %r\n" % (connected > 0, len(received), received))
os.rename(out + ".tmp", out)
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
    std::ifstream in(entry.path() / "cmdline", std::ios::binary);
    std::string cmdline((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (cmdline.find(needle) != std::string::npos) found.push_back(std::stoi(name));
  }
  return found;
}

class ForgedPromptTest : public ::testing::TestWithParam<std::string> {
 protected:
  static void SetUpTestSuite() {
    daemon_ = new Daemon();
    std::ofstream(daemon_->workspace() / "forger.py") << kForger;
    std::ofstream(daemon_->workspace() / "thief.py") << kThief;
    std::ofstream(daemon_->workspace() / "loot_forger.py") << kLootForger;
    std::ofstream(daemon_->workspace() / "knocker.py") << kKnocker;
  }
  static void TearDownTestSuite() {
    delete daemon_;
    daemon_ = nullptr;
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
  const std::string id = OpenSession(client_, GetParam());
  const Json slow{{"silenceMs", 20000}, {"timeoutMs", 30000}};
  // Unique per run: the thief's command line names it, and its loot stays inside the session.
  const std::string tag = "thief-" + std::to_string(::getpid()) + "-" + GetParam();
  const std::string loot = "/tmp/" + tag + ".loot";
  Json r = Send(client_, id,
                "python3 thief.py " + loot + " /tmp/" + tag + ".ready & while [ ! -e /tmp/" + tag +
                    ".ready ]; do sleep 0.01; done; exec bash\n",
                slow);
  EXPECT_EQ(r["waitReason"], "stdin_read") << r.dump();
  // The daemon types nothing while the thief lives. This send's own input goes to the shell or
  // to the thief (both read the terminal): either way no exit code, and a short silence bound.
  r = Send(client_, id, "echo one; (exit 4)\n", Json{{"silenceMs", 1500}, {"timeoutMs", 30000}});
  EXPECT_TRUE(r["exitCode"].is_null()) << r.dump();
  const std::vector<pid_t> thieves = ProcessesWith(tag + ".loot");
  ASSERT_EQ(thieves.size(), 1u);
  ASSERT_EQ(::kill(thieves[0], SIGKILL), 0);
  for (int i = 0; i < 2000 && !ProcessesWith(tag + ".loot").empty(); ++i) ::usleep(5000);
  ASSERT_TRUE(ProcessesWith(tag + ".loot").empty());
  // A line the thief may not have left whole: ends whatever readline holds, then exact again.
  Send(client_, id, "\n", Json{{"silenceMs", 1500}, {"timeoutMs", 30000}});
  // The hook comes back in every mode: its nonce never crosses the terminal (docs/readiness.md,
  // "exec bash").
  auto expect_exit = [](const Json& result, int code) {
    EXPECT_EQ(result["exitCode"], code) << result.dump();
  };
  r = Send(client_, id, "echo two; (exit 4)\n", slow);
  EXPECT_EQ(r["waitReason"], "stdin_read") << r.dump();
  expect_exit(r, 4);
  EXPECT_EQ(r["viewport"], "two") << r.dump();
  // What the thief got: the shell's environment and descriptors (which hold no nonce: the
  // environment holds the first bootstrap, without it), and from the terminal nothing typed by
  // the daemon: neither the bootstrap nor a nonce line.
  r = Send(client_, id,
           "grep -c '^environ:' " + loot + "; grep -a '^terminal:' " + loot +
               " | grep -c -e __ptybox -e '[0-9a-f]\\{32\\}'\n",
           slow);
  expect_exit(r, 1);  // the last grep found nothing
  ASSERT_TRUE(r["viewport"].is_string()) << r.dump();
  const std::string counts = r["viewport"].get<std::string>();
  ASSERT_NE(counts.find('\n'), std::string::npos) << r.dump();
  // It did read the shell's environment where the shell is dumpable; a root daemon's confined
  // shells (the first and every `exec bash`) run non-dumpable, so there it read nothing.
  if (GetParam() != "danger-full-access" && ::geteuid() == 0) {
    EXPECT_EQ(counts.substr(0, counts.find('\n')), "0") << r.dump();
  } else {
    EXPECT_NE(counts.substr(0, counts.find('\n')), "0") << r.dump();
  }
  EXPECT_EQ(counts.substr(counts.find('\n') + 1), "0") << r.dump();
  // And whatever it kept cannot forge the prompt of the hooked shell.
  r = Send(client_, id, "python3 loot_forger.py " + loot + "; (exit 3)\n", slow);
  EXPECT_EQ(r["waitReason"], "stdin_read") << r.dump();
  EXPECT_TRUE(r["exitCode"].is_null()) << r.dump();
  r = Send(client_, id, "x\n", slow);
  expect_exit(r, 3);
  // In the confined modes of a root daemon the new image runs the unreadable copy of bash, so it
  // is non-dumpable like the first one: a child finds the fresh nonce neither in its
  // environment nor in its memory. Where the shell was dumpable already, a child that reads its
  // memory finds it (docs/readiness.md, known limits), and still cannot settle a send at its
  // imitation: the shell itself must be the reader.
  r = Send(client_, id, "python3 forger.py; (exit 5)\n", slow);
  if (GetParam() != "danger-full-access" && ::geteuid() == 0) {
    EXPECT_NE(r["viewport"].get<std::string>().find("forger found:none"), std::string::npos)
        << r.dump();
  } else {
    EXPECT_NE(r["viewport"].get<std::string>().find("forger found:mem"), std::string::npos)
        << r.dump();
  }
  EXPECT_EQ(r["waitReason"], "stdin_read") << r.dump();
  EXPECT_TRUE(r["exitCode"].is_null()) << r.dump();
  r = Send(client_, id, "x\n", slow);
  expect_exit(r, 5);
}

// Whether `text` holds a run of 32 lowercase hex digits (what a nonce looks like). No <regex>:
// GCC 12's sanitized build warns falsely inside it (docs/ci.md).
bool HoldsAHexRun(const std::string& text) {
  size_t run = 0;
  for (char c : text) {
    run = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') ? run + 1 : 0;
    if (run >= 32) return true;
  }
  return false;
}

// The listening sockets on 127.0.0.1 of `shell`'s network namespace that the daemon holds: the
// session's rekey listener (in danger-full-access, every DFA session's of this daemon).
std::vector<int> RekeyPorts(pid_t shell, pid_t daemon) {
  std::set<std::string> held;
  const std::string fds = "/proc/" + std::to_string(daemon) + "/fd";
  for (const auto& entry : std::filesystem::directory_iterator(fds)) {
    std::error_code ec;
    const std::string target = std::filesystem::read_symlink(entry.path(), ec).string();
    if (!ec && target.starts_with("socket:[")) held.insert(target.substr(8, target.size() - 9));
  }
  std::vector<int> ports;
  std::ifstream table("/proc/" + std::to_string(shell) + "/net/tcp");
  std::string line;
  std::getline(table, line);  // the header
  while (std::getline(table, line)) {
    std::istringstream row(line);
    std::string sl, local, remote, state, queues, timer, retransmits, uid, timeout, inode;
    row >> sl >> local >> remote >> state >> queues >> timer >> retransmits >> uid >> timeout >>
        inode;
    if (state == "0A" && local.starts_with("0100007F:") && held.contains(inode)) {
      ports.push_back(std::stoi(local.substr(9), nullptr, 16));
    }
  }
  return ports;
}

// A connector from outside the session (another owner's program): in a child, in `shell`'s
// network namespace (entered as root; danger-full-access shares the host's), it connects to
// each port again and again, sends the shell's request and reads whatever comes, until killed.
// It reports on `report` one 'c' per connection and every byte it received.
pid_t StartConnector(pid_t shell, const std::vector<int>& ports, bool enter_namespace, int report) {
  // Nothing allocates after the fork (the test's reader thread may hold the allocator's lock).
  const std::string ns_path = "/proc/" + std::to_string(shell) + "/ns/net";
  const pid_t child = ::fork();
  if (child != 0) return child;
  if (enter_namespace) {
    const int ns = ::open(ns_path.c_str(), O_RDONLY);
    if (ns < 0 || ::setns(ns, CLONE_NEWNET) != 0) ::_exit(2);
  }
  for (;;) {
    for (const int port : ports) {
      const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in address{};
      address.sin_family = AF_INET;
      address.sin_port = htons(static_cast<uint16_t>(port));
      address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0) {
        (void)!::write(report, "c", 1);
        (void)!::write(fd, "ptybox-rekey\n", 13);
        pollfd p{fd, POLLIN, 0};
        char buf[256];
        ssize_t n = 0;
        if (::poll(&p, 1, 2000) > 0 && (n = ::read(fd, buf, sizeof buf)) > 0) {
          (void)!::write(report, buf, static_cast<size_t>(n));
        }
      }
      ::close(fd);
      ::usleep(1000);
    }
  }
}

// After `exec bash`, while the daemon gives the hook back: a process outside the session holds
// the session's terminal (as a program of another owner's session that received its descriptor
// over a socket would) and reads everything typed into it, and another connects to the
// session's rekey listener over and over, sending the shell's own request. Neither ever gets a
// 32-hex-digit string; the send answers the right exit code or null, never a forged one. Then,
// without them, the next image of the shell gets the hook back (the positive control).
TEST_P(ForgedPromptTest, TheFreshNonceReachesNeitherTheTerminalNorAnotherConnection) {
  const std::string tag = "rekey-" + std::to_string(::getpid()) + "-" + GetParam();
  const std::string id = OpenSession(client_, GetParam(), Json{{"env", {{"REKEY_MARK", tag}}}});
  const Json slow{{"silenceMs", 20000}, {"timeoutMs", 30000}};
  Json r = Send(client_, id, "exec bash\n", slow);
  EXPECT_EQ(r["waitReason"], "stdin_read") << r.dump();
  const std::vector<pid_t> shells = ProcessesWithEnv(tag);
  ASSERT_EQ(shells.size(), 1u);
  const pid_t shell = shells[0];
  const std::vector<int> ports = RekeyPorts(shell, daemon_->pid());
  ASSERT_FALSE(ports.empty()) << "no rekey listener found";

  // The terminal's reader: everything that is typed into the terminal while it reads.
  const int terminal = ::open(("/proc/" + std::to_string(shell) + "/fd/0").c_str(),
                              O_RDONLY | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
  ASSERT_GE(terminal, 0) << std::strerror(errno);
  std::atomic<bool> stop{false};
  std::string typed;
  std::thread reader([&] {
    while (!stop) {
      pollfd p{terminal, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      char buf[4096];
      const ssize_t n = ::read(terminal, buf, sizeof buf);
      if (n > 0) typed.append(buf, static_cast<size_t>(n));
    }
  });
  int report[2];
  ASSERT_EQ(::pipe2(report, O_CLOEXEC | O_NONBLOCK), 0);
  // Unprivileged, a confined session's network namespace belongs to the sandbox's user
  // namespace: only a root test can enter it; danger-full-access needs no entering.
  const bool dfa = GetParam() == "danger-full-access";
  const bool connect = dfa || ::geteuid() == 0;
  const pid_t connector = connect ? StartConnector(shell, ports, !dfa, report[1]) : -1;

  // The send the daemon gives the hook back before. Either reader may take what is typed (the
  // bootstrap line, this input), so: the right code or null, and a short silence bound.
  r = Send(client_, id, "echo two; (exit 4)\n", Json{{"silenceMs", 3000}, {"timeoutMs", 30000}});
  EXPECT_TRUE(r["exitCode"].is_null() || r["exitCode"] == 4) << r.dump();
  stop = true;
  reader.join();
  ::close(terminal);
  std::string got;
  if (connector > 0) {
    ::kill(connector, SIGKILL);
    ::waitpid(connector, nullptr, 0);
  }
  ::close(report[1]);
  char buf[4096];
  for (ssize_t n; (n = ::read(report[0], buf, sizeof buf)) > 0;) got.append(buf, n);
  ::close(report[0]);
  EXPECT_FALSE(HoldsAHexRun(typed)) << typed;
  if (connect) {
    ASSERT_NE(got.find('c'), std::string::npos) << "the connector never connected";
    EXPECT_EQ(got.find_first_not_of('c'), std::string::npos) << "the connector received: " << got;
  }
  // Whatever was taken (part of the bootstrap line may have left an open `{` behind): an
  // interrupt that drops it, then a fresh image without anyone else.
  Send(client_, id, "\x03", Json{{"silenceMs", 1500}, {"timeoutMs", 30000}});
  Send(client_, id, "\n", Json{{"silenceMs", 1500}, {"timeoutMs", 30000}});
  r = Send(client_, id, "exec bash\n", slow);
  r = Send(client_, id, "echo three; (exit 4)\n", slow);
  EXPECT_EQ(r["waitReason"], "stdin_read") << r.dump();
  EXPECT_EQ(r["exitCode"], 4) << r.dump();
  EXPECT_EQ(r["viewport"], "three") << r.dump();
}

// A program of the session started before `exec bash` knocks on the rekey listener with the
// shell's own request while it lives: the daemon types nothing then (another process lives),
// and every connection is closed with nothing written. Once it has ended the hook comes back.
TEST_P(ForgedPromptTest, AProgramOfTheSessionGetsNothingFromTheRekeyListener) {
  const std::string tag = "knock-" + std::to_string(::getpid()) + "-" + GetParam();
  const std::string id = OpenSession(client_, GetParam(), Json{{"env", {{"REKEY_MARK", tag}}}});
  const Json slow{{"silenceMs", 20000}, {"timeoutMs", 30000}};
  const std::vector<pid_t> shells = ProcessesWithEnv(tag);
  ASSERT_EQ(shells.size(), 1u);
  const std::vector<int> ports = RekeyPorts(shells[0], daemon_->pid());
  ASSERT_FALSE(ports.empty()) << "no rekey listener found";
  std::string list;
  for (int port : ports) list += (list.empty() ? "" : ",") + std::to_string(port);
  const std::string out = "/tmp/" + tag + ".out";
  const std::string stop = "/tmp/" + tag + ".stop";
  Json r = Send(client_, id,
                "python3 knocker.py " + out + " " + list + " " + stop + " & exec bash\n", slow);
  EXPECT_EQ(r["waitReason"], "stdin_read") << r.dump();
  r = Send(client_, id, "echo one; (exit 4)\n", slow);
  EXPECT_TRUE(r["exitCode"].is_null()) << r.dump();
  EXPECT_EQ(r["viewport"], "one") << r.dump();
  r = Send(client_, id,
           "touch " + stop + "; while [ ! -e " + out + " ]; do sleep 0.05; done; cat " + out +
               "; rm -f " + out + " " + stop + "\n",
           slow);
  EXPECT_EQ(r["viewport"], "connected=1 received=0 b''") << r.dump();
  // Until it is gone (its parent, the new bash, reaps it).
  r = Send(client_, id, "while pgrep -f knocker.py >/dev/null; do sleep 0.05; done; echo gone\n",
           slow);
  EXPECT_EQ(r["viewport"], "gone") << r.dump();
  r = Send(client_, id, "echo two; (exit 4)\n", slow);
  EXPECT_EQ(r["waitReason"], "stdin_read") << r.dump();
  EXPECT_EQ(r["exitCode"], 4) << r.dump();
  EXPECT_EQ(r["viewport"], "two") << r.dump();
}

// With `network: allow` a confined session shares the host's network namespace, so its rekey
// listener is on the host's loopback, where any host process can connect: during the
// rebootstrap a process of the host (this test) connects to it over and over with the shell's
// request and gets nothing; without it, the hook comes back.
TEST_P(ForgedPromptTest, OnTheHostsLoopbackOnlyTheShellGetsTheNonce) {
  TempDir dir;
  const std::filesystem::path op = dir.path() / "operator.yaml";
  std::ofstream(op) << "version: 1\nnetwork: allow\n";
  Daemon daemon(Daemon::Options{.extra_args = {"--policy", op.string()}, .env = {}});
  RpcClient client(daemon.socket());
  const std::string tag = "hostlo-" + std::to_string(::getpid()) + "-" + GetParam();
  const std::string id = OpenSession(client, GetParam(), Json{{"env", {{"REKEY_MARK", tag}}}});
  const Json slow{{"silenceMs", 20000}, {"timeoutMs", 30000}};
  Json r = Send(client, id, "exec bash\n", slow);
  EXPECT_EQ(r["waitReason"], "stdin_read") << r.dump();
  const std::vector<pid_t> shells = ProcessesWithEnv(tag);
  ASSERT_EQ(shells.size(), 1u);
  // The shell's network namespace is the host's: the listener is found in this process's table.
  std::error_code ec;
  EXPECT_EQ(std::filesystem::read_symlink("/proc/" + std::to_string(shells[0]) + "/ns/net", ec),
            std::filesystem::read_symlink("/proc/self/ns/net"));
  const std::vector<int> ports = RekeyPorts(::getpid(), daemon.pid());
  ASSERT_FALSE(ports.empty()) << "no rekey listener on the host's loopback";
  int report[2];
  ASSERT_EQ(::pipe2(report, O_CLOEXEC | O_NONBLOCK), 0);
  const pid_t connector = StartConnector(shells[0], ports, /*enter_namespace=*/false, report[1]);
  r = Send(client, id, "echo two; (exit 4)\n", slow);
  EXPECT_EQ(r["waitReason"], "stdin_read") << r.dump();
  EXPECT_TRUE(r["exitCode"].is_null() || r["exitCode"] == 4) << r.dump();
  // Refused, the bootstrap keeps a plain `$ `, which may lead this viewport (docs/security.md).
  EXPECT_TRUE(r["viewport"] == "two" || r["viewport"] == "$\ntwo") << r.dump();
  ::kill(connector, SIGKILL);
  ::waitpid(connector, nullptr, 0);
  ::close(report[1]);
  std::string got;
  char buf[4096];
  for (ssize_t n; (n = ::read(report[0], buf, sizeof buf)) > 0;) got.append(buf, n);
  ::close(report[0]);
  ASSERT_NE(got.find('c'), std::string::npos) << "the connector never connected";
  EXPECT_EQ(got.find_first_not_of('c'), std::string::npos) << "the connector received: " << got;
  // Without it, a fresh image gets the hook back.
  Send(client, id, "exec bash\n", slow);
  r = Send(client, id, "echo three; (exit 4)\n", slow);
  EXPECT_EQ(r["exitCode"], 4) << r.dump();
  EXPECT_EQ(r["viewport"], "three") << r.dump();
}

INSTANTIATE_TEST_SUITE_P(Modes, ForgedPromptTest,
                         ::testing::Values("read-only", "workspace-write", "danger-full-access"),
                         ModeTestName);

}  // namespace
}  // namespace ptybox::testing
