// ptybox-init: runs inside the sandbox (or directly, in danger-full-access) as the anchor of one
// session. It opens the PTY in the namespace's devpts, starts the shell as a session leader on
// it, passes the master to the daemon over the inherited control socket, reports the shell's exit
// and, when told (or when the daemon goes away), ends every process of the session.
//
//   ptybox-init --control-fd N [--confined] [--unreadable-shell] [--no-pty] [--stderr-fd N]
//               [--proxy-port PORT] [--apt-config FILE] [--cwd DIR] [--rows R] [--cols C] [--rlimit
//               NAME=VALUE]... -- PROGRAM [ARG]...
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/sendfile.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/proc_stat.h"
#include "common/unique_fd.h"
#include "sandbox/init/capabilities.h"
#include "sandbox/init/child_exec.h"
#include "sandbox/init/init_protocol.h"
#include "sandbox/init/landlock.h"
#include "sandbox/init/resource_limits.h"

namespace ptybox::sandbox {
namespace {

struct InitOptions {
  int control_fd = -1;
  int stderr_fd = -1;  // --stderr-fd: the caller's stderr, to put back on 2 (launcher.h)
  bool confined = false;
  bool pty = true;
  bool unreadable_shell = false;  // --unreadable-shell: exec the program from a 0111 memfd
  int exec_copy_fd = -1;          // --exec-copy-fd: the daemon's copy, for the shell's `exec bash`
  uint16_t proxy_port = 0;        // --proxy-port: listen on 127.0.0.1:port for the daemon's proxy
  std::string apt_config;         // --apt-config: write apt's setting here (sandbox/session_home.h)
  std::string cwd;
  unsigned short rows = 40;
  unsigned short cols = 120;
  std::vector<std::pair<int, rlim_t>> rlimits;
  std::vector<std::string> argv;
};

[[noreturn]] void Die(const std::string& message) {
  std::string line = "ptybox-init: " + message + "\n";
  ssize_t ignored = ::write(STDERR_FILENO, line.data(), line.size());
  (void)ignored;
  ::_exit(kInitExitSetupFailed);
}

// Reports a setup failure to the daemon (which turns it into spawn_failed) and exits.
// `exec_errno` is execve's errno when the program itself could not be started.
[[noreturn]] void FailSetup(int control_fd, const std::string& message, int exec_errno = 0) {
  // Ignored: a daemon that cannot hear it still sees init exit, with the message on stderr.
  (void)SendInitMessage(control_fd, FailedMessage{message, exec_errno});
  Die(message);
}

std::string ErrnoText(std::string_view what, int err = errno) {
  return std::string(what) + ": " + std::strerror(err);
}

template <typename T>
bool ParseNumber(std::string_view text, T& out) {
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && end == text.data() + text.size();
}

InitOptions ParseArgs(int argc, char** argv) {
  InitOptions o;
  int i = 1;
  auto value = [&](std::string_view flag) -> std::string_view {
    if (i + 1 >= argc) Die("missing value after " + std::string(flag));
    return argv[++i];
  };
  for (; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg == "--") {
      ++i;
      break;
    } else if (arg == "--control-fd") {
      if (!ParseNumber(value(arg), o.control_fd)) Die("--control-fd needs a number");
    } else if (arg == "--unreadable-shell") {
      o.unreadable_shell = true;
    } else if (arg == "--exec-copy-fd") {
      if (!ParseNumber(value(arg), o.exec_copy_fd)) Die("--exec-copy-fd needs a number");
    } else if (arg == "--confined") {
      o.confined = true;
    } else if (arg == "--proxy-port") {
      if (!ParseNumber(value(arg), o.proxy_port) || o.proxy_port == 0) {
        Die("--proxy-port needs a port number from 1 to 65535");
      }
    } else if (arg == "--apt-config") {
      o.apt_config = value(arg);
      if (o.apt_config.empty() || o.apt_config.front() != '/') {
        Die("--apt-config needs an absolute path");
      }
    } else if (arg == "--no-pty") {
      o.pty = false;
    } else if (arg == "--stderr-fd") {
      if (!ParseNumber(value(arg), o.stderr_fd)) Die("--stderr-fd needs a number");
    } else if (arg == "--cwd") {
      o.cwd = value(arg);
    } else if (arg == "--rows") {
      if (!ParseNumber(value(arg), o.rows) || o.rows == 0) Die("--rows needs a positive number");
    } else if (arg == "--cols") {
      if (!ParseNumber(value(arg), o.cols) || o.cols == 0) Die("--cols needs a positive number");
    } else if (arg == "--rlimit") {
      std::string_view spec = value(arg);
      size_t eq = spec.find('=');
      rlim_t limit = 0;
      std::optional<LimitedResource> resource =
          eq == std::string_view::npos ? std::nullopt : LimitedResourceNamed(spec.substr(0, eq));
      if (!resource || !ParseNumber(spec.substr(eq + 1), limit)) {
        Die("--rlimit needs NAME=VALUE with NAME one of nproc, nofile, as, fsize, cpu");
      }
      o.rlimits.emplace_back(InfoOf(*resource).rlimit, limit);
    } else {
      Die("unknown option " + std::string(arg));
    }
  }
  for (; i < argc; ++i) o.argv.emplace_back(argv[i]);
  if (o.control_fd < 0) Die("--control-fd is required");
  if (o.argv.empty()) Die("no program to run after --");
  return o;
}

// The start message: the environment of the program (never on a command line).
std::vector<std::string> ReceiveEnvironment(int control_fd) {
  Result<std::optional<ReceivedInitMessage>> received = ReceiveInitMessage(control_fd);
  if (!received) Die("reading the start message: " + received.error().message);
  const auto* start = *received ? std::get_if<StartMessage>(&(*received)->message) : nullptr;
  if (start == nullptr) Die("the daemon closed the control socket before starting the session");
  return start->environment;
}

void ApplyRlimits(const InitOptions& o) {
  for (const auto& [resource, value] : o.rlimits) {
    rlimit limit{value, value};
    if (::setrlimit(resource, &limit) != 0) {
      FailSetup(o.control_fd, ErrnoText("setrlimit " + std::to_string(resource)));
    }
  }
}

struct Pty {
  UniqueFd master;
  UniqueFd slave;
  struct stat slave_stat {};
};

// Opens a PTY pair in this mount namespace's devpts, with our terminal settings: no echo (the
// agent's input is not repeated into the output it reads) and no XON/XOFF (a stray ^S cannot
// freeze the terminal).
Pty OpenPty(const InitOptions& o) {
  Pty pty;
  pty.master.Reset(::posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC));
  if (!pty.master) FailSetup(o.control_fd, ErrnoText("posix_openpt /dev/ptmx"));
  if (::grantpt(pty.master.Get()) != 0) FailSetup(o.control_fd, ErrnoText("grantpt"));
  if (::unlockpt(pty.master.Get()) != 0) FailSetup(o.control_fd, ErrnoText("unlockpt"));
  char name[128];
  if (::ptsname_r(pty.master.Get(), name, sizeof(name)) != 0) {
    FailSetup(o.control_fd, ErrnoText("ptsname"));
  }
  pty.slave.Reset(::open(name, O_RDWR | O_NOCTTY | O_CLOEXEC));
  if (!pty.slave) FailSetup(o.control_fd, ErrnoText(std::string("open ") + name));
  if (::fstat(pty.slave.Get(), &pty.slave_stat) != 0) {
    FailSetup(o.control_fd, ErrnoText(std::string("fstat ") + name));
  }
  termios tio{};
  if (::tcgetattr(pty.slave.Get(), &tio) != 0) FailSetup(o.control_fd, ErrnoText("tcgetattr"));
  tio.c_lflag &= ~static_cast<tcflag_t>(ECHO | ECHONL);
  tio.c_iflag &= ~static_cast<tcflag_t>(IXON | IXOFF);
  tio.c_iflag |= IUTF8;
  if (::tcsetattr(pty.slave.Get(), TCSANOW, &tio) != 0) {
    FailSetup(o.control_fd, ErrnoText("tcsetattr"));
  }
  winsize ws{};
  ws.ws_row = o.rows;
  ws.ws_col = o.cols;
  if (::ioctl(pty.master.Get(), TIOCSWINSZ, &ws) != 0) {
    FailSetup(o.control_fd, ErrnoText("ioctl TIOCSWINSZ"));
  }
  return pty;
}

// A copy of `program` that its own process will not be able to read: a memfd with mode 0111.
// The kernel makes a process exec'd from a file it cannot read non-dumpable (would_dump), so
// the session's other processes (same uid, no capabilities) cannot open its /proc/<pid>/mem,
// environ, syscall or fd/, nor attach to it; the daemon, which owns the sandbox's user
// namespace (or is root), still inspects it. Used for a confined session's shell, whose memory
// holds the prompt nonce. Only with every capability dropped (CAP_DAC_OVERRIDE would read the
// copy). An empty fd when anything fails: the program then runs from its own file.
UniqueFd UnreadableCopy(const std::string& program) {
  UniqueFd source(::open(program.c_str(), O_RDONLY | O_CLOEXEC));
  struct stat st {};
  if (!source || ::fstat(source.Get(), &st) != 0 || !S_ISREG(st.st_mode)) return {};
  // Only a binary: a script's interpreter reopens the script by the path it was started from.
  if (!IsElfFile(source.Get())) {
    return {};
  }
  UniqueFd copy(static_cast<int>(::memfd_create("ptybox-shell", MFD_CLOEXEC)));
  if (!copy) return {};
  off_t remaining = st.st_size;
  while (remaining > 0) {
    ssize_t n = ::sendfile(copy.Get(), source.Get(), nullptr, static_cast<size_t>(remaining));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return {};
    remaining -= n;
  }
  if (::fchmod(copy.Get(), 0111) != 0) return {};
  return copy;
}

// A path under which the copy is exec'd, so the process's name (`ps`, /proc/<pid>/comm) is the
// program's ("bash"), not the memfd's: a private directory in the sandbox's own /tmp holding a
// link `<basename>` -> /proc/self/fd/<copy> (resolved by the child, which inherits the fd).
// Made before the session runs anything but ptybox-init; removed once the program has exec'd.
// Empty when it cannot be made (the copy is then exec'd by descriptor: named "memfd:...").
std::string CopyLinkDirectory(const std::string& program, int copy_fd, std::string& link) {
  char dir[] = "/tmp/.ptybox-shell-XXXXXX";
  if (::mkdtemp(dir) == nullptr) return {};
  link = std::string(dir) + "/" + program.substr(program.rfind('/') + 1);
  const std::string target = "/proc/self/fd/" + std::to_string(copy_fd);
  if (::symlink(target.c_str(), link.c_str()) != 0) {
    ::rmdir(dir);
    link.clear();
    return {};
  }
  return dir;
}

// Forks the program. In PTY mode it becomes a session leader with the slave as its controlling
// terminal. A failure in the child comes back over a close-on-exec pipe as the failed step and
// its errno (sandbox/init/child_exec.h).
pid_t StartProgram(const InitOptions& o, const std::vector<std::string>& env, const Pty* pty) {
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) FailSetup(o.control_fd, ErrnoText("pipe2"));
  UniqueFd exec_read(pipe_fds[0]);
  UniqueFd exec_write(pipe_fds[1]);

  std::string program = FindProgramOnPath(o.argv[0], env);
  std::vector<char*> argv;
  for (const std::string& a : o.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (const std::string& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  // A confined session's shell runs non-dumpable (capabilities are dropped by now).
  UniqueFd unreadable;
  if (o.unreadable_shell && o.confined && pty != nullptr) unreadable = UnreadableCopy(program);
  std::string link;
  const std::string link_dir =
      unreadable ? CopyLinkDirectory(program, unreadable.Get(), link) : std::string();

  pid_t pid = ::fork();
  if (pid < 0) FailSetup(o.control_fd, ErrnoText("fork"));
  if (pid == 0) {
    const int report = exec_write.Get();
    ResetChildSignals();
    if (pty != nullptr) {
      if (::setsid() < 0) FailChild({ChildStage::kSession, errno}, report);
      if (::ioctl(pty->slave.Get(), TIOCSCTTY, 0) != 0) {
        FailChild({ChildStage::kTerminal, errno}, report);
      }
      for (int fd = 0; fd < 3; ++fd) {
        if (::dup2(pty->slave.Get(), fd) < 0) FailChild({ChildStage::kStdio, errno}, report);
      }
    }
    if (!o.cwd.empty() && ::chdir(o.cwd.c_str()) != 0) {
      FailChild({ChildStage::kDirectory, errno}, report);
    }
    // The daemon's execute-only copy of the shell, at the number the prompt hook looks for
    // (backend::kExecCopyFd): dup2 leaves it open across the exec, for the shell alone to exec.
    if (o.exec_copy_fd >= 0 && unreadable) (void)::dup2(o.exec_copy_fd, kShellExecCopyFd);
    if (unreadable) {
      // argv[0] stays the program's path ($BASH, `exec $BASH`); on failure (a kernel that
      // refuses to exec memfds) the program runs from its own file.
      if (!link.empty()) ::execve(link.c_str(), argv.data(), envp.data());
      ::execveat(unreadable.Get(), "", argv.data(), envp.data(), AT_EMPTY_PATH);
    }
    ::execve(program.c_str(), argv.data(), envp.data());
    FailChild({ChildStage::kExec, errno}, report);
  }
  exec_write.Reset();
  const std::optional<ChildFailure> failure = AwaitChildExec(exec_read.Get());
  if (!link_dir.empty()) {  // the program has exec'd (or failed): the link is not needed
    ::unlink(link.c_str());
    ::rmdir(link_dir.c_str());
  }
  if (failure) {
    ::waitpid(pid, nullptr, 0);
    FailSetup(
        o.control_fd,
        ErrnoText("starting " + o.argv[0] + (o.cwd.empty() ? "" : " in " + o.cwd), failure->err),
        failure->stage == ChildStage::kExec ? failure->err : 0);
  }
  return pid;
}

// Every process this init is responsible for. Confined: everything in our pid namespace but
// pid 1 (bwrap's reaper) and ourselves. Danger-full-access: our descendants (we are their
// subreaper, so orphans stay in our tree).
std::vector<pid_t> SessionProcesses(bool confined) {
  const pid_t self = ::getpid();
  std::vector<proc::StatFields> table = proc::ReadAllStats();
  // Zombies and dead tasks are left to whoever reaps them.
  std::erase_if(table, [](const proc::StatFields& f) { return proc::IsDead(f); });
  std::vector<pid_t> result;
  if (confined) {
    for (const proc::StatFields& f : table) {
      if (f.pid != 1 && f.pid != self) result.push_back(f.pid);
    }
    return result;
  }
  return proc::Descendants(table, self);
}

// Reaps every exited child; reports the program's own exit once.
void Reap(pid_t program, bool& program_exited, int control_fd) {
  for (;;) {
    int status = 0;
    pid_t pid = ::waitpid(-1, &status, WNOHANG);
    if (pid <= 0) return;
    if (pid == program && !program_exited) {
      program_exited = true;
      ExitedMessage exited;
      if (WIFEXITED(status)) exited.exit_code = WEXITSTATUS(status);
      if (WIFSIGNALED(status)) exited.signal = WTERMSIG(status);
      // Ignored: a daemon that went away is why init ends the session anyway.
      (void)SendInitMessage(control_fd, exited);
    }
  }
}

// Graceful end of the whole session, as when a terminal window closes: SIGHUP to the program
// through its terminal's hangup, SIGHUP, SIGTERM and SIGCONT to every other process, `grace` to
// exit, then SIGKILL until none is left.
//
// The program gets one SIGHUP, never two. A shell handling a terminating signal (running its
// EXIT trap, saving history) that receives another ends at once (bash's kill_shell), so a
// second SIGHUP is what cut graceful closes short. With a terminal, the daemon closes its master
// before it asks (and a daemon that is gone has closed it): the kernel hangs the terminal up and
// sends the session leader, the program, its SIGHUP (it then has no controlling terminal any
// more, tty_nr 0 in its stat). Only a program that still has its terminal halfway through the
// grace (a master still held by a process the daemon was forking) gets SIGHUP from us, and
// SIGTERM then too: an interactive shell ignores it, a script handles it after its SIGHUP.
void TerminateSession(const InitOptions& o, pid_t program, bool& program_exited,
                      std::chrono::milliseconds grace) {
  using Clock = std::chrono::steady_clock;
  if (!o.pty && !program_exited) ::kill(program, SIGHUP);
  for (pid_t pid : SessionProcesses(o.confined)) {
    if (pid == program) {
      ::kill(pid, SIGCONT);
      continue;
    }
    ::kill(pid, SIGHUP);
    ::kill(pid, SIGTERM);
    ::kill(pid, SIGCONT);
  }
  const auto start = Clock::now();
  const auto give_up_gracefully = start + grace;
  bool program_prodded = false;
  while (Clock::now() < give_up_gracefully) {
    Reap(program, program_exited, o.control_fd);
    if (SessionProcesses(o.confined).empty()) break;
    if (!program_prodded && !program_exited && Clock::now() >= start + grace / 2) {
      program_prodded = true;
      if (o.pty) {
        std::optional<proc::StatFields> stat = proc::ReadStat(program);
        if (stat && stat->tty_nr != 0) ::kill(program, SIGHUP);
      }
      ::kill(program, SIGTERM);
      ::kill(program, SIGCONT);
    }
    ::usleep(10'000);
  }
  // Keep killing until nothing is left (a process may fork while we look).
  for (int round = 0; round < 500; ++round) {
    Reap(program, program_exited, o.control_fd);
    std::vector<pid_t> left = SessionProcesses(o.confined);
    if (left.empty()) break;
    for (pid_t pid : left) ::kill(pid, SIGKILL);
    ::usleep(10'000);
  }
  Reap(program, program_exited, o.control_fd);
}

// Step 5b of Run (network by name): the session's proxy port, bound here in the session's own
// network namespace before any program of the session runs (so none can take the port first),
// and handed to the daemon, which accepts on it outside the sandbox (backend/proxy/).
void OpenProxyListener(const InitOptions& o) {
  UniqueFd listener(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!listener) FailSetup(o.control_fd, ErrnoText("socket for the proxy port"));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(o.proxy_port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(listener.Get(), reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0) {
    FailSetup(o.control_fd,
              ErrnoText("binding the proxy port 127.0.0.1:" + std::to_string(o.proxy_port)));
  }
  if (::listen(listener.Get(), 128) != 0) FailSetup(o.control_fd, ErrnoText("listen"));
  if (Result<void> sent =
          SendInitMessage(o.control_fd, ProxyListenerMessage{o.proxy_port}, listener.Get());
      !sent) {
    Die("sending the proxy port to the daemon: " + sent.error().message);
  }
}

// Step 5c of Run: apt's configuration in the private home (sandbox/session_home.h), made before
// any program of the session runs, so the file is init's and holds exactly this text. The
// session cannot switch users (one id mapped, setgroups denied): apt must stay who it is.
constexpr std::string_view kAptConfigText =
    "// Written by ptybox-init: this session cannot switch users (docs/sandbox.md).\n"
    "APT::Sandbox::User \"root\";\n";

void WriteAptConfig(const InitOptions& o) {
  const std::string& path = o.apt_config;
  // The directories between the home (made by bwrap) and the file: create what is missing.
  for (size_t slash = path.find('/', 1); slash != std::string::npos;
       slash = path.find('/', slash + 1)) {
    const std::string dir = path.substr(0, slash);
    if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
      FailSetup(o.control_fd, ErrnoText("mkdir " + dir + " (for apt's configuration)"));
    }
  }
  UniqueFd file(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644));
  if (!file) FailSetup(o.control_fd, ErrnoText("creating " + path + " (apt's configuration)"));
  const std::string_view text = kAptConfigText;
  if (::write(file.Get(), text.data(), text.size()) != static_cast<ssize_t>(text.size())) {
    FailSetup(o.control_fd, ErrnoText("writing " + path + " (apt's configuration)"));
  }
}

// Step 8 of Run: reaps, reports the program's exit, and ends the session on request (a
// signal, the daemon's terminate message) or when the daemon is gone. Returns init's status.
int Serve(const InitOptions& o, pid_t program, const UniqueFd& signals) {
  bool program_exited = false;
  for (;;) {
    pollfd fds[2] = {{o.control_fd, POLLIN, 0}, {signals.Get(), POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      Die(ErrnoText("poll"));
    }
    if (fds[1].revents & POLLIN) {
      signalfd_siginfo info;
      bool terminate = false;
      while (::read(signals.Get(), &info, sizeof(info)) == static_cast<ssize_t>(sizeof(info))) {
        if (info.ssi_signo != SIGCHLD) terminate = true;
      }
      Reap(program, program_exited, o.control_fd);
      if (terminate) {
        TerminateSession(o, program, program_exited, std::chrono::milliseconds(1000));
        return 0;
      }
    }
    if (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) {
      Result<std::optional<ReceivedInitMessage>> received = ReceiveInitMessage(o.control_fd);
      if (!received || !*received) {
        // The daemon is gone: nobody may keep running in its name.
        TerminateSession(o, program, program_exited, std::chrono::milliseconds(500));
        return 0;
      }
      if (const auto* terminate = std::get_if<TerminateMessage>(&(*received)->message)) {
        TerminateSession(o, program, program_exited, terminate->grace);
        // Ignored: the session is ended either way; the daemon then waits for init to exit.
        (void)SendInitMessage(o.control_fd, QuietMessage{});
        return 0;
      }
    }
  }
}

int Run(int argc, char** argv) {
  InitOptions o = ParseArgs(argc, argv);
  // Until here our stderr (bwrap's) was the launcher's diagnostics pipe: from now on what we
  // and the program say goes to the caller's stderr.
  if (o.stderr_fd > STDERR_FILENO) {
    if (::dup2(o.stderr_fd, STDERR_FILENO) < 0) Die(ErrnoText("dup2 --stderr-fd"));
    ::close(o.stderr_fd);
  }
  // Non-dumpable: the session's processes cannot open /proc/<init>/mem nor take init's fds
  // with pidfd_getfd (both need ptrace access). The shell's exec makes it dumpable again.
  if (::prctl(PR_SET_DUMPABLE, 0) != 0) Die(ErrnoText("prctl PR_SET_DUMPABLE"));

  // 1. Signals arrive through a signalfd so the loop below sees them in order.
  sigset_t handled;
  sigemptyset(&handled);
  sigaddset(&handled, SIGCHLD);
  sigaddset(&handled, SIGTERM);
  sigaddset(&handled, SIGHUP);
  sigaddset(&handled, SIGINT);
  if (::sigprocmask(SIG_BLOCK, &handled, nullptr) != 0) Die(ErrnoText("sigprocmask"));
  UniqueFd signals(::signalfd(-1, &handled, SFD_CLOEXEC | SFD_NONBLOCK));
  if (!signals) Die(ErrnoText("signalfd"));

  // 2. The control socket must not leak into the program.
  if (::fcntl(o.control_fd, F_SETFD, FD_CLOEXEC) != 0) Die(ErrnoText("fcntl control fd"));
  // Nor the copy's descriptor at its inherited number (the shell gets it at kShellExecCopyFd).
  // Optional: a daemon that could not make the copy passes none, and anything at that number
  // that is not an execute-only regular file is not given to the shell (`exec bash` then keeps
  // null exit codes in this session, never wrong).
  if (o.exec_copy_fd >= 0) {
    struct stat st {};
    if (::fstat(o.exec_copy_fd, &st) != 0 || !S_ISREG(st.st_mode) || (st.st_mode & 07777) != 0111 ||
        ::fcntl(o.exec_copy_fd, F_SETFD, FD_CLOEXEC) != 0) {
      o.exec_copy_fd = -1;
    }
  }
  std::vector<std::string> env = ReceiveEnvironment(o.control_fd);

  // 3. The anchor of cleanup: in danger-full-access orphans re-parent to us.
  if (!o.confined && ::prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) {
    FailSetup(o.control_fd, ErrnoText("prctl PR_SET_CHILD_SUBREAPER"));
  }
  // 4. Confined: no capability in any set, no_new_privs, verified.
  if (o.confined) {
    if (Result<void> dropped = DropAllCapabilities(); !dropped) {
      FailSetup(o.control_fd, "dropping capabilities: " + dropped.error().message);
    }
    Result<bool> clean = HoldsNoCapabilities();
    if (!clean || !*clean)
      FailSetup(o.control_fd, "a capability survived the drop; refusing to start");
    // No host service over UNIX sockets: the host's abstract sockets (and, from Landlock ABI 9,
    // its pathname sockets) are out of the session's reach; its own sockets still work. A
    // kernel without these walls is reported by `ptybox doctor`, not refused here.
    if (Result<UnixSocketWalls> walls = RestrictUnixSockets(); !walls) {
      FailSetup(o.control_fd,
                "restricting UNIX sockets with Landlock: " + walls.error().Describe());
    }
  }
  // 5. Resource limits from the policy.
  ApplyRlimits(o);
  // 5b. Network by name: the proxy port, before the program can bind anything.
  if (o.proxy_port != 0) OpenProxyListener(o);
  // 5c. apt's configuration for a session that cannot switch users.
  if (!o.apt_config.empty()) WriteAptConfig(o);
  // 6. The PTY, inside this namespace, and the program on it.
  std::optional<Pty> pty;
  if (o.pty) pty = OpenPty(o);
  pid_t program = StartProgram(o, env, pty ? &*pty : nullptr);

  // 7. Hand the master to the daemon; keep no terminal fd here, so the terminal hangs up when
  //    the program's side closes.
  ReadyMessage ready{.program_pid = program};
  if (pty) {
    ready.slave_dev = pty->slave_stat.st_dev;
    ready.slave_rdev = pty->slave_stat.st_rdev;
  }
  if (Result<void> sent = SendInitMessage(o.control_fd, ready, pty ? pty->master.Get() : -1);
      !sent) {
    Die("sending the terminal to the daemon: " + sent.error().message);
  }
  pty.reset();

  // 8. Serve: reap, report the exit, terminate on request or when the daemon is gone.
  return Serve(o, program, signals);
}

}  // namespace
}  // namespace ptybox::sandbox

int main(int argc, char** argv) { return ptybox::sandbox::Run(argc, argv); }
