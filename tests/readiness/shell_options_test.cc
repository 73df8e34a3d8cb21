// The prompt machinery against the user's own shell options, through the real binary: `set -x`
// (also with BASH_XTRACEFD), `set -v`, a DEBUG trap with functrace, an ERR trap with errtrace,
// nounset. Each keeps exact readiness (waitReason stdin_read, the real exitCode) and never
// prints the session's nonce (docs/security.md, "A program cannot forge the shell's verified
// prompt"). The nonce is 32 hex digits: no output may hold
// such a run, so the check needs no access to the shell's environment.
#include <gtest/gtest.h>

#include <regex>
#include <string>

#include "tests/support/daemon_fixture.h"

namespace ptybox::testing {
namespace {

bool HoldsANonce(const Json& text) {
  static const std::regex kNonce("[0-9a-f]{32}");
  return text.is_string() && std::regex_search(text.get<std::string>(), kNonce);
}

class ShellOptionsTest : public SharedDaemonModeTest {
 protected:
  void SetUp() override {
    Json set = client_.Call("policy_set_mode", Json{{"mode", GetParam()}});
    ASSERT_TRUE(set.contains("result")) << set.dump();
    Json opened = client_.Call("terminal_open", Json::object());
    ASSERT_TRUE(opened.contains("result")) << opened.dump();
    EXPECT_FALSE(HoldsANonce(opened["result"]["motd"])) << opened.dump();
    id_ = opened["result"]["sessionId"].get<std::string>();
  }

  // A send that must settle at the shell's verified prompt with `exit_code`.
  Json AtPrompt(const std::string& input, int exit_code) {
    Json r = Send(client_, id_, input);
    EXPECT_EQ(r["waitReason"], "stdin_read") << input << r.dump();
    EXPECT_EQ(r["exitCode"], exit_code) << input << r.dump();
    EXPECT_FALSE(HoldsANonce(r["viewport"])) << input << r.dump();
    return r;
  }

  // Everything the session printed, and its screen: no nonce anywhere.
  void ExpectNoNonceInTheWholeOutput() {
    for (const char* view : {"lines", "screen"}) {
      Json read = client_.Call("terminal_read", Json{{"sessionId", id_}, {"view", view}});
      ASSERT_TRUE(read.contains("result")) << read.dump();
      EXPECT_FALSE(HoldsANonce(read["result"]["text"])) << view << ": " << read.dump();
    }
  }

  std::string id_;
};

TEST_P(ShellOptionsTest, XtraceTracesOnlyTheUsersCommands) {
  AtPrompt("set -x\n", 0);
  Json r = AtPrompt("false\n", 1);
  EXPECT_EQ(r["viewport"], "+ false") << r.dump();
  r = AtPrompt("echo hi\n", 0);
  EXPECT_EQ(r["viewport"], "+ echo hi\nhi") << r.dump();
  // A script that turns tracing on, sourced, as a user would.
  AtPrompt("printf 'set -x\\n' > trace_on.sh; set +x\n", 0);
  AtPrompt(". ./trace_on.sh\n", 0);
  r = AtPrompt("(exit 3)\n", 3);
  EXPECT_EQ(r["viewport"], "+ exit 3") << r.dump();
  AtPrompt("set +x; rm trace_on.sh\n", 0);
  r = AtPrompt("echo untraced\n", 0);
  EXPECT_EQ(r["viewport"], "untraced") << r.dump();
  ExpectNoNonceInTheWholeOutput();
}

TEST_P(ShellOptionsTest, XtraceToAnotherDescriptorKeepsReadiness) {
  AtPrompt("exec 7>&2; BASH_XTRACEFD=7; set -x\n", 0);
  AtPrompt("false\n", 1);
  Json r = AtPrompt("echo fd\n", 0);
  EXPECT_NE(r["viewport"].get<std::string>().find("fd"), std::string::npos) << r.dump();
  AtPrompt("set +x\n", 0);
  ExpectNoNonceInTheWholeOutput();
}

TEST_P(ShellOptionsTest, VerboseEchoesInputButNotTheNonce) {
  AtPrompt("set -v\n", 0);
  Json r = AtPrompt("echo v\n", 0);
  EXPECT_NE(r["viewport"].get<std::string>().find("v"), std::string::npos) << r.dump();
  AtPrompt("false\n", 1);
  AtPrompt("set +v\n", 0);
  r = AtPrompt("echo quiet\n", 0);
  EXPECT_EQ(r["viewport"], "quiet") << r.dump();
  ExpectNoNonceInTheWholeOutput();
}

TEST_P(ShellOptionsTest, DebugTrapWithFunctraceNeverSeesThePromptFunction) {
  AtPrompt("trap 'echo \"dbg:$BASH_COMMAND\"' DEBUG; set -T\n", 0);
  Json r = AtPrompt("true\n", 0);
  EXPECT_EQ(r["viewport"].get<std::string>().find("printf"), std::string::npos) << r.dump();
  AtPrompt("false\n", 1);
  AtPrompt("trap - DEBUG; set +T\n", 0);
  r = AtPrompt("echo plain\n", 0);
  EXPECT_EQ(r["viewport"], "plain") << r.dump();
  ExpectNoNonceInTheWholeOutput();
}

TEST_P(ShellOptionsTest, ErrTrapNounsetAndAllTogether) {
  AtPrompt("set -Eu; trap 'echo err-trap' ERR\n", 0);
  Json r = AtPrompt("false\n", 1);
  EXPECT_EQ(r["viewport"], "err-trap") << r.dump();
  r = AtPrompt("echo ok\n", 0);
  EXPECT_EQ(r["viewport"], "ok") << r.dump();
  AtPrompt("set -xvT\n", 0);
  AtPrompt("false\n", 1);
  AtPrompt("set +xvTEu; trap - ERR\n", 0);
  r = AtPrompt("echo clean\n", 0);
  EXPECT_EQ(r["viewport"], "clean") << r.dump();
  ExpectNoNonceInTheWholeOutput();
}

INSTANTIATE_TEST_SUITE_P(Modes, ShellOptionsTest,
                         ::testing::Values("danger-full-access", "workspace-write"), ModeTestName);

}  // namespace
}  // namespace ptybox::testing
