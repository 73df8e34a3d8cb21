// The real binary over its real socket with real bash, in each mode the case concerns.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <thread>

#include "common/random.h"
#include "tests/support/daemon_fixture.h"
#include "tests/support/error_kind.h"

namespace ptybox::testing {
namespace {

class DaemonTest : public ::testing::TestWithParam<std::string> {
 protected:
  Daemon daemon_;
  RpcClient client_{daemon_.socket()};
  std::string Open(Json extra = Json::object()) { return OpenSession(client_, GetParam(), extra); }
};

TEST_P(DaemonTest, EchoRoundTrip) {
  std::string id = Open();
  Json r = Send(client_, id, "echo hi\n");
  EXPECT_EQ(r["viewport"], "hi") << r.dump();
  EXPECT_EQ(r["waitReason"], "stdin_read");
  EXPECT_EQ(r["exitCode"], 0);
  EXPECT_EQ(r["sessionStatus"]["kind"], "running");
  EXPECT_EQ(r["truncated"], false);
}

TEST_P(DaemonTest, ExitCodeAndCwdComeFromTheVerifiedPrompt) {
  std::string id = Open();
  Json r = Send(client_, id, "cd / && false\n");
  EXPECT_EQ(r["waitReason"], "stdin_read") << r.dump();
  EXPECT_EQ(r["exitCode"], 1);
  EXPECT_EQ(r["cwd"], "/");
  EXPECT_EQ(r["viewport"], "");
  r = Send(client_, id, "cd " + daemon_.workspace().string() + "; printf 'a\\nb'\n");
  EXPECT_EQ(r["viewport"], "a\nb");
  EXPECT_EQ(r["cwd"], daemon_.workspace().string());
}

TEST_P(DaemonTest, ShellExitIsSessionExitWithItsCode) {
  std::string id = Open();
  Json r = Send(client_, id, "exit 3\n");
  EXPECT_EQ(r["waitReason"], "session_exit") << r.dump();
  EXPECT_EQ(r["sessionStatus"]["kind"], "exited");
  EXPECT_EQ(r["sessionStatus"]["exitCode"], 3);
  EXPECT_TRUE(r["exitCode"].is_null());
  Json again = client_.Call("terminal_send", Json{{"sessionId", id}, {"input", "echo\n"}});
  EXPECT_ERROR_KIND(again, ErrorKind::kClosed);
}

TEST_P(DaemonTest, AbsoluteTimeoutLeavesTheSessionRunning) {
  std::string id = Open();
  Json r = Send(client_, id, "sleep 5\n", Json{{"timeoutMs", 300}});
  EXPECT_EQ(r["waitReason"], "timeout") << r.dump();
  EXPECT_EQ(r["sessionStatus"]["kind"], "running");
  EXPECT_TRUE(r["exitCode"].is_null());
}

TEST_P(DaemonTest, SecondSendWhileOneIsActiveIsBusy) {
  std::string id = Open();
  int first = client_.SendRequest("terminal_send", Json{{"sessionId", id}, {"input", "sleep 2\n"}});
  Json second = client_.Call("terminal_send", Json{{"sessionId", id}, {"input", "echo x\n"}});
  EXPECT_EQ(second["error"]["code"], -32000) << second.dump();
  EXPECT_ERROR_KIND(second, ErrorKind::kBusy);
  Json done = client_.WaitResponse(first);
  EXPECT_EQ(done["result"]["waitReason"], "stdin_read") << done.dump();
}

TEST_P(DaemonTest, AnotherOwnersIdIsNotFound) {
  std::string id = Open();
  RpcClient other(daemon_.socket());
  for (const char* method :
       {"terminal_send", "terminal_read", "terminal_close", "terminal_status"}) {
    Json params{{"sessionId", id}};
    if (std::string(method) == "terminal_send") params["input"] = "echo stolen\n";
    Json r = other.Call(method, params);
    EXPECT_ERROR_KIND(r, ErrorKind::kNotFound) << method;
  }
  Json unknown = other.Call("terminal_status", Json{{"sessionId", "pty-0000"}});
  EXPECT_ERROR_KIND(unknown, ErrorKind::kNotFound);
  EXPECT_EQ(unknown["error"]["message"].get<std::string>().find(id), std::string::npos);
  EXPECT_EQ(other.Call("terminal_list", Json::object())["result"]["sessions"].size(), 0u);
}

TEST_P(DaemonTest, DisconnectEndsTheOwnersProcesses) {
  // Random, never the pid: with pid_max 32768 pids are reused within minutes, and an
  // unterminated "disconnect<pid>" is also a prefix of "disconnect<pid><digit>": another test's
  // (or another worktree's) marked sleeps were then counted as this owner's survivors.
  std::string marker = "PTYBOX_TEST_MARK=disconnect-" + RandomHex(16) + "-end";
  RpcClient owner(daemon_.socket());
  std::string id = OpenSession(owner, GetParam());
  Json opened_status = owner.Call("terminal_status", Json{{"sessionId", id}});
  pid_t shell = opened_status["result"]["pid"].get<pid_t>();
  ASSERT_TRUE(ProcessAlive(shell));
  Send(owner, id, "export MARK=" + marker + "; (sleep 300 &) ; sleep 300 &\n");
  owner.Disconnect();
  EXPECT_TRUE(WaitGone(shell)) << "the shell survived its owner's disconnect";
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!ProcessesWithEnv(marker).empty() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_TRUE(ProcessesWithEnv(marker).empty());
}

TEST_P(DaemonTest, CloseAnswersAfterEveryProcessEnded) {
  std::string id = Open();
  pid_t shell = client_.Call("terminal_status", Json{{"sessionId", id}})["result"]["pid"];
  Json closed = client_.Call("terminal_close", Json{{"sessionId", id}});
  ASSERT_TRUE(closed.contains("result")) << closed.dump();
  EXPECT_EQ(closed["result"]["sessionStatus"]["kind"], "exited");
  EXPECT_FALSE(ProcessAlive(shell));
  Json again = client_.Call("terminal_status", Json{{"sessionId", id}});
  EXPECT_ERROR_KIND(again, ErrorKind::kNotFound);
}

TEST_P(DaemonTest, ScrollbackPagesWithCursors) {
  std::string id = Open();
  Send(client_, id, "for i in $(seq 1 50); do echo line$i; done\n");
  Json page = client_.Call("terminal_read", Json{{"sessionId", id}, {"maxBytes", 64}});
  ASSERT_TRUE(page.contains("result")) << page.dump();
  EXPECT_LE(page["result"]["text"].get<std::string>().size(), 64u);
  EXPECT_FALSE(page["result"]["end"].get<bool>());
  uint64_t next = page["result"]["nextCursor"];
  std::string all = page["result"]["text"];
  for (int i = 0; i < 100 && !page["result"]["end"].get<bool>(); ++i) {
    page =
        client_.Call("terminal_read", Json{{"sessionId", id}, {"cursor", next}, {"maxBytes", 64}});
    all += page["result"]["text"].get<std::string>();
    next = page["result"]["nextCursor"];
  }
  EXPECT_NE(all.find("line1\n"), std::string::npos);
  EXPECT_NE(all.find("line50\n"), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(Modes, DaemonTest,
                         ::testing::Values("danger-full-access", "workspace-write"), ModeTestName);

class ProtocolTest : public ::testing::Test {
 protected:
  Daemon daemon_;
  RpcClient client_{daemon_.socket()};
};

TEST_F(ProtocolTest, MalformedLineGetsParseErrorAndTheConnectionStaysUsable) {
  client_.SendRaw("{this is not json\n");
  Json error = client_.WaitAny();
  EXPECT_EQ(error["error"]["code"], -32700) << error.dump();
  EXPECT_TRUE(error["id"].is_null());
  Json ok = client_.Call("terminal_list", Json::object());
  EXPECT_TRUE(ok["result"]["sessions"].is_array()) << ok.dump();
}

TEST_F(ProtocolTest, InvalidRequestsAndUnknownMethods) {
  client_.SendRaw("[1,2]\n");
  EXPECT_EQ(client_.WaitAny()["error"]["code"], -32600);
  client_.SendRaw(R"({"jsonrpc":"2.0","id":7,"method":"no_such_method"})"
                  "\n");
  Json unknown = client_.WaitResponse(7);
  EXPECT_EQ(unknown["error"]["code"], -32601);
  Json bad = client_.Call("terminal_open", Json{{"cols", "wide"}});
  EXPECT_EQ(bad["error"]["code"], -32602) << bad.dump();
  Json typo = client_.Call("terminal_open", Json{{"colums", 80}});
  EXPECT_EQ(typo["error"]["code"], -32602);
  EXPECT_NE(typo["error"]["message"].get<std::string>().find("colums"), std::string::npos);
}

TEST_F(ProtocolTest, PolicyResolveSpeaksTheContract) {
  Json r = client_.Call("policy_resolve", Json::object());
  ASSERT_TRUE(r.contains("result")) << r.dump();
  EXPECT_EQ(r["result"]["mode"], "workspace-write");
  EXPECT_EQ(r["result"]["workspaceRoot"], daemon_.workspace().string());
  EXPECT_EQ(r["result"]["network"], "deny");
  EXPECT_TRUE(r["result"]["writableRoots"].is_array());
  EXPECT_TRUE(r["result"].contains("source"));
}

TEST_F(ProtocolTest, RequestsOnOneConnectionRunConcurrently) {
  std::string a = OpenSession(client_, "danger-full-access");
  std::string b = OpenSession(client_, "danger-full-access");
  int slow = client_.SendRequest("terminal_send",
                                 Json{{"sessionId", a}, {"input", "sleep 1; echo slow\n"}});
  int fast = client_.SendRequest("terminal_send", Json{{"sessionId", b}, {"input", "echo fast\n"}});
  // The first answer to arrive is the fast one: a long send on A does not delay B.
  Json first = client_.WaitAny();
  EXPECT_EQ(first["id"], fast) << first.dump();
  EXPECT_EQ(first["result"]["viewport"], "fast");
  Json second = client_.WaitResponse(slow);
  EXPECT_EQ(second["result"]["viewport"], "slow");
}

TEST_F(ProtocolTest, ModeChangeIsFencedWhileASessionIsOpen) {
  std::string id = OpenSession(client_, "workspace-write");
  Json fenced = client_.Call("policy_set_mode", Json{{"mode", "read-only"}});
  EXPECT_ERROR_KIND(fenced, ErrorKind::kModeFenced);
  Json same = client_.Call("policy_set_mode", Json{{"mode", "workspace-write"}});
  EXPECT_TRUE(same.contains("result"));
  client_.Call("terminal_close", Json{{"sessionId", id}});
  Json changed = client_.Call("policy_set_mode", Json{{"mode", "read-only"}});
  EXPECT_EQ(changed["result"]["mode"], "read-only") << changed.dump();
}

TEST_F(ProtocolTest, SigtermClosesEverySessionAndExitsZero) {
  std::string id = OpenSession(client_, "danger-full-access");
  pid_t shell = client_.Call("terminal_status", Json{{"sessionId", id}})["result"]["pid"];
  int status = daemon_.Stop(SIGTERM);
  EXPECT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_FALSE(ProcessAlive(shell));
}

}  // namespace
}  // namespace ptybox::testing
