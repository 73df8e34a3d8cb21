// terminal_resize through the real binary, in every mode: in the confined modes the PTY master
// was handed back by ptybox-init from inside the sandbox, and resizing it still reaches the
// shell (stty size), a program trapping SIGWINCH, and the screen model (view "screen").
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "tests/support/daemon_fixture.h"

namespace ptybox::testing {
namespace {

class TerminalKeysTest : public ::testing::TestWithParam<std::string> {
 protected:
  std::string Open(Json extra = Json::object()) { return OpenSession(client_, GetParam(), extra); }

  void WriteFile(const std::string& name, const std::string& text) {
    std::ofstream(daemon_.workspace() / name) << text;
  }

  Daemon daemon_;
  RpcClient client_{daemon_.socket()};
};

TEST_P(TerminalKeysTest, ResizeReachesTheKernelTheProgramAndTheScreen) {
  const std::string id = Open(Json{{"cols", 80}, {"rows", 24}});
  EXPECT_EQ(Send(client_, id, "stty size\n")["viewport"], "24 80");

  Json resized = client_.Call("terminal_resize", Json{{"sessionId", id}, {"cols", 132}, {"rows", 43}});
  ASSERT_TRUE(resized.contains("result")) << resized.dump();
  EXPECT_EQ(resized["result"], (Json{{"cols", 132}, {"rows", 43}}));
  EXPECT_EQ(Send(client_, id, "stty size\n")["viewport"], "43 132");

  // A program that traps SIGWINCH sees the resize and reads the new size. (A trapped signal
  // may end `read` early; the loop reads again.)
  WriteFile("winch.sh",
            "trap 'echo \"WINCH $(stty size)\"' WINCH\n"
            "echo ready\n"
            "until read -r line; do :; done\n"
            "echo \"done $line\"\n");
  Json waiting = Send(client_, id, "bash winch.sh\n");
  ASSERT_EQ(waiting["waitReason"], "stdin_read") << waiting.dump();
  EXPECT_EQ(waiting["viewport"], "ready");
  ASSERT_TRUE(client_.Call("terminal_resize", Json{{"sessionId", id}, {"cols", 100}, {"rows", 30}})
                  .contains("result"));
  Json done = Send(client_, id, "x\n");
  EXPECT_EQ(done["exitCode"], 0) << done.dump();
  Json lines = client_.Call("terminal_read", Json{{"sessionId", id}});
  const std::string scrollback = lines["result"]["text"];
  EXPECT_NE(scrollback.find("WINCH 30 100"), std::string::npos) << scrollback;
  EXPECT_NE(scrollback.find("done x"), std::string::npos) << scrollback;

  // The screen model has the new width: a line of 150 characters wraps after 100.
  EXPECT_EQ(Send(client_, id, "clear; printf '%0150d\\n' 0\n")["exitCode"], 0);
  Json screen = client_.Call("terminal_read", Json{{"sessionId", id}, {"view", "screen"}});
  ASSERT_TRUE(screen.contains("result")) << screen.dump();
  const std::string text = screen["result"]["text"];
  EXPECT_EQ(text.find(std::string(101, '0')), std::string::npos) << text;
  std::istringstream rows(text);
  std::string row;
  size_t count = 0;
  size_t widest = 0;
  while (std::getline(rows, row)) {
    ++count;
    widest = std::max(widest, row.size());
  }
  EXPECT_LE(count, 30u) << text;
  EXPECT_EQ(widest, 100u) << text;
}

TEST_P(TerminalKeysTest, ResizeBoundsAreTerminalOpensAndAClosedSessionIsClosed) {
  const std::string id = Open();
  for (const Json& bad : {Json{{"cols", 1}, {"rows", 24}}, Json{{"cols", 80}, {"rows", 501}},
                          Json{{"cols", 80}}, Json{{"cols", "80"}, {"rows", 24}}}) {
    Json params = bad;
    params["sessionId"] = id;
    Json refused = client_.Call("terminal_resize", params);
    EXPECT_EQ(refused["error"]["code"], -32602) << refused.dump();
    EXPECT_TRUE(refused["error"]["message"].get<std::string>().starts_with("terminal_resize: \""))
        << refused.dump();
  }
  Json unknown = client_.Call("terminal_resize", Json{{"sessionId", "pty-nope"}, {"cols", 80}, {"rows", 24}});
  EXPECT_EQ(unknown["error"]["data"]["kind"], "not_found") << unknown.dump();
  client_.Call("terminal_close", Json{{"sessionId", id}});
  Json closed = client_.Call("terminal_resize", Json{{"sessionId", id}, {"cols", 80}, {"rows", 24}});
  EXPECT_EQ(closed["error"]["data"]["kind"], "not_found") << closed.dump();
}

INSTANTIATE_TEST_SUITE_P(Modes, TerminalKeysTest,
                         ::testing::Values("read-only", "workspace-write", "danger-full-access"),
                         ModeTestName);

}  // namespace
}  // namespace ptybox::testing
