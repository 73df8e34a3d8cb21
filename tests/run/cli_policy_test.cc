// The policy flags (--network, --allow-host, --writable, --env, --hide) through the real binary:
// `ptybox run` in both confined modes (danger-full-access as the control where it matters), `policy
// resolve`, and `serve --socket` whose flags hold for a session opened over the socket. The
// network is proved shared or not by whether the host's loopback listener, started by the test,
// is in the session's /proc/net/tcp: no traffic leaves this machine, none is even sent.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tests/run/child_process.h"
#include "tests/support/daemon_fixture.h"
#include "tests/support/temp_dir.h"

namespace ptybox::testing {
namespace {

namespace fs = std::filesystem;

// A TCP socket listening on the host's 127.0.0.1 (never connected to), and the shell command
// that counts it in the caller's network namespace.
class HostListener final {
 public:
  HostListener() {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (fd_ >= 0 && ::bind(fd_, reinterpret_cast<sockaddr*>(&addr), len) == 0 &&
        ::listen(fd_, 1) == 0 &&
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
      port_ = ntohs(addr.sin_port);
    }
  }
  ~HostListener() {
    if (fd_ >= 0) ::close(fd_);
  }
  HostListener(const HostListener&) = delete;
  HostListener& operator=(const HostListener&) = delete;
  [[nodiscard]] int port() const { return port_; }
  // Prints how many listening sockets on this port the network namespace has: 0 in a session's
  // own namespace, 1 in the host's.
  [[nodiscard]] std::string CountCommand() const {
    char hex[8];
    std::snprintf(hex, sizeof hex, "%04X", port_);
    return "grep -ci ' 0100007F:" + std::string(hex) + " 00000000:0000 0A ' /proc/net/tcp; true";
  }

 private:
  int fd_ = -1;
  int port_ = 0;
};

class CliPolicyTest : public ::testing::Test {
 protected:
  // `ptybox <args>` in the workspace, to completion, with stdin closed.
  ChildProcess::Exit Ptybox(std::vector<std::string> args, std::vector<std::string> env = {}) {
    ChildProcess::Options o;
    o.argv = {PtyboxBinary().string()};
    o.argv.insert(o.argv.end(), args.begin(), args.end());
    o.env = TestEnvironment(state_.path() / "no-operator-policy.yaml", env);
    o.cwd = ws();
    child_ = std::make_unique<ChildProcess>(std::move(o));
    child_->CloseStdin();
    return child_->Wait();
  }
  // `ptybox run --mode MODE [--policy OPERATOR] FLAGS -- bash -c SCRIPT`.
  ChildProcess::Exit Run(const std::string& mode, const std::vector<std::string>& flags,
                         const std::string& script, std::vector<std::string> env = {}) {
    std::vector<std::string> args = {"run", "--mode", mode};
    if (!operator_policy_.empty()) args.insert(args.end(), {"--policy", operator_policy_});
    args.insert(args.end(), flags.begin(), flags.end());
    args.insert(args.end(), {"--", "bash", "-c", script});
    return Ptybox(std::move(args), std::move(env));
  }
  void Operator(const std::string& text) {
    operator_policy_ = (state_.path() / "operator.yaml").string();
    state_.File("operator.yaml", text);
  }
  std::string out() const { return child_->out(); }
  std::string err() const { return child_->err(); }
  const fs::path& ws() const { return workspace_.path(); }

  TempDir workspace_;
  TempDir state_;
  TempDir outside_;
  std::string operator_policy_;
  std::unique_ptr<ChildProcess> child_;
};

// Both confined modes; each case says what danger-full-access, the control, does.
class CliPolicyModeTest : public CliPolicyTest, public ::testing::WithParamInterface<std::string> {
 protected:
  bool Confined() const { return GetParam() != "danger-full-access"; }
};

TEST_P(CliPolicyModeTest, NetworkAllowSharesTheHostsNetworkWhereTheOperatorAllowsIt) {
  HostListener listener;
  ASSERT_GT(listener.port(), 0);
  // No operator `network` key and the built-in ceiling: the command line may allow it.
  ChildProcess::Exit denied = Run(GetParam(), {}, listener.CountCommand());
  ASSERT_EQ(denied.code, 0) << err();
  EXPECT_EQ(out(), Confined() ? "0\n" : "1\n") << "without the flag (the control)";
  ChildProcess::Exit allowed = Run(GetParam(), {"--network", "allow"}, listener.CountCommand());
  ASSERT_EQ(allowed.code, 0) << err();
  EXPECT_EQ(out(), "1\n") << "the host's listener is in the session's network namespace";
  EXPECT_EQ(err(), "");

  // A repository file may narrow what the command line gave, never widen it back.
  workspace_.File(".ptybox.yaml", "version: 1\nnetwork: deny\n");
  ASSERT_EQ(Run(GetParam(), {"--network", "allow"}, listener.CountCommand()).code, 0) << err();
  EXPECT_EQ(out(), Confined() ? "0\n" : "1\n") << "the repository's `network: deny` holds";
  workspace_.File(".ptybox.yaml", "version: 1\nnetwork: allow\n");
  if (Confined()) {
    EXPECT_EQ(Run(GetParam(), {"--network", "deny"}, listener.CountCommand()).code, 125);
    EXPECT_NE(err().find("the command line denies network (command line --network deny)"),
              std::string::npos)
        << err();
  }
  fs::remove(ws() / ".ptybox.yaml");

  // The operator allows it: the command line may still deny it.
  Operator("version: 1\nnetwork: allow\n");
  ChildProcess::Exit narrowed = Run(GetParam(), {"--network", "deny"}, listener.CountCommand());
  ASSERT_EQ(narrowed.code, 0) << err();
  EXPECT_EQ(out(), Confined() ? "0\n" : "1\n");
}

TEST_P(CliPolicyModeTest, NetworkAllowIsRefusedNamingTheOperatorFileThatDeniesIt) {
  HostListener listener;
  Operator("version: 1\nnetwork: deny\n");
  ChildProcess::Exit e = Run(GetParam(), {"--network", "allow"}, listener.CountCommand());
  EXPECT_EQ(e.code, 125) << err();
  EXPECT_EQ(out(), "") << "nothing ran";
  EXPECT_EQ(err(),
            "ptybox run: command line --network allow: network: `allow` is not "
            "permitted: the operator denies network (" +
                operator_policy_ +
                ":2:10); the command line may only narrow what the operator policy "
                "allows. Drop --network allow, or ask the operator to allow network in " +
                operator_policy_ + "\n");

  Operator("version: 1\nceiling: workspace-write\n");
  if (GetParam() == "danger-full-access") {
    // Above the ceiling: refused for the mode, whatever the flag.
    EXPECT_EQ(Run(GetParam(), {"--network", "allow"}, "true").code, 125) << err();
    return;
  }
  e = Run(GetParam(), {"--network", "allow"}, listener.CountCommand());
  EXPECT_EQ(e.code, 125) << err();
  EXPECT_NE(err().find("the operator's ceiling `workspace-write` (" + operator_policy_ + ":2:10)"),
            std::string::npos)
      << err();
}

// --allow-host: the session keeps a network namespace of its own (the host's listener is not
// in it) and reaches names only through ptybox's proxy, which refuses a name not given, naming
// the flag, before any lookup (`.invalid` never resolves anywhere); under an operator's
// `network: deny` the flag itself is refused. danger-full-access, the control, has no sandbox.
TEST_P(CliPolicyModeTest, AllowHostLimitsTheNetworkToTheNamesGiven) {
  HostListener listener;
  ASSERT_GT(listener.port(), 0);
  const fs::path audit = state_.path() / "allow-host-audit.log";
  ChildProcess::Exit e =
      Run(GetParam(), {"--allow-host", "registry.npmjs.org", "--audit-log", audit.string()},
          listener.CountCommand() +
              "; curl -sS -w ' %{http_code}\\n' http://not-listed.invalid/ 2>&1; echo "
              "\"$PTYBOX_SANDBOX\"");
  ASSERT_EQ(e.code, 0) << err();
  if (!Confined()) {
    EXPECT_TRUE(out().starts_with("1\n")) << out();
    return;
  }
  EXPECT_TRUE(out().starts_with("0\n")) << "the host's network namespace: " << out();
  EXPECT_NE(out().find("not-listed.invalid:80 is refused by the network policy: it is not on "
                       "the allow list of command line --allow-host registry.npmjs.org"),
            std::string::npos)
      << out();
  EXPECT_NE(out().find(" 403\n"), std::string::npos) << out();
  EXPECT_NE(out().find("network by name only"), std::string::npos) << out();
  // `run --audit-log` records the refusal and the proxy's totals, before `run_ended`.
  std::vector<std::string> events;
  std::string denied_host;
  std::ifstream log(audit);
  for (std::string line; std::getline(log, line);) {
    Json event = Json::parse(line, nullptr, false);
    if (event.is_discarded()) continue;
    events.push_back(event.value("event", ""));
    if (events.back() == "network_denied") denied_host = event.value("host", "");
    if (events.back() == "network_closed") {
      EXPECT_EQ(event.value("refused", 0), 1) << line;
    }
  }
  EXPECT_EQ(denied_host, "not-listed.invalid");
  auto at = [&](const std::string& name) {
    return std::find(events.begin(), events.end(), name) - events.begin();
  };
  EXPECT_LT(at("network_denied"), at("network_closed"));
  EXPECT_LT(at("network_closed"), at("run_ended"));
  EXPECT_LT(at("run_ended"), static_cast<long>(events.size()));

  Operator("version: 1\nnetwork: deny\n");
  EXPECT_EQ(Run(GetParam(), {"--allow-host", "registry.npmjs.org"}, "true").code, 125);
  EXPECT_NE(err().find("`registry.npmjs.org` is not permitted: the operator denies network (" +
                       operator_policy_ + ":2:10)"),
            std::string::npos)
      << err();
}

TEST_P(CliPolicyModeTest, WritableMakesADirectoryWritableWithinTheOperatorsBounds) {
  const fs::path cache = outside_.Dir("cache");
  const std::string touch = "touch " + (cache / "made").string() + " 2>/dev/null; echo $?";
  ChildProcess::Exit plain = Run(GetParam(), {}, touch);
  ASSERT_EQ(plain.code, 0) << err();
  EXPECT_EQ(out(), Confined() ? "1\n" : "0\n") << "without the flag (the control)";
  fs::remove(cache / "made");

  ChildProcess::Exit granted = Run(GetParam(), {"--writable", cache.string()}, touch);
  ASSERT_EQ(granted.code, 0) << err();
  // Writable roots are writable in workspace-write only; read-only stays read-only.
  EXPECT_EQ(out(), GetParam() == "read-only" ? "1\n" : "0\n");
  EXPECT_EQ(fs::exists(cache / "made"), GetParam() != "read-only");
  fs::remove(cache / "made");

  // Under a ceiling below danger-full-access, only inside the workspace or the operator's roots.
  if (!Confined()) return;
  Operator("version: 1\nceiling: workspace-write\n");
  const std::string relative = fs::relative(cache, ws()).string();
  ChildProcess::Exit refused = Run(GetParam(), {"--writable", relative}, touch);
  EXPECT_EQ(refused.code, 125) << err();
  EXPECT_EQ(out(), "");
  EXPECT_TRUE(err().starts_with("ptybox run: command line --writable " + relative +
                                ": writable: " + cache.string() +
                                " is outside the workspace and the operator's "
                                "writable roots ("))
      << err();
  EXPECT_NE(err().find("ask the operator to list it under `writable` in " + operator_policy_),
            std::string::npos)
      << err();
  EXPECT_FALSE(fs::exists(cache / "made"));

  // A link in the workspace to the same directory is the same directory.
  fs::create_symlink(cache, ws() / "cache-link");
  EXPECT_EQ(Run(GetParam(), {"--writable", "cache-link"}, touch).code, 125) << err();
  EXPECT_NE(err().find(cache.string() + " is outside the workspace"), std::string::npos) << err();

  // Inside the workspace, relative to it.
  fs::create_directory(ws() / "build");
  ChildProcess::Exit inside =
      Run(GetParam(), {"--writable", "build"}, "touch build/made 2>/dev/null; echo $?");
  ASSERT_EQ(inside.code, 0) << err();
  EXPECT_EQ(out(), GetParam() == "read-only" ? "1\n" : "0\n");
}

// `--writable .git/hooks` would stay read-only (every repository's .git is protected): the
// launch is refused saying so, and nothing runs.
TEST_P(CliPolicyModeTest, WritableInsideAProtectedGitIsRefusedNotIgnored) {
  fs::create_directories(ws() / ".git/hooks");
  const std::string hook = (ws() / ".git/hooks/pre-commit").string();
  ChildProcess::Exit refused =
      Run(GetParam(), {"--writable", ".git/hooks"}, "echo ran; touch " + hook);
  EXPECT_EQ(refused.code, 125) << err();
  EXPECT_EQ(out(), "");
  EXPECT_TRUE(err().starts_with("ptybox run: command line --writable .git/hooks: writable: " +
                                (ws() / ".git/hooks").string() +
                                " lies inside the repository data " + (ws() / ".git").string() +
                                ", which every workspace-write session gets read-only"))
      << err();
  EXPECT_NE(err().find("Remove it"), std::string::npos) << err();
  EXPECT_FALSE(fs::exists(hook));
}

TEST_P(CliPolicyModeTest, HideHidesAPath) {
  workspace_.File("secret.txt", "s3cr3t\n");
  const std::string cat = "cat secret.txt 2>/dev/null || echo unreadable";
  ASSERT_EQ(Run(GetParam(), {}, cat).code, 0) << err();
  EXPECT_EQ(out(), "s3cr3t\n") << "without the flag (the control)";
  ASSERT_EQ(Run(GetParam(), {"--hide", "secret.txt"}, cat).code, 0) << err();
  // danger-full-access has no walls: `hide` has no effect there (docs/policy.md).
  EXPECT_EQ(out(), Confined() ? "unreadable\n" : "s3cr3t\n");
}

TEST_P(CliPolicyModeTest, EnvSetsAndPasses) {
  ChildProcess::Exit e =
      Run(GetParam(), {"--env", "CLI_SET=one two", "--env", "CLI_PASS"},
          "echo \"[$CLI_SET] [$CLI_PASS] [$CLI_NOT]\"", {"CLI_PASS=passed", "CLI_NOT=kept-out"});
  ASSERT_EQ(e.code, 0) << err();
  EXPECT_EQ(out(), "[one two] [passed] []\n");

  // The shell's own names are refused, and a value is never echoed.
  e = Run(GetParam(), {"--env", "PS1=s3cr3t"}, "true");
  EXPECT_EQ(e.code, 125) << err();
  EXPECT_TRUE(err().starts_with("ptybox run: command line --env PS1: env.set: `PS1` is reserved"))
      << err();
  EXPECT_EQ(err().find("s3cr3t"), std::string::npos) << err();
  // A name the operator sets is the operator's.
  Operator("version: 1\nenv:\n  set: {CLI_SET: fixed}\n");
  e = Run(GetParam(), {"--env", "CLI_SET=s3cr3t"}, "true");
  EXPECT_EQ(e.code, 125) << err();
  EXPECT_EQ(err(),
            "ptybox run: command line --env CLI_SET: env.set.CLI_SET: the operator policy "
            "sets `CLI_SET` (" +
                operator_policy_ +
                ":3:18); the command line may add variables but not change the "
                "operator's. Drop --env CLI_SET\n");
}

INSTANTIATE_TEST_SUITE_P(Modes, CliPolicyModeTest,
                         ::testing::Values("read-only", "workspace-write", "danger-full-access"),
                         ModeTestName);

TEST_F(CliPolicyTest, PolicyResolveShowsTheCommandLineAsTheSource) {
  fs::create_directory(ws() / "build");
  ChildProcess::Exit e = Ptybox({"policy", "resolve", "--network", "allow", "--writable", "build",
                                 "--env", "CI=1", "--hide", ".env"});
  ASSERT_EQ(e.code, 0) << err();
  EXPECT_NE(out().find("network: allow  # command line\n"), std::string::npos) << out();
  EXPECT_NE(out().find("writable: [" + (ws() / "build").string() + "]  # command line\n"),
            std::string::npos)
      << out();
  EXPECT_NE(out().find((ws() / ".env").string() + "]  # default, command line\n"),
            std::string::npos)
      << out();
  EXPECT_NE(out().find("env.set: {CI: \"1\"}  # command line\n"), std::string::npos) << out();

  e = Ptybox({"policy", "resolve", "--network", "maybe"});
  EXPECT_EQ(e.code, 1);
  EXPECT_EQ(err(),
            "command line --network maybe: network: expected `deny` or `allow`, got `maybe`; "
            "write --network allow or --network deny\n");
}

TEST_F(CliPolicyTest, ServeRefusesAFlagTheOperatorDeniesAtStartup) {
  Operator("version: 1\nnetwork: deny\n");
  ChildProcess::Exit e =
      Ptybox({"serve", "--stdio", "--policy", operator_policy_, "--network", "allow"});
  EXPECT_EQ(e.code, 2) << err();
  EXPECT_TRUE(
      err().starts_with("ptybox serve: command line --network allow: network: `allow` is "
                        "not permitted: the operator denies network (" +
                        operator_policy_ + ":2:10)"))
      << err();
}

TEST_F(CliPolicyTest, McpRefusesAFlagTheOperatorDeniesAtStartupAndNotAsItsMode) {
  Operator("version: 1\nceiling: workspace-write\n");
  ChildProcess::Exit e = Ptybox({"mcp", "--policy", operator_policy_, "--mode", "workspace-write",
                                 "--writable", state_.path().string()});
  EXPECT_EQ(e.code, 2) << err();
  EXPECT_TRUE(err().starts_with("ptybox mcp: command line --writable " + state_.path().string() +
                                ": writable: "))
      << err();
  EXPECT_EQ(out(), "") << "no MCP message before the refusal";
}

TEST_F(CliPolicyTest, McpConnectRefusesPolicyFlags) {
  ChildProcess::Exit e =
      Ptybox({"mcp", "--connect", (state_.path() / "ptybox.sock").string(), "--writable", "."});
  EXPECT_EQ(e.code, 2) << err();
  EXPECT_EQ(err(),
            "ptybox mcp: --writable does not apply with --connect: the daemon decides the policy "
            "of its sessions. Give --network, --writable, --env and --hide to its `ptybox "
            "serve`, or drop them\n");
}

// The daemon's command line holds for every owner's sessions: a session opened over the socket
// shares the host's network, and policy_resolve names the command line as the source.
TEST(CliPolicyServeTest, ServeFlagsApplyToSessionsOpenedOverTheSocket) {
  HostListener listener;
  ASSERT_GT(listener.port(), 0);
  TempDir outside;
  const fs::path cache = outside.Dir("cache");
  Daemon daemon(Daemon::Options{
      {"--network", "allow", "--writable", cache.string(), "--env", "CLI_SERVE=yes"}, {}});
  for (const std::string mode : {"read-only", "workspace-write"}) {
    RpcClient client(daemon.socket());
    Json resolved = client.Call("policy_set_mode", {{"mode", mode}});
    ASSERT_TRUE(resolved.contains("result")) << resolved.dump();
    Json policy = client.Call("policy_resolve", Json::object());
    ASSERT_TRUE(policy.contains("result")) << policy.dump();
    EXPECT_EQ(policy["result"]["network"], "allow") << policy.dump();
    EXPECT_EQ(policy["result"]["source"]["values"]["network"], "command line") << policy.dump();
    EXPECT_EQ(policy["result"]["source"]["values"]["writable"], "command line") << policy.dump();

    const std::string session = OpenSession(client, mode);
    Json count = Send(client, session, listener.CountCommand() + "\n");
    EXPECT_EQ(count["viewport"], "1") << mode << ": " << count.dump();
    Json env = Send(client, session, "echo \"[$CLI_SERVE]\"\n");
    EXPECT_EQ(env["viewport"], "[yes]") << mode << ": " << env.dump();
    Json touch =
        Send(client, session, "touch " + (cache / mode).string() + " 2>/dev/null; echo $?\n");
    EXPECT_EQ(touch["viewport"], mode == "read-only" ? "1" : "0") << touch.dump();
  }
  EXPECT_FALSE(fs::exists(cache / "read-only"));
  EXPECT_TRUE(fs::exists(cache / "workspace-write"));
}

}  // namespace
}  // namespace ptybox::testing
