// Attack: a program asks the terminal a question (cursor position, device attributes, a mode)
// and exits, or is killed, before it reads the answer. The daemon's emulator used to write the
// answer anyway; the shell's line editor then read it as typed text, joined to the agent's
// next command (`24;1Recho ok`: command not found). Replies are now held until a reader of the
// asking group waits on the terminal and dropped when the shell's own line editor would read
// them (backend/reply_gate.h). Programs that do read their answer still get it. Through the
// real binary in every mode, as root and as an ordinary user's daemon (`_unprivileged`).
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "tests/support/daemon_fixture.h"

namespace ptybox::testing {
namespace {

// "row=N col=1" with N one or more digits: what the readers below print of a cursor report.
bool IsReportLine(std::string_view line) {
  if (!line.starts_with("row=") || !line.ends_with(" col=1")) return false;
  const std::string_view row = line.substr(4, line.size() - 4 - 6);
  return !row.empty() && row.find_first_not_of("0123456789") == std::string_view::npos;
}

size_t LongestRunOfReportLines(std::string_view text) {
  size_t run = 0;
  size_t longest = 0;
  while (!text.empty()) {
    const size_t end = text.find('\n');
    run = IsReportLine(text.substr(0, end)) ? run + 1 : 0;
    longest = std::max(longest, run);
    text = end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
  }
  return longest;
}

// Bash reading a cursor position report, as prompt scripts do, in a process group of its own.
constexpr const char* kCursorReader = R"SH(for i in 1 2 3; do
  IFS='[;' read -rsdR -p $'\e[6n' _ row col
  echo "row=$row col=$col"
done
)SH";

// A raw-mode program that asks for the device attributes, works a while before it reads (the
// reply waits for it), and reads the answer byte by byte.
constexpr const char* kAttributesReader = R"PY(import os, sys, termios, tty
fd = sys.stdin.fileno()
old = termios.tcgetattr(fd)
tty.setraw(fd)
try:
    os.write(1, b"\x1b[c")
    sum(range(2000000))
    got = b""
    while not got.endswith(b"c"):
        got += os.read(fd, 1)
finally:
    termios.tcsetattr(fd, termios.TCSADRAIN, old)
print("da=" + got[1:].decode())
)PY";

// A raw-mode program that asks for answers, reads only the first byte of them and exits: the
// rest stays in the terminal's input, and the shell's line editor takes it at the next prompt.
// argv[1] holds the queries.
constexpr const char* kPartialReader = R"PY(import os, sys, termios, tty
fd = sys.stdin.fileno()
old = termios.tcgetattr(fd)
tty.setraw(fd)
try:
    os.write(1, sys.argv[1].encode().decode("unicode_escape").encode())
    os.read(fd, 1)
finally:
    termios.tcsetattr(fd, termios.TCSANOW, old)
)PY";

class TerminalReplyTest : public SharedDaemonModeTest {
 protected:
  static void SetUpTestSuite() {
    SharedDaemonModeTest::SetUpTestSuite();
    std::ofstream(daemon_->workspace() / "cursor-reader.sh") << kCursorReader;
    std::ofstream(daemon_->workspace() / "attributes-reader.py") << kAttributesReader;
    std::ofstream(daemon_->workspace() / "partial-reader.py") << kPartialReader;
  }
  // Exact evidence only: a large silence bound never settles these sends.
  const Json slow_{{"silenceMs", 20000}, {"timeoutMs", 30000}};
};

TEST_P(TerminalReplyTest, AReplyToAProgramThatLeftNeverBecomesACommandLine) {
  const struct {
    std::string input;
    int exit_code;
  } queries[] = {
      {"printf '\\e[6n'\n", 0},       // cursor position
      {"printf '\\e[?6n'\n", 0},      // extended cursor position
      {"printf '\\e[c'\n", 0},        // primary device attributes
      {"printf '\\e[>c'\n", 0},       // secondary device attributes
      {"printf '\\e[5n'\n", 0},       // device status
      {"printf '\\e[?2004$p'\n", 0},  // a mode (bracketed paste)
      {"printf '\\e[6n\\e[c\\e[6n'; (exit 3)\n", 3},
      // Killed right after asking.
      {"sh -c 'printf \"\\033[6n\"; kill -9 $$'\n", 137},
      // Asked and then another job took the foreground.
      {"printf '\\e[6n'; sleep 0.2\n", 0},
  };
  const std::string id = Open();
  for (int round = 0; round < 3; ++round) {
    for (const auto& query : queries) {
      SCOPED_TRACE(query.input);
      Json r = Send(client_, id, query.input, slow_);
      EXPECT_EQ(r["waitReason"], "stdin_read") << r.dump();
      EXPECT_EQ(r["exitCode"], query.exit_code) << r.dump();
      // The next command line is the agent's alone: no reply in front of it.
      r = Send(client_, id, "echo ok\n", slow_);
      EXPECT_EQ(r["waitReason"], "stdin_read") << r.dump();
      EXPECT_EQ(r["exitCode"], 0) << r.dump();
      EXPECT_EQ(r["viewport"], "ok") << r.dump();
    }
  }
}

// The answer reached a reader of the asking group, which read one byte of it and exited; the
// shell's line editor took the rest at the next prompt. The next send is written at the
// verified prompt, so the daemon discards what the line editor holds that the agent never
// typed (docs/security.md, "Terminal answers never become shell input").
TEST_P(TerminalReplyTest, APartlyReadAnswerNeverJoinsTheNextCommand) {
  const std::string id = Open();
  const char* const queries[] = {
      "\\x1b[c",                 // primary device attributes: "[?1;2c" is left
      "\\x1b[>c",                // secondary device attributes
      "\\x1b[6n",                // cursor position
      "\\x1b[c\\x1b[6n\\x1b[c",  // three answers: whole escape sequences are left too
  };
  for (int round = 0; round < 3; ++round) {
    for (const char* query : queries) {
      SCOPED_TRACE(query);
      Json r = Send(client_, id, std::string("python3 partial-reader.py '") + query + "'\n", slow_);
      EXPECT_EQ(r["waitReason"], "stdin_read") << r.dump();
      // Readline takes the leftover right after the prompt, which the engine cannot tell from
      // typeahead: the prompt may go unverified (exitCode null), never a wrong code.
      EXPECT_TRUE(r["exitCode"] == 0 || r["exitCode"].is_null()) << r.dump();
      r = Send(client_, id, "echo ok\n", slow_);
      EXPECT_EQ(r["waitReason"], "stdin_read") << r.dump();
      EXPECT_EQ(r["exitCode"], 0) << r.dump();
      EXPECT_EQ(r["viewport"], "ok") << r.dump();
    }
  }
  // readline's vi mode: ^U discards the line in its insertion keymap too.
  Json vi = Send(client_, id, "set -o vi\n", slow_);
  EXPECT_EQ(vi["exitCode"], 0) << vi.dump();
  for (int round = 0; round < 3; ++round) {
    Json r = Send(client_, id, "python3 partial-reader.py '\\x1b[c'\n", slow_);
    EXPECT_EQ(r["waitReason"], "stdin_read") << r.dump();
    r = Send(client_, id, "echo ok\n", slow_);
    EXPECT_EQ(r["exitCode"], 0) << r.dump();
    EXPECT_EQ(r["viewport"], "ok") << r.dump();
  }
  Send(client_, id, "set -o emacs\n", slow_);
  // What the agent itself leaves on the line is never discarded: an unterminated send is
  // completed by the next one.
  Json r = Send(client_, id, "echo to", slow_);
  r = Send(client_, id, "gether\n", slow_);
  EXPECT_EQ(r["exitCode"], 0) << r.dump();
  EXPECT_EQ(r["viewport"], "together") << r.dump();
}

// The discard's bytes are plain only while the terminal says so: a program that made ^U the
// interrupt (or a space the end of file) through stty would otherwise cut the agent's first
// byte (`false` ran `alse`) or end the shell. Then no discard is written, and every send's bytes
// are the agent's alone.
TEST_P(TerminalReplyTest, AProgramsSttyNeverTurnsTheDiscardIntoAnEditOfTheCommand) {
  const std::string id = Open();
  // (`stty lnext ^U` is not among them: readline binds ^U to quoted-insert from the settings it
  // saw before its raw mode, which no look reads; docs/security.md names that limit.)
  const char* const settings[] = {"intr ^U -echoctl", "eof ' '"};
  for (const char* setting : settings) {
    SCOPED_TRACE(setting);
    Json r = Send(client_, id, std::string("sh -c \"stty ") + setting + "\"\n", slow_);
    EXPECT_EQ(r["waitReason"], "stdin_read") << r.dump();
    r = Send(client_, id, "false\n", slow_);
    EXPECT_EQ(r["exitCode"], 1) << r.dump();
    r = Send(client_, id, "echo ok\n", slow_);
    EXPECT_EQ(r["sessionStatus"]["kind"], "running") << r.dump();
    EXPECT_EQ(r["exitCode"], 0) << r.dump();
    EXPECT_EQ(r["viewport"], "ok") << r.dump();
    r = Send(client_, id, "stty sane\n", slow_);
    EXPECT_EQ(r["exitCode"], 0) << r.dump();
  }
}

TEST_P(TerminalReplyTest, AProgramThatReadsItsReplyGetsIt) {
  const std::string id = Open();
  Json r = Send(client_, id, "bash cursor-reader.sh\n", slow_);
  EXPECT_EQ(r["waitReason"], "stdin_read") << r.dump();
  EXPECT_EQ(r["exitCode"], 0) << r.dump();
  const std::string viewport = r["viewport"].is_string() ? r["viewport"].get<std::string>() : "";
  EXPECT_GE(LongestRunOfReportLines(viewport), 3U) << r.dump();

  // A command substitution runs in the shell's own process group, while the shell itself waits
  // on the pipe: its reader is not the shell's line editor, and it gets the answer.
  r = Send(client_, id,
           R"SH(echo "$(IFS='[;' read -rsdR -p $'\e[6n' _ row col; echo "row=$row col=$col")")SH"
           "\n",
           slow_);
  EXPECT_EQ(r["waitReason"], "stdin_read") << r.dump();
  EXPECT_EQ(r["exitCode"], 0) << r.dump();
  ASSERT_TRUE(r["viewport"].is_string()) << r.dump();
  EXPECT_TRUE(IsReportLine(r["viewport"].get<std::string>())) << r.dump();

  r = Send(client_, id, "python3 attributes-reader.py\n", slow_);
  EXPECT_EQ(r["waitReason"], "stdin_read") << r.dump();
  EXPECT_EQ(r["exitCode"], 0) << r.dump();
  EXPECT_EQ(r["viewport"], "da=[?1;2c") << r.dump();

  r = Send(client_, id, "echo ok\n", slow_);
  EXPECT_EQ(r["exitCode"], 0) << r.dump();
  EXPECT_EQ(r["viewport"], "ok") << r.dump();
}

INSTANTIATE_TEST_SUITE_P(Modes, TerminalReplyTest,
                         ::testing::Values("read-only", "workspace-write", "danger-full-access"),
                         ModeTestName);

}  // namespace
}  // namespace ptybox::testing
