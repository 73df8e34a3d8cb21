// Protected paths are never followed: a workspace-write session that replaces a missing `.git`
// with a symbolic link to /tmp, /proc or / must not make the next session bind that host
// directory (over its private /tmp, its own /proc, or everything), nor make later spawns fail.
// Through the real daemon and through `ptybox run`, for the workspace and a writable root.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "tests/escape/escape_support.h"
#include "tests/sandbox/process_runner.h"

namespace ptybox::testing {
namespace {

namespace fs = std::filesystem;
using sandbox::testing::RunProcess;
using sandbox::testing::RunResult;

struct LinkCase {
  std::string name;
  std::string target;
  friend void PrintTo(const LinkCase& c, std::ostream* out) { *out << ".git -> " << c.target; }
};

class ProtectedLinkTest : public ::testing::TestWithParam<std::tuple<LinkCase, std::string>> {
 protected:
  const LinkCase& Link() const { return std::get<0>(GetParam()); }
  const std::string& Mode() const { return std::get<1>(GetParam()); }
};

// What session 2 checks: a host file in the host's /tmp is invisible, its /tmp is its own and
// writable, /proc shows only the sandbox (not this test process), and it runs at all.
void CheckSecondSession(RpcClient& client, const std::string& id, const std::string& mode,
                        const fs::path& host_marker) {
  Observed seen = RunInSession(client, id, mode, "host-tmp-marker",
                               "ls " + Quote(host_marker) + " 2>&1; echo rc=$?");
  EXPECT_TRUE(seen.Says("rc=2") || seen.Says("No such file")) << seen.Show();
  EXPECT_FALSE(seen.Says("rc=0")) << "the host's /tmp is visible: " << seen.Show();
  Observed tmp =
      RunInSession(client, id, mode, "own-tmp", "echo ok > /tmp/own-file && cat /tmp/own-file");
  EXPECT_EQ(tmp.exit, 0) << tmp.Show();
  EXPECT_EQ(tmp.text, "ok") << tmp.Show();
  Observed proc = RunInSession(client, id, mode, "host-proc",
                               "test -e /proc/" + std::to_string(::getpid()) + " ; echo rc=$?");
  EXPECT_TRUE(proc.Says("rc=1")) << "host processes are visible: " << proc.Show();
}

TEST_P(ProtectedLinkTest, DaemonSessionsNeverBindTheLinkTarget) {
  Daemon daemon;
  RpcClient client(daemon.socket());
  TempDir host_tmp;  // a directory in the host's /tmp with a file the session must not see
  const fs::path marker = host_tmp.path() / "host-marker";
  std::ofstream(marker) << "host\n";
  // Reachable by any uid: were the host's /tmp bound, the session would see the marker.
  fs::permissions(host_tmp.path(), fs::perms::owner_all | fs::perms::others_exec);
  ASSERT_FALSE(fs::exists(daemon.workspace() / ".git"));  // missing at the first session

  const std::string first = OpenSession(client, "workspace-write");
  ASSERT_FALSE(first.empty()) << daemon.Log();
  Observed link = RunInSession(client, first, "workspace-write", "link-.git",
                               "ln -s " + Link().target + " .git && echo linked");
  ASSERT_EQ(link.exit, 0) << link.Show();
  ASSERT_TRUE(fs::is_symlink(daemon.workspace() / ".git"));
  // Closed first: a mode change is fenced while a session of another mode lives.
  ASSERT_TRUE(client.Call("terminal_close", Json{{"sessionId", first}}).contains("result"));

  // Every later spawn works and is unaffected, in each mode.
  for (int round = 0; round < 2; ++round) {
    const std::string second = OpenSession(client, Mode());
    ASSERT_FALSE(second.empty()) << "a .git link made a later spawn fail: " << daemon.Log();
    CheckSecondSession(client, second, Mode(), marker);
    Json closed = client.Call("terminal_close", Json{{"sessionId", second}});
    EXPECT_TRUE(closed.contains("result")) << closed.dump();
  }
}

TEST_P(ProtectedLinkTest, WritableRootGitLinkUnderPtyboxRun) {
  TempDir workspace;
  TempDir host_tmp;
  const fs::path marker = host_tmp.path() / "host-marker";
  std::ofstream(marker) << "host\n";
  fs::create_directories(workspace.path() / "sub");
  std::ofstream(workspace.path() / ".ptybox.yaml") << "version: 1\nwritable: [sub]\n";
  // A root daemon's sessions run as an unprivileged id that owns nothing but what is idmapped.
  fs::permissions(host_tmp.path(), fs::perms::owner_all | fs::perms::others_exec);

  const std::vector<std::string> run = {PtyboxBinary().string(), "run", "--workspace",
                                        workspace.path().string(), "--mode"};
  // Session 1 (workspace-write) plants links for the workspace's and the writable root's .git.
  RunResult plant =
      RunProcess({run[0], run[1], run[2], run[3], run[4], "workspace-write", "--", "/bin/sh", "-c",
                  "ln -s " + Link().target + " .git && ln -s " + Link().target + " sub/.git"});
  ASSERT_EQ(plant.exit_code, 0) << plant.Describe();
  ASSERT_TRUE(fs::is_symlink(workspace.path() / "sub" / ".git"));

  RunResult second =
      RunProcess({run[0], run[1], run[2], run[3], run[4], Mode(), "--", "/bin/sh", "-c",
                  "ls " + Quote(marker).substr(0) +
                      " >/dev/null 2>&1 && echo host-tmp-visible; "
                      "echo ok > /tmp/own && cat /tmp/own; test -e /proc/" +
                      std::to_string(::getpid()) + " && echo host-proc-visible; echo done"});
  std::cout << "  observed [" << Mode() << "] ptybox run after .git -> " << Link().target << ": "
            << second.Describe() << "\n";
  EXPECT_EQ(second.exit_code, 0) << second.Describe();
  EXPECT_EQ(second.out, "ok\ndone\n") << second.Describe();
}

INSTANTIATE_TEST_SUITE_P(Links, ProtectedLinkTest,
                         ::testing::Combine(::testing::Values(LinkCase{"tmp", "/tmp"},
                                                              LinkCase{"proc", "/proc"},
                                                              LinkCase{"root", "/"}),
                                            ::testing::Values("read-only", "workspace-write")),
                         [](const auto& param_info) {
                           std::string mode = std::get<1>(param_info.param);
                           mode.erase(std::remove(mode.begin(), mode.end(), '-'), mode.end());
                           return std::get<0>(param_info.param).name + "_" + mode;
                         });

}  // namespace
}  // namespace ptybox::testing
