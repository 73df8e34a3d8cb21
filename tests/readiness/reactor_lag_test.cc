// A deadline is judged on every byte that arrived, not only on what the daemon got round to
// reading. A daemon busy with many sessions (or descheduled on a loaded host) can reach a send's
// silence deadline in the same reactor turn as that send's output: with more ready terminals
// than one epoll_wait returns (Asio takes 128), the expired timers of that turn run before the
// reads of the terminals left for the next one. The test makes such a turn happen: it stops the
// daemon (SIGSTOP) while the command runs and resumes it once the output and the silence
// deadline are both due. Asserted: the reason and the output, never a duration.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <string>
#include <thread>

#include "tests/support/daemon_fixture.h"

namespace ptybox::testing {
namespace {

// Lets the writes happen (if one has not, the daemon writes after it resumes and that send
// simply runs late: the assertions hold either way), then keeps the daemon from running until
// the command's output and its silence deadline (2000 ms) are both due.
void StopDaemonAcrossTheDeadline(const Daemon& daemon) {
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  ASSERT_EQ(::kill(daemon.pid(), SIGSTOP), 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  ASSERT_EQ(::kill(daemon.pid(), SIGCONT), 0);
}

Json LateEcho(const std::string& id, int n) {
  return {{"sessionId", id},
          {"input", "sleep 0.3; echo lag-$((1000+" + std::to_string(n) + "))\n"},
          {"silenceMs", 2000}};
}

void ExpectSettledWithItsOutput(const Json& reply, int n) {
  ASSERT_TRUE(reply.contains("result")) << reply.dump();
  const Json& r = reply["result"];
  EXPECT_EQ(r["waitReason"], "stdin_read") << "session " << n << ": " << r.dump();
  EXPECT_EQ(r["exitCode"], 0) << r.dump();
  const std::string expected = "lag-" + std::to_string(1000 + n);
  EXPECT_TRUE(r["viewport"].is_string() &&
              r["viewport"].get<std::string>().find(expected) != std::string::npos)
      << "session " << n << ": " << r.dump();
}

class ReactorLagTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ReactorLagTest, OutputDueWithTheSilenceDeadlineIsReadBeforeTheDeadlineCounts) {
  Daemon daemon;
  RpcClient client(daemon.socket());
  const std::string id = OpenSession(client, GetParam());
  const int request = client.SendRequest("terminal_send", LateEcho(id, 0));
  StopDaemonAcrossTheDeadline(daemon);
  ExpectSettledWithItsOutput(client.WaitResponse(request), 0);
}

INSTANTIATE_TEST_SUITE_P(Modes, ReactorLagTest,
                         ::testing::Values("read-only", "workspace-write", "danger-full-access"),
                         ModeTestName);

}  // namespace
}  // namespace ptybox::testing
