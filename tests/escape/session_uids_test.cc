// Host-wide session uids: through real root daemons, two live confined sessions of two daemons
// never run as the same host uid (read from the host's /proc), even when their range holds only
// two ids; a range of one id refuses a second live session with a message naming `sessionIds`
// and leaves the first working. danger-full-access is the control: both sessions run as the
// daemon's uid (root: host 0), the very sharing the leases prevent for confined sessions. A
// non-root daemon ignores `sessionIds` (its sessions run as its own uid): both sessions open.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <iostream>
#include <set>

#include "tests/escape/escape_support.h"
#include "tests/sandbox/process_runner.h"
#include "tests/support/error_kind.h"
#include "tests/support/files.h"

namespace ptybox::testing {
namespace {

namespace fs = std::filesystem;
using sandbox::testing::RunProcess;
using sandbox::testing::RunResult;

class SessionUidsTest : public ::testing::TestWithParam<std::string> {
 protected:
  [[nodiscard]] const std::string& Mode() const { return GetParam(); }
  [[nodiscard]] bool Confined() const { return Mode() != "danger-full-access"; }

  // An operator policy with `count` ids of a range no other test process uses (below the
  // default range, above what useradd and /etc/subuid allocate).
  fs::path PolicyWithIds(uint32_t count) {
    first_ = 2147300000u + static_cast<uint32_t>(::getpid() % 20000) * 4;
    const fs::path file = config_.path() / "operator.yaml";
    WriteFile(file, "version: 1\nsessionIds: {first: " + std::to_string(first_) +
                        ", count: " + std::to_string(count) + "}\n");
    return file;
  }

  // The effective host uid of every process of the session marked `marker`.
  static std::set<std::string> HostUidsOf(const std::string& marker) {
    std::set<std::string> uids;
    for (pid_t pid : ProcessesWithEnv(marker)) {
      for (const std::string& line : ReadLines("/proc/" + std::to_string(pid) + "/status")) {
        if (line.rfind("Uid:", 0) != 0) continue;
        const std::vector<std::string> f = Words(line.substr(4));
        if (f.size() == 4) uids.insert(f[1]);
      }
    }
    return uids;
  }

  TempDir config_;
  uint32_t first_ = 0;
};

TEST_P(SessionUidsTest, TwoDaemonsNeverShareAHostUid) {
  const fs::path policy = PolicyWithIds(2);
  Daemon a(Daemon::Options{{"--policy", policy.string()}, {}});
  Daemon b(Daemon::Options{{"--policy", policy.string()}, {}});
  RpcClient client_a(a.socket());
  RpcClient client_b(b.socket());
  const std::string mark_a = "idsA" + std::to_string(::getpid()) + Mode();
  const std::string mark_b = "idsB" + std::to_string(::getpid()) + Mode();
  const std::string id_a = OpenSession(client_a, Mode(), Json{{"env", {{"IDS_MARK", mark_a}}}});
  ASSERT_FALSE(id_a.empty()) << a.Log();
  const std::string id_b = OpenSession(client_b, Mode(), Json{{"env", {{"IDS_MARK", mark_b}}}});
  ASSERT_FALSE(id_b.empty()) << b.Log();
  const std::set<std::string> uids_a = HostUidsOf(mark_a);
  const std::set<std::string> uids_b = HostUidsOf(mark_b);
  ASSERT_EQ(uids_a.size(), 1u) << "session A's processes, from the host";
  ASSERT_EQ(uids_b.size(), 1u) << "session B's processes, from the host";
  std::cout << "  observed [" << Mode() << "] host uid A " << *uids_a.begin() << ", B "
            << *uids_b.begin() << "\n";
  if (Confined() && ::geteuid() == 0) {
    EXPECT_NE(*uids_a.begin(), *uids_b.begin()) << "two daemons gave out the same session uid";
    for (const std::set<std::string>* uids : {&uids_a, &uids_b}) {
      const uint64_t uid = std::stoull(*uids->begin());
      EXPECT_GE(uid, first_);
      EXPECT_LT(uid, first_ + 2u);
    }
  } else {
    // The control (and any non-root daemon): both run as the daemon's own uid.
    EXPECT_EQ(*uids_a.begin(), std::to_string(::geteuid()));
    EXPECT_EQ(*uids_b.begin(), std::to_string(::geteuid()));
  }
}

TEST_P(SessionUidsTest, AnExhaustedRangeRefusesTheNextSessionAndSparesTheFirst) {
  const fs::path policy = PolicyWithIds(1);
  Daemon daemon(Daemon::Options{{"--policy", policy.string()}, {}});
  RpcClient client(daemon.socket());
  const std::string first = OpenSession(client, Mode());
  ASSERT_FALSE(first.empty()) << daemon.Log();
  Json second = client.Call("terminal_open", Json::object());
  if (Confined() && ::geteuid() == 0) {
    ASSERT_TRUE(second.contains("error")) << second.dump();
    const std::string message = second["error"]["message"].get<std::string>();
    EXPECT_ERROR_KIND(second, ErrorKind::kSandboxUnavailable);
    EXPECT_NE(message.find("sessionIds"), std::string::npos) << message;
    EXPECT_NE(message.find("held by a live session"), std::string::npos) << message;
  } else {
    // The control: no lease is taken outside a root daemon's confined sessions.
    ASSERT_TRUE(second.contains("result")) << second.dump();
  }
  Observed o = RunInSession(client, first, Mode(), "first-still-works", "echo alive-$((6*7))");
  EXPECT_EQ(o.exit, 0) << o.Show();
  EXPECT_TRUE(o.Says("alive-42")) << o.Show();
  // Closing the first session frees its id: a new session gets it.
  if (Confined() && ::geteuid() == 0) {
    Json closed = client.Call("terminal_close", Json{{"sessionId", first}});
    ASSERT_TRUE(closed.contains("result")) << closed.dump();
    Json third = client.Call("terminal_open", Json::object());
    EXPECT_TRUE(third.contains("result")) << third.dump();
  }
}

TEST_P(SessionUidsTest, ARootRunHonoursTheDaemonsLease) {
  // One id, held by a daemon's live session: a `ptybox run` of the same operator policy, another
  // process, must not take it; once the session is closed it runs.
  const fs::path policy = PolicyWithIds(1);
  Daemon daemon(Daemon::Options{{"--policy", policy.string()}, {}});
  RpcClient client(daemon.socket());
  const std::string session = OpenSession(client, Mode());
  ASSERT_FALSE(session.empty()) << daemon.Log();
  const std::vector<std::string> argv = {PtyboxBinary().string(),
                                         "run",
                                         "--policy",
                                         policy.string(),
                                         "--workspace",
                                         daemon.workspace().string(),
                                         "--mode",
                                         Mode(),
                                         "--",
                                         "/bin/sh",
                                         "-c",
                                         "echo ran"};
  RunResult held = RunProcess(argv);
  std::cout << "  observed [" << Mode() << "] run while the daemon holds the id: exit "
            << held.exit_code << ", " << (held.err.empty() ? "no message\n" : held.err);
  if (Confined() && ::geteuid() == 0) {
    EXPECT_EQ(held.exit_code, 125) << held.Describe();
    EXPECT_EQ(held.out, "") << "the command ran as the daemon session's uid";
    EXPECT_NE(held.err.find("sessionIds"), std::string::npos) << held.Describe();
    Json closed = client.Call("terminal_close", Json{{"sessionId", session}});
    ASSERT_TRUE(closed.contains("result")) << closed.dump();
    RunResult freed = RunProcess(argv);
    EXPECT_EQ(freed.exit_code, 0) << freed.Describe();
    EXPECT_EQ(freed.out, "ran\n") << freed.Describe();
  } else {
    // The control and an ordinary user's daemon: no lease, the command runs.
    EXPECT_EQ(held.exit_code, 0) << held.Describe();
    EXPECT_EQ(held.out, "ran\n") << held.Describe();
  }
}

INSTANTIATE_TEST_SUITE_P(Modes, SessionUidsTest,
                         ::testing::Values("read-only", "workspace-write", "danger-full-access"),
                         ModeTestName);

}  // namespace
}  // namespace ptybox::testing
