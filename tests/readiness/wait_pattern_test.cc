// Contract v1.2 through the real binary over its real socket, in both confined modes: what is
// still running (foreground), waiting without typing (terminal_wait) and waiting for a line
// (pattern). Asserts reasons, order and content; never timings.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>

#include "tests/support/daemon_fixture.h"
#include "tests/support/error_kind.h"

namespace ptybox::testing {
namespace {

class WaitPatternTest : public SharedDaemonModeTest {
 protected:
  Json Wait(const std::string& id, Json extra = Json::object()) {
    extra["sessionId"] = id;
    Json reply = client_.Call("terminal_wait", extra, std::chrono::seconds(120));
    if (reply.contains("result")) return reply["result"];
    return reply;
  }
};

TEST_P(WaitPatternTest, AtThePromptNothingIsInTheForeground) {
  std::string id = Open();
  Json r = Send(client_, id, "echo hi\n");
  EXPECT_EQ(r["waitReason"], "stdin_read") << r.dump();
  ASSERT_TRUE(r.contains("foreground")) << r.dump();
  EXPECT_TRUE(r["foreground"].is_null()) << r.dump();
  EXPECT_FALSE(r.contains("match")) << "match only when a pattern settled it";
}

TEST_P(WaitPatternTest, SleepInferredIdleNamesItThenAWaitSettlesAtThePromptWithItsExitCode) {
  std::string id = Open();
  Json r = Send(client_, id, "sleep 4\n", Json{{"silenceMs", 500}});
  EXPECT_EQ(r["waitReason"], "inferred_idle") << r.dump();
  ASSERT_TRUE(r["foreground"].is_object()) << r.dump();
  EXPECT_TRUE(r["foreground"]["pgid"].is_number_integer());
  EXPECT_EQ(r["foreground"]["command"], "sleep 4") << r.dump();
  Json waited = Wait(id, Json{{"silenceMs", 60000}, {"timeoutMs", 60000}});
  EXPECT_EQ(waited["waitReason"], "stdin_read") << waited.dump();
  EXPECT_EQ(waited["exitCode"], 0) << waited.dump();
  EXPECT_TRUE(waited["foreground"].is_null()) << waited.dump();
  EXPECT_EQ(waited["viewport"], "");
}

TEST_P(WaitPatternTest, AWaitReturnsTheOutputSinceThePreviousResultEvenIfItCameBefore) {
  std::string id = Open();
  Json r =
      Send(client_, id, "sleep 1; echo first; echo second; (exit 3)\n", Json{{"silenceMs", 300}});
  EXPECT_EQ(r["waitReason"], "inferred_idle") << r.dump();
  // Most often the command has finished and its prompt is back before the wait starts (the
  // wait then settles on that prompt); on a slow machine it finishes during the wait. Both
  // give the same answer.
  std::this_thread::sleep_for(std::chrono::seconds(2));
  Json waited = Wait(id, Json{{"silenceMs", 60000}, {"timeoutMs", 60000}});
  EXPECT_EQ(waited["waitReason"], "stdin_read") << waited.dump();
  EXPECT_EQ(waited["exitCode"], 3) << waited.dump();
  EXPECT_EQ(waited["viewport"], "first\nsecond") << waited.dump();
  // The next send starts afresh.
  r = Send(client_, id, "echo next\n");
  EXPECT_EQ(r["viewport"], "next") << r.dump();
  EXPECT_EQ(r["exitCode"], 0);
}

TEST_P(WaitPatternTest, AWaitIsBusyWhileASendIsActive) {
  std::string id = Open();
  const int send_id = client_.SendRequest(
      "terminal_send",
      Json{{"sessionId", id}, {"input", "sleep 2\n"}, {"silenceMs", 60000}, {"timeoutMs", 60000}});
  // Busy once the send holds the terminal (terminal_status says so).
  for (int i = 0; i < 600; ++i) {
    Json status = client_.Call("terminal_status", Json{{"sessionId", id}});
    if (status["result"]["busy"] == true) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  Json busy = client_.Call("terminal_wait", Json{{"sessionId", id}});
  ASSERT_TRUE(busy.contains("error")) << busy.dump();
  EXPECT_ERROR_KIND(busy, ErrorKind::kBusy);
  Json sent = client_.WaitResponse(send_id, std::chrono::seconds(120));
  EXPECT_EQ(sent["result"]["waitReason"], "stdin_read") << sent.dump();
}

TEST_P(WaitPatternTest, ACanceledWaitInterruptsTheCommandLikeACanceledSend) {
  std::string id = Open();
  Json r = Send(client_, id, "sleep 300\n", Json{{"silenceMs", 300}});
  EXPECT_EQ(r["waitReason"], "inferred_idle") << r.dump();
  const int wait_id = client_.SendRequest(
      "terminal_wait", Json{{"sessionId", id}, {"silenceMs", 600000}, {"timeoutMs", 600000}});
  for (int i = 0; i < 600; ++i) {
    Json status = client_.Call("terminal_status", Json{{"sessionId", id}});
    if (status["result"]["busy"] == true) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  Json canceled = client_.Call("terminal_cancel", Json{{"sessionId", id}});
  EXPECT_EQ(canceled["result"]["canceled"], true) << canceled.dump();
  Json waited = client_.WaitResponse(wait_id, std::chrono::seconds(120));
  EXPECT_EQ(waited["result"]["waitReason"], "stdin_read") << waited.dump();
  EXPECT_EQ(waited["result"]["exitCode"], 130) << waited.dump();
}

TEST_P(WaitPatternTest, ACancelRequestCancelsAWaitLikeASend) {
  std::string id = Open();
  Json r = Send(client_, id, "sleep 300\n", Json{{"silenceMs", 300}});
  EXPECT_EQ(r["waitReason"], "inferred_idle") << r.dump();
  const int wait_id = client_.SendRequest(
      "terminal_wait", Json{{"sessionId", id}, {"silenceMs", 600000}, {"timeoutMs", 600000}});
  for (int i = 0; i < 600; ++i) {
    Json status = client_.Call("terminal_status", Json{{"sessionId", id}});
    if (status["result"]["busy"] == true) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  client_.SendRaw(
      Json{{"jsonrpc", "2.0"}, {"method", "$/cancelRequest"}, {"params", {{"id", wait_id}}}}
          .dump() +
      "\n");
  Json waited = client_.WaitResponse(wait_id, std::chrono::seconds(120));
  EXPECT_EQ(waited["result"]["waitReason"], "stdin_read") << waited.dump();
  EXPECT_EQ(waited["result"]["exitCode"], 130) << waited.dump();
}

TEST_P(WaitPatternTest, APatternSettlesAtTheMatchingLineWithTheMatch) {
  std::string id = Open();
  Json r =
      Send(client_, id, "sh -c 'sleep 1; echo \"Listening on 8000\"; sleep 60'\n",
           Json{{"pattern", R"(Listening on \d+)"}, {"silenceMs", 60000}, {"timeoutMs", 60000}});
  EXPECT_EQ(r["waitReason"], "pattern") << r.dump();
  EXPECT_EQ(r["match"], (Json{{"text", "Listening on 8000"}, {"line", "Listening on 8000"}}))
      << r.dump();
  EXPECT_EQ(r["viewport"], "Listening on 8000") << r.dump();
  EXPECT_TRUE(r["exitCode"].is_null());
  ASSERT_TRUE(r["foreground"].is_object()) << r.dump();
  EXPECT_EQ(r["foreground"]["command"].get<std::string>().rfind("sh -c", 0), 0u) << r.dump();
  // A wait with a pattern too; the server is stopped, and the wait settles at the prompt.
  // SIGKILL: a SIGINT that reaches sh between its echo and its fork of the last sleep is not
  // always fatal to it.
  Json signalled = client_.Call("terminal_signal", Json{{"sessionId", id}, {"signal", "SIGKILL"}});
  EXPECT_EQ(signalled["result"]["delivered"], true) << signalled.dump();
  Json waited =
      Wait(id, Json{{"pattern", "never printed"}, {"silenceMs", 60000}, {"timeoutMs", 60000}});
  EXPECT_EQ(waited["waitReason"], "stdin_read") << waited.dump();
  EXPECT_EQ(waited["exitCode"], 137) << waited.dump();
}

// A hostile line against a hostile pattern: a megabyte without a newline, printed in many
// chunks, against a pattern that backtracks exponentially in std::regex. RE2 matches each line
// on its first 64 KiB in linear time, so the send settles at the prompt and another session of
// the same daemon is answered meanwhile.
TEST_P(WaitPatternTest, AMegabyteLineAgainstACatastrophicPatternStallsNothing) {
  std::string id = Open();
  std::string other = Open();
  const int send_id = client_.SendRequest(
      "terminal_send", Json{{"sessionId", id},
                            {"input", "head -c 1048576 /dev/zero | tr '\\0' a; echo; echo end\n"},
                            {"pattern", "(a*)*b$"},
                            {"silenceMs", 60000},
                            {"timeoutMs", 120000}});
  Json r = Send(client_, other, "echo answered\n");
  EXPECT_EQ(r["viewport"], "answered") << r.dump();
  Json sent = client_.WaitResponse(send_id, std::chrono::seconds(180));
  ASSERT_TRUE(sent.contains("result")) << sent.dump().substr(0, 400);
  EXPECT_EQ(sent["result"]["waitReason"], "stdin_read");
  EXPECT_EQ(sent["result"]["exitCode"], 0);
  EXPECT_FALSE(sent["result"].contains("match"));
}

// A pattern whose DFA overflows falls back to RE2's NFA, linear but slow (~85 ms per 8 KiB
// line here): lines of random a/b against `[ab]*a[ab]{999}c`. The call's matching stops at its
// budget (said in the daemon's log), so another session is answered while that send is still
// active, and the send settles by the other rules (here: canceled).
TEST_P(WaitPatternTest, AnExpensivePatternStopsAtItsBudgetAndOtherSessionsAreAnswered) {
  auto BudgetLines = [] {
    const std::string log = daemon_->Log();
    size_t n = 0;
    for (size_t at = log.find("matching budget"); at != std::string::npos;
         at = log.find("matching budget", at + 1)) {
      ++n;
    }
    return n;
  };
  const size_t budget_lines_before = BudgetLines();
  std::string id = Open();
  std::string other = Open();
  const int send_id = client_.SendRequest(
      "terminal_send",
      Json{{"sessionId", id},
           {"input",
            "python3 -c \"import random,time\nfor i in range(60): "
            "print(''.join(random.choices('ab', k=65536)), flush=True)\ntime.sleep(100)\"\n"},
           {"pattern", "[ab]*a[ab]{999}c"},
           {"silenceMs", 60000},
           {"timeoutMs", 120000}});
  // The suite's daemon is shared: wait for one more budget line than before. A hang guard,
  // never a timing assertion.
  const auto guard = std::chrono::steady_clock::now() + std::chrono::seconds(90);
  while (BudgetLines() <= budget_lines_before && std::chrono::steady_clock::now() < guard) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_GT(BudgetLines(), budget_lines_before) << daemon_->Log();
  Json r = Send(client_, other, "echo answered\n");
  EXPECT_EQ(r["viewport"], "answered") << r.dump();
  Json canceled = client_.Call("terminal_cancel", Json{{"sessionId", id}});
  EXPECT_EQ(canceled["result"]["canceled"], true) << canceled.dump();
  Json sent = client_.WaitResponse(send_id, std::chrono::seconds(180));
  ASSERT_TRUE(sent.contains("result")) << sent.dump().substr(0, 400);
  EXPECT_FALSE(sent["result"].contains("match")) << sent.dump().substr(0, 400);
}

TEST_P(WaitPatternTest, ExactReadinessThatComesFirstWinsOverThePattern) {
  std::string id = Open();
  Json r = Send(client_, id, "echo before; false\n", Json{{"pattern", "never printed"}});
  EXPECT_EQ(r["waitReason"], "stdin_read") << r.dump();
  EXPECT_EQ(r["exitCode"], 1);
  EXPECT_FALSE(r.contains("match"));
}

TEST_P(WaitPatternTest, APatternThatDoesNotCompileOrIsTooLongIsInvalidParams) {
  std::string id = Open();
  for (const std::string& pattern : {std::string("(unclosed"), std::string(1025, 'a')}) {
    for (const char* method : {"terminal_send", "terminal_wait"}) {
      Json params{{"sessionId", id}, {"pattern", pattern}};
      if (std::string(method) == "terminal_send") params["input"] = "echo no\n";
      Json reply = client_.Call(method, params);
      ASSERT_TRUE(reply.contains("error")) << reply.dump();
      EXPECT_EQ(reply["error"]["code"], -32602) << reply.dump();
      EXPECT_NE(reply["error"]["message"].get<std::string>().find("pattern"), std::string::npos)
          << reply.dump();
    }
  }
  // Nothing was typed: the session still answers the next send at once.
  Json r = Send(client_, id, "echo still-here\n");
  EXPECT_EQ(r["viewport"], "still-here") << r.dump();
}

INSTANTIATE_TEST_SUITE_P(Modes, WaitPatternTest, ::testing::Values("read-only", "workspace-write"),
                         ModeTestName);

}  // namespace
}  // namespace ptybox::testing
