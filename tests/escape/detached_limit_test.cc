// Detached owners hold places of --max-connections (docs/security.md, "Daemon robustness"): a
// client that connects, opens sessions and disconnects, again and again, used to keep any
// number of owners (and their shells) alive for their detach grace, since only live
// connections were counted. Through the real binary over its real socket: once connections
// plus detached owners reach the limit, a new connection may only owner_attach; everything
// else is `busy` naming the limit, and its own owner never detaches.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <functional>
#include <iterator>
#include <thread>

#include "tests/support/daemon_fixture.h"
#include "tests/support/error_kind.h"
#include "tests/support/files.h"

namespace ptybox::testing {
namespace {

size_t Occurrences(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

// Waits (hang guard) until what `read` returns holds `needle` at least `count` times.
bool WaitForText(const std::function<std::string()>& read, const std::string& needle,
                 size_t count) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (Occurrences(read(), needle) < count) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

std::string Token(RpcClient& client) {
  Json info = client.Call("owner_info", Json::object());
  EXPECT_TRUE(info.contains("result")) << info.dump();
  return info["result"].value("ownerToken", std::string());
}

TEST(DetachedLimitTest, DetachedOwnersHoldPlacesAndAConnectionOverTheLimitMayOnlyAttach) {
  TempDir config;
  const std::filesystem::path policy = config.path() / "operator.yaml";
  std::ofstream(policy) << "version: 1\nlimits: {detachGraceMs: 600000}\n";
  const std::filesystem::path audit = config.path() / "audit.jsonl";
  Daemon daemon(Daemon::Options{
      {"--policy", policy.string(), "--max-connections", "2", "--audit-log", audit.string()}, {}});
  auto log = [&] { return daemon.Log(); };

  // Two owners open a shell each and leave: both are detached, their shells live on.
  std::string token_a;
  std::string session_a;
  {
    RpcClient a(daemon.socket());
    token_a = Token(a);
    session_a = OpenSession(a, "workspace-write");
    ASSERT_FALSE(session_a.empty());
  }
  ASSERT_TRUE(WaitForText(log, " detached: ", 1)) << daemon.Log();
  {
    RpcClient b(daemon.socket());
    ASSERT_FALSE(OpenSession(b, "read-only").empty());
  }
  ASSERT_TRUE(WaitForText(log, " detached: ", 2)) << daemon.Log();

  // The third connection finds both places held: it can open nothing, not even ask its token.
  RpcClient c(daemon.socket());
  for (const char* method : {"terminal_open", "owner_info", "terminal_list"}) {
    Json refused = c.Call(method, Json::object());
    ASSERT_TRUE(refused.contains("error")) << method << " " << refused.dump();
    EXPECT_ERROR_KIND(refused, ErrorKind::kBusy) << method;
    const std::string message = refused["error"]["message"];
    EXPECT_NE(message.find("serve --max-connections"), std::string::npos) << message;
    EXPECT_NE(message.find("2 detached owners awaiting owner_attach"), std::string::npos)
        << message;
    EXPECT_NE(message.find("may only owner_attach"), std::string::npos) << message;
  }
  // It may take a detached owner back: the shell is there and answers.
  Json attached = c.Call("owner_attach", Json{{"ownerToken", token_a}});
  ASSERT_TRUE(attached.contains("result")) << attached.dump();
  ASSERT_EQ(attached["result"]["sessions"].size(), 1u) << attached.dump();
  EXPECT_EQ(attached["result"]["sessions"][0]["sessionId"], session_a);
  EXPECT_EQ(Send(c, session_a, "echo kept-$((6*7))\n")["viewport"], "kept-42");

  // Now one connection and one detached owner: a fourth connection is again attach-only, and
  // when it leaves without attaching, its own owner is closed, never detached.
  {
    RpcClient d(daemon.socket());
    Json refused = d.Call("terminal_open", Json::object());
    EXPECT_ERROR_KIND(refused, ErrorKind::kBusy);
    EXPECT_NE(refused["error"]["message"].get<std::string>().find(
                  "1 connection and 1 detached owner awaiting"),
              std::string::npos)
        << refused.dump();
  }
  // conn-4 (the fourth owner) is closed: its owner_disconnected record is written.
  ASSERT_TRUE(WaitForText([&] { return ReadFile(audit); },
                          "\"event\":\"owner_disconnected\",\"owner\":\"conn-4\"", 1))
      << ReadFile(audit);
  EXPECT_EQ(Occurrences(daemon.Log(), "owner 4 detached"), 0u) << daemon.Log();
  // The attached connection works as any other: it may open a second shell.
  EXPECT_FALSE(OpenSession(c, "workspace-write").empty());
  daemon.Stop(SIGTERM);
}

}  // namespace
}  // namespace ptybox::testing
