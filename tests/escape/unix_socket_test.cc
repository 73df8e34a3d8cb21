// No host service over UNIX sockets: the host (this test process) listens on an abstract socket
// and on a 0666 pathname socket in a directory outside every root (under /var/tmp, which
// sessions see through the read-only host root); a confined session tries both, in both
// network modes, and the listener must see nothing where a wall holds. The session's own
// abstract socket keeps working. danger-full-access is the control that reaches both.
//
// A pathname socket bound before the session starts (a host service) is covered at the launch
// on every kernel; one bound later is refused only by LANDLOCK_ACCESS_FS_RESOLVE_UNIX (Landlock
// ABI 9, Linux 7.1): below it, the test asserts the gap exactly as docs/security.md and
// `ptybox doctor` state it, so a change either way shows.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <string>
#include <thread>
#include <tuple>

#include "sandbox/init/landlock.h"
#include "tests/escape/escape_support.h"

namespace ptybox::testing {
namespace {

namespace fs = std::filesystem;

// A listening stream socket of the host, non-blocking, that reports whether anyone connected.
class UnixListener final {
 public:
  // `abstract`: name without the leading NUL; else a filesystem path.
  UnixListener(const std::string& name, bool abstract) {
    fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    socklen_t len = 0;
    if (abstract) {
      addr.sun_path[0] = '\0';
      std::memcpy(addr.sun_path + 1, name.data(), name.size());
      len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
    } else {
      std::memcpy(addr.sun_path, name.data(), name.size());
      len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + name.size() + 1);
    }
    ok_ = fd_ >= 0 && ::bind(fd_, reinterpret_cast<sockaddr*>(&addr), len) == 0 &&
          ::listen(fd_, 8) == 0 && (abstract || ::chmod(name.c_str(), 0666) == 0);
  }
  ~UnixListener() {
    if (fd_ >= 0) ::close(fd_);
  }
  UnixListener(const UnixListener&) = delete;
  UnixListener& operator=(const UnixListener&) = delete;
  [[nodiscard]] bool ok() const { return ok_; }
  // Connections that arrived (each accepted and closed).
  int Connections() {
    int count = 0;
    for (;;) {
      const int conn = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (conn < 0) break;
      ::close(conn);
      ++count;
    }
    return count;
  }

 private:
  int fd_ = -1;
  bool ok_ = false;
};

// A fresh directory outside every root that any user may list and enter (mode 0755): what a
// session sees through the read-only host root.
void MakeVisibleDirectory(const fs::path& dir) {
  fs::remove_all(dir);
  fs::create_directories(dir);
  fs::permissions(dir, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                           fs::perms::others_read | fs::perms::others_exec);
}

using Param = std::tuple<std::string, bool>;  // mode, network allowed

class UnixSocketTest : public ::testing::TestWithParam<Param> {
 protected:
  void SetUp() override {
    PrepareWorkspace(daemon_.workspace());
    // Outside every root, visible through the read-only host root; a service listening before
    // the session starts (a warm pool's shell started before it is not claimed).
    MakeVisibleDirectory(dir_);
    early_.emplace((dir_ / "service.sock").string(), /*abstract=*/false);
    ASSERT_TRUE(early_->ok()) << std::strerror(errno);
    session_ = OpenSession(client_, Mode());
    ASSERT_FALSE(session_.empty()) << daemon_.Log();
  }
  void TearDown() override { fs::remove_all(dir_); }
  [[nodiscard]] const std::string& Mode() const { return std::get<0>(GetParam()); }
  [[nodiscard]] bool Network() const { return std::get<1>(GetParam()); }
  [[nodiscard]] bool Confined() const { return Mode() != "danger-full-access"; }

  static std::vector<std::string> Args(const fs::path& policy_dir, bool network) {
    const fs::path policy = policy_dir / "operator.yaml";
    std::ofstream(policy) << "version: 1\nnetwork: " << (network ? "allow" : "deny") << "\n";
    return {"--policy", policy.string()};
  }

  const std::string unique_ = std::to_string(::getpid()) + "-" + Mode() + (Network() ? "-net" : "");
  const fs::path dir_ = "/var/tmp/ptybox-unix-" + unique_;
  std::optional<UnixListener> early_;
  TempDir policy_dir_;
  Daemon daemon_{Daemon::Options{.extra_args = Args(policy_dir_.path(), Network()), .env = {}}};
  RpcClient client_{daemon_.socket()};
  std::string session_;
};

TEST_P(UnixSocketTest, HostServicesAreOutOfReach) {
  const std::string abstract_name = "ptybox-unix-test-" + unique_;
  UnixListener abstract(abstract_name, /*abstract=*/true);
  UnixListener late((dir_ / "late.sock").string(), /*abstract=*/false);
  ASSERT_TRUE(abstract.ok() && late.ok()) << std::strerror(errno);

  const std::string probe =
      "python3 " + Quote(daemon_.workspace() / ".escape" / "escape_probe.py") + " unix " +
      abstract_name + " " + Quote(dir_ / "service.sock") + " " + Quote(dir_ / "late.sock");
  Observed o = RunInSession(client_, session_, Mode(), "unix-sockets", probe);
  ASSERT_EQ(o.exit, 0) << o.Show();
  const int abstract_seen = abstract.Connections();
  const int path_seen = early_->Connections();
  const int late_seen = late.Connections();

  auto walls = sandbox::LandlockAbi();
  ASSERT_TRUE(walls.has_value());
  const sandbox::UnixSocketWalls held = sandbox::UnixSocketWallsFor(*walls);
  std::cout << "  [" << Mode() << (Network() ? ", network allowed" : ", network denied") << "] "
            << sandbox::DescribeUnixSocketWalls(held) << "\n";

  // The session's own abstract socket always works.
  EXPECT_TRUE(o.Says("unix own-abstract ok")) << o.Show();
  if (!Confined()) {
    EXPECT_TRUE(o.Says("unix host-abstract ok")) << o.Show();
    EXPECT_TRUE(o.Says("unix host-path ok")) << o.Show();
    EXPECT_TRUE(o.Says("unix host-late-path ok")) << o.Show();
    EXPECT_EQ(abstract_seen, 1);
    EXPECT_EQ(path_seen, 1);
    EXPECT_EQ(late_seen, 1);
    return;
  }
  // Abstract: another network namespace has none of the host's names (ECONNREFUSED); in the
  // host's, Landlock's scope refuses with EPERM.
  if (!Network()) {
    EXPECT_TRUE(o.Says("unix host-abstract ECONNREFUSED")) << o.Show();
  } else if (held.abstract_scoped) {
    EXPECT_TRUE(o.Says("unix host-abstract EPERM")) << o.Show();
  } else {
    std::cout << "  this kernel has no Landlock ABI 6: the host's abstract sockets are reachable "
                 "with the network allowed (doctor says so)\n";
  }
  if (!Network() || held.abstract_scoped) {
    EXPECT_EQ(abstract_seen, 0);
  }
  // Pathname, bound before the launch: covered on every kernel (the session finds /dev/null,
  // not a socket, there).
  EXPECT_TRUE(o.Says("unix host-path ECONNREFUSED")) << o.Show();
  EXPECT_EQ(path_seen, 0);
  // Bound after the launch: Landlock ABI 9 refuses with EACCES; below it the documented gap.
  if (held.pathname_restricted) {
    EXPECT_TRUE(o.Says("unix host-late-path EACCES")) << o.Show();
    EXPECT_EQ(late_seen, 0);
  } else {
    EXPECT_TRUE(o.Says("unix host-late-path ok")) << o.Show();
    EXPECT_EQ(late_seen, 1) << "the gap docs/security.md states for kernels before Landlock ABI 9";
  }
}

// A socket that comes and goes (a service restarting, a local user churning one in a directory
// sessions see) or whose path is swapped for a link between the daemon's look and the launch
// never fails an open nor moves a cover onto another file: the launcher reaches each socket by
// descriptor, without links, and skips one that is gone or is no longer a socket.
class UnixSocketChurnTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    PrepareWorkspace(daemon_.workspace());
    MakeVisibleDirectory(dir_);
    std::ofstream(dir_ / "victim.txt") << "still-visible\n";
    fs::permissions(dir_ / "victim.txt", fs::perms::owner_read | fs::perms::owner_write |
                                             fs::perms::group_read | fs::perms::others_read);
  }
  void TearDown() override { fs::remove_all(dir_); }

  const fs::path dir_ = "/var/tmp/ptybox-unix-churn-" + std::to_string(::getpid()) + "-" +
                        (GetParam() == "read-only" ? "ro" : "ww");
  Daemon daemon_;
  RpcClient client_{daemon_.socket()};
};

TEST_P(UnixSocketChurnTest, ASocketComingAndGoingNeverFailsAnOpenNorMovesItsCover) {
  const fs::path socket = dir_ / "churn.sock";
  std::atomic<bool> stop{false};
  std::atomic<int> rounds{0};
  std::thread churn([&] {
    while (!stop.load()) {
      {
        UnixListener listener(socket.string(), /*abstract=*/false);
        std::this_thread::sleep_for(std::chrono::microseconds(300));
      }
      ::unlink(socket.c_str());
      // The same name as a link to a file every session must go on reading.
      (void)::symlink("victim.txt", socket.c_str());
      std::this_thread::sleep_for(std::chrono::microseconds(300));
      ::unlink(socket.c_str());
      rounds.fetch_add(1);
    }
  });
  constexpr int kOpens = 8;
  int opened = 0;
  for (int i = 0; i < kOpens; ++i) {
    const std::string session = OpenSession(client_, GetParam());
    EXPECT_FALSE(session.empty()) << "open " << i << " failed while a socket churned\n"
                                  << daemon_.Log();
    if (session.empty()) continue;
    ++opened;
    Observed o =
        RunInSession(client_, session, GetParam(), "victim", "cat " + Quote(dir_ / "victim.txt"));
    EXPECT_TRUE(o.Says("still-visible")) << o.Show();
    client_.Call("terminal_close", Json{{"sessionId", session}});
  }
  stop.store(true);
  churn.join();
  EXPECT_EQ(opened, kOpens);
  EXPECT_GT(rounds.load(), 0) << "the socket never churned";
}

INSTANTIATE_TEST_SUITE_P(Confined, UnixSocketChurnTest,
                         ::testing::Values("read-only", "workspace-write"),
                         [](const ::testing::TestParamInfo<std::string>& param) {
                           return param.param == "read-only" ? std::string("readonly")
                                                             : std::string("workspacewrite");
                         });

INSTANTIATE_TEST_SUITE_P(Modes, UnixSocketTest,
                         ::testing::Combine(::testing::Values("read-only", "workspace-write",
                                                              "danger-full-access"),
                                            ::testing::Bool()),
                         [](const ::testing::TestParamInfo<Param>& param) {
                           std::string name = std::get<0>(param.param) +
                                              (std::get<1>(param.param) ? "_net" : "_nonet");
                           for (char& c : name) {
                             if (c == '-') c = '_';
                           }
                           return name;
                         });

}  // namespace
}  // namespace ptybox::testing
