// Readiness through the real binary: real programs (python's REPL, cat, bash's read, a getpass
// prompt on /dev/tty, nested shells, cursor-report queries) on the real terminal, over the real
// socket, in each mode. Asserts wait reasons, order and content; prints the exact-readiness
// latencies (docs/readiness.md), never asserts them.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/daemon_fixture.h"
#include "tests/support/error_kind.h"

namespace ptybox::testing {
namespace {

using Clock = std::chrono::steady_clock;

bool Contains(const Json& text, const std::string& needle) {
  return text.is_string() && text.get<std::string>().find(needle) != std::string::npos;
}

// A unique environment token for this test's processes (PTYBOX_* names are reserved).
std::string MarkerValue(const std::string& tag) {
  static int counter = 0;
  return "readiness-" + tag + "-" + std::to_string(::getpid()) + "-" + std::to_string(++counter);
}

class ReadinessTest : public SharedDaemonModeTest {
 protected:
  // A program in the workspace (visible at the same path in every mode).
  static std::filesystem::path WriteProgram(const std::string& name, const std::string& text,
                                            bool executable = false) {
    std::filesystem::path path = daemon_->workspace() / name;
    std::ofstream(path) << text;
    if (executable) ::chmod(path.c_str(), 0755);
    return path;
  }
};

TEST_P(ReadinessTest, PythonReplWaitsOnStdin) {
  std::string id = Open();
  Json r = Send(client_, id, "python3 -q\n");
  EXPECT_EQ(r["waitReason"], "stdin_read") << r.dump();
  EXPECT_TRUE(r["exitCode"].is_null()) << "the REPL is not the shell's prompt: " << r.dump();
  r = Send(client_, id, "1+1\n");
  EXPECT_EQ(r["waitReason"], "stdin_read") << r.dump();
  // The result is on the line of the previous ">>> " prompt: only what follows it is output.
  EXPECT_EQ(r["viewport"], "2\n>>>") << r.dump();
  EXPECT_TRUE(r["exitCode"].is_null());
  r = Send(client_, id, "exit()\n");
  EXPECT_EQ(r["waitReason"], "stdin_read") << r.dump();
  EXPECT_EQ(r["exitCode"], 0);
}

TEST_P(ReadinessTest, CatWaitsOnStdinAndReturnsEachLine) {
  std::string id = Open();
  Json r = Send(client_, id, "cat\n");
  EXPECT_EQ(r["waitReason"], "stdin_read") << r.dump();
  EXPECT_TRUE(r["exitCode"].is_null());
  EXPECT_EQ(r["viewport"], "");
  r = Send(client_, id, "hello\n");
  EXPECT_EQ(r["waitReason"], "stdin_read") << r.dump();
  EXPECT_EQ(r["viewport"], "hello");
  r = Send(client_, id, "\x04");  // end of file: cat ends, the prompt comes back
  EXPECT_EQ(r["waitReason"], "stdin_read") << r.dump();
  EXPECT_EQ(r["exitCode"], 0);
}

TEST_P(ReadinessTest, ShellReadBuiltinWaitsOnStdin) {
  std::string id = Open();
  Json r = Send(client_, id, "read x\n");
  EXPECT_EQ(r["waitReason"], "stdin_read") << r.dump();
  EXPECT_TRUE(r["exitCode"].is_null()) << "the shell waits in `read`, not at its prompt";
  r = Send(client_, id, "value\n");
  EXPECT_EQ(r["waitReason"], "stdin_read") << r.dump();
  EXPECT_EQ(r["exitCode"], 0);
  r = Send(client_, id, "echo \"[$x]\"\n");
  EXPECT_EQ(r["viewport"], "[value]") << r.dump();
}

TEST_P(ReadinessTest, GetpassPromptOnDevTtyWaitsOnStdin) {
  std::string id = Open();
  // getpass reads /dev/tty, not its (redirected) standard input.
  Json r = Send(client_, id,
                "python3 -c 'import getpass; print(getpass.getpass(\"pw: \"))' < /dev/null\n");
  EXPECT_EQ(r["waitReason"], "stdin_read") << r.dump();
  EXPECT_TRUE(Contains(r["viewport"], "pw:")) << r.dump();
  EXPECT_TRUE(r["exitCode"].is_null());
  r = Send(client_, id, "secret\n");
  EXPECT_EQ(r["waitReason"], "stdin_read") << r.dump();
  EXPECT_TRUE(Contains(r["viewport"], "secret")) << r.dump();
  EXPECT_EQ(r["exitCode"], 0);
}

// --norc keeps the host's ~/.bashrc (pyenv, cargo...) out of the test.
TEST_P(ReadinessTest, NestedBashIsReadyByItsStdinWait) {
  std::string id = Open();
  Json r = Send(client_, id, "bash --norc -i\n");
  EXPECT_EQ(r["waitReason"], "stdin_read") << r.dump();
  EXPECT_TRUE(r["exitCode"].is_null()) << "the child's prompt is not ours: " << r.dump();
  r = Send(client_, id, "echo inner\n");
  EXPECT_EQ(r["waitReason"], "stdin_read") << r.dump();
  EXPECT_TRUE(Contains(r["viewport"], "inner")) << r.dump();
  EXPECT_TRUE(r["exitCode"].is_null());
  r = Send(client_, id, "exit 7\n");
  EXPECT_EQ(r["waitReason"], "stdin_read") << r.dump();
  EXPECT_EQ(r["exitCode"], 7) << "the outer prompt reports the child's status: " << r.dump();
  EXPECT_EQ(r["sessionStatus"]["kind"], "running");
}

TEST_P(ReadinessTest, InheritedMarkerOfANestedBashNeverSettlesAsOurPrompt) {
  std::string id = Open();
  // Re-exported, PS1 (which holds the marker) makes the child print our marker, in its own
  // group.
  Json r = Send(client_, id, "export PS1; bash --norc -i\n");
  EXPECT_EQ(r["waitReason"], "stdin_read") << r.dump();
  EXPECT_TRUE(r["exitCode"].is_null()) << "a marker of another group settled: " << r.dump();
  EXPECT_TRUE(r["cwd"].is_null());
  r = Send(client_, id, "echo inner; (exit 4)\n");
  EXPECT_EQ(r["waitReason"], "stdin_read") << r.dump();
  EXPECT_TRUE(Contains(r["viewport"], "inner")) << r.dump();
  EXPECT_TRUE(r["exitCode"].is_null()) << r.dump();
  r = Send(client_, id, "exit 5\n");
  EXPECT_EQ(r["waitReason"], "stdin_read") << r.dump();
  EXPECT_EQ(r["exitCode"], 5) << r.dump();
}

TEST_P(ReadinessTest, SleepUnderAShortSilenceBoundIsInferredIdle) {
  std::string id = Open();
  Json r = Send(client_, id, "sleep 2\n", Json{{"silenceMs", 200}});
  EXPECT_EQ(r["waitReason"], "inferred_idle") << r.dump();
  EXPECT_TRUE(r["exitCode"].is_null());
  EXPECT_EQ(r["sessionStatus"]["kind"], "running");
  // Typed ahead while sleep runs: the prompt printed when sleep ends comes before the shell
  // reads this line, so it must not settle this send.
  r = Send(client_, id, "echo typed-ahead\n");
  EXPECT_EQ(r["waitReason"], "stdin_read") << r.dump();
  EXPECT_EQ(r["viewport"], "typed-ahead") << r.dump();
  EXPECT_EQ(r["exitCode"], 0);
}

TEST_P(ReadinessTest, TextThatLooksLikeThePromptDoesNotSettleEarly) {
  std::string id = Open();
  Json r = Send(client_, id, "printf '$ '; sleep 1; echo done\n");
  EXPECT_EQ(r["waitReason"], "stdin_read") << r.dump();
  EXPECT_TRUE(Contains(r["viewport"], "done")) << r.dump();
  EXPECT_EQ(r["exitCode"], 0);
}

TEST_P(ReadinessTest, ForgedMarkerWithAWrongNonceDoesNotSettle) {
  std::string id = Open();
  Json r =
      Send(client_, id, "printf '\\033]6973;deadbeef;0;/\\007$ '; sleep 1; echo real; false\n");
  EXPECT_EQ(r["waitReason"], "stdin_read") << r.dump();
  EXPECT_TRUE(Contains(r["viewport"], "real")) << r.dump();
  EXPECT_EQ(r["exitCode"], 1) << "the forged marker's status was taken: " << r.dump();
  EXPECT_EQ(r["cwd"], daemon_->workspace().string()) << "the forged marker's cwd was taken";
}

TEST_P(ReadinessTest, MarkerSplitAcrossReadsIsStillOneMarker) {
  std::string id = Open();
  // The shell itself (its controlled PS1 holds the nonce) prints a marker with it in two writes a
  // moment apart (two reads of the terminal), then its PS1, then runs `sleep`: the tracker must see
  // one marker (so the "$ " is an intermediate prompt and leaves the viewport) and must not
  // settle on it (sleep, not the shell, is in the foreground).
  Json r = Send(client_, id,
                "n=$__ptybox_ps1; n=${n#*6973;}; n=${n%%;*}; printf '\\033]6973;%s' \"$n\"; "
                "sleep 0.3; printf ';0;/\\007$ '; sleep 1; echo after\n");
  EXPECT_EQ(r["waitReason"], "stdin_read") << r.dump();
  EXPECT_EQ(r["viewport"], "after") << "split marker not recognized, or settled on: " << r.dump();
  EXPECT_EQ(r["exitCode"], 0);
  EXPECT_EQ(r["cwd"], daemon_->workspace().string());
}

TEST_P(ReadinessTest, OutputLargerThanOneReadSettlesOnTheFinalPrompt) {
  std::string id = Open();
  // 300000 bytes: several 64 KiB reads of the terminal, and a truncated viewport.
  Json r = Send(client_, id,
                "yes 0123456789abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyz | "
                "head -c 300000; echo; echo the-end\n");
  EXPECT_EQ(r["waitReason"], "stdin_read") << r.dump().substr(0, 300);
  EXPECT_EQ(r["exitCode"], 0);
  ASSERT_TRUE(r["viewport"].is_string());
  const std::string viewport = r["viewport"];
  EXPECT_TRUE(viewport.ends_with("the-end")) << viewport.substr(viewport.size() - 200);
  EXPECT_EQ(r["truncated"], true);
  r = Send(client_, id, "echo next\n");
  EXPECT_EQ(r["viewport"], "next") << r.dump();
}

TEST_P(ReadinessTest, MultiLineInputIsOneSend) {
  std::string id = Open();
  Json r = Send(client_, id, "echo a\necho b\n");
  EXPECT_EQ(r["waitReason"], "stdin_read") << r.dump();
  EXPECT_EQ(r["viewport"], "a\nb") << r.dump();
  EXPECT_EQ(r["exitCode"], 0);
  r = Send(client_, id, "echo c; sleep 0.2\necho d\nfalse\n");
  EXPECT_EQ(r["viewport"], "c\nd") << r.dump();
  EXPECT_EQ(r["exitCode"], 1) << "settled before the last line ran: " << r.dump();
  r = Send(client_, id, "echo e\n");
  EXPECT_EQ(r["viewport"], "e") << "output of the previous send leaked: " << r.dump();
}

TEST_P(ReadinessTest, CursorPositionReportIsAnsweredAndNotShown) {
  WriteProgram("cpr.py", R"(import os, select, sys, termios, tty
fd = sys.stdin.fileno()
saved = termios.tcgetattr(fd)
tty.setraw(fd)
reply = b""
try:
    os.write(sys.stdout.fileno(), b"\x1b[6n")
    while not reply.endswith(b"R"):
        ready, _, _ = select.select([fd], [], [], 20)
        if not ready:
            break
        reply += os.read(fd, 64)
finally:
    termios.tcsetattr(fd, termios.TCSADRAIN, saved)
print("reply=" + reply.decode(errors="replace").replace("\x1b", "ESC"))
)");
  std::string id = Open();
  Json r = Send(client_, id, "printf ab; python3 cpr.py\n");
  EXPECT_EQ(r["waitReason"], "stdin_read") << r.dump();
  EXPECT_EQ(r["exitCode"], 0);
  ASSERT_TRUE(r["viewport"].is_string());
  // The cursor was after "ab" (column 3); the reply reached the program, not the output.
  const std::string viewport = r["viewport"];
  EXPECT_TRUE(std::regex_match(viewport, std::regex(R"(abreply=ESC\[[0-9]+;3R)"))) << viewport;
  Json page = client_.Call("terminal_read", Json{{"sessionId", id}});
  EXPECT_FALSE(Contains(page["result"]["text"], "\x1b")) << page.dump();
}

TEST_P(ReadinessTest, TypeaheadRightAfterSigintIsNotLost) {
  std::string id = Open();
  for (const char* foreground : {"cat\n", "sleep 30\n"}) {
    Json r = Send(client_, id, foreground, Json{{"silenceMs", 300}});
    ASSERT_TRUE(r.contains("waitReason")) << r.dump();
    Json signal = client_.Call("terminal_signal", Json{{"sessionId", id}, {"signal", "SIGINT"}});
    EXPECT_EQ(signal["result"]["delivered"], true) << signal.dump();
    r = Send(client_, id, "echo after\n");
    EXPECT_EQ(r["waitReason"], "stdin_read") << foreground << r.dump();
    EXPECT_EQ(r["viewport"], "after") << foreground << r.dump();
    EXPECT_EQ(r["exitCode"], 0) << foreground;
  }
}

// Startup.

TEST_P(ReadinessTest, ShellThatExitsAtOnceIsSpawnFailed) {
  std::filesystem::create_directories(daemon_->workspace() / "exit-bin");
  WriteProgram("exit-bin/bash", "#!/bin/sh\necho dying early\nexit 3\n", true);
  ASSERT_TRUE(client_.Call("policy_set_mode", Json{{"mode", GetParam()}}).contains("result"));
  Json env{{"PATH", (daemon_->workspace() / "exit-bin").string() + ":/usr/bin:/bin"}};
  Json r = client_.Call("terminal_open", Json{{"env", env}});
  EXPECT_EQ(r["error"]["code"], -32000) << r.dump();
  EXPECT_ERROR_KIND(r, ErrorKind::kSpawnFailed);
  EXPECT_TRUE(Contains(r["error"]["message"], "exit code 3")) << r.dump();
  EXPECT_TRUE(Contains(r["error"]["message"], "dying early")) << r.dump();
  EXPECT_EQ(client_.Call("terminal_list", Json::object())["result"]["sessions"].size(), 0u);
}

TEST_P(ReadinessTest, TinyStartupTimeoutIsStartupTimeoutAndLeavesNoProcess) {
  ASSERT_TRUE(client_.Call("policy_set_mode", Json{{"mode", GetParam()}}).contains("result"));
  const std::string name = "TESTMARK_" + std::to_string(::getpid());
  const std::string value = MarkerValue("tiny");
  Json r = client_.Call("terminal_open", Json{{"timeoutMs", 1}, {"env", {{name, value}}}});
  EXPECT_ERROR_KIND(r, ErrorKind::kStartupTimeout);
  EXPECT_TRUE(ProcessesWithEnv(name + "=" + value).empty()) << "answered before cleanup";
}

TEST_P(ReadinessTest, ShellThatNeverPromptsIsStartupTimeoutAndLeavesNoProcess) {
  std::filesystem::create_directories(daemon_->workspace() / "mute-bin");
  // Output but no prompt: the startup fallback needs silence, the deadline comes first.
  WriteProgram("mute-bin/bash", "#!/bin/sh\necho starting\nexec sleep 300\n", true);
  ASSERT_TRUE(client_.Call("policy_set_mode", Json{{"mode", GetParam()}}).contains("result"));
  const std::string name = "TESTMARK_" + std::to_string(::getpid());
  const std::string value = MarkerValue("mute");
  Json env{{"PATH", (daemon_->workspace() / "mute-bin").string() + ":/usr/bin:/bin"},
           {name, value}};
  // The deadline (2 s) comes before the silence fallback (3 s after "starting").
  Json r = client_.Call("terminal_open", Json{{"timeoutMs", 2000}, {"env", env}});
  EXPECT_ERROR_KIND(r, ErrorKind::kStartupTimeout);
  EXPECT_TRUE(Contains(r["error"]["message"], "starting")) << r.dump();
  EXPECT_TRUE(ProcessesWithEnv(name + "=" + value).empty()) << "answered before cleanup";
}

// Latency of exact readiness: request to response over the socket, which bounds the time from
// the write to the settlement from above. Printed, never asserted.
TEST_P(ReadinessTest, MeasuresExactReadinessLatency) {
  std::string id = Open();
  constexpr int kRounds = 15;
  auto timed = [&](const std::string& input) {
    const auto start = Clock::now();
    Json r = Send(client_, id, input);
    const double ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
    EXPECT_EQ(r["waitReason"], "stdin_read") << input << r.dump();
    return ms;
  };
  auto report = [&](const std::string& what, std::vector<double> samples) {
    std::sort(samples.begin(), samples.end());
    std::printf("[ latency ] %-18s %-20s median %6.2f ms  min %6.2f  max %6.2f  (n=%zu)\n",
                GetParam().c_str(), what.c_str(), samples[samples.size() / 2], samples.front(),
                samples.back(), samples.size());
  };
  std::vector<double> echo, cat, read, python;
  for (int i = 0; i < kRounds; ++i) echo.push_back(timed("echo hi\n"));
  for (int i = 0; i < kRounds; ++i) {
    cat.push_back(timed("cat\n"));
    timed("\x04");
  }
  for (int i = 0; i < kRounds; ++i) {
    read.push_back(timed("read x\n"));
    timed("v\n");
  }
  timed("python3 -q\n");
  for (int i = 0; i < kRounds; ++i) python.push_back(timed("1+1\n"));
  timed("exit()\n");
  report("echo hi (prompt)", echo);
  report("cat (stdin wait)", cat);
  report("read x (builtin)", read);
  report("python3 REPL 1+1", python);
}

INSTANTIATE_TEST_SUITE_P(Modes, ReadinessTest,
                         ::testing::Values("danger-full-access", "workspace-write"), ModeTestName);

}  // namespace
}  // namespace ptybox::testing
