// Owners that outlive a connection, unique names and the contract v1.1 conformance fixes
// (docs/protocol.md), through the real binary over its real socket with real bash. Waits are hang
// guards; the tests assert reasons and order, never durations.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <thread>

#include "common/random.h"
#include "tests/support/daemon_fixture.h"
#include "tests/support/error_kind.h"
#include "tests/support/files.h"

namespace ptybox::testing {
namespace {

// An operator policy with `limits` (YAML flow mapping), kept for the daemon's lifetime.
class PolicyDaemon {
 public:
  explicit PolicyDaemon(const std::string& limits)
      : daemon_(Options(policy_dir_.path() / "operator.yaml", limits)) {}
  Daemon& daemon() { return daemon_; }

 private:
  static Daemon::Options Options(const std::filesystem::path& file, const std::string& limits) {
    std::ofstream(file) << "version: 1\nlimits: " << limits << "\n";
    Daemon::Options options;
    options.extra_args = {"--policy", file.string()};
    return options;
  }
  TempDir policy_dir_;
  Daemon daemon_;
};

std::string Token(RpcClient& client) {
  Json info = client.Call("owner_info", Json::object());
  EXPECT_TRUE(info.contains("result")) << info.dump();
  return info["result"].value("ownerToken", std::string());
}

// Polls terminal_output (a hang guard bounds it) until the operation is done; the pieces joined.
Json DrainOutput(RpcClient& client, const std::string& session, std::string& output) {
  for (int i = 0; i < 600; ++i) {
    Json r = client.Call("terminal_output", Json{{"sessionId", session}});
    if (!r.contains("result")) return r;
    output += r["result"]["output"].get<std::string>();
    if (r["result"]["done"] == true) return r["result"];
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return Json{{"error", "terminal_output never reported done"}};
}

// Waits (hang guard) until `client` reports `session` busy: its foreground send is running.
void WaitBusy(RpcClient& client, const std::string& session) {
  for (int i = 0; i < 600; ++i) {
    Json status = client.Call("terminal_status", Json{{"sessionId", session}});
    if (status["result"].value("busy", false)) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ADD_FAILURE() << "the send never became busy";
}

TEST(OwnerTest, InfoGivesAToken) {
  PolicyDaemon pd("{detachGraceMs: 60000}");
  RpcClient client(pd.daemon().socket());
  Json info = client.Call("owner_info", Json::object());
  ASSERT_TRUE(info.contains("result")) << info.dump();
  const std::string token = info["result"]["ownerToken"];
  EXPECT_EQ(info["result"]["detachGraceMs"], 60000);
  // At least 128 random bits: more than 32 hex digits after its prefix.
  EXPECT_GE(token.size(), 32u + 6u);
  RpcClient other(pd.daemon().socket());
  EXPECT_NE(Token(other), token);
}

TEST(OwnerTest, ReconnectWithinTheGraceFindsTheShellAndTheSendInFlight) {
  PolicyDaemon pd("{detachGraceMs: 600000}");
  std::string token;
  std::string id;
  {
    RpcClient first(pd.daemon().socket());
    token = Token(first);
    id = OpenSession(first, "read-only", Json{{"name", "build"}});
    Json set = Send(first, id, "KEPT=state-42\n");
    EXPECT_EQ(set["waitReason"], "stdin_read") << set.dump();
    // A foreground send, still running when the connection ends.
    first.SendRequest("terminal_send",
                      Json{{"sessionId", id}, {"input", "sleep 2; echo done-$KEPT\n"}});
    WaitBusy(first, id);
    first.Disconnect();
  }
  RpcClient second(pd.daemon().socket());
  Json attached = second.Call("owner_attach", Json{{"ownerToken", token}});
  ASSERT_TRUE(attached.contains("result")) << attached.dump();
  ASSERT_EQ(attached["result"]["sessions"].size(), 1u) << attached.dump();
  EXPECT_EQ(attached["result"]["sessions"][0]["sessionId"], id);
  EXPECT_EQ(attached["result"]["sessions"][0]["name"], "build");
  ASSERT_EQ(attached["result"]["operations"].size(), 1u) << attached.dump();
  EXPECT_EQ(attached["result"]["operations"][0]["sessionId"], id);
  EXPECT_TRUE(attached["result"]["operations"][0]["operationId"].is_string());
  // The send in flight finished on its own; its output and result are read now.
  std::string output;
  Json result = DrainOutput(second, id, output);
  EXPECT_NE(output.find("done-state-42"), std::string::npos) << output;
  EXPECT_EQ(result["result"]["waitReason"], "stdin_read") << result.dump();
  EXPECT_EQ(result["result"]["exitCode"], 0);
  // The same shell, with its state.
  Json again = Send(second, id, "echo still-$KEPT\n");
  EXPECT_EQ(again["viewport"], "still-state-42") << again.dump();
  // Mode and fence stayed with the owner: read-only, and fenced while the session is open.
  Json resolved = second.Call("policy_resolve", Json::object());
  EXPECT_EQ(resolved["result"]["mode"], "read-only") << resolved.dump();
  Json widen = second.Call("policy_set_mode", Json{{"mode", "workspace-write"}});
  EXPECT_ERROR_KIND(widen, ErrorKind::kModeFenced);
  // The token is a secret: not in the list, not in the daemon's log.
  Json list = second.Call("terminal_list", Json::object());
  EXPECT_EQ(list.dump().find(token), std::string::npos);
  EXPECT_EQ(attached.dump().find(token), std::string::npos);
  EXPECT_EQ(pd.daemon().Log().find(token), std::string::npos);
  EXPECT_NE(pd.daemon().Log().find("detached"), std::string::npos) << pd.daemon().Log();
}

TEST(OwnerTest, ExpiryClosesTheSessionsAsADisconnectDoes) {
  PolicyDaemon pd("{detachGraceMs: 200}");
  const std::string marker = "OWNER_TEST_EXPIRY_" + RandomHex(8);
  std::string token;
  {
    RpcClient first(pd.daemon().socket());
    token = Token(first);
    std::string id = OpenSession(first, "workspace-write", Json{{"env", {{marker, "1"}}}});
    Json bg = Send(first, id, "sleep 600 &\n");
    EXPECT_EQ(bg["waitReason"], "stdin_read") << bg.dump();
    EXPECT_FALSE(ProcessesWithEnv(marker).empty());
    first.Disconnect();
  }
  // After the grace every process of the session is gone.
  for (int i = 0; i < 300 && !ProcessesWithEnv(marker).empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(ProcessesWithEnv(marker).empty());
  // And the owner is gone: its token attaches nothing.
  RpcClient second(pd.daemon().socket());
  Json late = second.Call("owner_attach", Json{{"ownerToken", token}});
  EXPECT_ERROR_KIND(late, ErrorKind::kNotFound);
}

TEST(OwnerTest, AttachErrors) {
  PolicyDaemon pd("{detachGraceMs: 600000}");
  RpcClient owner(pd.daemon().socket());
  const std::string token = Token(owner);
  // Unknown token.
  RpcClient a(pd.daemon().socket());
  Json wrong = a.Call("owner_attach", Json{{"ownerToken", "owner-" + RandomHex(32)}});
  EXPECT_EQ(wrong["error"]["code"], -32000) << wrong.dump();
  EXPECT_ERROR_KIND(wrong, ErrorKind::kNotFound);
  // Almost right: one digit changed.
  std::string near = token;
  near.back() = near.back() == '0' ? '1' : '0';
  EXPECT_ERROR_KIND(a.Call("owner_attach", Json{{"ownerToken", near}}), ErrorKind::kNotFound);
  // The owner's connection is alive.
  Json busy = a.Call("owner_attach", Json{{"ownerToken", token}});
  EXPECT_ERROR_KIND(busy, ErrorKind::kBusy);
  // A connection that opened a session may not attach.
  RpcClient b(pd.daemon().socket());
  OpenSession(b, "workspace-write");
  owner.Disconnect();
  Json after_open = b.Call("owner_attach", Json{{"ownerToken", token}});
  EXPECT_EQ(after_open["error"]["code"], -32600) << after_open.dump();
  // Nor attach twice.
  RpcClient c(pd.daemon().socket());
  Json first = c.Call("owner_attach", Json{{"ownerToken", token}});
  ASSERT_TRUE(first.contains("result")) << first.dump();
  Json twice = c.Call("owner_attach", Json{{"ownerToken", token}});
  EXPECT_EQ(twice["error"]["code"], -32600) << twice.dump();
  // The attached owner is busy for anyone else.
  RpcClient d(pd.daemon().socket());
  EXPECT_ERROR_KIND(d.Call("owner_attach", Json{{"ownerToken", token}}), ErrorKind::kBusy);
  EXPECT_EQ(pd.daemon().Log().find(token), std::string::npos);
}

TEST(OwnerTest, WithoutAGraceADisconnectClosesEverything) {
  Daemon daemon;  // default policy: detachGraceMs 0
  const std::string marker = "OWNER_TEST_NOGRACE_" + RandomHex(8);
  std::string token;
  {
    RpcClient first(daemon.socket());
    Json info = first.Call("owner_info", Json::object());
    EXPECT_EQ(info["result"]["detachGraceMs"], 0) << info.dump();
    token = info["result"]["ownerToken"];
    std::string id = OpenSession(first, "workspace-write", Json{{"env", {{marker, "1"}}}});
    EXPECT_FALSE(ProcessesWithEnv(marker).empty());
    first.Disconnect();
  }
  for (int i = 0; i < 300 && !ProcessesWithEnv(marker).empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(ProcessesWithEnv(marker).empty());
  RpcClient second(daemon.socket());
  EXPECT_ERROR_KIND(second.Call("owner_attach", Json{{"ownerToken", token}}), ErrorKind::kNotFound);
}

TEST(OwnerTest, ARepositoryFileCannotGrantAGrace) {
  Daemon daemon;  // no operator policy: detachGraceMs 0
  std::ofstream(daemon.workspace() / ".ptybox.yaml")
      << "version: 1\nlimits: {detachGraceMs: 60000}\n";
  RpcClient client(daemon.socket());
  Json info = client.Call("owner_info", Json::object());
  EXPECT_EQ(info["result"]["detachGraceMs"], 0) << info.dump();
  Json opened = client.Call("terminal_open", Json::object());
  EXPECT_ERROR_KIND(opened, ErrorKind::kPolicyDenied);
  EXPECT_NE(opened.dump().find("detachGraceMs"), std::string::npos) << opened.dump();
}

// A repository file is shared by every owner of the workspace. Owner A's session writes one
// that names a grace of 0, or that no daemon reads (`version: 2`); owner B then disconnects.
// B's grace is the operator's, fixed when B's policy resolved, so B's shell survives and B
// attaches to it, state and all. (Both used to close B's detached shell at once.)
TEST(OwnerTest, AnotherOwnersRepositoryFileNeverClosesDetachedSessions) {
  const std::vector<std::string> hostile = {
      "printf '%s\\n' 'version: 1' 'limits: {detachGraceMs: 0}' > .ptybox.yaml\n",
      "printf '%s\\n' 'version: 2' > .ptybox.yaml\n"};
  for (const std::string& write : hostile) {
    PolicyDaemon pd("{detachGraceMs: 600000}");
    RpcClient a(pd.daemon().socket());
    const std::string a_id = OpenSession(a, "workspace-write");
    std::string token;
    std::string b_id;
    {
      RpcClient b(pd.daemon().socket());
      token = Token(b);
      b_id = OpenSession(b, "workspace-write");
      EXPECT_EQ(Send(b, b_id, "KEPT=b-state\n")["waitReason"], "stdin_read");
      Json wrote = Send(a, a_id, write);
      EXPECT_EQ(wrote["exitCode"], 0) << wrote.dump();
      ASSERT_TRUE(std::filesystem::exists(pd.daemon().workspace() / ".ptybox.yaml"));
      b.Disconnect();
    }
    // The file is in force: a new open in the workspace is refused because of it.
    Json refused = a.Call("terminal_open", Json::object());
    EXPECT_NE(refused.dump().find(".ptybox.yaml"), std::string::npos) << refused.dump();
    RpcClient again(pd.daemon().socket());
    Json attached;
    for (int i = 0; i < 100; ++i) {  // hang guard: the disconnect may still be in progress
      attached = again.Call("owner_attach", Json{{"ownerToken", token}});
      if (!attached.contains("error") || !IsErrorKind(attached, ErrorKind::kBusy)) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ASSERT_TRUE(attached.contains("result")) << write << attached.dump();
    ASSERT_EQ(attached["result"]["sessions"].size(), 1u) << attached.dump();
    Json kept = Send(again, b_id, "echo still-$KEPT\n");
    EXPECT_EQ(kept["viewport"], "still-b-state") << kept.dump();
  }
}

// The whole 1 MiB alias-bomb attack file (docs/policy.md; one ~1 MB anchored scalar and 3000
// aliases: 3 GB if expanded) is refused by its size now, and what fits under the repository cap of
// 64 KiB (a 60,000-byte anchor and 500 aliases: 30 MB expanded) by the alias budget, with its
// position. Every call that reads the repository file refuses it, the daemon stays small, and
// another owner goes on: its shell answers, and it opens a session in danger-full-access (where the
// repository file is not read).
TEST(OwnerTest, AnAliasBombRepositoryFileIsRefusedAndOtherOwnersGoOn) {
  Daemon daemon;
  RpcClient b(daemon.socket());
  const std::string b_id = OpenSession(b, "read-only");
  struct Bomb {
    size_t anchor;
    int aliases;
    std::string refusal;
  };
  const Bomb bombs[] = {
      {1'000'000, 3000, ".ptybox.yaml: is larger than 65536 bytes (64 KiB)"},
      {60'000, 500,
       ".ptybox.yaml:20:5: yaml: the document holds more than 1048576 bytes of text (aliases "
       "counted expanded)"},
  };
  RpcClient a(daemon.socket());
  for (const Bomb& bomb : bombs) {
    std::string text = "version: 1\nbig: &big " + std::string(bomb.anchor, 'x') + "\nlist:\n";
    for (int i = 0; i < bomb.aliases; ++i) text += "  - *big\n";
    std::ofstream(daemon.workspace() / ".ptybox.yaml", std::ios::trunc) << text;
    for (int i = 0; i < 10; ++i) {
      Json refused = a.Call("terminal_open", Json::object());
      ASSERT_TRUE(refused.contains("error")) << refused.dump().substr(0, 300);
      EXPECT_ERROR_KIND(refused, ErrorKind::kPolicyError);
      const std::string message = refused["error"]["message"];
      EXPECT_NE(message.find(bomb.refusal), std::string::npos) << message.substr(0, 300);
      EXPECT_TRUE(a.Call("policy_resolve", Json::object()).contains("error"));
      EXPECT_TRUE(a.Call("owner_info", Json::object()).contains("result"));
    }
  }
  EXPECT_EQ(Send(b, b_id, "echo alive\n")["viewport"], "alive");
  RpcClient c(daemon.socket());
  const std::string c_id = OpenSession(c, "danger-full-access");
  EXPECT_EQ(Send(c, c_id, "echo also-alive\n")["viewport"], "also-alive");
  // The daemon's peak memory: the expansion would be 3 GB; a generous bound, not a timing.
  // 15 MB in the ordinary build; under ASan 227 MB (its shadow and its 256 MB quarantine of
  // freed blocks), hence 512 MiB: still a sixth of what the expansion would take.
  const long peak_kb = ProcStatusKib(daemon.pid(), "VmHWM");
  ASSERT_GT(peak_kb, 0);
  RecordProperty("daemon_peak_kb", std::to_string(peak_kb));
  EXPECT_LT(peak_kb, 512 * 1024) << "the daemon peaked at " << peak_kb << " kB";
}

TEST(NamesTest, ASecondOpenOfTheSameNameIsNameTakenConcurrentOrNot) {
  Daemon daemon;
  RpcClient client(daemon.socket());
  const std::string marker = "OWNER_TEST_NAME_TAKEN_" + RandomHex(8);
  // Two opens in flight at once: exactly one wins.
  int a = client.SendRequest("terminal_open", Json{{"name", "build"}});
  int b = client.SendRequest("terminal_open", Json{{"name", "build"}, {"env", {{marker, "1"}}}});
  Json ra = client.WaitResponse(a);
  Json rb = client.WaitResponse(b);
  ASSERT_NE(ra.contains("result"), rb.contains("result")) << ra.dump() << rb.dump();
  Json won = ra.contains("result") ? ra : rb;
  Json lost = ra.contains("result") ? rb : ra;
  EXPECT_EQ(lost["error"]["code"], -32000) << lost.dump();
  EXPECT_ERROR_KIND(lost, ErrorKind::kNameTaken);
  const std::string id = won["result"]["sessionId"];
  // A later one names the published session, and spawns nothing.
  Json later = client.Call("terminal_open", Json{{"name", "build"}, {"env", {{marker, "2"}}}});
  EXPECT_ERROR_KIND(later, ErrorKind::kNameTaken);
  EXPECT_EQ(later["error"]["data"]["sessionId"], id);
  if (ra.contains("error")) {
    EXPECT_TRUE(ProcessesWithEnv(marker).empty());
  }
  Json list = client.Call("terminal_list", Json::object());
  EXPECT_EQ(list["result"]["sessions"].size(), 1u) << list.dump();
  // Another owner may use the name; after close, so may this one.
  RpcClient other(daemon.socket());
  EXPECT_TRUE(other.Call("terminal_open", Json{{"name", "build"}}).contains("result"));
  EXPECT_TRUE(client.Call("terminal_close", Json{{"sessionId", id}}).contains("result"));
  Json reopened = client.Call("terminal_open", Json{{"name", "build"}});
  EXPECT_TRUE(reopened.contains("result")) << reopened.dump();
  // A failed open gives its name back.
  Json bad = client.Call("terminal_open", Json{{"name", "cwd-fails"}, {"cwd", "/nonexistent/x"}});
  EXPECT_TRUE(bad.contains("error")) << bad.dump();
  Json good = client.Call("terminal_open", Json{{"name", "cwd-fails"}});
  EXPECT_TRUE(good.contains("result")) << good.dump();
}

TEST(ConformanceTest, ReadPagesKeepBothBoundsWithALongUnterminatedLine) {
  PolicyDaemon pd("{maxReadBytes: 65536}");
  RpcClient client(pd.daemon().socket());
  std::string id = OpenSession(client, "workspace-write");
  // 300,000 bytes on one line, no newline after it: the prompt follows on the same line.
  // 'A' written as an octal escape: the echoed command holds no A of its own.
  Json r = Send(client, id, "head -c 300000 /dev/zero | tr '\\0' '\\101'\n");
  EXPECT_EQ(r["waitReason"], "stdin_read") << r.dump().substr(0, 300);
  Json small = client.Call("terminal_read", Json{{"sessionId", id}, {"maxBytes", 100}});
  ASSERT_TRUE(small.contains("result")) << small.dump();
  EXPECT_LE(small["result"]["text"].get<std::string>().size(), 100u);
  EXPECT_EQ(small["result"]["end"], false);
  // Every page, asked for more than maxReadBytes, keeps to maxReadBytes; together they hold
  // every byte.
  std::string all;
  Json cursor = nullptr;
  int pages = 0;
  for (; pages < 100; ++pages) {
    Json params{{"sessionId", id}, {"maxBytes", 1000000}};
    if (!cursor.is_null()) params["cursor"] = cursor;
    Json page = client.Call("terminal_read", params);
    ASSERT_TRUE(page.contains("result")) << page.dump().substr(0, 300);
    const std::string text = page["result"]["text"];
    EXPECT_LE(text.size(), 65536u);
    all += text;
    if (page["result"]["end"] == true) break;
    cursor = page["result"]["nextCursor"];
  }
  EXPECT_GE(pages, 4);
  EXPECT_EQ(std::count(all.begin(), all.end(), 'A'), 300000);
  // A cursor past everything starts where the unterminated line starts: 100 bytes of it. The
  // rest of the 300,000 bytes (37,856 of them) plus the prompt used to come whole.
  const uint64_t beyond = 1'000'000'000'000;
  Json tail =
      client.Call("terminal_read", Json{{"sessionId", id}, {"maxBytes", 100}, {"cursor", beyond}});
  ASSERT_TRUE(tail.contains("result")) << tail.dump().substr(0, 300);
  EXPECT_EQ(tail["result"]["text"].get<std::string>(), std::string(100, 'A'));
  EXPECT_EQ(tail["result"]["end"], false);
  EXPECT_EQ(tail["result"]["nextCursor"], tail["result"]["cursor"].get<uint64_t>() + 100);
}

TEST(ConformanceTest, AnIncompleteUtf8SequenceAtTheEndIsFlushedAsReplacement) {
  Daemon daemon;
  RpcClient client(daemon.socket());
  std::string id = OpenSession(client, "workspace-write");
  Json r = Send(client, id, "printf 'X\\xe2'; exit\n");
  EXPECT_EQ(r["waitReason"], "session_exit") << r.dump();
  Json read = client.Call("terminal_read", Json{{"sessionId", id}});
  ASSERT_TRUE(read.contains("result")) << read.dump();
  const std::string text = read["result"]["text"];
  EXPECT_NE(text.find("X\xEF\xBF\xBD"), std::string::npos) << Json(text).dump();
}

TEST(ConformanceTest, ASecondCloseIsNotFound) {
  Daemon daemon;
  RpcClient client(daemon.socket());
  std::string id = OpenSession(client, "workspace-write");
  EXPECT_TRUE(client.Call("terminal_close", Json{{"sessionId", id}}).contains("result"));
  Json again = client.Call("terminal_close", Json{{"sessionId", id}});
  EXPECT_ERROR_KIND(again, ErrorKind::kNotFound);
}

}  // namespace
}  // namespace ptybox::testing
