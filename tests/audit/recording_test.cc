// Session recordings through the real binary: `--record DIR` writes DIR/<sessionId>.cast
// (0600), an asciicast v2 file whose header has the terminal's size and whose events are
// ordered in time, with `i` events for what was sent and `o` events whose concatenation is the
// terminal's output (invalid UTF-8 made valid); `asciinema cat` replays it; the operator's
// `audit.recordMaxBytes` bounds it with a final marker. The daemon is stopped before a file is
// read.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "common/base64.h"
#include "tests/audit/audit_support.h"

namespace ptybox::testing {
namespace {

namespace fs = std::filesystem;

struct Cast {
  Json header;
  std::vector<Json> events;
  std::string output;  // every `o` event, concatenated
  std::vector<std::string> inputs;
};

// Parses a recording; fails the test for a line that is not an asciicast v2 line or an
// event earlier than the one before it.
Cast ReadCast(const fs::path& path) {
  Cast cast;
  std::ifstream in(path, std::ios::binary);
  std::string line;
  EXPECT_TRUE(std::getline(in, line)) << "empty recording " << path;
  cast.header = Json::parse(line);
  double last = 0;
  while (std::getline(in, line)) {
    Json e = Json::parse(line);
    EXPECT_TRUE(e.is_array() && e.size() == 3 && e[0].is_number() && e[1].is_string() &&
                e[2].is_string())
        << line;
    if (!e.is_array() || e.size() != 3) continue;
    EXPECT_GE(e[0].get<double>(), last) << line;
    last = e[0].get<double>();
    if (e[1] == "o") cast.output += e[2].get<std::string>();
    if (e[1] == "i") cast.inputs.push_back(e[2]);
    cast.events.push_back(std::move(e));
  }
  return cast;
}

// What `asciinema cat` prints (it wants a terminal: `script` gives it one).
std::string AsciinemaCat(const fs::path& cast, const fs::path& out) {
  Shell("script -qec 'asciinema cat " + cast.string() + "' /dev/null > " + out.string() +
        " 2>&1 < /dev/null");
  std::ifstream in(out, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(RecordingTest, ASessionIsRecordedAsAsciicastV2) {
  TempDir records;
  TempDir logs;
  std::string id;
  {
    Daemon daemon(Daemon::Options{
        {"--record", records.path().string(), "--audit-log", (logs.path() / "a.jsonl").string()},
        {}});
    RpcClient client(daemon.socket());
    id = OpenSession(client, "workspace-write", Json{{"cols", 100}, {"rows", 30}});
    ASSERT_FALSE(id.empty());
    EXPECT_EQ(Send(client, id, "echo rec-hello\n")["viewport"], "rec-hello");
    // A character split across two writes, then bytes that are not UTF-8 at all.
    Send(client, id, "printf '\\342\\202'; sleep 0.1; printf '\\254\\n'\n");
    Send(client, id, "printf 'x\\377\\376y\\n'\n");
    client.Call("terminal_close", Json{{"sessionId", id}});
    daemon.Stop(SIGTERM);
  }
  const fs::path path = records.path() / (id + ".cast");
  ASSERT_TRUE(fs::exists(path)) << path;
  EXPECT_EQ(FileMode(path), 0600u);
  Cast cast = ReadCast(path);
  EXPECT_EQ(cast.header["version"], 2);
  EXPECT_EQ(cast.header["width"], 100);
  EXPECT_EQ(cast.header["height"], 30);
  EXPECT_TRUE(cast.header["timestamp"].is_number_integer());
  EXPECT_EQ(cast.header["env"]["TERM"], "xterm-256color");
  EXPECT_EQ(cast.header["env"]["SHELL"], "bash");
  ASSERT_GE(cast.inputs.size(), 3u);
  EXPECT_EQ(cast.inputs[0], "echo rec-hello\n");
  EXPECT_NE(cast.output.find("rec-hello\r\n"), std::string::npos) << cast.output;
  EXPECT_NE(cast.output.find("\xE2\x82\xAC\r\n"), std::string::npos) << cast.output;
  EXPECT_NE(cast.output.find("x\xEF\xBF\xBD\xEF\xBF\xBDy"), std::string::npos) << cast.output;
  // The prompt markers, which carry the session's nonce, are not recorded.
  EXPECT_EQ(cast.output.find("\x1b]6973;"), std::string::npos) << cast.output;
  // The session's close is the last event, as a marker.
  ASSERT_FALSE(cast.events.empty());
  EXPECT_EQ(cast.events.back()[1], "m");
  // The audit log names the recording.
  std::vector<Json> opened = EventsNamed(ReadAuditLog(logs.path() / "a.jsonl"), "session_opened");
  ASSERT_EQ(opened.size(), 1u);
  EXPECT_EQ(opened[0]["recording"], path.string());
}

TEST(RecordingTest, ACancelledMarkerDoesNotHideTheOutputAfterIt) {
  // A session starts a prompt marker (OSC 6973) and ends it with CAN, SUB or another escape
  // sequence, as the terminal's parser does; the output after it used to vanish from the
  // recording until the next BEL. The words are assembled by the shell, so the typed command's
  // echo cannot contain them.
  for (const std::string mode : {"read-only", "workspace-write", "danger-full-access"}) {
    TempDir records;
    std::string id;
    {
      Daemon daemon(Daemon::Options{{"--record", records.path().string()}, {}});
      RpcClient client(daemon.socket());
      id = OpenSession(client, mode);
      ASSERT_FALSE(id.empty()) << mode << ": " << daemon.Log();
      for (const char* end : {"\\030", "\\032", "\\033[1m"}) {
        Send(client, id,
             std::string("v=shown; printf '\\033]6973;fake") + end + "%s-after\\n' \"$v\"\n");
      }
      client.Call("terminal_close", Json{{"sessionId", id}});
      daemon.Stop(SIGTERM);
    }
    Cast cast = ReadCast(records.path() / (id + ".cast"));
    size_t shown = 0;
    for (size_t at = 0; (at = cast.output.find("shown-after", at)) != std::string::npos; ++at) {
      ++shown;
    }
    EXPECT_EQ(shown, 3u) << mode << ": " << cast.output;
    EXPECT_NE(cast.output.find("\x1b[1mshown-after"), std::string::npos) << mode;
    EXPECT_EQ(cast.output.find("\x1b]6973;"), std::string::npos) << mode << ": " << cast.output;
  }
}

TEST(RecordingTest, ALongWorkingDirectorysMarkerReachesNeitherAWatcherNorTheRecording) {
  // The prompt marker holds the shell's ${PWD@Q}: 18 directories of 250 characters make it
  // longer than 4 KiB. The daemon's prompt parser accepts it (the send settles with the cwd);
  // the stripper used to pass a marker that long on, nonce and all, to watchers and recordings.
  // The output after it must still reach both.
  for (const std::string mode : {"read-only", "workspace-write"}) {
    TempDir records;
    std::string id;
    std::string watched;
    {
      Daemon daemon(Daemon::Options{{"--record", records.path().string()}, {}});
      RpcClient client(daemon.socket());
      id = OpenSession(client, mode);
      ASSERT_FALSE(id.empty()) << mode << ": " << daemon.Log();
      RpcClient person(daemon.socket());
      const Json token = client.Call("owner_info", Json::object())["result"]["ownerToken"];
      Json watch = person.Call("terminal_watch", Json{{"sessionId", id}, {"ownerToken", token}});
      ASSERT_TRUE(watch.contains("result")) << mode << ": " << watch.dump();
      const int64_t watch_id = watch["result"]["watchId"];

      const std::string dir(250, 'd');
      // The private /tmp of a confined session is writable in both modes.
      Json deep = Send(client, id,
                       "cd /tmp && for i in $(seq 18); do mkdir " + dir + " && cd " + dir +
                           " || break; done; echo depth=${#PWD}\n");
      ASSERT_EQ(deep.value("waitReason", ""), "stdin_read") << mode << ": " << deep.dump();
      EXPECT_EQ(deep["exitCode"], 0) << mode << ": " << deep.dump();
      EXPECT_GT(deep.value("cwd", "").size(), 4096u) << mode << ": " << deep.dump();
      EXPECT_NE(deep.value("viewport", "").find("depth=4522"), std::string::npos)
          << mode << ": " << deep.dump();
      Json after = Send(client, id, "echo af$((1+1))ter\n");
      EXPECT_NE(after.value("viewport", "").find("af2ter"), std::string::npos)
          << mode << ": " << after.dump();
      client.Call("terminal_close", Json{{"sessionId", id}});
      // Every chunk the watcher got, until the close ends the watch.
      for (;;) {
        Json note = person.WaitAny();
        if (note.contains("error")) break;  // the hang guard (already a failure)
        if (note.value("method", "") == "terminal_watch_ended") break;
        if (note.value("method", "") != "terminal_watch_output") continue;
        EXPECT_EQ(note["params"]["watchId"], watch_id);
        std::optional<std::string> data = Base64Decode(note["params"].value("data", ""));
        ASSERT_TRUE(data.has_value()) << note.dump();
        watched += *data;
      }
      daemon.Stop(SIGTERM);
    }
    Cast cast = ReadCast(records.path() / (id + ".cast"));
    EXPECT_NE(cast.output.find("af2ter"), std::string::npos) << mode;
    EXPECT_EQ(cast.output.find("6973;"), std::string::npos) << mode;
    EXPECT_NE(watched.find("af2ter"), std::string::npos) << mode;
    EXPECT_EQ(watched.find("6973;"), std::string::npos) << mode;
  }
}

TEST(RecordingTest, AsciinemaReplaysIt) {
  if (Shell("command -v asciinema >/dev/null && command -v script >/dev/null") != 0) {
    GTEST_SKIP() << "asciinema is not installed (scripts/install-deps.sh installs it)";
  }
  TempDir records;
  std::string id;
  {
    Daemon daemon(Daemon::Options{{"--record", records.path().string()}, {}});
    RpcClient client(daemon.socket());
    id = OpenSession(client, "workspace-write");
    EXPECT_EQ(Send(client, id, "echo replayed-$((6*7))\n")["viewport"], "replayed-42");
    daemon.Stop(SIGTERM);
  }
  const std::string replay = AsciinemaCat(records.path() / (id + ".cast"), records.path() / "out");
  EXPECT_NE(replay.find("replayed-42"), std::string::npos) << replay;
  EXPECT_EQ(replay.find("printing failed"), std::string::npos) << replay;
}

TEST(RecordingTest, TheOperatorBoundStopsARecordingWithAMarker) {
  TempDir config;
  TempDir records;
  const fs::path policy = config.path() / "operator.yaml";
  std::ofstream(policy) << "version: 1\naudit:\n  recordDir: " << records.path().string()
                        << "\n  recordMaxBytes: 65536\n";
  std::string id;
  {
    Daemon daemon(Daemon::Options{{"--policy", policy.string()}, {}});
    RpcClient client(daemon.socket());
    id = OpenSession(client, "workspace-write");
    Json flood = Send(client, id, "head -c 300000 /dev/zero | tr '\\0' y; echo\n");
    EXPECT_EQ(flood["exitCode"], 0);
    // The session goes on after its recording stopped.
    EXPECT_EQ(Send(client, id, "echo after-the-bound\n")["viewport"], "after-the-bound");
    daemon.Stop(SIGTERM);
  }
  const fs::path path = records.path() / (id + ".cast");
  EXPECT_LE(fs::file_size(path), 65536u);
  Cast cast = ReadCast(path);
  ASSERT_FALSE(cast.events.empty());
  EXPECT_EQ(cast.events.back()[1], "m");
  EXPECT_NE(cast.events.back()[2].get<std::string>().find("recording stopped"), std::string::npos);
  EXPECT_EQ(cast.output.find("after-the-bound"), std::string::npos);
}

}  // namespace
}  // namespace ptybox::testing
