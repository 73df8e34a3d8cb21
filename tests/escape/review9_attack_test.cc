// Ninth outside review (security round three, issue 30): the merged tree attacked as an outsider
// (docs/security.md's threat model; report in the review's brief). Each test fails while its
// hole is open, through the real daemon, as root and as an ordinary user (escape_test and
// escape_test_unprivileged):
//  - one owner's pipelined `terminal_resize` requests of its own 500x1000 session hold the
//    reactor: a 64 KiB read of requests is handled in one turn (LineConnection::ProcessInput
//    runs every line of the chunk), and each resize of a screen that size costs milliseconds
//    (SyncScreen, vterm_set_size, the Resize fix's writes, TIOCSWINSZ). Another owner's
//    `echo` waited 10-16 s here while the flood lasted (cheap requests, `terminal_status`, at
//    the same rate stall nothing: the cost per request is what the limit on connections does
//    not bound).
//  - a program in any confined session (the default 40x120 terminal) that writes fast in the
//    alternate screen (`printf '\033[?1049h'; yes`: any full-screen program with a flood of
//    output) freezes the daemon for every owner for as long as it writes: while the agent's send
//    is in flight, LocalTerminal::Deliver calls DrainOutput(), ReadAvailable(SIZE_MAX), which
//    reads until EAGAIN; decoding the alternate screen (every byte through libvterm) is slower
//    than the writer, so EAGAIN never comes. No other request, timeout, terminal_close or
//    SIGTERM is served until the writer is killed from the host. The same unbounded drain runs
//    in LocalTerminal::Hangup: the owner's terminal_close of such a session (the writer in the
//    background, no send in flight) freezes the daemon as well.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <string>
#include <thread>

#include "tests/support/daemon_fixture.h"

namespace ptybox::testing {
namespace {

class ResizeFloodTest : public ::testing::TestWithParam<std::string> {};

// The flood of one owner's resizes of its own 500x1000 session; `alternate`: every other one to
// 499 rows, so that each changes the size (a same-size resize is a no-op since the fix).
void ResizeFloodAgainstAnotherOwner(const std::string& mode, bool alternate) {
  Daemon daemon;
  RpcClient victim(daemon.socket());
  const std::string victim_session = OpenSession(victim, mode);
  ASSERT_FALSE(victim_session.empty());
  Json warm = Send(victim, victim_session, "echo warm\n");
  ASSERT_EQ(warm["waitReason"], "stdin_read") << warm.dump().substr(0, 300);

  RpcClient attacker(daemon.socket());
  const std::string session = OpenSession(attacker, mode, Json{{"cols", 1000}, {"rows", 500}});
  ASSERT_FALSE(session.empty());
  // Every request is this owner's own session's resize: nothing a limit refuses.
  std::string flood;
  // Same size: 3000 (each was 5-8 ms before the fix); alternating: 600, about 5 s of resizes.
  const int kResizes = alternate ? 600 : 3000;
  for (int i = 0; i < kResizes; ++i) {
    flood += Json{{"jsonrpc", "2.0"},
                  {"id", "r" + std::to_string(i)},
                  {"method", "terminal_resize"},
                  {"params",
                   {{"sessionId", session},
                    {"rows", alternate && i % 2 == 0 ? 499 : 500},
                    {"cols", 1000}}}}
                 .dump() +
             "\n";
  }
  std::thread sender([&attacker, &flood] { attacker.SendRaw(flood); });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));

  double worst = 0;
  for (int i = 0; i < 3; ++i) {
    const auto start = std::chrono::steady_clock::now();
    Json sent = Send(victim, victim_session, "echo other" + std::to_string(i) + "\n");
    const double took =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    worst = std::max(worst, took);
    EXPECT_EQ(sent["waitReason"], "stdin_read") << sent.dump().substr(0, 300);
    std::cerr << "another owner's echo during the resize flood took " << took << " s\n";
  }
  sender.join();
  // A shell's echo answers in milliseconds; the bound leaves room for a loaded 2-core machine.
  EXPECT_LT(worst, 3.0) << "another owner's send waited " << worst
                        << " s behind one owner's pipelined terminal_resize requests";
}

TEST_P(ResizeFloodTest, AnOwnersResizeFloodNeverStallsAnotherOwner) {
  ResizeFloodAgainstAnotherOwner(GetParam(), /*alternate=*/false);
}

// Each resize changes the size (about 8 ms of libvterm's work each at 500x1000): one turn of
// the reactor handles a connection's requests for 2 ms at most (past the first), so the other
// owner's send is served between them.
TEST_P(ResizeFloodTest, AnOwnersAlternatingResizeFloodNeverStallsAnotherOwner) {
  ResizeFloodAgainstAnotherOwner(GetParam(), /*alternate=*/true);
}

INSTANTIATE_TEST_SUITE_P(Modes, ResizeFloodTest, ::testing::Values("read-only", "workspace-write"),
                         ModeTestName);

// Another owner's session answering `echo warm`, and a flooding session of an attacker whose
// processes the host finds by an environment marker.
class OutputFloodTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    ASSERT_FALSE(victim_session_.empty());
    Json warm = Send(victim_, victim_session_, "echo warm\n");
    ASSERT_EQ(warm["waitReason"], "stdin_read") << warm.dump().substr(0, 300);
  }
  void TearDown() override {
    // Release the daemon from the host (nothing else can): kill the session's writers.
    for (pid_t pid : ProcessesWithEnv(marker_)) ::kill(pid, SIGKILL);
  }
  [[nodiscard]] std::string OpenFlooder() {
    return OpenSession(attacker_, GetParam(), Json{{"env", {{"R9_FLOOD", marker_}}}});
  }
  // The other owner's `echo other`: how long its answer took (at most the 20 s guard).
  double TimedEcho(Json& answer) {
    const auto start = std::chrono::steady_clock::now();
    const int id = victim_.SendRequest(
        "terminal_send", Json{{"sessionId", victim_session_}, {"input", "echo other\n"}});
    answer = victim_.WaitResponse(id, std::chrono::seconds(20));
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }

  Daemon daemon_;
  RpcClient victim_{daemon_.socket()};
  const std::string victim_session_ = OpenSession(victim_, GetParam());
  const std::string marker_ = "R9FLOOD" + std::to_string(::getpid()) + GetParam().substr(0, 4);
  RpcClient attacker_{daemon_.socket()};
};

TEST_P(OutputFloodTest, AFullScreenFloodInOneSessionNeverFreezesTheDaemon) {
  // The hostile session: default size.
  const std::string session = OpenFlooder();
  ASSERT_FALSE(session.empty());
  attacker_.SendRequest(
      "terminal_send",
      Json{{"sessionId", session}, {"input", "printf '\\033[?1049h'; yes\n"}, {"timeoutMs", 2000}});
  std::this_thread::sleep_for(std::chrono::seconds(1));

  Json answer;
  const double took = TimedEcho(answer);
  EXPECT_LT(took, 5.0) << "another owner's echo waited " << took
                       << " s while one session wrote in the alternate screen";
  EXPECT_TRUE(answer.contains("result")) << answer.dump().substr(0, 300);

  for (pid_t pid : ProcessesWithEnv(marker_)) ::kill(pid, SIGKILL);
  Json closed = attacker_.Call("terminal_close", Json{{"sessionId", session}});
  EXPECT_TRUE(closed.contains("result")) << closed.dump().substr(0, 300);
}

TEST_P(OutputFloodTest, ClosingAFloodingSessionNeverFreezesTheDaemon) {
  const std::string session = OpenFlooder();
  ASSERT_FALSE(session.empty());
  // The writer in the background: the send settles at once, nothing is in flight.
  Json started = Send(attacker_, session, "(sleep 1; printf '\\033[?1049h'; exec yes) &\n",
                      Json{{"timeoutMs", 500}});
  ASSERT_TRUE(started.contains("waitReason")) << started.dump().substr(0, 300);
  std::this_thread::sleep_for(std::chrono::seconds(3));
  attacker_.SendRequest("terminal_close", Json{{"sessionId", session}});
  std::this_thread::sleep_for(std::chrono::seconds(1));

  Json answer;
  const double took = TimedEcho(answer);
  EXPECT_LT(took, 5.0) << "another owner's echo waited " << took
                       << " s after one owner closed a session writing in the alternate screen";
  EXPECT_TRUE(answer.contains("result")) << answer.dump().substr(0, 300);
}

INSTANTIATE_TEST_SUITE_P(Modes, OutputFloodTest, ::testing::Values("read-only", "workspace-write"),
                         ModeTestName);

}  // namespace
}  // namespace ptybox::testing
