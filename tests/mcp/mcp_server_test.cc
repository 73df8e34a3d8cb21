// `ptybox mcp` spoken to line by line over its real stdin/stdout: version negotiation, the
// lifecycle rules, framing errors, tool errors as results, cancellation without a response, the
// policy resource and its subscriptions, and end of input closing every session. The official
// SDK client runs the whole session flow in sdk_client_test.mjs.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>

#include "tests/mcp/mcp_process.h"
#include "tests/support/daemon_fixture.h"

namespace ptybox::testing {
namespace {

constexpr size_t kDefaultBudget = 16384;  // ptybox mcp --max-result-bytes by default

TEST(McpVersionTest, EachSupportedVersionIsEchoedAndAnUnknownOneGetsTheLatest) {
  for (const char* version : {"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"}) {
    McpProcess mcp;
    Json r = mcp.Initialize(version);
    EXPECT_EQ(r["result"]["protocolVersion"], version) << r.dump();
    EXPECT_EQ(r["result"]["serverInfo"]["name"], "ptybox");
    EXPECT_TRUE(r["result"]["capabilities"]["tools"].is_object());
    EXPECT_EQ(r["result"]["capabilities"]["resources"]["subscribe"], true);
    EXPECT_TRUE(r["result"]["instructions"].get<std::string>().starts_with(
        "Sandbox policy: workspace-write mode; writable: \"" + mcp.workspace().string() + "\""));
  }
  McpProcess mcp;
  Json r = mcp.Initialize("1999-01-01");
  EXPECT_EQ(r["result"]["protocolVersion"], "2025-11-25") << r.dump();
}

TEST(McpVersionTest, OlderVersionsGetNoStructuredFieldsButKeepTheJsonAsText) {
  McpProcess old;
  old.Initialize("2024-11-05");
  Json tools = old.Request("tools/list")["result"]["tools"];
  ASSERT_EQ(tools.size(), 13u) << tools.dump();  // one per contract method
  for (const Json& tool : tools) {
    EXPECT_FALSE(tool.contains("outputSchema")) << tool["name"];
    EXPECT_FALSE(tool.contains("title")) << tool["name"];
    EXPECT_FALSE(tool.contains("annotations")) << tool["name"];
    EXPECT_EQ(tool["inputSchema"]["type"], "object");
  }
  Json listed = old.Tool("terminal_list");
  EXPECT_FALSE(listed.contains("structuredContent"));
  ASSERT_EQ(listed["content"].size(), 2u) << listed.dump();
  EXPECT_EQ(Json::parse(listed["content"][1]["text"].get<std::string>()),
            Json({{"sessions", Json::array()}}));

  McpProcess mid;
  mid.Initialize("2025-03-26");
  // A named copy: ranging over a part of the temporary response would read it after it
  // is destroyed (GCC 12 does not extend its life; AddressSanitizer: heap-use-after-free).
  const Json mid_tools = mid.Request("tools/list")["result"]["tools"];
  for (const Json& tool : mid_tools) {
    EXPECT_TRUE(tool.contains("annotations")) << tool["name"];
    EXPECT_FALSE(tool.contains("outputSchema")) << tool["name"];
  }

  McpProcess current;
  current.Initialize("2025-06-18");
  const Json current_tools = current.Request("tools/list")["result"]["tools"];
  for (const Json& tool : current_tools) {
    EXPECT_EQ(tool["outputSchema"]["type"], "object") << tool["name"];
    EXPECT_TRUE(tool.contains("title")) << tool["name"];
  }
  Json listed_now = current.Tool("terminal_list");
  EXPECT_EQ(listed_now["structuredContent"], Json({{"sessions", Json::array()}}));
  EXPECT_EQ(listed_now["content"].size(), 1u);
}

TEST(McpLifecycleTest, InitializeFirstPingAnytimeNotificationsUnanswered) {
  McpProcess mcp;
  Json early = mcp.Request("tools/list");
  EXPECT_EQ(early["error"]["code"], -32600) << early.dump();
  EXPECT_EQ(mcp.Request("ping")["result"], Json::object());
  Json no_version = mcp.Request("initialize", Json{{"capabilities", Json::object()}});
  EXPECT_EQ(no_version["error"]["code"], -32602) << no_version.dump();
  mcp.Initialize();
  Json again = mcp.Request("initialize", Json{{"protocolVersion", "2025-11-25"}});
  EXPECT_EQ(again["error"]["code"], -32600) << again.dump();

  // Notifications (known or not) and stray responses get nothing back: the next message on the
  // wire is the answer to the ping that follows them.
  mcp.Notify("notifications/initialized", Json::object());
  mcp.Notify("notifications/roots/list_changed", Json::object());
  mcp.Notify("notifications/cancelled", Json{{"requestId", 12345}});
  mcp.SendRaw(R"({"jsonrpc":"2.0","id":"server-req-1","result":{}})"
              "\n");
  size_t before = mcp.seen().size();
  Json pong = mcp.Request("ping");
  EXPECT_EQ(pong["result"], Json::object());
  EXPECT_EQ(mcp.seen().size(), before + 1) << "a notification or response was answered";
}

TEST(McpLifecycleTest, FramingErrorsAreJsonRpcErrorsAndTheConnectionStaysUsable) {
  McpProcess mcp;
  mcp.Initialize();
  mcp.SendRaw("{not json\n");
  Json parse = mcp.WaitFor([](const Json& m) { return m.contains("error"); });
  EXPECT_EQ(parse["error"]["code"], -32700);
  EXPECT_TRUE(parse["id"].is_null());
  mcp.SendRaw("[1,2]\n");
  Json batch = mcp.WaitFor(
      [](const Json& m) { return m.contains("error") && m["error"]["code"] == -32600; });
  EXPECT_TRUE(batch["id"].is_null());
  EXPECT_EQ(mcp.Request("no/such/method")["error"]["code"], -32601);
  Json unknown = mcp.Request("tools/call", Json{{"name", "rm_rf"}});
  EXPECT_EQ(unknown["error"]["code"], -32602);
  EXPECT_NE(unknown["error"]["message"].get<std::string>().find("rm_rf"), std::string::npos);
  Json bad_args = mcp.Request("tools/call", Json{{"name", "terminal_list"}, {"arguments", "all"}});
  EXPECT_EQ(bad_args["error"]["code"], -32602);
  EXPECT_EQ(mcp.Request("ping")["result"], Json::object());
}

TEST(McpToolTest, ToolFailuresAreResultsWithIsError) {
  McpProcess mcp;
  mcp.Initialize();
  Json bogus = mcp.Tool("terminal_send", Json{{"sessionId", "pty-nope"}, {"input", "ls\n"}});
  EXPECT_EQ(bogus["isError"], true) << bogus.dump();
  EXPECT_FALSE(bogus.contains("structuredContent"));
  EXPECT_TRUE(Text(bogus).starts_with("not_found: no session pty-nope")) << Text(bogus);
  Json typo = mcp.Tool("terminal_open", Json{{"colums", 80}});
  EXPECT_EQ(typo["isError"], true) << typo.dump();
  EXPECT_NE(Text(typo).find("colums"), std::string::npos) << Text(typo);
  Json mode = mcp.Tool("policy_set_mode", Json{{"mode", "yolo"}});
  EXPECT_EQ(mode["isError"], true);
  EXPECT_NE(Text(mode).find("read-only, workspace-write or danger-full-access"), std::string::npos);
}

TEST(McpToolTest, SendResultTextCarriesViewportReasonExitCodeAndCwd) {
  McpProcess mcp;
  mcp.Initialize();
  Json opened = mcp.Tool("terminal_open");
  ASSERT_EQ(opened["isError"], false) << opened.dump();
  std::string id = opened["structuredContent"]["sessionId"];
  Json r = mcp.Tool("terminal_send", Json{{"sessionId", id}, {"input", "echo one; false\n"}});
  EXPECT_EQ(Text(r),
            "one\n[waitReason: stdin_read | exitCode: 1 | cwd: " + mcp.workspace().string() + "]");
  EXPECT_EQ(r["structuredContent"]["exitCode"], 1);
  Json idle = mcp.Tool("terminal_send",
                       Json{{"sessionId", id}, {"input", "sleep 30\n"}, {"timeoutMs", 200}});
  EXPECT_EQ(idle["structuredContent"]["waitReason"], "timeout") << idle.dump();
  EXPECT_NE(Text(idle).find("the command may still be running"), std::string::npos);
  mcp.Tool("terminal_close", Json{{"sessionId", id}});
}

// The bytes an elision line's terminal_read pointer names, read page by page: each page starts
// where the previous one ended and is not truncated, and its answer line is at most
// `max_line_bytes` when that is given. Empty (and a failure) without a pointer.
std::string ReadPointed(McpProcess& mcp, const std::string& id, const std::string& elided,
                        size_t max_line_bytes = 0) {
  const size_t at = elided.find("\"cursor\": ");
  if (at == std::string::npos) {
    ADD_FAILURE() << "no terminal_read pointer in: " << elided;
    return {};
  }
  const uint64_t cursor = std::stoull(elided.substr(at + 10));
  const uint64_t max_bytes = std::stoull(elided.substr(elided.find("\"maxBytes\": ") + 12));
  std::string pointed;
  for (uint64_t next = cursor; next < cursor + max_bytes;) {
    Json page = mcp.Tool(
        "terminal_read",
        Json{{"sessionId", id}, {"cursor", next}, {"maxBytes", cursor + max_bytes - next}});
    if (page["isError"] != false) {
      ADD_FAILURE() << page.dump();
      return pointed;
    }
    if (max_line_bytes != 0) {
      EXPECT_LE((Json{{"jsonrpc", "2.0"}, {"id", 1000}, {"result", page}}).dump().size(),
                max_line_bytes);
    }
    EXPECT_EQ(page["structuredContent"]["truncated"], false) << page.dump();
    EXPECT_EQ(page["structuredContent"]["cursor"], next) << page.dump();
    pointed += page["structuredContent"]["text"].get<std::string>();
    next = page["structuredContent"]["nextCursor"];
  }
  return pointed;
}

// --max-result-bytes bounds every answer line; an over-long viewport keeps head and tail with a
// pointer, and terminal_read pages stay within the budget with an exact nextCursor.
TEST(McpBudgetTest, ASmallerBudgetBoundsEveryAnswerAndThePointerWorks) {
  McpProcess mcp({"--max-result-bytes", "4096"});
  mcp.Initialize();
  Json opened = mcp.Tool("terminal_open");
  ASSERT_EQ(opened["isError"], false) << opened.dump();
  std::string id = opened["structuredContent"]["sessionId"];
  Json r = mcp.Tool("terminal_send", Json{{"sessionId", id}, {"input", "seq 1 3000\n"}});
  const std::string viewport = r["structuredContent"]["viewport"];
  const Json line{{"jsonrpc", "2.0"}, {"id", 1000}, {"result", r}};
  EXPECT_LE(line.dump().size(), 4096u);
  EXPECT_EQ(viewport.rfind("1\n2\n", 0), 0u) << viewport;
  EXPECT_TRUE(viewport.ends_with("\n2999\n3000")) << viewport;
  EXPECT_NE(Text(r).find("[waitReason: stdin_read | exitCode: 0"), std::string::npos);
  // Page through the pointed bytes: the head, the pages and the tail are the whole output.
  const std::string middle = ReadPointed(mcp, id, viewport, 4096);
  ASSERT_FALSE(middle.empty()) << viewport;
  const std::string head = viewport.substr(0, viewport.find("[... "));
  const std::string tail = viewport.substr(viewport.find("...]\n") + 5);
  std::string expected;
  for (int i = 1; i <= 3000; ++i) expected += std::to_string(i) + (i < 3000 ? "\n" : "");
  EXPECT_TRUE(head + middle + tail == expected)
      << "head " << head.size() << " + pointed " << middle.size() << " + tail " << tail.size()
      << " bytes; the output is " << expected.size();
  mcp.Tool("terminal_close", Json{{"sessionId", id}});
}

// A send's viewport can keep a head the scrollback has already dropped (it keeps its last
// scrollbackLines lines): the elision line then points only at the part still kept, which a read
// returns exactly (not `truncated`), and paging it ends right before the kept tail.
TEST(McpBudgetTest, ThePointerNamesOnlyWhatTheScrollbackStillKeeps) {
  TempDir workspace;
  std::ofstream(workspace.path() / ".ptybox.yaml")
      << "version: 1\nlimits:\n  scrollbackLines: 1000\n";
  McpProcess mcp({"--max-result-bytes", "4096"}, workspace.path());
  mcp.Initialize();
  Json opened = mcp.Tool("terminal_open");
  ASSERT_EQ(opened["isError"], false) << opened.dump();
  std::string id = opened["structuredContent"]["sessionId"];
  Json r = mcp.Tool("terminal_send", Json{{"sessionId", id}, {"input", "seq 1 3000\n"}});
  const std::string viewport = r["structuredContent"]["viewport"];
  EXPECT_EQ(viewport.rfind("1\n2\n", 0), 0u) << viewport;
  EXPECT_TRUE(viewport.ends_with("\n2999\n3000")) << viewport;
  const size_t kept_at = viewport.find(" bytes are kept: terminal_read {");
  ASSERT_NE(kept_at, std::string::npos) << viewport;
  EXPECT_NE(viewport.find("left out here; only their last "), std::string::npos) << viewport;
  const std::string middle = ReadPointed(mcp, id, viewport);
  ASSERT_FALSE(middle.empty()) << viewport;
  // The pointed bytes start at a whole line the scrollback kept, after the kept head, and run
  // into the kept tail: together they are the output's end.
  const std::string head = viewport.substr(0, viewport.find("[... "));
  const std::string tail = viewport.substr(viewport.find("...]\n") + 5);
  const int first = std::stoi(middle);
  const int head_last = std::stoi(head.substr(head.rfind('\n', head.size() - 2) + 1));
  EXPECT_GT(first, head_last + 1);
  EXPECT_GE(first, 3000 - 1000);
  std::string expected;
  for (int i = first; i <= 3000; ++i) expected += std::to_string(i) + (i < 3000 ? "\n" : "");
  EXPECT_TRUE(middle + tail == expected)
      << "pointed " << middle.size() << " + tail " << tail.size() << " bytes from line " << first
      << "; expected " << expected.size();
  mcp.Tool("terminal_close", Json{{"sessionId", id}});
}

// Starts `command` as a background send and waits (a hang guard only) until it settled, so
// everything it printed waits to be collected and lies in the scrollback before what follows.
std::string StartAndSettle(McpProcess& mcp, const std::string& command) {
  Json opened = mcp.Tool("terminal_open");
  EXPECT_EQ(opened["isError"], false) << opened.dump() << mcp.Log();
  const std::string id = opened["structuredContent"].value("sessionId", "");
  Json started = mcp.Tool("terminal_send",
                          Json{{"sessionId", id}, {"input", command + "\n"}, {"background", true}});
  EXPECT_EQ(started["isError"], false) << started.dump();
  const auto guard = Clock::now() + kGuard;
  while (mcp.Tool("terminal_status", Json{{"sessionId", id}})["structuredContent"]["busy"] ==
             true &&
         Clock::now() < guard) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return id;
}

// Every chunk terminal_output hands back until done (as the model gets it), each answer line
// within `budget` bytes.
std::vector<std::string> CollectAll(McpProcess& mcp, const std::string& id, size_t budget) {
  std::vector<std::string> chunks;
  for (int i = 0; i < 1000; ++i) {
    Json r = mcp.Tool("terminal_output", Json{{"sessionId", id}});
    EXPECT_EQ(r["isError"], false) << r.dump();
    EXPECT_LE((Json{{"jsonrpc", "2.0"}, {"id", 1000}, {"result", r}}).dump().size(), budget);
    chunks.push_back(r["structuredContent"].value("output", ""));
    if (r["structuredContent"]["done"] != false) break;
  }
  return chunks;
}

std::string SeqText(int n) {
  std::string text;
  for (int i = 1; i <= n; ++i) text += std::to_string(i) + "\n";
  return text;
}

// Issue 25, as measured through `ptybox mcp`: `seq 1 200000` collected after it finished. Each
// collected chunk (maxReadBytes, cut mid-line) is elided with a pointer although about 1 MB of
// later output follows it in the scrollback: head + the pages read from the pointer + tail,
// chunk after chunk, are the whole output, nothing missing, nothing repeated.
void CollectedChunksPointAtWhatTheyLeftOut(McpProcess& mcp) {
  mcp.Initialize();
  const std::string id = StartAndSettle(mcp, "seq 1 200000; echo end");
  std::string joined;
  int elided = 0;
  for (const std::string& chunk : CollectAll(mcp, id, kDefaultBudget)) {
    const size_t line = chunk.find("[... ");
    if (line == std::string::npos) {
      joined += chunk;
      continue;
    }
    ++elided;
    EXPECT_EQ(chunk.find("terminal_read pages what the scrollback kept"), std::string::npos)
        << chunk.substr(line, 200);
    EXPECT_EQ(chunk.find("no longer keeps"), std::string::npos) << chunk.substr(line, 200);
    const std::string middle = ReadPointed(mcp, id, chunk);
    joined += chunk.substr(0, line) + middle + chunk.substr(chunk.find("...]\n", line) + 5);
  }
  EXPECT_GE(elided, 4);
  EXPECT_TRUE(joined == SeqText(200000) + "end\n")
      << joined.size() << " bytes collected and pointed at, expected "
      << SeqText(200000).size() + 4;
  mcp.Tool("terminal_close", Json{{"sessionId", id}});
}

// An operator policy whose scrollback keeps all of seq 1 200000 (the default keeps 10,000
// lines), in `dir`.
std::filesystem::path BigScrollbackPolicy(const std::filesystem::path& dir,
                                          const std::string& more = "") {
  const std::filesystem::path path = dir / "operator.yaml";
  std::ofstream(path) << "version: 1\nlimits: {scrollbackLines: 400000" << more << "}\n";
  return path;
}

TEST(McpCollectedOutputTest, ChunksFarBeforeTheScrollbacksEndPointAtWhatTheyLeftOut) {
  TempDir dir;
  McpProcess mcp({"--policy", BigScrollbackPolicy(dir.path()).string()});
  CollectedChunksPointAtWhatTheyLeftOut(mcp);
}

TEST(McpCollectedOutputTest, OverConnectChunksPointAtWhatTheyLeftOut) {
  TempDir dir;
  const std::filesystem::path state = dir.path() / "state";
  std::filesystem::create_directories(state);
  ::setenv("XDG_STATE_HOME", state.c_str(), 1);
  Daemon daemon(Daemon::Options{
      {"--policy", BigScrollbackPolicy(dir.path(), ", detachGraceMs: 600000").string()}, {}});
  {
    McpProcess mcp({"--connect", daemon.socket().string()}, daemon.workspace());
    CollectedChunksPointAtWhatTheyLeftOut(mcp);
  }
  ::unsetenv("XDG_STATE_HOME");
}

// When the bytes a chunk left out scrolled out of a small scrollback before it was collected,
// the line says so and names no cursor (never one whose read would start elsewhere).
TEST(McpCollectedOutputTest, LeftOutBytesThatScrolledOutAreSaidToBeGone) {
  TempDir workspace;
  std::ofstream(workspace.path() / ".ptybox.yaml")
      << "version: 1\nlimits:\n  scrollbackLines: 1000\n";
  McpProcess mcp({}, workspace.path());
  mcp.Initialize();
  const std::string id = StartAndSettle(mcp, "seq 1 200000; echo end");
  const std::vector<std::string> chunks = CollectAll(mcp, id, kDefaultBudget);
  ASSERT_FALSE(chunks.empty());
  const std::string& first = chunks.front();
  EXPECT_EQ(first.rfind("1\n2\n", 0), 0u) << first.substr(0, 100);
  const size_t line = first.find("[... ");
  ASSERT_NE(line, std::string::npos);
  const std::string said = first.substr(line, first.find("...]\n", line) + 4 - line);
  EXPECT_NE(said.find("left out here; the scrollback no longer keeps them ...]"), std::string::npos)
      << said;
  EXPECT_EQ(said.find("terminal_read {"), std::string::npos) << said;
  EXPECT_EQ(chunks.back().substr(chunks.back().size() - 11), "200000\nend\n");
  mcp.Tool("terminal_close", Json{{"sessionId", id}});
}

// Output that is not one run of scrollback bytes (the intermediate prompt between two commands
// of one send is taken out of it) has no outputCursor: its elision line names no cursor, never
// one whose pages would hold the prompt too.
TEST(McpCollectedOutputTest, OutputThatIsNotOneRunOfTheScrollbackNamesNoCursor) {
  McpProcess mcp({"--max-result-bytes", "4096"});
  mcp.Initialize();
  const std::string id = StartAndSettle(mcp, "seq 1 3000\nseq 3001 6000");
  const std::vector<std::string> chunks = CollectAll(mcp, id, 4096);
  ASSERT_EQ(chunks.size(), 1u);
  const std::string& chunk = chunks.front();
  EXPECT_EQ(chunk.rfind("1\n2\n", 0), 0u) << chunk.substr(0, 100);
  EXPECT_TRUE(chunk.ends_with("\n5999\n6000\n")) << chunk.substr(chunk.size() - 100);
  const size_t line = chunk.find("[... ");
  ASSERT_NE(line, std::string::npos);
  const std::string said = chunk.substr(line, chunk.find("...]\n", line) + 4 - line);
  EXPECT_NE(said.find("left out here; terminal_read pages what the scrollback kept ...]"),
            std::string::npos)
      << said;
  EXPECT_EQ(said.find("\"cursor\""), std::string::npos) << said;
  mcp.Tool("terminal_close", Json{{"sessionId", id}});
}

TEST(McpCancelTest, CanceledSendIsInterruptedAndGetsNoResponse) {
  McpProcess mcp;
  mcp.Initialize();
  std::string id = mcp.Tool("terminal_open")["structuredContent"]["sessionId"];
  int send =
      mcp.SendRequest("tools/call", Json{{"name", "terminal_send"},
                                         {"arguments",
                                          {{"sessionId", id},
                                           {"input", "sh -c 'echo go-$((6*7)); exec sleep 300'\n"},
                                           {"silenceMs", 600000},
                                           {"timeoutMs", 600000}}}});
  // Wait until the sleeper runs, so the cancel has a foreground program to interrupt.
  auto deadline = Clock::now() + kGuard;
  while (Clock::now() < deadline) {
    Json page = mcp.Tool("terminal_read", Json{{"sessionId", id}, {"view", "screen"}});
    if (page["structuredContent"]["text"].get<std::string>().find("go-42") != std::string::npos) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  mcp.Notify("notifications/cancelled", Json{{"requestId", send}, {"reason", "not needed"}});
  while (Clock::now() < deadline &&
         mcp.Tool("terminal_status", Json{{"sessionId", id}})["structuredContent"]["busy"] ==
             true) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  Json after = mcp.Tool("terminal_send", Json{{"sessionId", id}, {"input", "echo \"rc=$?\"\n"}});
  EXPECT_EQ(after["structuredContent"]["viewport"], "rc=130") << after.dump();
  for (const Json& m : mcp.seen()) EXPECT_FALSE(IsResponseTo(m, send)) << m.dump();
}

TEST(McpCancelTest, CanceledOpenClosesTheUnpublishedShell) {
  McpProcess mcp;
  mcp.Initialize();
  const std::string marker = "MCPTEST_MARK_" + std::to_string(::getpid());
  const Json open{
      {"jsonrpc", "2.0"},
      {"id", "open-1"},
      {"method", "tools/call"},
      {"params", {{"name", "terminal_open"}, {"arguments", {{"env", {{"MARK", marker}}}}}}}};
  const Json cancel{{"jsonrpc", "2.0"},
                    {"method", "notifications/cancelled"},
                    {"params", {{"requestId", "open-1"}, {"reason", "host gave up"}}}};
  // One write: both lines are read before the spawn can settle.
  mcp.SendRaw(open.dump() + "\n" + cancel.dump() + "\n");
  auto deadline = Clock::now() + kGuard;
  while (!ProcessesWithEnv(marker).empty() && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_TRUE(ProcessesWithEnv(marker).empty()) << "the canceled shell survived";
  EXPECT_EQ(mcp.Tool("terminal_list")["structuredContent"]["sessions"], Json::array());
  for (const Json& m : mcp.seen()) EXPECT_FALSE(IsResponseTo(m, "open-1")) << m.dump();
}

TEST(McpPolicyTest, ResourceUpdatesGoToSubscribersOnlyAndPrecedeTheResult) {
  McpProcess mcp;
  mcp.Initialize();
  Json read = mcp.Request("resources/read", Json{{"uri", "ptybox://policy"}});
  ASSERT_EQ(read["result"]["contents"].size(), 2u) << read.dump();
  EXPECT_EQ(Json::parse(read["result"]["contents"][1]["text"].get<std::string>())["mode"],
            "workspace-write");
  EXPECT_EQ(mcp.Request("resources/subscribe", Json{{"uri", "ptybox://other"}})["error"]["code"],
            -32002);

  // Not subscribed: the mode changes without a notification.
  size_t before = mcp.seen().size();
  Json quiet = mcp.Tool("policy_set_mode", Json{{"mode", "read-only"}});
  EXPECT_EQ(quiet["structuredContent"]["mode"], "read-only") << quiet.dump();
  EXPECT_EQ(mcp.seen().size(), before + 1);

  EXPECT_EQ(mcp.Request("resources/subscribe", Json{{"uri", "ptybox://policy"}})["result"],
            Json::object());
  before = mcp.seen().size();
  Json loud = mcp.Tool("policy_set_mode", Json{{"mode", "workspace-write"}});
  ASSERT_EQ(mcp.seen().size(), before + 2);
  EXPECT_EQ(mcp.seen()[before]["method"], "notifications/resources/updated");
  EXPECT_EQ(mcp.seen()[before]["params"]["uri"], "ptybox://policy");
  EXPECT_NE(Text(loud).find("Sandbox policy: workspace-write mode"), std::string::npos);

  EXPECT_EQ(mcp.Request("resources/unsubscribe", Json{{"uri", "ptybox://policy"}})["result"],
            Json::object());
  before = mcp.seen().size();
  mcp.Tool("policy_set_mode", Json{{"mode", "read-only"}});
  EXPECT_EQ(mcp.seen().size(), before + 1);
}

// The instructions a model gets, with Git for agents off (`git_write` "0") and on ("1"): what
// they say of .git is what the sessions will do there (told .git was read-only, a model with
// Git for agents on would not commit).
std::string InstructionsWithGitWrite(const char* git_write, std::string& expected_start) {
  TempDir dir;
  const std::filesystem::path extra = dir.path() / "cache";
  std::filesystem::create_directories(extra);
  const std::filesystem::path policy = dir.path() / "operator.yaml";
  std::ofstream(policy) << "version: 1\nmode: workspace-write\nnetwork: allow\nwritable:\n  - "
                        << extra.string() << "\n";
  ::setenv("PTYBOX_GIT_WRITE", git_write, 1);  // the child's environment
  McpProcess mcp({"--policy", policy.string()});
  ::unsetenv("PTYBOX_GIT_WRITE");
  Json r = mcp.Initialize();
  expected_start = "Sandbox policy: workspace-write mode; writable: \"" + mcp.workspace().string() +
                   "\", \"" + extra.string() + "\" (";
  return r["result"].value("instructions", r.dump());
}

TEST(McpPolicyTest, InstructionsStateTheOperatorPolicy) {
  std::string start;
  const std::string off = InstructionsWithGitWrite("0", start);
  EXPECT_EQ(off, start +
                     "except .git directories and policy files) and a private /tmp; "
                     "everything else read-only; network allowed.");
  const std::string on = InstructionsWithGitWrite("1", start);
  EXPECT_EQ(on, start +
                    "except policy files, and the hooks and configuration in .git directories: "
                    "git add, commit, branch and tag work there and come back to the repository "
                    "after each command) and a private /tmp; everything else read-only; network "
                    "allowed.");
}

TEST(McpShutdownTest, EndOfInputClosesEverySessionAndExitsZero) {
  McpProcess mcp;
  mcp.Initialize();
  const std::string marker = "MCPTEST_EOF_" + std::to_string(::getpid());
  Json opened = mcp.Tool("terminal_open", Json{{"env", {{"MARK", marker}}}});
  ASSERT_EQ(opened["isError"], false) << opened.dump();
  std::string id = opened["structuredContent"]["sessionId"];
  pid_t shell = opened["structuredContent"]["pid"];
  mcp.Tool("terminal_send", Json{{"sessionId", id}, {"input", "(sleep 300 &); sleep 300 &\n"}});
  ASSERT_FALSE(ProcessesWithEnv(marker).empty());
  // A send still running when the host leaves must not keep the server alive.
  mcp.SendRequest("tools/call", Json{{"name", "terminal_send"},
                                     {"arguments", {{"sessionId", id}, {"input", "sleep 300\n"}}}});
  mcp.CloseInput();
  std::optional<int> status = mcp.WaitExit();
  ASSERT_TRUE(status.has_value()) << "ptybox mcp did not exit at end of input";
  EXPECT_TRUE(WIFEXITED(*status)) << *status;
  EXPECT_EQ(WEXITSTATUS(*status), 0);
  EXPECT_FALSE(ProcessAlive(shell));
  EXPECT_TRUE(ProcessesWithEnv(marker).empty());
}

// tools/list goes to the model on every turn: the whole message stays under 10,000 bytes, and
// every tool keeps its title, description and schemas.
TEST(McpToolsTest, ToolsListStaysUnderTenThousandBytes) {
  McpProcess mcp;
  mcp.Initialize();
  const Json listed = mcp.Request("tools/list");
  const size_t bytes = listed.dump().size();
  EXPECT_LT(bytes, 10000u) << "tools/list is " << bytes << " bytes";
  ASSERT_EQ(listed["result"]["tools"].size(), 13u);
  for (const Json& tool : listed["result"]["tools"]) {
    EXPECT_FALSE(tool.value("title", "").empty()) << tool.dump();
    EXPECT_GT(tool.value("description", "").size(), 40u) << tool.dump();
    EXPECT_EQ(tool["inputSchema"]["type"], "object") << tool.dump();
    EXPECT_EQ(tool["outputSchema"]["type"], "object") << tool.dump();
  }
}

// terminal_open's env schema states the service's rules (policy/schema.h: EnvNamePattern,
// kMaxEnvValueBytes, kMaxListEntries, the reserved names), and the tool enforces them.
TEST(McpToolsTest, TerminalOpenEnvSchemaStatesTheServiceRules) {
  McpProcess mcp;
  mcp.Initialize("2025-06-18");
  const Json listed = mcp.Request("tools/list");
  Json env;
  for (const Json& tool : listed["result"]["tools"]) {
    if (tool["name"] == "terminal_open") env = tool["inputSchema"]["properties"]["env"];
  }
  ASSERT_TRUE(env.is_object());
  EXPECT_EQ(env["propertyNames"]["pattern"], "^[A-Za-z_][A-Za-z0-9_]{0,127}$") << env.dump();
  EXPECT_EQ(env["maxProperties"], 256);
  EXPECT_EQ(env["additionalProperties"]["maxLength"], 32768);
  const Json& reserved = env["propertyNames"]["not"]["anyOf"][0]["enum"];
  for (const char* name : {"SHELLOPTS", "BASHOPTS", "BASH_XTRACEFD", "PROMPT_COMMAND", "TERM"}) {
    EXPECT_NE(std::find(reserved.begin(), reserved.end(), Json(name)), reserved.end()) << name;
  }
  EXPECT_EQ(env["propertyNames"]["not"]["anyOf"][1]["pattern"], "^PTYBOX_");
  for (const Json& bad : {Json{{"SHELLOPTS", "xtrace"}}, Json{{"A", std::string("x\0PS0=y", 7)}}}) {
    Json refused = mcp.Tool("terminal_open", Json{{"env", bad}});
    EXPECT_EQ(refused["isError"], true) << refused.dump();
  }
}

}  // namespace
}  // namespace ptybox::testing
