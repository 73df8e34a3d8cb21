// SessionPeerReason on real processes: a descendant of the "daemon" (this test process) is a
// session's process, wherever re-parenting took it; anything else is not.
#include "runtime/peer_check.h"

#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <iterator>

#include "common/unique_fd.h"
#include "runtime/daemon.h"
#include "tests/support/files.h"

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

// A child that runs `setup` (in the child), reports through a pipe whether it worked, then
// sleeps until killed.
struct Prepared {
  pid_t pid = -1;
  bool ok = false;
  template <typename Setup>
  explicit Prepared(Setup setup) {
    int fds[2];
    if (::pipe(fds) != 0) return;
    pid = ::fork();
    if (pid == 0) {
      const char result = setup() ? 1 : 0;
      ssize_t ignored = ::write(fds[1], &result, 1);
      (void)ignored;
      ::pause();
      ::_exit(0);
    }
    ::close(fds[1]);
    char result = 0;
    ok = ::read(fds[0], &result, 1) == 1 && result == 1;
    ::close(fds[0]);
  }
  ~Prepared() {
    if (pid > 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
  }
};

TEST(PeerCheckTest, TheSameUserNamespaceIsAdmitted) {
  Tree tree(/*with_grandchild=*/false);
  Tree daemon(/*with_grandchild=*/false);  // a "daemon" that is no ancestor of the peer
  EXPECT_EQ(CompareUserNamespace(tree.child).verdict, NamespaceCheck::Verdict::kSame);
  EXPECT_FALSE(CheckPeer(tree.child, daemon.child).has_value());
}

TEST(PeerCheckTest, AnotherUserNamespaceIsRefused) {
  // What a confined session of any daemon is: a process in a user namespace of its own.
  Prepared inner([] { return ::unshare(CLONE_NEWUSER) == 0; });
  if (!inner.ok) GTEST_SKIP() << "this host refuses unprivileged user namespaces";
  const NamespaceCheck ns = CompareUserNamespace(inner.pid);
  EXPECT_EQ(ns.verdict, NamespaceCheck::Verdict::kOther) << ns.detail;
  Tree daemon(/*with_grandchild=*/false);
  std::optional<PeerRefusal> refused = CheckPeer(inner.pid, daemon.child);
  ASSERT_TRUE(refused.has_value());
  EXPECT_NE(refused->message.find("another user namespace than the daemon's"), std::string::npos)
      << refused->message;
  EXPECT_EQ(refused->message.find("of this daemon"), std::string::npos) << refused->message;
}

TEST(PeerCheckTest, ANonDumpableProcessInAnotherNamespaceIsRefusedByItsMaps) {
  // A non-dumpable process hides its namespace link from another user; its maps still tell.
  Prepared inner([] { return ::unshare(CLONE_NEWUSER) == 0 && ::prctl(PR_SET_DUMPABLE, 0) == 0; });
  if (!inner.ok) GTEST_SKIP() << "this host refuses unprivileged user namespaces";
  const NamespaceCheck ns = CompareUserNamespace(inner.pid);
  EXPECT_EQ(ns.verdict, NamespaceCheck::Verdict::kOther) << ns.detail;
}

TEST(PeerCheckTest, ProcessesUnderAnyPtyboxInitAreRefused) {
  // A danger-full-access session of another daemon: the same namespace, but ptybox-init (a
  // subreaper) above it. Its name is all that marks it, as for a real one.
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const pid_t init = ::fork();
  if (init == 0) {
    ::prctl(PR_SET_NAME, "ptybox-init");
    const pid_t g = ::fork();
    if (g == 0) {
      ::pause();
      ::_exit(0);
    }
    ssize_t ignored = ::write(fds[1], &g, sizeof g);
    (void)ignored;
    ::pause();
    ::_exit(0);
  }
  ::close(fds[1]);
  pid_t shell = -1;
  ASSERT_EQ(::read(fds[0], &shell, sizeof shell), static_cast<ssize_t>(sizeof shell));
  ::close(fds[0]);
  std::optional<std::string> why = AnySessionPeerReason(shell);
  EXPECT_NE(why.value_or("").find("runs under ptybox-init"), std::string::npos)
      << why.value_or("(admitted)");
  // As seen by a daemon that is not its ancestor: refused as any session's.
  Tree daemon(/*with_grandchild=*/false);
  std::optional<PeerRefusal> refused = CheckPeer(shell, daemon.child);
  ASSERT_TRUE(refused.has_value());
  EXPECT_NE(refused->message.find("runs inside a ptybox session (of another daemon)"),
            std::string::npos)
      << refused->message;
  // Its init killed, the shell is adopted by its daemon (a subreaper named ptybox): still refused.
  ::prctl(PR_SET_NAME, "ptybox");
  std::optional<std::string> adopted = AnySessionPeerReason(init);
  EXPECT_NE(adopted.value_or("").find("runs under the ptybox process"), std::string::npos)
      << adopted.value_or("(admitted)");
  ::prctl(PR_SET_NAME, "peer_check_test");
  // ptybox-init itself is not under one (when no ptybox is above it); this test process neither.
  EXPECT_FALSE(AnySessionPeerReason(init).has_value());
  EXPECT_FALSE(AnySessionPeerReason(::getpid()).has_value());
  ::kill(shell, SIGKILL);
  ::kill(init, SIGKILL);
  ::waitpid(init, nullptr, 0);
}

TEST(PeerCheckTest, AnotherUsersProcessOfTheSameNamespaceIsAdmitted) {
  // pid 1 (root's) as the peer: an ordinary test user cannot read its namespace link, so the
  // maps decide; it must be admitted, not refused as a session (a root client of an ordinary
  // daemon).
  using ::ptybox::testing::ReadFile;
  if (ReadFile("/proc/1/uid_map") != ReadFile("/proc/self/uid_map")) {
    GTEST_SKIP() << "pid 1 is in another user namespace here";
  }
  const NamespaceCheck ns = CompareUserNamespace(1);
  EXPECT_EQ(ns.verdict, NamespaceCheck::Verdict::kSame) << ns.detail;
  Tree daemon(/*with_grandchild=*/false);
  std::optional<PeerRefusal> refused = CheckPeer(1, daemon.child);
  EXPECT_FALSE(refused.has_value()) << (refused ? refused->message : "");
}

TEST(PeerCheckTest, APeerInAnInvisiblePidNamespaceIsJudgedByItsPidfd) {
  // Shown as pid 0 (the daemon is a container's entrypoint, the client above it): its pidfd's
  // user namespace decides.
  UniqueFd self(static_cast<int>(::syscall(SYS_pidfd_open, ::getpid(), 0)));
  ASSERT_TRUE(self);
  const NamespaceCheck same = CompareUserNamespaceByPidfd(self.Get());
  if (same.verdict == NamespaceCheck::Verdict::kUnsupported) {
    GTEST_SKIP() << "this kernel has no PIDFD_GET_USER_NAMESPACE (Linux 6.11)";
  }
  EXPECT_EQ(same.verdict, NamespaceCheck::Verdict::kSame) << same.detail;
  EXPECT_FALSE(CheckPeer(0, ::getpid(), self.Get()).has_value());
  Prepared inner([] { return ::unshare(CLONE_NEWUSER) == 0; });
  if (!inner.ok) GTEST_SKIP() << "this host refuses unprivileged user namespaces";
  UniqueFd other(static_cast<int>(::syscall(SYS_pidfd_open, inner.pid, 0)));
  ASSERT_TRUE(other);
  std::optional<PeerRefusal> refused = CheckPeer(0, ::getpid(), other.Get());
  ASSERT_TRUE(refused.has_value());
  EXPECT_NE(refused->message.find("another user namespace than the daemon's"), std::string::npos)
      << refused->message;
  // Without a pidfd nothing can be read: admitted, as before (docs/security.md, Wall 2).
  EXPECT_FALSE(CheckPeer(0, ::getpid()).has_value());
}

// The first wall's placement rule (runtime/daemon.h): the socket never lies inside a root a
// session may write, where renaming its directory locks new clients out.
TEST(SocketPlacementTest, ASocketInsideAnyRootIsRefusedNamingIt) {
  const std::vector<std::filesystem::path> roots = {"/home/me/project", "/srv/cache/"};
  std::optional<std::string> why = SocketInsideRoot("/home/me/project/run/p.sock", roots);
  ASSERT_TRUE(why.has_value());
  EXPECT_NE(why->find("is inside /home/me/project, a directory sessions may write"),
            std::string::npos)
      << *why;
  EXPECT_TRUE(SocketInsideRoot("/srv/cache/deep/p.sock", roots).has_value());
  EXPECT_FALSE(SocketInsideRoot("/home/me/project-other/p.sock", roots).has_value());
  EXPECT_FALSE(SocketInsideRoot("/run/user/1000/ptybox/ptybox.sock", roots).has_value());
  // Roots no sandbox accepts are no session's: a daemon started in / or /tmp still starts.
  EXPECT_FALSE(SocketInsideRoot("/tmp/ptybox.sock", {"/", "/tmp", "/run"}).has_value());
}

}  // namespace
}  // namespace ptybox::runtime
