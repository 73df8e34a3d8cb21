// Landlock's UNIX-socket walls: which ABI gives which wall (pure), and, for real in a forked
// child, that RestrictUnixSockets refuses an abstract socket created outside the child's domain
// while the child's own abstract socket keeps working.
#include "sandbox/init/landlock.h"

#include <gtest/gtest.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iostream>
#include <string>

namespace ptybox::sandbox {
namespace {

TEST(LandlockTest, WallsFollowTheAbi) {
  for (int abi : {-1, 0, 1, 5}) {
    const UnixSocketWalls walls = UnixSocketWallsFor(abi);
    EXPECT_FALSE(walls.abstract_scoped) << abi;
    EXPECT_FALSE(walls.pathname_restricted) << abi;
    EXPECT_GE(walls.abi, 0);
  }
  for (int abi : {6, 7, 8}) {
    const UnixSocketWalls walls = UnixSocketWallsFor(abi);
    EXPECT_TRUE(walls.abstract_scoped) << abi;
    EXPECT_FALSE(walls.pathname_restricted) << abi;
    EXPECT_FALSE(walls.Complete());
    EXPECT_NE(DescribeUnixSocketWalls(walls).find("stays reachable"), std::string::npos);
  }
  const UnixSocketWalls nine = UnixSocketWallsFor(9);
  EXPECT_TRUE(nine.Complete());
  EXPECT_EQ(DescribeUnixSocketWalls(nine).find("stays reachable"), std::string::npos);
  EXPECT_NE(DescribeUnixSocketWalls(UnixSocketWallsFor(0)).find("no Landlock"), std::string::npos);
}

// 0 when connecting to the abstract `name` succeeded, else the errno.
int ConnectAbstract(const std::string& name) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return errno;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path + 1, name.data(), name.size());
  const auto len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  const int rc = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), len);
  const int err = rc == 0 ? 0 : errno;
  ::close(fd);
  return err;
}

int ListenAbstract(const std::string& name) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path + 1, name.data(), name.size());
  const auto len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&addr), len) != 0 || ::listen(fd, 4) != 0) {
    return -1;
  }
  return fd;
}

TEST(LandlockTest, AbstractSocketsOutsideTheDomainAreRefused) {
  Result<int> abi = LandlockAbi();
  ASSERT_TRUE(abi.has_value()) << abi.error().Describe();
  std::cout << "  Landlock ABI " << *abi << ": "
            << DescribeUnixSocketWalls(UnixSocketWallsFor(*abi)) << "\n";
  if (!UnixSocketWallsFor(*abi).abstract_scoped) GTEST_SKIP() << "no Landlock ABI 6 here";
  const std::string outside = "ptybox-landlock-test-" + std::to_string(::getpid());
  const int listener = ListenAbstract(outside);
  ASSERT_GE(listener, 0) << std::strerror(errno);
  ASSERT_EQ(ConnectAbstract(outside), 0) << "reachable before any wall";
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // 1: restrict failed; 2: the outside socket answered; 3: our own did not.
    if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) ::_exit(1);
    Result<UnixSocketWalls> walls = RestrictUnixSockets();
    if (!walls || !walls->abstract_scoped) ::_exit(1);
    if (ConnectAbstract(outside) != EPERM) ::_exit(2);
    const std::string own = outside + "-own";
    if (ListenAbstract(own) < 0 || ConnectAbstract(own) != 0) ::_exit(3);
    ::_exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ::close(listener);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "1: restrict failed, 2: outside socket answered, 3: own "
                                       "socket refused";
}

}  // namespace
}  // namespace ptybox::sandbox
