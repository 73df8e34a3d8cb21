// Test helper for the foreground inspector: blocks in exactly one chosen way (read, select,
// poll, epoll, ... on the terminal or elsewhere, or spins) until input arrives, then exits.
// Usage: tty_waiter MODE [PATH]; see Usage() for the modes.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <string_view>
#include <thread>

namespace {

int Usage() {
  std::fprintf(stderr,
               "usage: tty_waiter MODE [PATH]\n"
               "modes: read-stdin readv-stdin read-devtty read-path PATH select select-high\n"
               "       select-sleep pselect poll ppoll poll-no-input poll-timeout epoll\n"
               "       epoll-pwait epoll-pwait2 epoll-nested epoll-pipe threads-sleep\n"
               "       threads-spin sleep spin\n");
  return 2;
}

int Fail(const char* what) {
  std::fprintf(stderr, "tty_waiter: %s: %s\n", what, std::strerror(errno));
  return 1;
}

int ReadOnce(int fd) {
  char c;
  return ::read(fd, &c, 1) >= 0 ? 0 : Fail("read");
}

// A pipe nobody writes to: something to wait on that is not the terminal.
int QuietPipe() {
  static int fds[2] = {-1, -1};
  if (fds[0] < 0 && ::pipe2(fds, O_CLOEXEC) != 0) return -1;
  return fds[0];
}

int Select(bool high) {
  int fd = 0;
  if (high && (fd = ::dup2(0, 200)) < 0) return Fail("dup2");
  int quiet = QuietPipe();
  fd_set set;
  FD_ZERO(&set);
  FD_SET(quiet, &set);
  FD_SET(fd, &set);
  return ::select((fd > quiet ? fd : quiet) + 1, &set, nullptr, nullptr, nullptr) >= 0
             ? 0
             : Fail("select");
}

int Poll(short events, int timeout_ms, bool use_ppoll) {
  struct pollfd fds[2] = {{QuietPipe(), POLLIN, 0}, {0, events, 0}};
  if (use_ppoll) return ::ppoll(fds, 2, nullptr, nullptr) >= 0 ? 0 : Fail("ppoll");
  return ::poll(fds, 2, timeout_ms) >= 0 ? 0 : Fail("poll");
}

enum class EpollCall { kWait, kPwait, kPwait2 };

int Epoll(int watched, EpollCall call, bool nested) {
  int ep = ::epoll_create1(EPOLL_CLOEXEC);
  if (ep < 0) return Fail("epoll_create1");
  struct epoll_event ev {};
  ev.events = EPOLLIN;
  ev.data.fd = QuietPipe();
  if (::epoll_ctl(ep, EPOLL_CTL_ADD, ev.data.fd, &ev) != 0) return Fail("epoll_ctl pipe");
  ev.data.fd = watched;
  if (watched >= 0 && ::epoll_ctl(ep, EPOLL_CTL_ADD, watched, &ev) != 0) return Fail("epoll_ctl");
  if (nested) {
    int outer = ::epoll_create1(EPOLL_CLOEXEC);
    ev.data.fd = ep;
    if (outer < 0 || ::epoll_ctl(outer, EPOLL_CTL_ADD, ep, &ev) != 0) return Fail("nested");
    ep = outer;
  }
  struct epoll_event out {};
  long n = 0;
  switch (call) {
    case EpollCall::kWait:
      n = ::epoll_wait(ep, &out, 1, -1);
      break;
    case EpollCall::kPwait:
      n = ::epoll_pwait(ep, &out, 1, -1, nullptr);
      break;
    case EpollCall::kPwait2:
      n = ::syscall(SYS_epoll_pwait2, ep, &out, 1, nullptr, nullptr, 0);
      break;
  }
  return n >= 0 ? 0 : Fail("epoll wait");
}

int Threads(bool spin) {
  std::atomic<bool> done{false};
  std::thread other([&] {
    while (!done.load()) {
      if (!spin) ::usleep(100 * 1000);
    }
  });
  int rc = ReadOnce(0);
  done = true;
  other.join();
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return Usage();
  const std::string_view mode = argv[1];
  if (mode == "read-stdin") return ReadOnce(0);
  if (mode == "readv-stdin") {
    char c;
    struct iovec iov {
      &c, 1
    };
    return ::readv(0, &iov, 1) >= 0 ? 0 : Fail("readv");
  }
  if (mode == "read-devtty" || mode == "read-path") {
    const char* path = mode == "read-devtty" ? "/dev/tty" : (argc > 2 ? argv[2] : nullptr);
    if (path == nullptr) return Usage();
    int fd = ::open(path, O_RDONLY | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) return Fail(path);
    return ReadOnce(fd);
  }
  if (mode == "select") return Select(false);
  if (mode == "select-high") return Select(true);
  if (mode == "select-sleep") return ::select(0, nullptr, nullptr, nullptr, nullptr);
  if (mode == "pselect") {
    fd_set set;
    FD_ZERO(&set);
    FD_SET(0, &set);
    return ::pselect(1, &set, nullptr, nullptr, nullptr, nullptr) >= 0 ? 0 : Fail("pselect");
  }
  if (mode == "poll") return Poll(POLLIN, -1, false);
  if (mode == "ppoll") return Poll(POLLIN, -1, true);
  if (mode == "poll-no-input") return Poll(0, -1, false);  // watches the terminal, not for input
  if (mode == "poll-timeout") return Poll(POLLIN, 1000 * 1000, false);
  if (mode == "epoll") return Epoll(0, EpollCall::kWait, false);
  if (mode == "epoll-pwait") return Epoll(0, EpollCall::kPwait, false);
  if (mode == "epoll-pwait2") return Epoll(0, EpollCall::kPwait2, false);
  if (mode == "epoll-nested") return Epoll(0, EpollCall::kWait, true);
  if (mode == "epoll-pipe") return Epoll(-1, EpollCall::kWait, false);
  if (mode == "threads-sleep") return Threads(false);
  if (mode == "threads-spin") return Threads(true);
  if (mode == "sleep") return ::pause();
  if (mode == "spin") {
    volatile unsigned long spins = 0;
    while (true) spins = spins + 1;
  }
  return Usage();
}
