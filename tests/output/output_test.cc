// What the model reads, through the real binary in both modes: escape sequences never reach a
// line view, progress bars collapse, floods are truncated honestly and stay bounded, and a
// full-screen program is driven through the screen view.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "tests/support/daemon_fixture.h"
#include "tests/support/files.h"

namespace ptybox::testing {
namespace {

bool HasControlBytes(const std::string& text) {
  for (unsigned char c : text) {
    if (c == 0x1b || (c < 0x20 && c != '\n' && c != '\t')) return true;
  }
  return false;
}

class OutputTest : public ::testing::TestWithParam<std::string> {
 protected:
  Daemon daemon_;
  RpcClient client_{daemon_.socket()};
  std::string Open() { return OpenSession(client_, GetParam(), Json{{"cols", 80}, {"rows", 24}}); }
};

TEST_P(OutputTest, ColouredLsLeavesNoEscapeByte) {
  std::string id = Open();
  Json r = Send(client_, id,
                "mkdir -p d && touch d/plain d/script.sh && chmod +x d/script.sh && "
                "ls --color=always d; printf '\\033[1;31mred\\033[0m \\033]0;title\\007done\\n'\n");
  EXPECT_EQ(r["waitReason"], "stdin_read") << r.dump();
  const std::string viewport = r["viewport"];
  EXPECT_NE(viewport.find("script.sh"), std::string::npos) << viewport;
  EXPECT_NE(viewport.find("red done"), std::string::npos) << viewport;
  EXPECT_FALSE(HasControlBytes(viewport)) << viewport;
  Json page = client_.Call("terminal_read", Json{{"sessionId", id}});
  EXPECT_FALSE(HasControlBytes(page["result"]["text"])) << page.dump();
}

TEST_P(OutputTest, CarriageReturnProgressBarCollapsesToItsFinalState) {
  std::string id = Open();
  Json r = Send(client_, id,
                "for p in 10 40 70 100; do printf '\\rdownloading %3d%%' $p; sleep 0.05; done; "
                "printf '\\r\\033[Kdone\\r\\n'\n");
  EXPECT_EQ(r["viewport"], "done") << r.dump();
  r = Send(client_, id, "printf 'step 1/3\\rstep 2/3\\rstep 3/3\\n'\n");
  EXPECT_EQ(r["viewport"], "step 3/3") << r.dump();
}

TEST_P(OutputTest, FloodIsTruncatedWithItsHeadAndTailAndPagesStayBounded) {
  std::string id = Open();
  Json r = Send(client_, id, "yes | head -n 1000000; echo end-of-flood\n");
  EXPECT_EQ(r["waitReason"], "stdin_read") << r.dump().substr(0, 300);
  EXPECT_EQ(r["exitCode"], 0);
  EXPECT_TRUE(r["truncated"].get<bool>());
  const std::string viewport = r["viewport"];
  // Bounded by maxResultBytes (256 KiB) plus the line that says what was dropped.
  EXPECT_LE(viewport.size(), 256u * 1024 + 200);
  EXPECT_EQ(viewport.substr(0, 4), "y\ny\n");
  EXPECT_NE(viewport.find("dropped"), std::string::npos);
  EXPECT_EQ(viewport.substr(viewport.size() - 14), "y\nend-of-flood");
  // The scrollback kept its last 10,000 lines: a read from the start says output was dropped.
  Json page = client_.Call("terminal_read", Json{{"sessionId", id}, {"cursor", 0}});
  ASSERT_TRUE(page.contains("result")) << page.dump().substr(0, 300);
  EXPECT_TRUE(page["result"]["truncated"].get<bool>());
  EXPECT_GT(page["result"]["cursor"].get<uint64_t>(), 0u);
  EXPECT_LE(page["result"]["text"].get<std::string>().size(), 256u * 1024);
  // The session is still quick to use.
  r = Send(client_, id, "echo after\n");
  EXPECT_EQ(r["viewport"], "after");
}

TEST_P(OutputTest, ViIsDrivenThroughTheScreenView) {
  std::string id = Open();
  // vi waits for keys on the alternate screen: the viewport is the rendered screen.
  Json r = Send(client_, id, "vi -i NONE notes.txt\n");
  EXPECT_EQ(r["waitReason"], "stdin_read") << r.dump();
  std::string screen = r["viewport"];
  EXPECT_NE(screen.find("notes.txt"), std::string::npos) << screen;
  EXPECT_NE(screen.find("~"), std::string::npos) << screen;
  EXPECT_FALSE(HasControlBytes(screen)) << screen;

  r = Send(client_, id, "ihello from the agent\x1b");
  EXPECT_EQ(r["waitReason"], "stdin_read") << r.dump();
  EXPECT_NE(r["viewport"].get<std::string>().find("hello from the agent"), std::string::npos)
      << r.dump();
  Json view = client_.Call("terminal_read", Json{{"sessionId", id}, {"view", "screen"}});
  ASSERT_TRUE(view.contains("result")) << view.dump();
  const std::string shown = view["result"]["text"];
  EXPECT_EQ(shown.substr(0, 20), "hello from the agent") << shown;
  // 24 rows at most: trailing blank rows are dropped, vi's "~" rows are not blank.
  EXPECT_LE(std::count(shown.begin(), shown.end(), '\n'), 23) << shown;
  EXPECT_GE(std::count(shown.begin(), shown.end(), '\n'), 20) << shown;
  EXPECT_NE(shown.back(), '\n') << shown;

  r = Send(client_, id, ":wq\n");
  EXPECT_EQ(r["waitReason"], "stdin_read") << r.dump();
  EXPECT_EQ(r["exitCode"], 0) << "back at the verified prompt";
  EXPECT_FALSE(HasControlBytes(r["viewport"])) << r.dump();
  EXPECT_EQ(ReadFile(daemon_.workspace() / "notes.txt"), "hello from the agent\n");
  // Line view again once the alternate screen is left.
  r = Send(client_, id, "echo back\n");
  EXPECT_EQ(r["viewport"], "back");
}

TEST_P(OutputTest, LessIsAPagerOnTheScreenAndQuitsCleanly) {
  std::string id = Open();
  Json r = Send(client_, id, "seq 1 200 | less\n");
  EXPECT_EQ(r["waitReason"], "stdin_read") << r.dump();
  EXPECT_NE(r["viewport"].get<std::string>().find("\n23\n"), std::string::npos) << r.dump();
  r = Send(client_, id, "q");
  EXPECT_EQ(r["waitReason"], "stdin_read") << r.dump();
  EXPECT_EQ(r["exitCode"], 0) << r.dump();
}

TEST_P(OutputTest, MalformedUtf8BecomesReplacementCharacters) {
  std::string id = Open();
  Json r = Send(client_, id, "printf 'ok \\xff\\xfe end\\n'\n");
  EXPECT_EQ(r["viewport"], "ok \xEF\xBF\xBD\xEF\xBF\xBD end") << r.dump();
}

INSTANTIATE_TEST_SUITE_P(Modes, OutputTest,
                         ::testing::Values("danger-full-access", "workspace-write"), ModeTestName);

}  // namespace
}  // namespace ptybox::testing
