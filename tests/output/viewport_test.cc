// Viewports of cursor-addressed output through the real binary (docs/readiness.md §5): an
// editor that exits, a cancelled `watch`, `top` redrawing, multi-line progress with cursor-up
// leave what the terminal showed, never the concatenated fragments, in the viewport and in the
// scrollback; plain sends (the great majority) take the cheap line path, which the daemon's
// debug log shows; the screen view drops trailing blank rows; terminal_cancel after a timeout.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>

#include "tests/support/daemon_fixture.h"
#include "tests/support/files.h"

namespace ptybox::testing {
namespace {

constexpr std::string_view kRendered = "rendered through a scratch screen";

bool HasControlBytes(const std::string& text) {
  for (unsigned char c : text) {
    if (c == 0x1b || (c < 0x20 && c != '\n' && c != '\t')) return true;
  }
  return false;
}

size_t Count(const std::string& text, std::string_view needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

class ViewportTest : public ::testing::TestWithParam<std::string> {
 protected:
  Daemon daemon_{Daemon::Options{.extra_args = {}, .env = {"PTYBOX_LOG=debug"}}};
  RpcClient client_{daemon_.socket()};
  std::string Open() { return OpenSession(client_, GetParam(), Json{{"cols", 80}, {"rows", 24}}); }
  // The scrollback from `cursor` to its end.
  std::string Lines(const std::string& id, uint64_t cursor) {
    Json page = client_.Call("terminal_read",
                             Json{{"sessionId", id}, {"cursor", cursor}, {"maxBytes", 1 << 20}});
    EXPECT_TRUE(page.contains("result")) << page.dump();
    return page.value("result", Json::object()).value("text", std::string());
  }
  uint64_t End(const std::string& id) {
    Json page = client_.Call("terminal_read", Json{{"sessionId", id}, {"cursor", 1ULL << 60}});
    return page["result"]["nextCursor"].get<uint64_t>();
  }
  std::string Screen(const std::string& id) {
    Json view = client_.Call("terminal_read", Json{{"sessionId", id}, {"view", "screen"}});
    return view.value("result", Json::object()).value("text", std::string());
  }
};

TEST_P(ViewportTest, PlainSendsStayOnTheLinePath) {
  std::string id = Open();
  EXPECT_EQ(Send(client_, id, "echo hi\n")["viewport"], "hi");
  EXPECT_EQ(Send(client_, id, "printf 'abc\\rX\\n'\n")["viewport"], "Xbc");
  EXPECT_EQ(Send(client_, id, "printf 'a\\033[2Kb\\n'\n")["viewport"], " b");
  EXPECT_EQ(Send(client_, id,
                 "for p in 10 50 100; do printf '\\rprogress %3d%%' $p; sleep 0.02; done; "
                 "echo\n")["viewport"],
            "progress 100%");
  EXPECT_EQ(Send(client_, id,
                 "ls --color=always / >/dev/null; printf '\\033[1mbold\\033[0m\\n'\n")["viewport"],
            "bold");
  EXPECT_EQ(Count(daemon_.Log(), kRendered), 0u) << daemon_.Log();
  // The first cursor-addressed send is rendered (and says what it cost in the log).
  Json r = Send(client_, id, "printf 'x\\n\\033[1A\\033[2Ky\\n'\n");
  EXPECT_EQ(r["viewport"], "y") << r.dump();
  EXPECT_EQ(Count(daemon_.Log(), kRendered), 1u) << daemon_.Log();
  // And the next plain one is cheap again.
  EXPECT_EQ(Send(client_, id, "echo again\n")["viewport"], "again");
  EXPECT_EQ(Count(daemon_.Log(), kRendered), 1u) << daemon_.Log();
}

TEST_P(ViewportTest, CursorUpProgressShowsItsFinalLines) {
  std::string id = Open();
  const uint64_t before = End(id);
  Json r = Send(client_, id,
                "printf 'a 0%%\\nb 0%%\\n'; sleep 0.05; "
                "printf '\\033[2A\\ra 100%%\\n\\rb 100%%\\n'\n");
  EXPECT_EQ(r["viewport"], "a 100%\nb 100%") << r.dump();
  EXPECT_EQ(r["exitCode"], 0);
  const std::string lines = Lines(id, before);
  EXPECT_NE(lines.find("a 100%\nb 100%\n"), std::string::npos) << lines;
  EXPECT_EQ(lines.find("a 0%"), std::string::npos) << lines;
  EXPECT_EQ(lines.find("b 0%"), std::string::npos) << lines;
  EXPECT_EQ(Send(client_, id, "echo next\n")["viewport"], "next");
}

TEST_P(ViewportTest, VimWriteAndQuitLeavesNoFragments) {
  std::string id = Open();
  const uint64_t before = End(id);
  Json r = Send(client_, id, "vim.tiny -i NONE f.txt\n");
  EXPECT_EQ(r["waitReason"], "stdin_read") << r.dump();
  EXPECT_NE(r["viewport"].get<std::string>().find("f.txt"), std::string::npos) << r.dump();
  r = Send(client_, id, "ihello\x1b:wq\n");
  EXPECT_EQ(r["waitReason"], "stdin_read") << r.dump();
  EXPECT_EQ(r["exitCode"], 0) << r.dump();
  const std::string viewport = r["viewport"];
  // What was on the screen once vim left (its message, or nothing), never the concatenation.
  for (std::string_view junk : {"INSERT", ":wq", "All", "0,1", "1,5", "~"}) {
    EXPECT_EQ(viewport.find(junk), std::string::npos) << junk << " in " << viewport;
  }
  EXPECT_LE(Count(viewport, "\n"), 1u) << viewport;
  EXPECT_FALSE(HasControlBytes(viewport)) << viewport;
  EXPECT_EQ(ReadFile(daemon_.workspace() / "f.txt"), "hello\n");
  const std::string lines = Lines(id, before);
  for (std::string_view junk : {"INSERT", ":wq", "hello"}) {
    EXPECT_EQ(lines.find(junk), std::string::npos) << junk << " in " << lines;
  }
  EXPECT_EQ(Send(client_, id, "echo after\n")["viewport"], "after");
}

TEST_P(ViewportTest, CancelledWatchLeavesAtMostItsLastFrame) {
  std::string id = Open();
  Json started =
      client_.Call("terminal_send",
                   Json{{"sessionId", id}, {"input", "watch -n 0.5 date\n"}, {"background", true}});
  ASSERT_TRUE(started.contains("result")) << started.dump();
  // Wait (hang guard) until watch has drawn at least two frames.
  std::string screen;
  for (int i = 0; i < 200 && Count(screen, "Every 0.5s") == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    screen = Screen(id);
  }
  ASSERT_NE(Count(screen, "Every 0.5s"), 0u) << screen;
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));
  Json canceled = client_.Call("terminal_cancel", Json{{"sessionId", id}});
  EXPECT_EQ(canceled["result"]["canceled"], true) << canceled.dump();
  Json out;
  for (int i = 0; i < 500; ++i) {
    out = client_.Call("terminal_output", Json{{"sessionId", id}});
    if (out["result"].value("done", false)) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_TRUE(out["result"].value("done", false)) << out.dump();
  const Json result = out["result"]["result"];
  EXPECT_EQ(result["waitReason"], "stdin_read") << result.dump();
  const std::string viewport = result["viewport"];
  EXPECT_LE(Count(viewport, "Every 0.5s"), 1u) << viewport;
  EXPECT_FALSE(HasControlBytes(viewport)) << viewport;
  // No line holds two of watch's frames (the fragments the line path used to join).
  EXPECT_LE(Count(viewport, " 20"), 2u) << viewport;
  EXPECT_EQ(Send(client_, id, "echo after\n")["viewport"], "after");
}

TEST_P(ViewportTest, TopRedrawsDoNotStack) {
  std::string id = Open();
  const uint64_t before = End(id);
  // A 0.2 s period: below the 250 ms from which a full-screen program's timed wait counts as a
  // wait for a key on its first screen (docs/readiness.md, rule 3d), so the send ends at the
  // prompt after the second frame.
  Json r = Send(client_, id, "top -d 0.2 -n 2\n", Json{{"timeoutMs", 15000}});
  EXPECT_EQ(r["waitReason"], "stdin_read") << r.dump();
  EXPECT_EQ(r["exitCode"], 0) << r.dump();
  const std::string viewport = r["viewport"];
  EXPECT_LE(Count(viewport, "Tasks:"), 1u) << viewport;
  EXPECT_LE(Count(viewport, "top - "), 1u) << viewport;
  EXPECT_FALSE(HasControlBytes(viewport)) << viewport;
  const std::string lines = Lines(id, before);
  EXPECT_LE(Count(lines, "Tasks:"), 1u) << lines;
  // Trailing blank rows are not part of it.
  EXPECT_TRUE(viewport.empty() || viewport.back() != '\n') << viewport;
  EXPECT_EQ(Send(client_, id, "echo after\n")["viewport"], "after");
}

TEST_P(ViewportTest, ScreenViewDropsTrailingBlankRows) {
  std::string id = Open();
  Send(client_, id, "clear; echo first; echo second\n");
  const std::string screen = Screen(id);
  EXPECT_EQ(screen.substr(0, 13), "first\nsecond\n") << screen;
  EXPECT_LE(Count(screen, "\n"), 2u) << screen;
  EXPECT_TRUE(screen.empty() || screen.back() != '\n') << screen;
}

TEST_P(ViewportTest, CancelAfterATimeoutSaysSoAndSigintStopsTheCommand) {
  std::string id = Open();
  Json r = Send(client_, id, "sleep 30\n", Json{{"timeoutMs", 300}});
  EXPECT_EQ(r["waitReason"], "timeout") << r.dump();
  // The send has ended: nothing to cancel, and nothing is signalled (the contract).
  Json canceled = client_.Call("terminal_cancel", Json{{"sessionId", id}});
  EXPECT_EQ(canceled["result"]["canceled"], false) << canceled.dump();
  Json status = client_.Call("terminal_status", Json{{"sessionId", id}});
  EXPECT_EQ(status["result"]["busy"], false) << status.dump();
  // The recovery the docs name: SIGINT to the foreground group.
  Json signal = client_.Call("terminal_signal", Json{{"sessionId", id}, {"signal", "SIGINT"}});
  EXPECT_EQ(signal["result"]["delivered"], true) << signal.dump();
  r = Send(client_, id, "echo $?; echo back\n");
  EXPECT_EQ(r["viewport"], "130\nback") << r.dump();
}

// A chunk collected while a send still printed plain lines names its scrollback cursor; when
// that send later addresses the cursor across rows, its rendering replaces those lines at new
// offsets. A read from the old cursor says so (`truncated`) and starts after them, never handing
// the rendering's bytes out as what the cursor named.
TEST_P(ViewportTest, ACursorIntoLinesARenderingReplacedIsToldSo) {
  std::string id = Open();
  const std::filesystem::path gate = daemon_.workspace() / "gate";
  ASSERT_EQ(::mkfifo(gate.c_str(), 0666), 0);
  Json started =
      client_.Call("terminal_send", Json{{"sessionId", id},
                                         {"input",
                                          "printf 'plain 1\\nplain 2\\n'; read -r _ < gate; "
                                          "printf '\\033[2A\\rdrawn 1\\n\\rdrawn 2\\n'\n"},
                                         {"background", true}});
  ASSERT_TRUE(started.contains("result")) << started.dump();
  Json chunk;
  std::string collected;
  for (int i = 0; i < 500 && collected.find("plain 2\n") == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    chunk = client_.Call("terminal_output", Json{{"sessionId", id}});
    ASSERT_TRUE(chunk.contains("result")) << chunk.dump();
    collected += chunk["result"].value("output", std::string());
  }
  ASSERT_EQ(collected.rfind("plain 1\nplain 2\n", 0), 0u) << collected << chunk.dump();
  ASSERT_TRUE(chunk["result"].contains("outputCursor")) << chunk.dump();
  const uint64_t cursor = chunk["result"]["outputCursor"];
  const int writer = ::open(gate.c_str(), O_RDWR | O_CLOEXEC);  // never blocks
  ASSERT_GE(writer, 0);
  ASSERT_EQ(::write(writer, "go\n", 3), 3);
  Json out = Json{{"result", Json::object()}};
  for (int i = 0; i < 500 && !out["result"].value("done", false); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    out = client_.Call("terminal_output", Json{{"sessionId", id}});
    ASSERT_TRUE(out.contains("result")) << out.dump();
  }
  ::close(writer);
  ASSERT_TRUE(out["result"].value("done", false)) << out.dump();
  EXPECT_EQ(out["result"]["result"]["viewport"], "drawn 1\ndrawn 2") << out.dump();
  Json page = client_.Call("terminal_read",
                           Json{{"sessionId", id}, {"cursor", cursor}, {"maxBytes", 4096}});
  ASSERT_TRUE(page.contains("result")) << page.dump();
  EXPECT_EQ(page["result"]["truncated"], true) << page.dump();
  EXPECT_GT(page["result"]["cursor"].get<uint64_t>(), cursor) << page.dump();
  const std::string text = page["result"]["text"];
  EXPECT_NE(text.find("drawn 1\ndrawn 2\n"), std::string::npos) << page.dump();
  EXPECT_EQ(text.find("plain"), std::string::npos) << page.dump();
}

INSTANTIATE_TEST_SUITE_P(Modes, ViewportTest,
                         ::testing::Values("danger-full-access", "workspace-write"), ModeTestName);

}  // namespace
}  // namespace ptybox::testing
