// `ptybox ls` and `ptybox attach` through the real binary over the real socket, with real
// shells in each confined mode: a person lists the sessions of the owner whose token they
// hold, watches one live in a real PTY (forkpty, as a person's terminal), their keystrokes do
// not reach it, detaching leaves it running. The wall: another owner's sessions can be neither
// listed nor watched without its token. A watcher that never reads is dropped without stalling
// the agent. The audit log records who watched what. Waits are hang guards only: tests assert
// what was drawn and in which order, never how long it took.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/base64.h"
#include "sandbox/captured_run.h"
#include "tests/mcp/mcp_process.h"
#include "tests/support/daemon_fixture.h"
#include "tests/support/error_kind.h"
#include "tests/support/files.h"

namespace ptybox::testing {
namespace {

// `ptybox attach ...` in a PTY of `rows` x `cols`, as a person's terminal runs it.
class AttachProcess final {
 public:
  AttachProcess(const std::vector<std::string>& args, int rows, int cols) {
    winsize size{};
    size.ws_row = static_cast<unsigned short>(rows);
    size.ws_col = static_cast<unsigned short>(cols);
    std::vector<std::string> argv = {PtyboxBinary().string(), "attach"};
    argv.insert(argv.end(), args.begin(), args.end());
    pid_ = ::forkpty(&master_, nullptr, nullptr, &size);
    if (pid_ == 0) {
      std::vector<char*> raw;
      for (std::string& a : argv) raw.push_back(a.data());
      raw.push_back(nullptr);
      ::execv(raw[0], raw.data());
      ::_exit(127);
    }
    EXPECT_GT(pid_, 0);
  }
  ~AttachProcess() {
    if (pid_ > 0 && !status_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    if (master_ >= 0) ::close(master_);
  }
  AttachProcess(const AttachProcess&) = delete;
  AttachProcess& operator=(const AttachProcess&) = delete;

  // Reads what attach draws until `needle` is in it (from `from` on); false at the guard or
  // when attach ended first.
  bool WaitFor(const std::string& needle, size_t from = 0) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (drawn_.find(needle, from) == std::string::npos) {
      if (std::chrono::steady_clock::now() > deadline || !ReadSome(deadline)) {
        return drawn_.find(needle, from) != std::string::npos;
      }
    }
    return true;
  }
  void Type(const std::string& keys) {
    ASSERT_EQ(::write(master_, keys.data(), keys.size()), static_cast<ssize_t>(keys.size()));
  }
  // Waits (hang guard) for attach to exit; its wait status.
  std::optional<int> WaitExit() {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (!status_) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        status_ = status;
        break;
      }
      if (std::chrono::steady_clock::now() > deadline) return std::nullopt;
      ReadSome(std::chrono::steady_clock::now() + std::chrono::milliseconds(50));
    }
    while (ReadSome(std::chrono::steady_clock::now() + std::chrono::milliseconds(50))) {
    }
    return status_;
  }
  [[nodiscard]] const std::string& drawn() const { return drawn_; }
  [[nodiscard]] pid_t pid() const { return pid_; }
  // The terminal's local modes as attach's side sees them (the master shares the slave's
  // termios).
  [[nodiscard]] tcflag_t LocalModes() const {
    termios modes{};
    ::tcgetattr(master_, &modes);
    return modes.c_lflag;
  }

 private:
  bool ReadSome(std::chrono::steady_clock::time_point deadline) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    pollfd fd{master_, POLLIN, 0};
    if (::poll(&fd, 1, static_cast<int>(std::max<int64_t>(left.count(), 0))) <= 0) {
      return std::chrono::steady_clock::now() < deadline;
    }
    char buffer[65536];
    const ssize_t n = ::read(master_, buffer, sizeof buffer);
    if (n <= 0) return false;  // EIO: attach and its terminal are gone
    drawn_.append(buffer, static_cast<size_t>(n));
    return true;
  }

  int master_ = -1;
  pid_t pid_ = -1;
  std::optional<int> status_;
  std::string drawn_;
};

std::string TokenOf(RpcClient& client) {
  Json info = client.Call("owner_info", Json::object());
  EXPECT_TRUE(info.contains("result")) << info.dump();
  return info["result"].value("ownerToken", std::string());
}

std::filesystem::path WriteTokenFile(const std::filesystem::path& dir, const std::string& token,
                                     std::filesystem::perms perms = std::filesystem::perms(0600)) {
  const std::filesystem::path file =
      dir / ("token-" + std::to_string(::getpid()) + "-" + std::to_string(std::rand()));
  std::ofstream(file) << token << "\n";
  std::filesystem::permissions(file, perms);
  return file;
}

sandbox::CapturedRun Cli(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {PtyboxBinary().string()};
  argv.insert(argv.end(), args.begin(), args.end());
  return sandbox::RunCaptured(argv, sandbox::CaptureOptions{});
}

bool WaitForText(const std::function<std::string()>& read, const std::string& needle) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (read().find(needle) == std::string::npos) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

// One daemon (with an audit log) per suite; each test talks on its own connections.
class AttachTest : public ::testing::TestWithParam<std::string> {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    // No `mcp --connect` token of the host's user is ever read here.
    ::setenv("XDG_STATE_HOME", (dir_->path() / "state").c_str(), 1);
    std::filesystem::create_directories(dir_->path() / "state");
    std::ofstream(dir_->path() / "operator.yaml")
        << "version: 1\nlimits: {detachGraceMs: 600000}\n";
    daemon_ = new Daemon(Daemon::Options{
        {"--policy", (dir_->path() / "operator.yaml").string(), "--audit-log", Audit().string()},
        {}});
  }
  static void TearDownTestSuite() {
    delete daemon_;
    daemon_ = nullptr;
    ::unsetenv("XDG_STATE_HOME");
    delete dir_;
    dir_ = nullptr;
  }
  static std::filesystem::path Audit() { return dir_->path() / "audit.jsonl"; }
  std::string Socket() const { return daemon_->socket().string(); }

  inline static TempDir* dir_ = nullptr;
  inline static Daemon* daemon_ = nullptr;
  RpcClient agent_{daemon_->socket()};
};

TEST_P(AttachTest, LsListsTheSessionsOfTheOwnerWhoseTokenItHolds) {
  const std::string session = OpenSession(agent_, GetParam(), Json{{"name", "agent-ls"}});
  ASSERT_FALSE(session.empty());
  const std::filesystem::path token = WriteTokenFile(dir_->path(), TokenOf(agent_));

  sandbox::CapturedRun table = Cli({"ls", "--socket", Socket(), "--token-file", token.string()});
  ASSERT_TRUE(table.Succeeded()) << table.err;
  EXPECT_EQ(table.out.rfind("SESSION", 0), 0u) << table.out;
  EXPECT_NE(table.out.find(session), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("agent-ls"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find(GetParam()), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("running"), std::string::npos) << table.out;

  sandbox::CapturedRun json =
      Cli({"ls", "--socket", Socket(), "--token-file", token.string(), "--json"});
  ASSERT_TRUE(json.Succeeded()) << json.err;
  Json listed = Json::parse(json.out);
  ASSERT_EQ(listed["sessions"].size(), 1u) << json.out;
  EXPECT_EQ(listed["sessions"][0]["sessionId"], session);
  EXPECT_EQ(listed["sessions"][0]["mode"], GetParam());
  EXPECT_EQ(listed["sessions"][0]["busy"], false);

  // Without a token (none kept for this directory): this connection's own, which are none.
  sandbox::CapturedRun own = Cli({"ls", "--socket", Socket()});
  ASSERT_TRUE(own.Succeeded()) << own.err;
  EXPECT_EQ(own.out, "no sessions\n");
  EXPECT_NE(own.err.find("give --workspace DIR"), std::string::npos) << own.err;
}

// The wall of docs/security.md, "Watching a session": the owner token decides. Another
// connection (another owner) neither lists nor watches a session without its owner's token;
// a near-miss token is as unknown as none; a token file others could read is refused.
TEST_P(AttachTest, AnotherOwnersSessionCannotBeListedOrWatchedWithoutItsToken) {
  const std::string session = OpenSession(agent_, GetParam());
  ASSERT_FALSE(session.empty());
  const std::string token = TokenOf(agent_);
  std::string wrong = token;
  wrong.back() = wrong.back() == '0' ? '1' : '0';

  RpcClient other(daemon_->socket());
  Json watched = other.Call("terminal_watch", Json{{"sessionId", session}});
  ASSERT_TRUE(watched.contains("error")) << watched.dump();
  EXPECT_ERROR_KIND(watched, ErrorKind::kNotFound);
  watched = other.Call("terminal_watch", Json{{"sessionId", session}, {"ownerToken", wrong}});
  ASSERT_TRUE(watched.contains("error")) << watched.dump();
  EXPECT_ERROR_KIND(watched, ErrorKind::kNotFound);
  Json listed = other.Call("owner_sessions", Json{{"ownerToken", wrong}});
  ASSERT_TRUE(listed.contains("error")) << listed.dump();
  EXPECT_ERROR_KIND(listed, ErrorKind::kNotFound);
  EXPECT_EQ(other.Call("terminal_list", Json::object())["result"]["sessions"], Json::array());

  // Through the CLI: a wrong token file, and the right token in a file others may read.
  sandbox::CapturedRun refused = Cli(
      {"ls", "--socket", Socket(), "--token-file", WriteTokenFile(dir_->path(), wrong).string()});
  EXPECT_EQ(refused.exit_code, 1) << refused.out << refused.err;
  EXPECT_NE(refused.err.find("no owner of this daemon has this token"), std::string::npos)
      << refused.err;
  EXPECT_EQ(refused.out.find(session), std::string::npos);
  sandbox::CapturedRun loose =
      Cli({"ls", "--socket", Socket(), "--token-file",
           WriteTokenFile(dir_->path(), token, std::filesystem::perms(0644)).string()});
  EXPECT_EQ(loose.exit_code, 1) << loose.out << loose.err;
  EXPECT_NE(loose.err.find("chmod 600"), std::string::npos) << loose.err;

  // With the token: the watch begins with the screen, and nobody else may end it.
  watched = other.Call("terminal_watch", Json{{"sessionId", session}, {"ownerToken", token}});
  ASSERT_TRUE(watched.contains("result")) << watched.dump();
  EXPECT_EQ(watched["result"]["sessionId"], session);
  EXPECT_EQ(watched["result"]["rows"], 40);
  EXPECT_EQ(watched["result"]["cols"], 120);
  EXPECT_EQ(watched["result"]["lines"].size(), 40u);
  const int64_t watch_id = watched["result"]["watchId"];
  RpcClient third(daemon_->socket());
  Json stolen = third.Call("terminal_unwatch", Json{{"watchId", watch_id}});
  EXPECT_ERROR_KIND(stolen, ErrorKind::kNotFound);
  EXPECT_EQ(other.Call("terminal_unwatch", Json{{"watchId", watch_id}})["result"]["unwatched"],
            true);
}

TEST_P(AttachTest, AttachMirrorsTheSessionLiveKeystrokesDoNotReachItAndDetachLeavesItRunning) {
  const std::string session = OpenSession(agent_, GetParam(), Json{{"name", "agent-attach"}});
  ASSERT_FALSE(session.empty());
  const std::filesystem::path token = WriteTokenFile(dir_->path(), TokenOf(agent_));

  AttachProcess attach({"--socket", Socket(), "--token-file", token.string(), session}, 50, 130);
  ASSERT_TRUE(attach.WaitFor("Ctrl-] detaches")) << attach.drawn();
  EXPECT_NE(attach.drawn().find("\x1b[?1049h"), std::string::npos);  // the alternate screen
  EXPECT_NE(attach.drawn().find("agent-attach"), std::string::npos) << attach.drawn();
  EXPECT_NE(attach.drawn().find("read-only"), std::string::npos) << attach.drawn();

  // The agent's send shows up in the person's terminal.
  Json sent = Send(agent_, session, "echo wat$((6*7))ch\n");
  ASSERT_EQ(sent.value("waitReason", ""), "stdin_read") << sent.dump();
  ASSERT_TRUE(attach.WaitFor("wat42ch")) << attach.drawn();

  // A person's keystrokes in read-only mode: refused with a status line, never written.
  const size_t before = attach.drawn().size();
  attach.Type("echo le$((40+2))ak\r");
  ASSERT_TRUE(attach.WaitFor("keystrokes are not sent", before)) << attach.drawn();
  sent = Send(agent_, session, "echo after\n");
  ASSERT_EQ(sent.value("waitReason", ""), "stdin_read") << sent.dump();
  Json screen = agent_.Call("terminal_read", Json{{"sessionId", session}, {"view", "screen"}});
  const std::string text = screen["result"].value("text", "");
  EXPECT_NE(text.find("after"), std::string::npos) << text;
  EXPECT_EQ(text.find("le42ak"), std::string::npos) << text;
  EXPECT_EQ(text.find("$((40+2))"), std::string::npos) << text;
  ASSERT_TRUE(attach.WaitFor("after", before)) << attach.drawn();

  // Ctrl-] detaches: attach restores the terminal and exits 0; the session goes on.
  attach.Type("\x1d");
  const std::optional<int> status = attach.WaitExit();
  ASSERT_TRUE(status.has_value()) << attach.drawn();
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << *status << attach.drawn();
  EXPECT_NE(attach.drawn().find("\x1b[?1049l"), std::string::npos);
  EXPECT_NE(attach.drawn().find("detached; the session keeps running"), std::string::npos)
      << attach.drawn();
  Json status_now = agent_.Call("terminal_status", Json{{"sessionId", session}});
  EXPECT_EQ(status_now["result"]["sessionStatus"]["kind"], "running") << status_now.dump();
  sent = Send(agent_, session, "echo still$((1+1))here\n");
  EXPECT_NE(sent.value("viewport", "").find("still2here"), std::string::npos) << sent.dump();

  // The audit log (written off the reactor): who watched the session, then that the watch
  // ended; never the token.
  const std::string token_now = TokenOf(agent_);
  auto events_of_session = [&] {
    std::vector<std::string> events;
    for (const std::string& line : ReadLines(Audit())) {
      if (line.find(session) == std::string::npos) continue;
      EXPECT_EQ(line.find(token_now), std::string::npos) << line;
      Json record = Json::parse(line, nullptr, false);
      const std::string event = record.value("event", "");
      if (event.rfind("session_", 0) == 0 && event != "session_opened") {
        events.push_back(event + ":" + record.value("reason", ""));
      }
    }
    return events;
  };
  std::vector<std::string> events;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while ((events = events_of_session()).size() < 2 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(events, (std::vector<std::string>{"session_watched:", "session_unwatched:unwatched"}));
}

// A terminal_resize during a watch is announced: every watcher gets terminal_watch_resized with
// the screen at the new size, after the output that came before it, and `ptybox attach`
// redraws at that size (its status line names it).
TEST_P(AttachTest, AResizeIsAnnouncedToWatchersAndAttachRedrawsAtTheNewSize) {
  const std::string session =
      OpenSession(agent_, GetParam(), Json{{"name", "agent-resize"}, {"cols", 120}, {"rows", 40}});
  ASSERT_FALSE(session.empty());
  const std::filesystem::path token = WriteTokenFile(dir_->path(), TokenOf(agent_));
  RpcClient watcher{daemon_->socket()};
  Json watch =
      watcher.Call("terminal_watch", Json{{"sessionId", session}, {"ownerToken", TokenOf(agent_)}});
  ASSERT_TRUE(watch.contains("result")) << watch.dump();
  const int64_t watch_id = watch["result"]["watchId"].get<int64_t>();
  EXPECT_EQ(watch["result"]["cols"], 120);

  AttachProcess attach({"--socket", Socket(), "--token-file", token.string(), session}, 50, 130);
  ASSERT_TRUE(attach.WaitFor("120x40, read-only")) << attach.drawn();
  Json sent = Send(agent_, session, "echo before$((2+3))resize\n");
  ASSERT_EQ(sent.value("waitReason", ""), "stdin_read") << sent.dump();
  ASSERT_TRUE(attach.WaitFor("before5resize")) << attach.drawn();
  const size_t before = attach.drawn().size();
  Json resized =
      agent_.Call("terminal_resize", Json{{"sessionId", session}, {"cols", 90}, {"rows", 30}});
  ASSERT_TRUE(resized.contains("result")) << resized.dump();

  // The raw watcher: the output first, then the announcement with the screen at 90x30.
  std::string output;
  std::optional<Json> announced;
  while (!announced) {
    Json message = watcher.WaitAny();  // a hang guard of its own
    ASSERT_TRUE(message.contains("method")) << message.dump();
    const Json& params = message["params"];
    ASSERT_EQ(params.value("watchId", int64_t{-1}), watch_id) << message.dump();
    if (message["method"] == "terminal_watch_output") {
      output += Base64Decode(params.value("data", "")).value_or("");
    } else {
      ASSERT_EQ(message["method"], "terminal_watch_resized") << message.dump();
      announced = params;
    }
  }
  EXPECT_NE(output.find("before5resize"), std::string::npos) << output;
  EXPECT_EQ(announced->value("cols", 0), 90) << announced->dump();
  EXPECT_EQ(announced->value("rows", 0), 30) << announced->dump();
  ASSERT_TRUE((*announced)["lines"].is_array()) << announced->dump();
  EXPECT_EQ((*announced)["lines"].size(), 30u) << announced->dump();
  EXPECT_NE(announced->dump().find("before5resize"), std::string::npos) << announced->dump();
  EXPECT_TRUE((*announced)["cursor"].contains("row")) << announced->dump();

  // ptybox attach redraws at the new size; what the session prints next still arrives.
  ASSERT_TRUE(attach.WaitFor("90x30, read-only", before)) << attach.drawn();
  sent = Send(agent_, session, "echo after$((3+4))resize\n");
  ASSERT_EQ(sent.value("waitReason", ""), "stdin_read") << sent.dump();
  ASSERT_TRUE(attach.WaitFor("after7resize", before)) << attach.drawn();
  attach.Type("\x1d");
  const std::optional<int> status = attach.WaitExit();
  ASSERT_TRUE(status.has_value()) << attach.drawn();
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << *status << attach.drawn();
}

// Raw mode and the alternate screen are restored on every exit path: here SIGTERM (and the
// session goes on).
TEST_P(AttachTest, ASignalEndsTheViewRestoresTheTerminalAndLeavesTheSession) {
  const std::string session = OpenSession(agent_, GetParam());
  ASSERT_FALSE(session.empty());
  const std::filesystem::path token = WriteTokenFile(dir_->path(), TokenOf(agent_));
  AttachProcess attach({"--socket", Socket(), "--token-file", token.string(), session}, 50, 130);
  const tcflag_t cooked = ICANON | ECHO | ISIG;
  ASSERT_TRUE(attach.WaitFor("Ctrl-] detaches")) << attach.drawn();
  EXPECT_EQ(attach.LocalModes() & cooked, 0u);  // raw while attached
  ASSERT_EQ(::kill(attach.pid(), SIGTERM), 0);
  const std::optional<int> status = attach.WaitExit();
  ASSERT_TRUE(status.has_value()) << attach.drawn();
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << *status << attach.drawn();
  EXPECT_EQ(attach.LocalModes() & cooked, cooked);  // cooked again
  EXPECT_NE(attach.drawn().find("\x1b[?1049l"), std::string::npos);
  EXPECT_NE(attach.drawn().find("the session keeps running"), std::string::npos) << attach.drawn();
  Json sent = Send(agent_, session, "echo al$((2*5))ive\n");
  EXPECT_NE(sent.value("viewport", "").find("al10ive"), std::string::npos) << sent.dump();
}

// A watcher that never reads its connection is dropped once its queue passes the bound; the
// agent's sends go on meanwhile, and the watcher learns why when it reads again.
TEST_P(AttachTest, AWatcherThatNeverReadsIsDroppedWithoutStallingTheAgent) {
  const std::string session = OpenSession(agent_, GetParam());
  ASSERT_FALSE(session.empty());
  RpcClient watcher(daemon_->socket());
  Json watched =
      watcher.Call("terminal_watch", Json{{"sessionId", session}, {"ownerToken", TokenOf(agent_)}});
  ASSERT_TRUE(watched.contains("result")) << watched.dump();
  const int64_t watch_id = watched["result"]["watchId"];

  // About 4 MB of output (more than 5 MB as base64): far beyond the 1 MiB bound plus what the
  // socket buffers hold. The watcher reads nothing meanwhile.
  Json sent =
      Send(agent_, session,
           "yes 0123456789012345678901234567890123456789 | head -c 4000000; echo fl$((0+0))od\n",
           Json{{"timeoutMs", 600000}});
  ASSERT_EQ(sent.value("waitReason", ""), "stdin_read") << sent.dump().substr(0, 400);
  sent = Send(agent_, session, "echo ne$((1+1))xt\n");
  EXPECT_NE(sent.value("viewport", "").find("ne2xt"), std::string::npos) << sent.dump();

  // Now the watcher reads: output, then the end of its watch, reason slow.
  std::optional<Json> ended;
  for (int i = 0; i < 100000 && !ended; ++i) {
    Json message = watcher.WaitAny();
    if (message.value("method", "") == "terminal_watch_ended") ended = message;
    if (message.is_null() || message.empty()) break;
  }
  ASSERT_TRUE(ended.has_value());
  EXPECT_EQ((*ended)["params"]["watchId"], watch_id);
  EXPECT_EQ((*ended)["params"]["reason"], "slow") << ended->dump();
  auto audit = [] { return ReadFile(Audit()); };
  EXPECT_TRUE(WaitForText(audit, "\"slow\"")) << audit();
}

// The session closed under a person's eyes: attach says so and exits 1.
TEST_P(AttachTest, ClosingTheSessionEndsTheWatchAndAttachSaysSo) {
  const std::string session = OpenSession(agent_, GetParam());
  ASSERT_FALSE(session.empty());
  const std::filesystem::path token = WriteTokenFile(dir_->path(), TokenOf(agent_));
  AttachProcess attach({"--socket", Socket(), "--token-file", token.string(), session}, 50, 130);
  ASSERT_TRUE(attach.WaitFor("Ctrl-] detaches")) << attach.drawn();
  Json closed = agent_.Call("terminal_close", Json{{"sessionId", session}});
  ASSERT_TRUE(closed.contains("result")) << closed.dump();
  const std::optional<int> status = attach.WaitExit();
  ASSERT_TRUE(status.has_value()) << attach.drawn();
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 1) << *status;
  EXPECT_NE(attach.drawn().find("the session was closed"), std::string::npos) << attach.drawn();
  EXPECT_NE(attach.drawn().find("\x1b[?1049l"), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(Modes, AttachTest, ::testing::Values("read-only", "workspace-write"),
                         ModeTestName);

// `ptybox attach --write`: a person takes the session over. While they hold it the agent's
// sends answer busy saying so; their keys reach the shell; the recording keeps both their keys
// and the agent's sends as `i` events; detaching gives the session back.
class TakeOverTest : public ::testing::TestWithParam<std::string> {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    ::setenv("XDG_STATE_HOME", (dir_->path() / "state").c_str(), 1);
    std::filesystem::create_directories(dir_->path() / "state");
    daemon_ = new Daemon(Daemon::Options{{"--audit-log", (dir_->path() / "audit.jsonl").string(),
                                          "--record", (dir_->path() / "casts").string()},
                                         {}});
  }
  static void TearDownTestSuite() {
    delete daemon_;
    daemon_ = nullptr;
    ::unsetenv("XDG_STATE_HOME");
    delete dir_;
    dir_ = nullptr;
  }
  inline static TempDir* dir_ = nullptr;
  inline static Daemon* daemon_ = nullptr;
  RpcClient agent_{daemon_->socket()};
};

TEST_P(TakeOverTest, APersonTakesTheSessionOverTheAgentWaitsAndTheRecordingKeepsTheKeys) {
  const std::string session = OpenSession(agent_, GetParam(), Json{{"name", "held"}});
  ASSERT_FALSE(session.empty());
  const std::filesystem::path token = WriteTokenFile(dir_->path(), TokenOf(agent_));
  Json sent = Send(agent_, session, "echo ag$((1+1))ent\n");
  ASSERT_EQ(sent.value("waitReason", ""), "stdin_read") << sent.dump();

  AttachProcess attach(
      {"--socket", daemon_->socket().string(), "--token-file", token.string(), "--write", session},
      50, 130);
  ASSERT_TRUE(attach.WaitFor("TAKEN OVER")) << attach.drawn();

  // The agent's send is refused, saying why; its status says busy.
  Json refused = agent_.Call("terminal_send", Json{{"sessionId", session}, {"input", "echo no\n"}});
  ASSERT_TRUE(refused.contains("error")) << refused.dump();
  EXPECT_ERROR_KIND(refused, ErrorKind::kBusy);
  EXPECT_NE(refused["error"]["message"].get<std::string>().find("a person holds this session"),
            std::string::npos)
      << refused.dump();
  EXPECT_EQ(agent_.Call("terminal_status", Json{{"sessionId", session}})["result"]["busy"], true);

  // The person's keys reach the shell.
  attach.Type("echo ty$((3*3))ped\r");
  ASSERT_TRUE(attach.WaitFor("ty9ped")) << attach.drawn();

  // Detaching gives it back: the agent's next send runs.
  attach.Type("\x1d");
  const std::optional<int> status = attach.WaitExit();
  ASSERT_TRUE(status.has_value()) << attach.drawn();
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << *status << attach.drawn();
  Json back;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  do {  // the daemon learns of the detach when it reads the connection's end
    back = Send(agent_, session, "echo ba$((2+2))ck\n");
  } while (back.contains("error") && IsErrorKind(back, ErrorKind::kBusy) &&
           std::chrono::steady_clock::now() < deadline);
  ASSERT_EQ(back.value("waitReason", ""), "stdin_read") << back.dump();
  EXPECT_NE(back.value("viewport", "").find("ba4ck"), std::string::npos) << back.dump();

  // The audit log: taken over, then released. The log is written off the reactor: read once it
  // holds the agent's last send (the answer can come before the line is in the file).
  std::string log;
  for (int i = 0; i < 2000; ++i) {
    log = ReadFile(dir_->path() / "audit.jsonl");
    if (log.find("ba$((2+2))ck") != std::string::npos) break;
    ::usleep(5000);
  }
  const size_t taken = log.find("\"session_taken_over\"");
  ASSERT_NE(taken, std::string::npos) << log;
  EXPECT_NE(log.find("\"session_released\"", taken), std::string::npos) << log;
  // The person's keys are `typed` records (one per read of their terminal), as sends are.
  std::string logged_keys;
  for (const std::string& line : ReadLines(dir_->path() / "audit.jsonl")) {
    Json record = Json::parse(line, nullptr, false);
    if (record.value("event", "") == "typed" && record.value("sessionId", "") == session) {
      logged_keys += record.value("input", "");
    }
  }
  EXPECT_NE(logged_keys.find("echo ty$((3*3))ped\r"), std::string::npos) << log;

  // The recording: the agent's sends and the person's keys as `i` events, in order.
  agent_.Call("terminal_close", Json{{"sessionId", session}});
  const std::filesystem::path cast = dir_->path() / "casts" / (session + ".cast");
  ASSERT_TRUE(WaitForText([&] { return ReadFile(cast); }, "ba$((2+2))ck")) << ReadFile(cast);
  // Every `i` event's data in order (a person's keys may come in several reads).
  std::string typed;
  std::istringstream lines(ReadFile(cast));
  for (std::string line; std::getline(lines, line);) {
    Json event = Json::parse(line, nullptr, false);
    if (event.is_array() && event.size() == 3 && event[1] == "i")
      typed += event[2].get<std::string>();
  }
  const size_t agent_input = typed.find("echo ag$((1+1))ent\n");
  const size_t person_input = typed.find("echo ty$((3*3))ped\r");
  const size_t agent_again = typed.find("echo ba$((2+2))ck\n");
  ASSERT_NE(agent_input, std::string::npos) << typed;
  ASSERT_NE(person_input, std::string::npos) << typed;
  ASSERT_NE(agent_again, std::string::npos) << typed;
  EXPECT_LT(agent_input, person_input);
  EXPECT_LT(person_input, agent_again);
}

// Never two writers inside one send: while the agent's send runs, a takeover is refused
// (busy, saying so) and keys without a takeover are refused; once it settled the takeover
// succeeds. Only the watch's own connection may take over or type through it.
TEST_P(TakeOverTest, ATakeoverWaitsForTheAgentsSendAndKeysNeedIt) {
  const std::string session = OpenSession(agent_, GetParam());
  ASSERT_FALSE(session.empty());
  RpcClient person(daemon_->socket());
  Json watched =
      person.Call("terminal_watch", Json{{"sessionId", session}, {"ownerToken", TokenOf(agent_)}});
  ASSERT_TRUE(watched.contains("result")) << watched.dump();
  const int64_t watch_id = watched["result"]["watchId"];

  Json typed = person.Call("terminal_type", Json{{"watchId", watch_id}, {"data", "bHMNCg=="}});
  EXPECT_ERROR_KIND(typed, ErrorKind::kBusy);

  // The agent's send waits on a FIFO the test writes when it chooses (not on the terminal,
  // so no readiness settles it meanwhile).
  const std::filesystem::path fifo =
      std::filesystem::canonical(daemon_->workspace()) / ("gate-" + GetParam());
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0666), 0) << std::strerror(errno);
  ::chmod(fifo.c_str(), 0666);
  Json started = agent_.Call(
      "terminal_send", Json{{"sessionId", session},
                            {"input", "read -r x < " + fifo.string() + "; echo go$((5+5))t\n"},
                            {"background", true},
                            {"silenceMs", 3600000},
                            {"timeoutMs", 3600000}});
  ASSERT_TRUE(started.contains("result")) << started.dump();
  Json refused = person.Call("terminal_takeover", Json{{"watchId", watch_id}});
  ASSERT_TRUE(refused.contains("error")) << refused.dump();
  EXPECT_ERROR_KIND(refused, ErrorKind::kBusy);
  EXPECT_NE(refused["error"]["message"].get<std::string>().find("the agent's send is running"),
            std::string::npos)
      << refused.dump();

  RpcClient stranger(daemon_->socket());
  EXPECT_ERROR_KIND(stranger.Call("terminal_takeover", Json{{"watchId", watch_id}}),
                    ErrorKind::kNotFound);

  // Open the gate: the agent's command ends, its send settles at the prompt.
  int gate = -1;
  const auto open_deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while ((gate = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC)) < 0 && errno == ENXIO &&
         std::chrono::steady_clock::now() < open_deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));  // the reader is not there yet
  }
  ASSERT_GE(gate, 0) << std::strerror(errno);
  ASSERT_EQ(::write(gate, "x\n", 2), 2);
  ::close(gate);
  Json held;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  do {  // the agent's send settles once the prompt is back
    held = person.Call("terminal_takeover", Json{{"watchId", watch_id}});
  } while (held.contains("error") && IsErrorKind(held, ErrorKind::kBusy) &&
           std::chrono::steady_clock::now() < deadline);
  ASSERT_TRUE(held.contains("result")) << held.dump();
  EXPECT_EQ(held["result"]["held"], true);
  EXPECT_EQ(person.Call("terminal_type",
                        Json{{"watchId", watch_id}, {"data", "IA=="}})["result"]["typed"],
            true);
  EXPECT_EQ(person.Call("terminal_release", Json{{"watchId", watch_id}})["result"]["released"],
            true);
  Json sent = Send(agent_, session, "echo fr$((4+4))ee\n");
  EXPECT_NE(sent.value("viewport", "").find("fr8ee"), std::string::npos) << sent.dump();
}

// An owner may watch and take over its own session (no token needed), so what it types there is
// audited like a send: a `typed` record with the keys, between the takeover and the release.
// Otherwise an agent could run a command that reaches the shell but never the audit log.
TEST_P(TakeOverTest, AnOwnerTypingIntoItsOwnSessionIsAudited) {
  const std::string session = OpenSession(agent_, GetParam());
  ASSERT_FALSE(session.empty());
  Json watched = agent_.Call("terminal_watch", Json{{"sessionId", session}});
  ASSERT_TRUE(watched.contains("result")) << watched.dump();
  const int64_t watch_id = watched["result"]["watchId"];
  ASSERT_EQ(agent_.Call("terminal_takeover", Json{{"watchId", watch_id}})["result"]["held"], true);
  const std::string keys = "echo self$((6*7))typed\r";
  // base64 of the keys, and then of a control byte and an invalid UTF-8 byte, which the log
  // escapes and replaces (never writes raw).
  const std::string keys_b64 = "ZWNobyBzZWxmJCgoNio3KSl0eXBlZA0=";
  ASSERT_EQ(keys.size(), 23u);
  EXPECT_EQ(agent_.Call("terminal_type",
                        Json{{"watchId", watch_id}, {"data", keys_b64}})["result"]["typed"],
            true);
  // The command ran (the shell printed its result on the screen).
  auto screen = [&] {
    Json read = agent_.Call("terminal_read", Json{{"sessionId", session}, {"view", "screen"}});
    return read["result"].value("text", std::string());
  };
  ASSERT_TRUE(WaitForText(screen, "self42typed")) << screen();
  EXPECT_EQ(agent_.Call("terminal_type",
                        Json{{"watchId", watch_id}, {"data", "G/8="}})["result"]["typed"],
            true);  // ESC 0xFF
  EXPECT_EQ(agent_.Call("terminal_release", Json{{"watchId", watch_id}})["result"]["released"],
            true);

  // The audit log (written off the reactor): taken over, each typed call with its keys, released.
  const std::filesystem::path log = dir_->path() / "audit.jsonl";
  auto records = [&] {
    std::vector<Json> found;
    for (const std::string& line : ReadLines(log)) {
      if (line.find(session) == std::string::npos) continue;
      Json record = Json::parse(line, nullptr, false);
      const std::string event = record.value("event", "");
      if (event == "session_taken_over" || event == "typed" || event == "session_released") {
        found.push_back(std::move(record));
      }
    }
    return found;
  };
  std::vector<Json> found;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while ((found = records()).size() < 4 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_EQ(found.size(), 4u) << ReadFile(log);
  EXPECT_EQ(found[0]["event"], "session_taken_over");
  EXPECT_EQ(found[1]["event"], "typed");
  EXPECT_EQ(found[1]["input"], keys) << found[1].dump();
  EXPECT_EQ(found[1]["bytes"], keys.size()) << found[1].dump();
  EXPECT_EQ(found[1]["sessionId"], session);
  // The owner typed into its own session: the typing connection is the session's owner.
  EXPECT_EQ(found[1]["owner"], "conn-" + std::to_string(found[1].value("sessionOwner", 0)))
      << found[1].dump();
  EXPECT_EQ(found[2]["event"], "typed");
  EXPECT_EQ(found[2]["input"], "\x1b\xEF\xBF\xBD") << found[2].dump();
  EXPECT_EQ(found[2]["bytes"], 2u);
  EXPECT_EQ(found[3]["event"], "session_released");
  for (const std::string& line : ReadLines(log)) {
    EXPECT_EQ(line.find('\x1b'), std::string::npos) << "a raw ESC in the log: " << line;
  }
}

INSTANTIATE_TEST_SUITE_P(Modes, TakeOverTest, ::testing::Values("read-only", "workspace-write"),
                         ModeTestName);

// The scenario: the agent's terminals are opened over `ptybox mcp --connect`; the person
// runs `ptybox ls --workspace` and `ptybox attach` with the token file it keeps, and watches the
// agent's command appear.
TEST(AttachMcpConnectTest, APersonWatchesTheSessionOfAnAgentOnMcpConnect) {
  TempDir dir;
  const std::filesystem::path state = dir.path() / "state";
  std::filesystem::create_directories(state);
  ::setenv("XDG_STATE_HOME", state.c_str(), 1);
  std::ofstream(dir.path() / "operator.yaml") << "version: 1\nlimits: {detachGraceMs: 600000}\n";
  Daemon daemon(Daemon::Options{{"--policy", (dir.path() / "operator.yaml").string()}, {}});
  McpProcess host({"--connect", daemon.socket().string()}, daemon.workspace());
  host.Initialize();
  Json opened = host.Tool("terminal_open", Json{{"name", "claude"}});
  ASSERT_EQ(opened["isError"], false) << opened.dump() << host.Log();
  const std::string session = opened["structuredContent"]["sessionId"];

  sandbox::CapturedRun table =
      Cli({"ls", "--socket", daemon.socket().string(), "--workspace", daemon.workspace().string()});
  ASSERT_TRUE(table.Succeeded()) << table.err;
  EXPECT_NE(table.out.find(session), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("claude"), std::string::npos) << table.out;

  AttachProcess attach(
      {"--socket", daemon.socket().string(), "--workspace", daemon.workspace().string(), session},
      50, 130);
  ASSERT_TRUE(attach.WaitFor("Ctrl-] detaches")) << attach.drawn();
  Json sent =
      host.Tool("terminal_send", Json{{"sessionId", session}, {"input", "echo mc$((2+3))p\n"}});
  ASSERT_EQ(sent["isError"], false) << sent.dump();
  EXPECT_TRUE(attach.WaitFor("mc5p")) << attach.drawn();
  attach.Type("\x1d");
  const std::optional<int> status = attach.WaitExit();
  ASSERT_TRUE(status.has_value());
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << *status << attach.drawn();
  host.CloseInput();
  EXPECT_TRUE(host.WaitExit().has_value());
  ::unsetenv("XDG_STATE_HOME");
}

}  // namespace
}  // namespace ptybox::testing
