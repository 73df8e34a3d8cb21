// The probe table: each entry performs one real operation with harmless arguments (paths that
// do not exist, invalid flags where the call would change the host) and reports the errno.
#include "tests/sandbox/syscall_probes.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/keyctl.h>
#include <linux/sched.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>

#include "common/errno_name.h"
#include "common/join.h"
#include "sandbox/init/init_protocol.h"
#include "tests/support/files.h"

extern char** environ;

namespace ptybox::sandbox::testing {
namespace {

#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080
#endif
constexpr unsigned kOpenTreeCloexec = O_CLOEXEC;
constexpr unsigned kFsopenCloexec = 1;
constexpr unsigned kFspickCloexec = 1;
constexpr int kUffdUserModeOnly = 1;

// 0 or the errno of a failed call returning -1; closes a returned fd.
int FdResult(long fd) {
  if (fd < 0) return errno;
  close(static_cast<int>(fd));
  return 0;
}
int ErrnoOf(long rc) { return rc < 0 ? errno : 0; }

ProbeOutcome Ok(std::string info = {}) { return {0, std::move(info)}; }
ProbeOutcome Err(int err, std::string info = {}) { return {err, std::move(info)}; }

std::string Collapse(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '\n' || c == '\t' || c == ' ') {
      if (!out.empty() && out.back() != ' ') out += ' ';
    } else {
      out += c;
    }
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

std::optional<std::string> ReadWhole(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::string content;
  char buffer[4096];
  ssize_t n;
  while ((n = read(fd, buffer, sizeof buffer)) > 0) content.append(buffer, static_cast<size_t>(n));
  close(fd);
  return content;
}

// A PTY whose slave is open; with `controlling`, the caller becomes a session leader and the
// slave its controlling terminal (TIOCSTI needs that, or CAP_SYS_ADMIN).
struct Pty {
  int master = -1;
  int slave = -1;
  std::string name;
  int err = 0;
  ~Pty() {
    if (slave >= 0) close(slave);
    if (master >= 0) close(master);
  }
};

void OpenPty(Pty& pty, bool controlling) {
  if (controlling) {
    // Closing the controlling terminal's master would SIGHUP us, the session leader.
    signal(SIGHUP, SIG_IGN);
    setsid();
  }
  pty.master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (pty.master < 0 || grantpt(pty.master) != 0 || unlockpt(pty.master) != 0) {
    pty.err = errno;
    return;
  }
  char name[128];
  if (ptsname_r(pty.master, name, sizeof name) != 0) {
    pty.err = errno;
    return;
  }
  pty.name = name;
  pty.slave = open(name, O_RDWR | O_CLOEXEC | (controlling ? 0 : O_NOCTTY));
  if (pty.slave < 0) pty.err = errno;
}

ProbeOutcome ProbeIoctl(std::string_view arg) {
  Pty pty;
  OpenPty(pty, /*controlling=*/true);
  if (pty.err != 0) return Err(pty.err, "pty setup failed");
  char c = '\n';
  if (arg.empty() || arg == "tiocsti") return Err(ErrnoOf(ioctl(pty.slave, TIOCSTI, &c)));
  if (arg == "tiocsti-high") {
    // The kernel truncates the request to 32 bits; a filter must not be fooled by bit 32.
    const unsigned long request = (1UL << 32) | TIOCSTI;
    return Err(ErrnoOf(syscall(SYS_ioctl, pty.slave, request, &c)));
  }
  if (arg == "tioclinux") {
    char subcode = 0;  // no such subcode: harmless even where TIOCLINUX exists
    return Err(ErrnoOf(ioctl(pty.slave, TIOCLINUX, &subcode)));
  }
  if (arg == "tiocsetd") {
    int discipline = 0;  // N_TTY, the discipline the terminal already has: changes nothing
    return Err(ErrnoOf(ioctl(pty.slave, TIOCSETD, &discipline)));
  }
  if (arg == "tiocgwinsz") {
    winsize size{};
    return Err(ErrnoOf(ioctl(pty.slave, TIOCGWINSZ, &size)));
  }
  return Err(EINVAL, "unknown ioctl probe");
}

unsigned long CloneFlag(std::string_view arg) {
  static const std::map<std::string_view, unsigned long> kFlags = {
      {"newns", CLONE_NEWNS},         {"newuts", CLONE_NEWUTS},   {"newipc", CLONE_NEWIPC},
      {"newuser", CLONE_NEWUSER},     {"newpid", CLONE_NEWPID},   {"newnet", CLONE_NEWNET},
      {"newcgroup", CLONE_NEWCGROUP}, {"newtime", CLONE_NEWTIME}, {"none", 0}};
  auto it = kFlags.find(arg.empty() ? "newns" : arg);
  return it == kFlags.end() ? ~0UL : it->second;
}

int WaitChild(pid_t pid) {
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return errno;
  }
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : ECHILD;
}

ProbeOutcome ProbeClone(std::string_view arg) {
  const unsigned long flag = CloneFlag(arg);
  if (flag == ~0UL) return Err(EINVAL, "unknown clone flag");
  // Raw clone(2) without CLONE_VM: the child runs on a copy of this stack.
  const long pid = syscall(SYS_clone, flag | SIGCHLD, 0, 0, 0, 0);
  if (pid < 0) return Err(errno);
  if (pid == 0) _exit(0);
  return Err(WaitChild(static_cast<pid_t>(pid)));
}

ProbeOutcome ProbeClone3() {
  clone_args args{};
  args.exit_signal = SIGCHLD;
  const long pid = syscall(SYS_clone3, &args, sizeof args);
  if (pid < 0) return Err(errno);
  if (pid == 0) _exit(0);
  return Err(WaitChild(static_cast<pid_t>(pid)));
}

int SocketDomain(std::string_view arg) {
  if (arg.empty() || arg == "inet") return AF_INET;
  if (arg == "inet6") return AF_INET6;
  if (arg == "unix") return AF_UNIX;
  if (arg == "netlink") return AF_NETLINK;
  if (arg == "packet") return AF_PACKET;
  return -1;
}

int SocketType(std::string_view arg) {
  if (arg == "stream") return SOCK_STREAM;
  if (arg == "dgram") return SOCK_DGRAM;
  if (arg == "raw") return SOCK_RAW;
  if (arg == "seqpacket") return SOCK_SEQPACKET;
  if (arg == "packet") return SOCK_PACKET;  // on AF_INET: the old spelling of a packet socket
  return -1;
}

// socket:DOMAIN[:TYPE[:PROTOCOL]], e.g. socket:inet:raw:1; the protocol is a number.
ProbeOutcome ProbeSocket(std::string_view arg) {
  const size_t first = arg.find(':');
  const int domain = SocketDomain(arg.substr(0, first));
  if (domain < 0) return Err(EINVAL, "unknown domain");
  int type = domain == AF_NETLINK || domain == AF_PACKET ? SOCK_RAW : SOCK_STREAM;
  int protocol = 0;
  if (first != std::string_view::npos) {
    const std::string_view rest = arg.substr(first + 1);
    const size_t second = rest.find(':');
    type = SocketType(rest.substr(0, second));
    if (type < 0) return Err(EINVAL, "unknown type");
    if (second != std::string_view::npos) {
      protocol = std::atoi(std::string(rest.substr(second + 1)).c_str());
    }
  }
  return Err(FdResult(socket(domain, type | SOCK_CLOEXEC, protocol)));
}

ProbeOutcome ProbeSocketpair(std::string_view arg) {
  const int domain = SocketDomain(arg);
  if (domain < 0) return Err(EINVAL, "unknown domain");
  int fds[2];
  if (socketpair(domain, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) return Err(errno);
  close(fds[0]);
  close(fds[1]);
  return Ok();
}

ProbeOutcome ProbeInt80Getpid() {
#if defined(__x86_64__)
  long rc = 20;  // __NR_getpid in the i386 table
  __asm__ volatile("int $0x80" : "+a"(rc) : : "r8", "r9", "r10", "r11", "memory");
  if (rc < 0 && rc > -4096) return Err(static_cast<int>(-rc), "int $0x80");
  return Ok("pid " + std::to_string(rc));
#else
  return Err(ENOSYS, "not x86_64");
#endif
}

ProbeOutcome ProbeX32Getpid() {
#if defined(__x86_64__)
  const long rc = syscall(0x40000000L | SYS_getpid);
  if (rc < 0) return Err(errno);
  return Ok("pid " + std::to_string(rc));
#else
  return Err(ENOSYS, "not x86_64");
#endif
}

ProbeOutcome ProbeProcessVm(bool write) {
  static char target[16] = "ptybox";
  char local[16] = "ptybox";
  iovec local_iov{local, sizeof local};
  iovec remote_iov{target, sizeof target};
  const ssize_t n = write ? process_vm_writev(getpid(), &local_iov, 1, &remote_iov, 1, 0)
                          : process_vm_readv(getpid(), &local_iov, 1, &remote_iov, 1, 0);
  return Err(ErrnoOf(n));
}

// personality(2): "query" (0xffffffff), "linux" (PER_LINUX), or by default PER_LINUX |
// ADDR_NO_RANDOMIZE, which changes only this process and is undone right away.
ProbeOutcome ProbePersonality(std::string_view arg) {
  constexpr unsigned long kQuery = 0xffffffffUL;
  constexpr unsigned long kAddrNoRandomize = 0x0040000UL;
  unsigned long persona = kAddrNoRandomize;
  if (arg == "query") persona = kQuery;
  if (arg == "linux") persona = 0;
  if (arg == "linux32") persona = 0x0008;
  const long previous = syscall(SYS_personality, persona);
  if (previous < 0) return Err(errno);
  if (persona != kQuery) syscall(SYS_personality, static_cast<unsigned long>(previous));
  return Ok("previous " + std::to_string(previous));
}

ProbeOutcome ProbeModifyLdt() {
#if defined(__x86_64__) || defined(__i386__)
  char table[64] = {};
  const long n = syscall(SYS_modify_ldt, 0, table, sizeof table);  // 0: read the LDT
  if (n < 0) return Err(errno);
  return Ok(std::to_string(n) + " bytes");
#else
  return Err(ENOSYS, "x86 only");
#endif
}

// "PID:FD" (default: this process, fd 0): pidfd_open, then pidfd_getfd of that descriptor.
std::optional<std::pair<pid_t, int>> PidAndFd(std::string_view arg, int default_fd) {
  if (arg.empty()) return std::pair<pid_t, int>{getpid(), default_fd};
  const size_t colon = arg.find(':');
  const std::string pid_text(arg.substr(0, colon));
  const std::string fd_text = colon == std::string_view::npos ? std::to_string(default_fd)
                                                              : std::string(arg.substr(colon + 1));
  char* end = nullptr;
  const long pid = std::strtol(pid_text.c_str(), &end, 10);
  if (end == pid_text.c_str() || *end != '\0' || pid <= 0) return std::nullopt;
  return std::pair<pid_t, int>{static_cast<pid_t>(pid), std::atoi(fd_text.c_str())};
}

// The descriptor `fd` of process `pid`, taken with pidfd_open + pidfd_getfd; -1 and errno set
// when either step fails (info says which).
int StealFd(pid_t pid, int fd, std::string& info) {
  const long pidfd = syscall(SYS_pidfd_open, pid, 0);
  if (pidfd < 0) {
    info = "pidfd_open failed";
    return -1;
  }
  const long stolen = syscall(SYS_pidfd_getfd, static_cast<int>(pidfd), fd, 0);
  const int err = errno;
  close(static_cast<int>(pidfd));
  errno = err;
  if (stolen < 0) info = "pidfd_getfd failed";
  return static_cast<int>(stolen);
}

ProbeOutcome ProbePidfdGetfd(std::string_view arg) {
  auto target = PidAndFd(arg, 0);
  if (!target) return Err(EINVAL, "expected PID:FD");
  std::string info;
  const int fd = StealFd(target->first, target->second, info);
  if (fd < 0) return Err(errno, info);
  close(fd);
  return Ok("took fd " + std::to_string(target->second) + " of " + std::to_string(target->first));
}

// The attack on ptybox-init (docs/security.md, "Wall 5"): take ptybox-init's control socket (fd 3
// of PID) and send the daemon a forged "the program exited with 0" message on it.
ProbeOutcome ProbeForgeExit(std::string_view arg) {
  auto target = PidAndFd(arg, 3);
  if (!target || arg.empty()) return Err(EINVAL, "expected PID[:FD]");
  std::string info;
  const int fd = StealFd(target->first, target->second, info);
  if (fd < 0) return Err(errno, info);
  const sandbox::InitMessage forged = sandbox::ExitedMessage{.exit_code = 0, .signal = {}};
  const Result<void> sent = sandbox::SendInitMessage(fd, forged);
  close(fd);
  if (!sent) return Err(EIO, "send on the stolen socket failed: " + sent.error().message);
  return Ok("sent a forged exit message on fd " + std::to_string(target->second) + " of " +
            std::to_string(target->first));
}

ProbeOutcome ProbeProcMem(std::string_view arg) {
  const std::string path = "/proc/" + std::string(arg.empty() ? "self" : arg) + "/mem";
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Err(errno, path);
  close(fd);
  return Ok("opened " + path);
}

#ifndef __NR_fchmodat2
#define __NR_fchmodat2 452
#endif
#ifndef __NR_openat2
#define __NR_openat2 437
#endif

// "setid:SYSCALL:OCTAL:DIR": SYSCALL with mode OCTAL on DIR/<SYSCALL>-<OCTAL> (the chmod family
// on a file it first creates 0644; the creating calls on a path it first removes). info: the
// resulting file's mode in octal, so a caller sees which bits survived.
ProbeOutcome ProbeSetid(std::string_view arg) {
  const size_t first = arg.find(':');
  const size_t second = first == std::string_view::npos ? first : arg.find(':', first + 1);
  if (second == std::string_view::npos) return Err(EINVAL, "setid:SYSCALL:OCTAL:DIR");
  const std::string call(arg.substr(0, first));
  const std::string mode_text(arg.substr(first + 1, second - first - 1));
  const std::string dir(arg.substr(second + 1));
  const auto mode = static_cast<mode_t>(std::strtoul(mode_text.c_str(), nullptr, 8));
  const std::string name = call + "-" + mode_text;
  const std::string path = dir + "/" + name;
  const int dirfd = open(dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (dirfd < 0) return Err(errno, "open " + dir);
  unlink(path.c_str());
  rmdir(path.c_str());
  const bool chmod_family = call.find("chmod") != std::string::npos;
  if (chmod_family) {
    const int fd = open(path.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
    if (fd < 0) return Err(errno, "create " + path);
    close(fd);
  }
  long rc = -1;
  if (call == "chmod") {
    rc = syscall(SYS_chmod, path.c_str(), mode);
  } else if (call == "fchmod") {
    const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    rc = fd < 0 ? -1 : syscall(SYS_fchmod, fd, mode);
    if (fd >= 0) close(fd);
  } else if (call == "fchmodat") {
    rc = syscall(SYS_fchmodat, dirfd, name.c_str(), mode);
  } else if (call == "fchmodat2") {
    rc = syscall(__NR_fchmodat2, dirfd, name.c_str(), mode, 0);
  } else if (call == "open") {
    rc = FdResult(syscall(SYS_open, path.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, mode)) == 0 ? 0
                                                                                              : -1;
  } else if (call == "openat") {
    rc = FdResult(syscall(SYS_openat, dirfd, name.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, mode)) ==
                 0
             ? 0
             : -1;
  } else if (call == "openat-tmpfile") {
    const int fd = open(dir.c_str(), O_TMPFILE | O_WRONLY | O_CLOEXEC, mode);
    if (fd < 0) return Err(errno);
    struct stat st {};
    fstat(fd, &st);
    close(fd);
    char octal[16];
    std::snprintf(octal, sizeof octal, "%o", st.st_mode & 07777);
    return Ok(octal);
  } else if (call == "creat") {
    rc = FdResult(syscall(SYS_creat, path.c_str(), mode)) == 0 ? 0 : -1;
  } else if (call == "mkdir") {
    rc = syscall(SYS_mkdir, path.c_str(), mode);
  } else if (call == "mkdirat") {
    rc = syscall(SYS_mkdirat, dirfd, name.c_str(), mode);
  } else if (call == "mknod") {
    rc = syscall(SYS_mknod, path.c_str(), S_IFREG | mode, 0);
  } else if (call == "mknodat") {
    rc = syscall(SYS_mknodat, dirfd, name.c_str(), S_IFREG | mode, 0);
  } else if (call == "openat2") {
    struct {
      uint64_t flags, mode, resolve;
    } how{O_CREAT | O_WRONLY | O_CLOEXEC, mode, 0};
    rc = FdResult(syscall(__NR_openat2, dirfd, name.c_str(), &how, sizeof how)) == 0 ? 0 : -1;
  } else {
    close(dirfd);
    return Err(EINVAL, "unknown setid call " + call);
  }
  const int err = rc < 0 ? errno : 0;
  close(dirfd);
  struct stat st {};
  std::string info = "absent";
  if (lstat(path.c_str(), &st) == 0) {
    char octal[16];
    std::snprintf(octal, sizeof octal, "%o", st.st_mode & 07777);
    info = octal;
  }
  return Err(err, info);
}

ProbeOutcome ProbeWrite(std::string_view path) {
  const int fd = open(std::string(path).c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Err(errno);
  const bool wrote = write(fd, "ptybox\n", 7) == 7;
  const int err = errno;
  close(fd);
  return Err(wrote ? 0 : err);
}

ProbeOutcome ProbeRead(std::string_view path) {
  auto content = ReadWhole(std::string(path));
  if (!content) return Err(errno);
  return Ok(Collapse(content->substr(0, 512)));
}

ProbeOutcome ProbeLs(std::string_view path) {
  DIR* dir = opendir(std::string(path).c_str());
  if (dir == nullptr) return Err(errno);
  std::vector<std::string> names;
  while (dirent* entry = readdir(dir)) {
    const std::string name = entry->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
  closedir(dir);
  std::sort(names.begin(), names.end());
  return Ok(Join(names, " "));
}

ProbeOutcome ProbePty() {
  Pty pty;
  OpenPty(pty, /*controlling=*/true);
  if (pty.err != 0) return Err(pty.err, "pty setup failed");
  if (write(pty.slave, "ping", 4) != 4) return Err(errno, "write to slave");
  pollfd pfd{pty.master, POLLIN, 0};
  if (poll(&pfd, 1, 10000) != 1) return Err(ETIMEDOUT, "nothing on the master");
  char buffer[16] = {};
  const ssize_t n = read(pty.master, buffer, sizeof buffer - 1);
  if (n != 4 || std::string_view(buffer, 4) != "ping") return Err(EIO, "master read mismatch");
  return Ok(pty.name);
}

ProbeOutcome ProbeForkExecTrue() {
  const pid_t pid = fork();
  if (pid < 0) return Err(errno);
  if (pid == 0) {
    char* const argv[] = {const_cast<char*>("/bin/true"), nullptr};
    execv("/bin/true", argv);
    _exit(127);
  }
  return Err(WaitChild(pid));
}

ProbeOutcome ProbePosixSpawnTrue() {
  // glibc's posix_spawn uses clone3 first and falls back to clone on ENOSYS.
  pid_t pid = 0;
  char* const argv[] = {const_cast<char*>("/bin/true"), nullptr};
  const int rc = posix_spawn(&pid, "/bin/true", nullptr, nullptr, argv, environ);
  if (rc != 0) return Err(rc);
  return Err(WaitChild(pid));
}

ProbeOutcome ProbeThread() {
  // pthread_create takes the same clone3 -> clone fallback.
  pthread_t thread;
  const int rc = pthread_create(
      &thread, nullptr, [](void*) -> void* { return nullptr; }, nullptr);
  if (rc != 0) return Err(rc);
  return Err(pthread_join(thread, nullptr));
}

ProbeOutcome ProbeOpenReadWrite() {
  auto status = ReadWhole("/proc/self/status");
  if (!status) return Err(errno, "read /proc/self/status");
  const int fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
  if (fd < 0) return Err(errno, "open /dev/null");
  const bool wrote =
      write(fd, status->data(), status->size()) == static_cast<ssize_t>(status->size());
  close(fd);
  return Err(wrote ? 0 : EIO);
}

ProbeOutcome ProbeCaps() {
  auto status = ReadWhole("/proc/self/status");
  if (!status) return Err(errno);
  std::istringstream in(*status);
  std::string line;
  std::string info;
  for (const char* field :
       {"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb", "NoNewPrivs", "Seccomp"}) {
    in.clear();
    in.seekg(0);
    while (std::getline(in, line)) {
      if (line.rfind(std::string(field) + ":", 0) == 0) {
        info += (info.empty() ? "" : " ") + std::string(field) + "=" +
                Collapse(line.substr(std::strlen(field) + 1));
      }
    }
  }
  return Ok(info);
}

ProbeOutcome ProbeEnv() {
  std::string info;
  int count = 0;
  for (char** e = environ; *e != nullptr; ++e, ++count) info += std::string(" ") + *e;
  return Ok(std::to_string(count) + info);
}

ProbeOutcome ProbeReadlink(const char* path) {
  char buffer[256];
  const ssize_t n = readlink(path, buffer, sizeof buffer - 1);
  if (n < 0) return Err(errno);
  return Ok(std::string(buffer, static_cast<size_t>(n)));
}

using ProbeFn = std::function<ProbeOutcome(std::string_view arg)>;

// Syscall probes are named after the syscall (the names SeccompRules() uses).
const std::vector<std::pair<std::string_view, ProbeFn>>& Table() {
  static const std::vector<std::pair<std::string_view, ProbeFn>> table = {
      // Seccomp rules.
      {"ioctl", ProbeIoctl},
      {"clone", ProbeClone},
      {"clone3", [](std::string_view) { return ProbeClone3(); }},
      {"unshare", [](std::string_view) { return Err(ErrnoOf(unshare(CLONE_NEWUSER))); }},
      {"setns", [](std::string_view) { return Err(ErrnoOf(setns(-1, 0))); }},
      {"mount",
       [](std::string_view) {
         return Err(ErrnoOf(mount("none", "/ptybox-nonexistent", "tmpfs", 0, nullptr)));
       }},
      {"umount2", [](std::string_view) { return Err(ErrnoOf(umount2("/ptybox-nonexistent", 0))); }},
      {"pivot_root",
       [](std::string_view) {
         return Err(ErrnoOf(syscall(SYS_pivot_root, "/ptybox-nonexistent", "/ptybox-nonexistent")));
       }},
      {"chroot", [](std::string_view) { return Err(ErrnoOf(chroot("/ptybox-nonexistent"))); }},
      {"open_tree",
       [](std::string_view) {
         return Err(FdResult(syscall(SYS_open_tree, AT_FDCWD, "/", kOpenTreeCloexec)));
       }},
      {"move_mount",
       [](std::string_view) {
         return Err(ErrnoOf(syscall(SYS_move_mount, -1, "", -1, "/ptybox-nonexistent", 0)));
       }},
      {"fsopen",
       [](std::string_view) {
         return Err(FdResult(syscall(SYS_fsopen, "tmpfs", kFsopenCloexec)));
       }},
      {"fsconfig",
       [](std::string_view) {
         return Err(ErrnoOf(syscall(SYS_fsconfig, -1, 0, nullptr, nullptr, 0)));
       }},
      {"fsmount", [](std::string_view) { return Err(FdResult(syscall(SYS_fsmount, -1, 0, 0))); }},
      {"fspick",
       [](std::string_view) {
         return Err(FdResult(syscall(SYS_fspick, AT_FDCWD, "/", kFspickCloexec)));
       }},
      {"mount_setattr",
       [](std::string_view) {
         return Err(ErrnoOf(syscall(SYS_mount_setattr, -1, "", 0, nullptr, 0)));
       }},
      {"keyctl",
       [](std::string_view) {
         return Err(
             ErrnoOf(syscall(SYS_keyctl, KEYCTL_GET_KEYRING_ID, KEY_SPEC_PROCESS_KEYRING, 1)));
       }},
      {"add_key",
       [](std::string_view) {
         return Err(ErrnoOf(
             syscall(SYS_add_key, "user", "ptybox-probe", "x", 1, KEY_SPEC_PROCESS_KEYRING)));
       }},
      {"request_key",
       [](std::string_view) {
         return Err(ErrnoOf(syscall(SYS_request_key, "user", "ptybox-probe-missing", nullptr, 0)));
       }},
      {"bpf", [](std::string_view) { return Err(ErrnoOf(syscall(SYS_bpf, 9999, nullptr, 0))); }},
      {"perf_event_open",
       [](std::string_view) {
         return Err(FdResult(syscall(SYS_perf_event_open, nullptr, 0, -1, -1, 0)));
       }},
      {"userfaultfd",
       [](std::string_view) {
         return Err(FdResult(syscall(SYS_userfaultfd, O_CLOEXEC | kUffdUserModeOnly)));
       }},
      {"io_uring_setup",
       [](std::string_view) {
         alignas(8) char params[120] = {};  // struct io_uring_params, zeroed
         return Err(FdResult(syscall(SYS_io_uring_setup, 1, params)));
       }},
      {"io_uring_enter",
       [](std::string_view) {
         return Err(ErrnoOf(syscall(SYS_io_uring_enter, -1, 0, 0, 0, nullptr, 0)));
       }},
      {"io_uring_register",
       [](std::string_view) {
         return Err(ErrnoOf(syscall(SYS_io_uring_register, -1, 0, nullptr, 0)));
       }},
      // Invalid architecture bits in the flags: never loads anything, even as root.
      {"kexec_load",
       [](std::string_view) {
         return Err(ErrnoOf(syscall(SYS_kexec_load, 0, 0, nullptr, 0xFFFF0000UL)));
       }},
      {"kexec_file_load",
       [](std::string_view) {
         return Err(ErrnoOf(syscall(SYS_kexec_file_load, -1, -1, 0, nullptr, ~0UL)));
       }},
      {"init_module",
       [](std::string_view) { return Err(ErrnoOf(syscall(SYS_init_module, nullptr, 0, ""))); }},
      {"finit_module",
       [](std::string_view) { return Err(ErrnoOf(syscall(SYS_finit_module, -1, "", 0))); }},
      {"delete_module",
       [](std::string_view) {
         return Err(ErrnoOf(syscall(SYS_delete_module, "ptybox_no_such_module", O_NONBLOCK)));
       }},
      {"ptrace",
       [](std::string_view) { return Err(ErrnoOf(ptrace(PTRACE_TRACEME, 0, nullptr, nullptr))); }},
      {"process_vm_readv", [](std::string_view) { return ProbeProcessVm(false); }},
      {"process_vm_writev", [](std::string_view) { return ProbeProcessVm(true); }},
      {"personality", ProbePersonality},
      {"modify_ldt", [](std::string_view) { return ProbeModifyLdt(); }},
      {"pidfd_getfd", ProbePidfdGetfd},
      // Attacks on ptybox-init (docs/security.md, "Wall 5"): its control socket and its memory.
      {"forge-exit", ProbeForgeExit},
      {"proc-mem", ProbeProcMem},
      {"socket", ProbeSocket},
      {"socketpair", ProbeSocketpair},
      {"setid", ProbeSetid},
      {"openat2",
       [](std::string_view) {
         struct {
           uint64_t flags, mode, resolve;
         } how{O_RDONLY | O_CLOEXEC, 0, 0};
         return Err(FdResult(syscall(__NR_openat2, AT_FDCWD, "/", &how, sizeof how)));
       }},
      // Other ABIs.
      {"int80-getpid", [](std::string_view) { return ProbeInt80Getpid(); }},
      {"x32-getpid", [](std::string_view) { return ProbeX32Getpid(); }},
      // Ordinary things that must keep working.
      {"getpid", [](std::string_view) { return Ok(std::to_string(getpid())); }},
      {"open-read-write", [](std::string_view) { return ProbeOpenReadWrite(); }},
      {"fork-exec-true", [](std::string_view) { return ProbeForkExecTrue(); }},
      {"posix-spawn-true", [](std::string_view) { return ProbePosixSpawnTrue(); }},
      {"thread", [](std::string_view) { return ProbeThread(); }},
      {"pty", [](std::string_view) { return ProbePty(); }},
      // Filesystem and identity.
      {"write", ProbeWrite},
      {"mkdir",
       [](std::string_view path) { return Err(ErrnoOf(mkdir(std::string(path).c_str(), 0755))); }},
      {"read", ProbeRead},
      {"ls", ProbeLs},
      {"cwd",
       [](std::string_view) {
         char buffer[4096];
         if (getcwd(buffer, sizeof buffer) == nullptr) return Err(errno);
         return Ok(buffer);
       }},
      {"ids",
       [](std::string_view) {
         return Ok("uid=" + std::to_string(getuid()) + " gid=" + std::to_string(getgid()) +
                   " pid=" + std::to_string(getpid()));
       }},
      {"mount-flags",
       [](std::string_view path) {
         struct statvfs st {};
         if (statvfs(std::string(path).c_str(), &st) != 0) return Err(errno);
         return Ok((st.f_flag & ST_RDONLY) != 0 ? "ro" : "rw");
       }},
      {"caps", [](std::string_view) { return ProbeCaps(); }},
      {"env", [](std::string_view) { return ProbeEnv(); }},
      {"netns", [](std::string_view) { return ProbeReadlink("/proc/self/ns/net"); }},
  };
  return table;
}

}  // namespace

const std::vector<std::string_view>& ProbeNames() {
  static const std::vector<std::string_view> names = [] {
    std::vector<std::string_view> out;
    for (const auto& [name, fn] : Table()) out.push_back(name);
    return out;
  }();
  return names;
}

std::optional<ProbeOutcome> RunProbe(std::string_view spec) {
  const size_t colon = spec.find(':');
  const std::string_view name = spec.substr(0, colon);
  const std::string_view arg = colon == std::string_view::npos ? "" : spec.substr(colon + 1);
  for (const auto& [probe_name, fn] : Table()) {
    if (probe_name == name) {
      errno = 0;
      return fn(arg);
    }
  }
  return std::nullopt;
}

ProbeOutcome RunProbeInChild(std::string_view spec, const std::vector<uint8_t>* program) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return Err(errno, "pipe2");
  const pid_t pid = fork();
  if (pid < 0) {
    const int err = errno;
    close(fds[0]);
    close(fds[1]);
    return Err(err, "fork");
  }
  if (pid == 0) {
    close(fds[0]);
    // A probe the kernel answers with a fatal signal (`int $0x80` without IA32 emulation) must
    // die of it, so the parent sees "killed": a sanitized build's runtime would otherwise catch
    // the SIGSEGV, print a report and exit 1 (which read as "the probe child reported nothing").
    for (int sig : {SIGSEGV, SIGBUS, SIGILL, SIGFPE}) signal(sig, SIG_DFL);
    ProbeOutcome outcome;
    bool loaded = true;
    if (program != nullptr) {
      sock_fprog fprog{static_cast<unsigned short>(program->size() / sizeof(sock_filter)),
                       reinterpret_cast<sock_filter*>(const_cast<uint8_t*>(program->data()))};
      if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
          syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &fprog) != 0) {
        outcome = Err(errno, "loading the seccomp program failed");
        loaded = false;
      }
    }
    if (loaded) {
      auto ran = RunProbe(spec);
      outcome = ran ? *ran : Err(EINVAL, "unknown probe");
    }
    const std::string message = std::to_string(outcome.err) + "\n" + outcome.info;
    ssize_t ignored = write(fds[1], message.data(), message.size());
    (void)ignored;
    _exit(0);
  }
  close(fds[1]);
  std::string message;
  char buffer[4096];
  ssize_t n;
  while ((n = read(fds[0], buffer, sizeof buffer)) != 0) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    message.append(buffer, static_cast<size_t>(n));
  }
  close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFSIGNALED(status)) {
    return Err(kKilledBySignal,
               sigabbrev_np(WTERMSIG(status)) ? sigabbrev_np(WTERMSIG(status)) : "signal");
  }
  const size_t newline = message.find('\n');
  if (newline == std::string::npos) return Err(EIO, "the probe child reported nothing");
  return Err(std::atoi(message.substr(0, newline).c_str()), message.substr(newline + 1));
}

std::vector<uint8_t> ReadProgram(int fd) {
  std::vector<uint8_t> bytes;
  uint8_t buffer[4096];
  off_t offset = 0;
  ssize_t n;
  while ((n = pread(fd, buffer, sizeof buffer, offset)) > 0) {
    bytes.insert(bytes.end(), buffer, buffer + n);
    offset += n;
  }
  return bytes;
}

std::string ErrnoName(int err) {
  if (err == 0) return "ok";
  if (err == kKilledBySignal) return "killed";
  return ::ptybox::ErrnoName(err);
}

std::optional<int> ErrnoFromName(std::string_view name) {
  if (name == "ok") return 0;
  if (name == "killed") return kKilledBySignal;
  for (int err = 1; err < 200; ++err) {
    if (const char* known = strerrorname_np(err); known != nullptr && name == known) return err;
  }
  return std::nullopt;
}

std::string FormatProbeLine(std::string_view spec, const ProbeOutcome& outcome) {
  return ptybox::testing::EscapeControls(spec) + "\t" + ErrnoName(outcome.err) + "\t" +
         ptybox::testing::EscapeControls(outcome.info) + "\n";
}

std::vector<ProbeLine> ParseProbeLines(std::string_view output) {
  std::vector<ProbeLine> lines;
  while (!output.empty()) {
    const size_t end = output.find('\n');
    const std::string_view line = output.substr(0, end);
    output = end == std::string_view::npos ? std::string_view() : output.substr(end + 1);
    const size_t tab1 = line.find('\t');
    const size_t tab2 = tab1 == std::string_view::npos ? tab1 : line.find('\t', tab1 + 1);
    if (tab2 == std::string_view::npos) continue;
    lines.push_back({ptybox::testing::UnescapeControls(line.substr(0, tab1)),
                     std::string(line.substr(tab1 + 1, tab2 - tab1 - 1)),
                     ptybox::testing::UnescapeControls(line.substr(tab2 + 1))});
  }
  return lines;
}

}  // namespace ptybox::sandbox::testing
