// A newcomer's first hour through the real binary (issue 28, "Found failing or misleading"):
// `ptybox help` is --help, an empty or /-level --socket is refused saying why, and a session's
// environment names the sandbox it runs in (PTYBOX_SANDBOX), in both confined modes and
// without a sandbox.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <fstream>

#include "tests/support/daemon_fixture.h"

namespace ptybox::testing {
namespace {

// Runs a shell command line (stdin /dev/null); its exit code and everything it printed.
std::pair<int, std::string> Capture(const std::string& command) {
  FILE* pipe = ::popen((command + " 2>&1 </dev/null").c_str(), "r");
  std::string out;
  char buf[4096];
  while (size_t n = std::fread(buf, 1, sizeof(buf), pipe)) out.append(buf, n);
  const int status = ::pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

// `ptybox ARGS...`, no operator policy of the machine's, ptybox-init from the build.
std::pair<int, std::string> Ptybox(const std::vector<std::string>& args,
                                   const std::string& operator_policy = "/nonexistent.yaml") {
  std::string command = "PTYBOX_OPERATOR_POLICY=" + operator_policy +
                        " PTYBOX_INIT=" + InitBinary().string() + " " + PtyboxBinary().string();
  for (const std::string& a : args) command += " '" + a + "'";
  return Capture(command);
}

TEST(FirstHourTest, HelpIsDashDashHelp) {
  for (const std::vector<std::string>& topic :
       {std::vector<std::string>{}, {"serve"}, {"mcp"}, {"policy", "check"}}) {
    std::vector<std::string> help = {"help"};
    help.insert(help.end(), topic.begin(), topic.end());
    std::vector<std::string> dash = topic;
    dash.push_back("--help");
    const auto [help_code, help_text] = Ptybox(help);
    const auto [dash_code, dash_text] = Ptybox(dash);
    EXPECT_EQ(help_code, 0) << help_text;
    EXPECT_EQ(dash_code, 0) << dash_text;
    EXPECT_EQ(help_text, dash_text);
    EXPECT_NE(help_text.find("Usage:"), std::string::npos) << help_text;
  }
  const auto [code, text] = Ptybox({"help", "serv"});
  EXPECT_EQ(code, 2) << text;
  EXPECT_NE(text.find("ptybox help: no command \"serv\"; `ptybox --help` lists them"),
            std::string::npos)
      << text;
}

// `serve --socket "$XDG_RUNTIME_DIR/ptybox.sock"` with the variable unset (root, `su`).
TEST(FirstHourTest, AnEmptyOrSlashLevelSocketIsRefusedSayingWhy) {
  TempDir work;
  const auto [empty_code, empty_text] =
      Ptybox({"serve", "--workspace", work.path().string(), "--socket", ""});
  EXPECT_EQ(empty_code, 2) << empty_text;
  EXPECT_NE(empty_text.find("--socket is empty (was a variable such as $XDG_RUNTIME_DIR unset"),
            std::string::npos)
      << empty_text;
  const std::string slash = "/ptybox-first-hour-test.sock";
  const auto [code, text] =
      Ptybox({"serve", "--workspace", work.path().string(), "--socket", slash});
  EXPECT_EQ(code, 1) << text;
  EXPECT_NE(text.find("the socket path " + slash + " lies in / itself"), std::string::npos) << text;
  EXPECT_EQ(text.find("chown"), std::string::npos) << "never advises chowning /: " << text;
  EXPECT_EQ(text.find("listening"), std::string::npos) << text;
  EXPECT_FALSE(std::filesystem::exists(slash));
}

// Inside a session `curl` only says "Could not resolve host": the environment says why.
class SandboxVariableTest : public SharedDaemonModeTest {};

TEST_P(SandboxVariableTest, ASessionsEnvironmentNamesItsModeAndTheDeniedNetwork) {
  const std::string id = Open();
  ASSERT_FALSE(id.empty());
  Json r = Send(client_, id, "echo \"[$PTYBOX_SANDBOX]\"\n");
  const std::string viewport = r.value("viewport", "");
  if (GetParam() == "danger-full-access") {
    EXPECT_EQ(viewport,
              "[danger-full-access: no ptybox sandbox (the host's filesystem, network "
              "and users)]")
        << r.dump();
    return;
  }
  EXPECT_EQ(viewport.rfind("[" + GetParam() +
                               ", network denied by the ptybox policy (network: "
                               "deny): no name resolves",
                           0),
            0u)
      << r.dump();
  EXPECT_NE(viewport.find("docs/sandbox.md"), std::string::npos) << r.dump();
}

INSTANTIATE_TEST_SUITE_P(Modes, SandboxVariableTest,
                         ::testing::Values("read-only", "workspace-write", "danger-full-access"),
                         ModeTestName);

TEST(FirstHourTest, PtyboxRunSaysWhenTheOperatorAllowsTheNetwork) {
  TempDir dir;
  const std::filesystem::path op = dir.path() / "operator.yaml";
  std::ofstream(op) << "version: 1\nnetwork: allow\n";
  const auto [code, text] = Ptybox(
      {"run", "--workspace", dir.path().string(), "--", "sh", "-c", "echo \"$PTYBOX_SANDBOX\""},
      op.string());
  EXPECT_EQ(code, 0) << text;
  EXPECT_EQ(text, "workspace-write, network allowed (policy network: allow)\n");
}

}  // namespace
}  // namespace ptybox::testing
