// SessionPeerReason on real processes: a descendant of the "daemon" (this test process) is a
// session's process, wherever re-parenting took it; anything else is not.
#include "runtime/peer_check.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

namespace ptybox::runtime {
namespace {

// A child that sleeps until killed; with `grandchild`, it forks one that sleeps too and the
// grandchild's pid comes back through a pipe.
struct Tree {
  pid_t child = -1;
  pid_t grandchild = -1;
  explicit Tree(bool with_grandchild) {
    int fds[2];
    if (::pipe(fds) != 0) return;
    child = ::fork();
    if (child == 0) {
      pid_t g = -1;
      if (with_grandchild) {
        g = ::fork();
        if (g == 0) {
          ::pause();
          ::_exit(0);
        }
      }
      ssize_t ignored = ::write(fds[1], &g, sizeof g);
      (void)ignored;
      ::pause();
      ::_exit(0);
    }
    ::close(fds[1]);
    ssize_t n = ::read(fds[0], &grandchild, sizeof grandchild);
    (void)n;
    ::close(fds[0]);
  }
  ~Tree() {
    if (grandchild > 0) ::kill(grandchild, SIGKILL);
    if (child > 0) {
      ::kill(child, SIGKILL);
      ::waitpid(child, nullptr, 0);
    }
  }
};

TEST(PeerCheckTest, DescendantsOfTheDaemonAreSessionProcesses) {
  Tree tree(/*with_grandchild=*/true);
  ASSERT_GT(tree.grandchild, 0);
  EXPECT_TRUE(SessionPeerReason(tree.child, ::getpid()).has_value());
  std::optional<std::string> why = SessionPeerReason(tree.grandchild, ::getpid());
  ASSERT_TRUE(why.has_value());
  EXPECT_NE(why->find("descends from the daemon"), std::string::npos) << *why;
}

TEST(PeerCheckTest, OrphansReparentedToASubreaperDaemonStaySessionProcesses) {
  ASSERT_EQ(::prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
  pid_t orphan = -1;
  {
    int fds[2];
    ASSERT_EQ(::pipe(fds), 0);
    const pid_t middle = ::fork();
    if (middle == 0) {
      const pid_t g = ::fork();
      if (g == 0) {
        ::pause();
        ::_exit(0);
      }
      ssize_t ignored = ::write(fds[1], &g, sizeof g);
      (void)ignored;
      ::_exit(0);  // the grandchild re-parents to us, the subreaper
    }
    ::close(fds[1]);
    ASSERT_EQ(::read(fds[0], &orphan, sizeof orphan), static_cast<ssize_t>(sizeof orphan));
    ::close(fds[0]);
    ::waitpid(middle, nullptr, 0);
  }
  EXPECT_TRUE(SessionPeerReason(orphan, ::getpid()).has_value());
  ::kill(orphan, SIGKILL);
  ::waitpid(orphan, nullptr, 0);
  ::prctl(PR_SET_CHILD_SUBREAPER, 0);
}

TEST(PeerCheckTest, OtherProcessesAreNot) {
  // Our parent, ourselves as seen by a child "daemon", pid 0 (another pid namespace).
  Tree tree(/*with_grandchild=*/false);
  EXPECT_FALSE(SessionPeerReason(::getppid(), ::getpid()).has_value());
  EXPECT_FALSE(SessionPeerReason(::getpid(), tree.child).has_value());
  EXPECT_FALSE(SessionPeerReason(0, ::getpid()).has_value());
  EXPECT_FALSE(SessionPeerReason(::getpid(), ::getpid()).has_value());
}

TEST(PeerCheckTest, AnUnreadableChainIsRefused) {
  // A pid that does not exist (beyond pid_max): fail closed.
  std::optional<std::string> why = SessionPeerReason(1 << 30, ::getpid());
  ASSERT_TRUE(why.has_value());
  EXPECT_NE(why->find("cannot be read"), std::string::npos) << *why;
}

}  // namespace
}  // namespace ptybox::runtime
