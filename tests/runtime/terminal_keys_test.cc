// terminal_resize and terminal_send `keys` through the real binary, in every mode: in the
// confined modes the PTY master was handed back by ptybox-init from inside the sandbox, and
// resizing it still reaches the shell (stty size), a program trapping SIGWINCH, and the screen
// model (view "screen"); named keys reach programs as a terminal would send them (C-c
// interrupts, Escape :q! Enter leaves vim, Up is ESC O A under application cursor mode).
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "tests/support/daemon_fixture.h"
#include "tests/support/error_kind.h"

namespace ptybox::testing {
namespace {

class TerminalKeysTest : public ::testing::TestWithParam<std::string> {
 protected:
  std::string Open(Json extra = Json::object()) { return OpenSession(client_, GetParam(), extra); }

  Json Keys(const std::string& id, const Json& keys, Json extra = Json::object()) {
    extra["sessionId"] = id;
    extra["keys"] = keys;
    Json r = client_.Call("terminal_send", extra);
    EXPECT_TRUE(r.contains("result")) << r.dump();
    return r.value("result", Json::object());
  }

  void WriteFile(const std::string& name, const std::string& text) {
    std::ofstream(daemon_.workspace() / name) << text;
  }

  Daemon daemon_;
  RpcClient client_{daemon_.socket()};
};

TEST_P(TerminalKeysTest, ResizeReachesTheKernelTheProgramAndTheScreen) {
  const std::string id = Open(Json{{"cols", 80}, {"rows", 24}});
  EXPECT_EQ(Send(client_, id, "stty size\n")["viewport"], "24 80");

  Json resized =
      client_.Call("terminal_resize", Json{{"sessionId", id}, {"cols", 132}, {"rows", 43}});
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
  Json unknown =
      client_.Call("terminal_resize", Json{{"sessionId", "pty-nope"}, {"cols", 80}, {"rows", 24}});
  EXPECT_ERROR_KIND(unknown, ErrorKind::kNotFound);
  client_.Call("terminal_close", Json{{"sessionId", id}});
  Json closed =
      client_.Call("terminal_resize", Json{{"sessionId", id}, {"cols", 80}, {"rows", 24}});
  EXPECT_ERROR_KIND(closed, ErrorKind::kNotFound);
}

// A program's output and an owner's resize once crashed the daemon (every owner's sessions with
// it): the screen model's libvterm restored a cursor saved before the shrink on row -1 and
// erased there (tests/fuzz/regressions/decoder/libvterm-saved-cursor-off-screen).
TEST_P(TerminalKeysTest, ACursorRestoredAfterAShrinkLeavesTheDaemonRunning) {
  const std::string id = Open(Json{{"cols", 80}, {"rows", 24}});
  Json waiting = Send(client_, id,
                      "clear; printf '\\n\\n\\n.\\033[H'; read -r x; "
                      "printf '\\0338\\033[X\\0337\\033[8X'; echo \"survived $x\"\n");
  ASSERT_EQ(waiting["waitReason"], "stdin_read") << waiting.dump();
  ASSERT_TRUE(client_.Call("terminal_resize", Json{{"sessionId", id}, {"cols", 5}, {"rows", 2}})
                  .contains("result"));
  Json done = Send(client_, id, "y\n");
  EXPECT_EQ(done["exitCode"], 0) << done.dump();
  Json screen = client_.Call("terminal_read", Json{{"sessionId", id}, {"view", "screen"}});
  ASSERT_TRUE(screen.contains("result")) << screen.dump();
  const std::string lines =
      client_.Call("terminal_read", Json{{"sessionId", id}})["result"]["text"];
  EXPECT_NE(lines.find("survived y"), std::string::npos) << lines;
  EXPECT_EQ(client_.Call("terminal_list", Json::object())["result"]["sessions"].size(), 1u);
}

TEST_P(TerminalKeysTest, ControlCInterruptsAForegroundSleep) {
  const std::string id = Open();
  Json sleeping = Send(client_, id, "sleep 100\n", Json{{"timeoutMs", 300}});
  ASSERT_EQ(sleeping["waitReason"], "timeout") << sleeping.dump();
  Json interrupted = Keys(id, Json::array({"C-c"}));
  EXPECT_EQ(interrupted["waitReason"], "stdin_read") << interrupted.dump();
  EXPECT_EQ(interrupted["exitCode"], 130) << interrupted.dump();
  // Keys and literal text, Enter ending the line as "\n" would.
  Json echoed = Keys(id, Json::array({"echo keys-$((6*7))", "Enter"}));
  EXPECT_EQ(echoed["viewport"], "keys-42") << echoed.dump();
  EXPECT_EQ(echoed["exitCode"], 0);
}

TEST_P(TerminalKeysTest, EscapeQuitLeavesVim) {
  const std::string id = Open();
  Json vim = Send(client_, id, "vim.tiny -u NONE -i NONE -N -n notes.txt\n");
  ASSERT_EQ(vim["waitReason"], "stdin_read") << vim.dump();
  // Type some text in insert mode, then leave without saving.
  Keys(id, Json::array({"i", "unsaved text"}));
  Json left = Keys(id, Json::array({"Escape", ":q!", "Enter"}));
  EXPECT_EQ(left["waitReason"], "stdin_read") << left.dump();
  EXPECT_EQ(left["exitCode"], 0) << "back at the shell's prompt: " << left.dump();
  EXPECT_FALSE(std::filesystem::exists(daemon_.workspace() / "notes.txt"));
}

TEST_P(TerminalKeysTest, UpIsEncodedForApplicationCursorMode) {
  const std::string id = Open();
  // Reads one key's bytes raw and prints them in hex, after turning application cursor keys on
  // or off.
  WriteFile("rawkey.py",
            "import os, sys, termios, tty\n"
            "mode = sys.argv[1]\n"
            "sys.stdout.write('\\x1b[?1h' if mode == 'app' else '\\x1b[?1l')\n"
            "sys.stdout.write('reading\\n'); sys.stdout.flush()\n"
            "old = termios.tcgetattr(0)\n"
            "tty.setraw(0)\n"
            "try:\n"
            "    data = os.read(0, 16)\n"
            "finally:\n"
            "    termios.tcsetattr(0, termios.TCSADRAIN, old)\n"
            "sys.stdout.write('\\x1b[?1l')\n"
            "print('got', data.hex())\n");
  for (const auto& [mode, expected] : {std::pair{"app", "got 1b4f41"}, {"normal", "got 1b5b41"}}) {
    Json reading = Send(client_, id, std::string("/usr/bin/python3 rawkey.py ") + mode + "\n");
    ASSERT_EQ(reading["waitReason"], "stdin_read") << reading.dump();
    ASSERT_EQ(reading["viewport"], "reading") << reading.dump();
    Json got = Keys(id, Json::array({"Up"}));
    EXPECT_EQ(got["viewport"], expected) << mode << ": " << got.dump();
    EXPECT_EQ(got["exitCode"], 0) << got.dump();
  }
}

TEST_P(TerminalKeysTest, ExactlyOneOfInputAndKeysAndUnknownKeyNamesAreRefused) {
  const std::string id = Open();
  Json both = client_.Call("terminal_send",
                           Json{{"sessionId", id}, {"input", "ls\n"}, {"keys", {"Enter"}}});
  EXPECT_EQ(both["error"]["code"], -32602) << both.dump();
  EXPECT_NE(
      both["error"]["message"].get<std::string>().find("exactly one of \"input\" or \"keys\""),
      std::string::npos)
      << both.dump();
  Json neither = client_.Call("terminal_send", Json{{"sessionId", id}});
  EXPECT_EQ(neither["error"]["code"], -32602) << neither.dump();
  Json unknown =
      client_.Call("terminal_send", Json{{"sessionId", id}, {"keys", {"Escape", "C-Foo"}}});
  EXPECT_EQ(unknown["error"]["code"], -32602) << unknown.dump();
  const std::string message = unknown["error"]["message"];
  EXPECT_NE(message.find("keys[1]: unknown key \"C-Foo\""), std::string::npos) << message;
  EXPECT_NE(message.find("PageUp"), std::string::npos) << "lists the valid names: " << message;
  // Nothing was written: the session is idle and works.
  EXPECT_EQ(Send(client_, id, "echo still\n")["viewport"], "still");
}

INSTANTIATE_TEST_SUITE_P(Modes, TerminalKeysTest,
                         ::testing::Values("read-only", "workspace-write", "danger-full-access"),
                         ModeTestName);

}  // namespace
}  // namespace ptybox::testing
