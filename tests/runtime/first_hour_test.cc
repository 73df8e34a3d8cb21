// A newcomer's first hour through the real binary (README.md, docs/protocol.md):
// `ptybox help` is --help, an empty or /-level --socket is refused saying why, a session's
// environment names the sandbox it runs in (PTYBOX_SANDBOX), in both confined modes and
// without a sandbox, and a root client refused by an ordinary user's daemon hears the reason
// (permission), not that it runs in a session.
#include <gtest/gtest.h>
#include <pwd.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <thread>

#include "tests/support/daemon_fixture.h"
#include "tests/support/error_kind.h"

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

// An ordinary user's daemon whose /proc hides other users' processes (hidepid) cannot check a
// root client: it is refused (the check fails closed) saying so, never told that it runs
// inside a ptybox session or that a process exited.
TEST(FirstHourTest, ARootClientAnOrdinaryUsersDaemonCannotCheckHearsWhy) {
  const char* name = std::getenv("PTYBOX_TEST_USER");
  const passwd* user = ::getpwnam(name != nullptr && *name ? name : "ptybox-ci");
  if (::geteuid() != 0 || user == nullptr) {
    GTEST_SKIP() << "needs root and an ordinary user (PTYBOX_TEST_USER, default ptybox-ci)";
  }
  TempDir dir;
  const std::filesystem::path workspace = dir.path() / "ws";
  std::filesystem::create_directory(workspace);
  ASSERT_EQ(::chown(dir.path().c_str(), user->pw_uid, user->pw_gid), 0);
  ASSERT_EQ(::chown(workspace.c_str(), user->pw_uid, user->pw_gid), 0);
  ASSERT_EQ(::chmod(dir.path().c_str(), 0755), 0);
  const std::filesystem::path socket = dir.path() / "s.sock";
  const std::string daemon =
      "unshare -m --propagation private sh -c 'mount -t proc -o hidepid=1 proc /proc && exec "
      "runuser -u " +
      std::string(user->pw_name) +
      " -- env PTYBOX_OPERATOR_POLICY=/nonexistent.yaml PTYBOX_INIT=" + InitBinary().string() +
      " " + PtyboxBinary().string() + " serve --socket " + socket.string() + " --workspace " +
      workspace.string() + "' 2>" + (dir.path() / "log").string();
  const pid_t child = ::fork();
  if (child == 0) {
    ::execl("/bin/sh", "sh", "-c", ("exec " + daemon).c_str(), nullptr);
    ::_exit(127);
  }
  ASSERT_GT(child, 0);
  // Hang guard only: the socket appears once the daemon listens.
  for (int i = 0; i < 600 && !std::filesystem::exists(socket); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::snprintf(address.sun_path, sizeof(address.sun_path), "%s", socket.c_str());
  std::string answer;
  pid_t daemon_pid = -1;
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) == 0) {
    ucred cred{};
    socklen_t length = sizeof(cred);
    if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &length) == 0) daemon_pid = cred.pid;
    timeval guard{60, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &guard, sizeof(guard));
    char buf[4096];
    for (ssize_t n; (n = ::read(fd, buf, sizeof(buf))) > 0;) answer.append(buf, n);
  }
  ::close(fd);
  if (daemon_pid > 0) ::kill(daemon_pid, SIGTERM);
  int status = 0;
  ::waitpid(child, &status, 0);
  std::ifstream log(dir.path() / "log");
  const std::string daemon_log((std::istreambuf_iterator<char>(log)),
                               std::istreambuf_iterator<char>());
  if (answer.empty() && daemon_log.find("mount") != std::string::npos) {
    GTEST_SKIP() << "cannot mount a /proc with hidepid here: " << daemon_log;
  }
  ASSERT_FALSE(answer.empty()) << daemon_log;
  const Json refusal = Json::parse(answer.substr(0, answer.find('\n')));
  const std::string message = refusal["error"]["message"];
  EXPECT_ERROR_KIND(refusal, ErrorKind::kPolicyDenied) << answer;
  EXPECT_NE(message.find("connection refused: the daemon cannot check this client, since the "
                         "daemon may not read /proc/"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("run the client as the daemon's user (uid " +
                         std::to_string(user->pw_uid) + ")"),
            std::string::npos)
      << message;
  EXPECT_EQ(message.find("ptybox session"), std::string::npos) << message;
  EXPECT_EQ(message.find("exited"), std::string::npos) << message;
}

}  // namespace
}  // namespace ptybox::testing
