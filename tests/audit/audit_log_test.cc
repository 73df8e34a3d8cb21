// The audit log through the real binary (docs/security.md, "Audit log and recordings"): a real
// session's open, sends with their input, exit codes, a cancel, a signal, a fenced mode change,
// a denied open, the close and a mode change appear in order as JSON lines in a 0600 file; the
// operator policy key works and a repository file cannot set it; an unwritable path, a full
// disk or a symlink never stops a session and is reported once; a hostile session's output
// stays bounded valid JSON; `ptybox run` records its command. The daemon is stopped before the
// log is read (it writes everything queued on exit), so nothing waits on time.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <regex>
#include <thread>

#include "tests/audit/audit_support.h"
#include "tests/support/error_kind.h"

namespace ptybox::testing {
namespace {

namespace fs = std::filesystem;

void WriteFile(const fs::path& path, const std::string& text) { std::ofstream(path) << text; }

// Every owner is named by its connection number, never by anything a client sent.
void ExpectOpaqueOwners(const std::vector<Json>& records) {
  const std::regex opaque("conn-[0-9]+");
  for (const Json& r : records) {
    if (!r.contains("owner")) continue;
    EXPECT_TRUE(std::regex_match(r["owner"].get<std::string>(), opaque)) << r.dump();
  }
}

// The audit log and the recordings beside the socket, as docs/security.md advises (the
// per-user run-time directory): that directory is emptied inside every session, and nothing in
// it gets a cover of its own (bwrap could not create one there: every open used to fail with
// "Can't create file at .../audit.jsonl: Read-only file system").
TEST(AuditLogTest, ALogAndRecordingsBesideTheSocketLeaveSessionsWorking) {
  // Not under /tmp (private in every session): under /run for root, in the home otherwise.
  const char* home = std::getenv("HOME");
  TempDir dir(::geteuid() == 0 ? "/run" : (home ? home : "/var/tmp"));
  // Searchable by others, as /run/ptybox is: with 0700 a root daemon's sessions could not reach
  // it at all and nothing in it would need a cover.
  ASSERT_EQ(::chmod(dir.path().c_str(), 0755), 0);
  const fs::path log = dir.path() / "audit.jsonl";
  Daemon daemon(
      Daemon::Options{{"--audit-log", log.string(), "--record", (dir.path() / "casts").string()},
                      {}},
      dir.path() / "ptybox.sock");
  RpcClient client(daemon.socket());
  for (const char* mode : {"read-only", "workspace-write"}) {
    SCOPED_TRACE(mode);
    const std::string id = OpenSession(client, mode);
    ASSERT_FALSE(id.empty()) << daemon.Log();
    Json r = Send(client, id, "test -e " + log.string() + " && echo visible || echo hidden\n");
    EXPECT_EQ(r["viewport"], "hidden") << r.dump();
    client.Call("terminal_close", Json{{"sessionId", id}});
  }
}

TEST(AuditLogTest, RecordsASessionsEventsInOrder) {
  TempDir logs;
  const fs::path log = logs.path() / "audit.jsonl";
  Daemon daemon(Daemon::Options{{"--audit-log", log.string()}, {}});
  std::string id;
  {
    RpcClient client(daemon.socket());
    id = OpenSession(client, "workspace-write", Json{{"name", "audited"}});
    ASSERT_FALSE(id.empty());
    Json ok = Send(client, id, "echo hello-audit\n");
    EXPECT_EQ(ok["exitCode"], 0) << ok.dump();
    Json failed = Send(client, id, "false\n");
    EXPECT_EQ(failed["exitCode"], 1) << failed.dump();
    Json background = client.Call(
        "terminal_send", Json{{"sessionId", id}, {"input", "sleep 30\n"}, {"background", true}});
    ASSERT_TRUE(background.contains("result")) << background.dump();
    Json canceled = client.Call("terminal_cancel", Json{{"sessionId", id}});
    EXPECT_EQ(canceled["result"]["canceled"], true) << canceled.dump();
    WaitBackgroundDone(client, id);
    Json signaled = client.Call("terminal_signal", Json{{"sessionId", id}, {"signal", "SIGINT"}});
    EXPECT_TRUE(signaled.contains("result")) << signaled.dump();
    Json fenced = client.Call("policy_set_mode", Json{{"mode", "danger-full-access"}});
    EXPECT_ERROR_KIND(fenced, ErrorKind::kModeFenced);
    Json denied = client.Call("terminal_open", Json{{"cwd", "/"}});
    EXPECT_ERROR_KIND(denied, ErrorKind::kPolicyDenied);
    Json closed = client.Call("terminal_close", Json{{"sessionId", id}, {"reason", "done"}});
    EXPECT_TRUE(closed.contains("result")) << closed.dump();
    Json narrowed = client.Call("policy_set_mode", Json{{"mode", "read-only"}});
    EXPECT_EQ(narrowed["result"]["mode"], "read-only") << narrowed.dump();
  }
  daemon.Stop(SIGTERM);

  EXPECT_EQ(FileMode(log), 0600u);
  std::vector<Json> records = ReadAuditLog(log);
  EXPECT_EQ(EventNames(records),
            (std::vector<std::string>{"audit_started", "owner_connected", "session_opened", "send",
                                      "send_result", "send", "send_result", "send", "cancel",
                                      "send_result", "signal", "refused", "refused", "close",
                                      "mode_changed", "owner_disconnected", "audit_stopped"}));
  ASSERT_EQ(records.size(), 17u);
  ExpectOpaqueOwners(records);
  for (size_t i = 0; i < records.size(); ++i) {
    EXPECT_EQ(records[i]["seq"], i + 1) << records[i].dump();
    EXPECT_TRUE(records[i]["ts"].get<std::string>().ends_with("Z")) << records[i].dump();
  }
  EXPECT_EQ(records[0]["program"], "serve");
  const Json& opened = records[2];
  EXPECT_EQ(opened["sessionId"], id);
  EXPECT_EQ(opened["name"], "audited");
  EXPECT_EQ(opened["mode"], "workspace-write");
  EXPECT_EQ(opened["workspace"], fs::canonical(daemon.workspace()).string());
  EXPECT_TRUE(opened["writableRoots"].is_array());
  EXPECT_EQ(opened["network"], false);
  EXPECT_EQ(records[3]["input"], "echo hello-audit\n");
  EXPECT_EQ(records[4]["exitCode"], 0);
  EXPECT_EQ(records[4]["waitReason"], "stdin_read");
  EXPECT_EQ(records[4]["viewport"], "hello-audit");
  EXPECT_EQ(records[5]["input"], "false\n");
  EXPECT_EQ(records[6]["exitCode"], 1);
  EXPECT_EQ(records[7]["input"], "sleep 30\n");
  EXPECT_EQ(records[7]["background"], true);
  EXPECT_EQ(records[8]["canceled"], true);
  EXPECT_EQ(records[10]["signal"], "SIGINT");
  EXPECT_EQ(records[11]["request"], "policy_set_mode");
  EXPECT_EQ(records[11]["error"]["kind"], KindName(ErrorKind::kModeFenced));
  EXPECT_EQ(records[12]["request"], "terminal_open");
  EXPECT_EQ(records[12]["error"]["kind"], KindName(ErrorKind::kPolicyDenied));
  EXPECT_EQ(records[13]["sessionId"], id);
  EXPECT_EQ(records[13]["reason"], "done");
  EXPECT_EQ(records[13]["status"]["exited"], true);
  EXPECT_EQ(records[14]["from"], "workspace-write");
  EXPECT_EQ(records[14]["to"], "read-only");
  for (const Json& r : records) {
    if (r.contains("owner")) {
      EXPECT_EQ(r["owner"], records[1]["owner"]);
    }
  }
}

// A send made of named keys types bytes too: the log and the recording show the bytes typed,
// so `keys` is no way around the audit (literal text in keys is typed as is).
TEST(AuditLogTest, ASendOfNamedKeysIsAuditedAsTheBytesItTypes) {
  TempDir logs;
  const fs::path log = logs.path() / "audit.jsonl";
  Daemon daemon(Daemon::Options{{"--audit-log", log.string()}, {}});
  {
    RpcClient client(daemon.socket());
    const std::string id = OpenSession(client, "workspace-write");
    ASSERT_FALSE(id.empty());
    Json keyed =
        client.Call("terminal_send",
                    Json{{"sessionId", id}, {"keys", Json::array({"echo keyed-42", "Enter"})}});
    ASSERT_TRUE(keyed.contains("result")) << keyed.dump();
    EXPECT_EQ(keyed["result"]["exitCode"], 0) << keyed.dump();
  }
  daemon.Stop(SIGTERM);
  std::vector<Json> sends = EventsNamed(ReadAuditLog(log), "send");
  ASSERT_EQ(sends.size(), 1u);
  EXPECT_EQ(sends[0]["input"], "echo keyed-42\r") << sends[0].dump();
}

// terminal_wait types nothing: a `wait` event (no input), then its send_result, which names
// what was still running when the send before it returned.
TEST(AuditLogTest, AWaitIsAuditedWithoutInputAndAResultNamesItsForeground) {
  TempDir logs;
  const fs::path log = logs.path() / "audit.jsonl";
  Daemon daemon(Daemon::Options{{"--audit-log", log.string()}, {}});
  {
    RpcClient client(daemon.socket());
    const std::string id = OpenSession(client, "workspace-write");
    ASSERT_FALSE(id.empty());
    Json sent = Send(client, id, "sleep 2\n", Json{{"silenceMs", 300}});
    EXPECT_EQ(sent["waitReason"], "inferred_idle") << sent.dump();
    Json waited = client.Call("terminal_wait", Json{{"sessionId", id}, {"silenceMs", 60000}});
    EXPECT_EQ(waited["result"]["waitReason"], "stdin_read") << waited.dump();
  }
  daemon.Stop(SIGTERM);
  std::vector<Json> records = ReadAuditLog(log);
  std::vector<std::string> order;
  for (const Json& r : records) {
    const std::string event = r.value("event", "");
    if (event == "send" || event == "wait" || event == "send_result") order.push_back(event);
  }
  EXPECT_EQ(order, (std::vector<std::string>{"send", "send_result", "wait", "send_result"}));
  std::vector<Json> waits = EventsNamed(records, "wait");
  ASSERT_EQ(waits.size(), 1u);
  EXPECT_FALSE(waits[0].contains("input")) << waits[0].dump();
  std::vector<Json> results = EventsNamed(records, "send_result");
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(results[0]["foreground"]["command"], "sleep 2") << results[0].dump();
  EXPECT_EQ(results[1]["exitCode"], 0) << results[1].dump();
}

// The log and the recordings' directory are the daemon's: a confined session reads neither
// (hidden like the socket where the session runs as the daemon's own uid; unreadable to the
// unprivileged id a root daemon's sessions run as). They live where a session could see them
// were they not covered: /var/tmp, not the private /tmp.
TEST(AuditLogTest, AConfinedSessionReadsNeitherTheLogNorTheRecordings) {
  const fs::path base = fs::path("/var/tmp") / ("ptybox-audit-reach-" + std::to_string(::getpid()));
  fs::remove_all(base);
  fs::create_directories(base / "casts");
  fs::permissions(base, fs::perms(0755));
  fs::permissions(base / "casts", fs::perms(0755));
  const fs::path log = base / "audit.jsonl";
  {
    Daemon daemon(
        Daemon::Options{{"--audit-log", log.string(), "--record", (base / "casts").string()}, {}});
    for (const char* mode : {"workspace-write", "read-only"}) {
      RpcClient client(daemon.socket());
      const std::string id = OpenSession(client, mode);
      ASSERT_FALSE(id.empty()) << mode;
      Json read = Send(client, id,
                       "cat " + log.string() + " " + (base / "casts").string() +
                           "/*.cast 2>/dev/null | head -c 200; ls " + (base / "casts").string() +
                           " 2>/dev/null | head -3; echo END-OF-LOOK\n");
      const std::string viewport = read["viewport"].get<std::string>();
      EXPECT_NE(viewport.find("END-OF-LOOK"), std::string::npos) << mode << " " << read.dump();
      EXPECT_EQ(viewport.find("audit_started"), std::string::npos) << mode << " " << viewport;
      EXPECT_EQ(viewport.find(".cast"), std::string::npos) << mode << " " << viewport;
      EXPECT_EQ(viewport.find("\"version\""), std::string::npos) << mode << " " << viewport;
    }
    daemon.Stop(SIGTERM);
  }
  // Control: the files exist and hold what the session could not read.
  EXPECT_FALSE(EventsNamed(ReadAuditLog(log), "session_opened").empty());
  EXPECT_FALSE(fs::is_empty(base / "casts"));
  fs::remove_all(base);
}

TEST(AuditLogTest, TheOperatorPolicyKeySetsTheLog) {
  TempDir config;
  const fs::path log = config.path() / "from-policy.jsonl";
  const fs::path policy = config.path() / "operator.yaml";
  WriteFile(policy, "version: 1\naudit:\n  log: from-policy.jsonl\n");
  Daemon daemon(Daemon::Options{{"--policy", policy.string()}, {}});
  {
    RpcClient client(daemon.socket());
    std::string id = OpenSession(client, "workspace-write");
    EXPECT_EQ(Send(client, id, "echo via-policy\n")["exitCode"], 0);
  }
  daemon.Stop(SIGTERM);
  std::vector<Json> sends = EventsNamed(ReadAuditLog(log), "send");
  ASSERT_EQ(sends.size(), 1u);
  EXPECT_EQ(sends[0]["input"], "echo via-policy\n");
  EXPECT_EQ(FileMode(log), 0600u);
}

TEST(AuditLogTest, ARepositoryPolicyCannotSetTheAuditPath) {
  TempDir logs;
  const fs::path log = logs.path() / "audit.jsonl";
  const fs::path moved = logs.path() / "moved.jsonl";
  Daemon daemon(Daemon::Options{{"--audit-log", log.string()}, {}});
  WriteFile(daemon.workspace() / ".ptybox.yaml",
            "version: 1\naudit:\n  log: " + moved.string() + "\n");
  {
    RpcClient client(daemon.socket());
    Json refused = client.Call("terminal_open", Json::object());
    ASSERT_TRUE(refused.contains("error")) << refused.dump();
    EXPECT_ERROR_KIND(refused, ErrorKind::kPolicyError);
    const std::string message = refused["error"]["message"];
    EXPECT_NE(message.find(".ptybox.yaml:2:1: audit: only the operator policy may set `audit`"),
              std::string::npos)
        << message;
  }
  daemon.Stop(SIGTERM);
  EXPECT_FALSE(fs::exists(moved));
  std::vector<Json> refusals = EventsNamed(ReadAuditLog(log), "refused");
  ASSERT_EQ(refusals.size(), 1u);
  EXPECT_EQ(refusals[0]["error"]["kind"], KindName(ErrorKind::kPolicyError));
}

// Mounts a tmpfs for the life of the object (root only); `ok()` false when it could not.
class Tmpfs final {
 public:
  Tmpfs(const fs::path& dir, const std::string& options) : dir_(dir) {
    fs::create_directories(dir);
    ok_ = ::geteuid() == 0 && Shell("mount -t tmpfs -o " + options + " ptybox-test " +
                                    dir.string() + " 2>/dev/null") == 0;
  }
  ~Tmpfs() {
    if (ok_) Shell("umount -l " + dir_.string());
  }
  [[nodiscard]] bool ok() const { return ok_; }

 private:
  fs::path dir_;
  bool ok_ = false;
};

// A log or recordings' directory that cannot be used is a startup error: the daemon opens
// them once and never by path again, so it refuses rather than runs unrecorded. The exit
// status and stderr of `ptybox serve` (`ptybox run`: 125).
struct Startup {
  int status = -1;
  std::string stderr_text;
};

Startup StartServe(const std::vector<std::string>& args, const fs::path& workspace,
                   const std::string& program = "serve") {
  TempDir scratch;
  const fs::path err = scratch.path() / "stderr";
  std::string command =
      "cd " + workspace.string() +
      " && PTYBOX_LOG=info PTYBOX_OPERATOR_POLICY=/nonexistent/ptybox.yaml PTYBOX_INIT=" +
      InitBinary().string() + " " + PtyboxBinary().string() + " " + program;
  if (program == "serve") command += " --socket " + (scratch.path() / "s.sock").string();
  for (const std::string& arg : args) command += " '" + arg + "'";
  if (program == "run") command += " -- true";
  // A daemon that did start is stopped at once: one SIGTERM after it printed "listening" (a
  // second one during a slow shutdown, under a sanitizer say, would end it with 143).
  command += " 2>" + err.string() +
             " & pid=$!; for i in $(seq 1 300); do "
             "kill -0 $pid 2>/dev/null || break; grep -q listening " +
             err.string() + " && { kill -TERM $pid; break; }; sleep 0.1; done; wait $pid";
  Startup out;
  out.status = Shell(command);
  std::ifstream in(err);
  out.stderr_text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return out;
}

void ExpectRefusedAtStartup(const std::vector<std::string>& args, const std::string& why) {
  TempDir workspace;
  Startup started = StartServe(args, workspace.path());
  EXPECT_EQ(started.status, 1) << started.stderr_text;
  EXPECT_NE(started.stderr_text.find("ptybox serve: "), std::string::npos) << started.stderr_text;
  EXPECT_NE(started.stderr_text.find(why), std::string::npos) << started.stderr_text;
  EXPECT_EQ(started.stderr_text.find("listening"), std::string::npos) << started.stderr_text;
}

TEST(AuditLogTest, ADirectoryIsRefusedAtStartup) {
  TempDir dir;
  ExpectRefusedAtStartup({"--audit-log", dir.path().string()},
                         "cannot open the audit log " + dir.path().string() +
                             ": it is a directory; name a regular file");
}

TEST(AuditLogTest, AProcPathIsRefusedAtStartup) {
  ExpectRefusedAtStartup({"--audit-log", "/proc/ptybox-audit.jsonl"},
                         "cannot open the audit log /proc/ptybox-audit.jsonl");
}

// README's `--audit-log /var/log/ptybox/audit.jsonl` on a fresh machine: the log's missing
// directory is created private, as the recordings' is; one that cannot be created says how.
TEST(AuditLogTest, ALogsMissingDirectoryIsCreatedPrivateOrTheErrorSaysWhatToDo) {
  TempDir dir;
  TempDir workspace;
  const fs::path log = dir.path() / "var" / "log" / "ptybox" / "audit.jsonl";
  Startup started = StartServe({"--audit-log", log.string()}, workspace.path());
  EXPECT_EQ(started.status, 0) << started.stderr_text;
  EXPECT_TRUE(fs::is_regular_file(log));
  EXPECT_EQ(FileMode(log), 0600u);
  EXPECT_EQ(FileMode(log.parent_path()), 0700u);
  EXPECT_EQ(FileMode(dir.path() / "var"), 0700u);
  ExpectRefusedAtStartup({"--audit-log", "/proc/ptybox-missing/audit.jsonl"},
                         "cannot create the audit log's directory /proc/ptybox-missing: ");
  ExpectRefusedAtStartup({"--audit-log", "/proc/ptybox-missing/audit.jsonl"},
                         "; create it (mkdir -p, owned by uid " + std::to_string(::geteuid()) +
                             ", mode 0700) or choose another --audit-log file");
}

TEST(AuditLogTest, AReadOnlyDirectoryIsRefusedAtStartup) {
  TempDir dir;
  const fs::path ro = dir.path() / "ro";
  // Root ignores directory permissions: a read-only mount then; others: a read-only directory.
  std::optional<Tmpfs> mount;
  if (::geteuid() == 0) {
    mount.emplace(ro, "ro,size=64k");
    if (!mount->ok()) GTEST_SKIP() << "cannot mount a read-only tmpfs here";
  } else {
    fs::create_directories(ro);
    fs::permissions(ro, fs::perms::owner_read | fs::perms::owner_exec);
  }
  ExpectRefusedAtStartup({"--audit-log", (ro / "audit.jsonl").string()}, "cannot open");
  EXPECT_FALSE(fs::exists(ro / "audit.jsonl"));
}

TEST(AuditLogTest, ASymlinkAtThePathIsRefusedNeverFollowed) {
  TempDir dir;
  const fs::path target = dir.path() / "target";
  WriteFile(target, "");
  const fs::path link = dir.path() / "audit.jsonl";
  fs::create_symlink(target, link);
  ExpectRefusedAtStartup({"--audit-log", link.string()},
                         "it is a symbolic link, which is never followed");
  EXPECT_TRUE(fs::is_symlink(link));
  EXPECT_EQ(fs::file_size(target), 0u);
}

// The recordings' directory is opened once, as a directory itself, and checked like the
// socket's: never through a link, never one another user could rearrange.
TEST(AuditLogTest, ARecordDirectoryThatIsALinkOrOpenToOthersIsRefusedAtStartup) {
  TempDir dir;
  const fs::path real = dir.path() / "real";
  fs::create_directories(real);
  fs::create_symlink(real, dir.path() / "link");
  ExpectRefusedAtStartup({"--record", (dir.path() / "link").string()},
                         "it is a symbolic link, which is never followed");
  const fs::path open_dir = dir.path() / "open";
  fs::create_directories(open_dir);
  fs::permissions(open_dir, fs::perms(0777));
  ExpectRefusedAtStartup({"--record", open_dir.string()}, "could be changed by another user");
  EXPECT_TRUE(fs::is_empty(open_dir));
  // A missing one is created, private.
  TempDir workspace;
  const fs::path fresh = dir.path() / "fresh" / "casts";
  Startup started = StartServe({"--record", fresh.string()}, workspace.path());
  EXPECT_EQ(started.status, 0) << started.stderr_text;
  EXPECT_EQ(FileMode(fresh), 0700u);
}

// Inside the workspace (or a writable root the operator's policy names), a session could
// rename or replace the directories above the log: refused at startup, saying where to put it.
TEST(AuditLogTest, ALogOrRecordDirectoryInsideASessionRootIsRefusedAtStartup) {
  TempDir workspace;
  for (const char* flag : {"--audit-log", "--record"}) {
    const fs::path inside = workspace.path() / "logs" / "audit";
    Startup started = StartServe({flag, inside.string()}, workspace.path());
    EXPECT_EQ(started.status, 1) << flag << " " << started.stderr_text;
    EXPECT_NE(started.stderr_text.find(" lies inside " + fs::canonical(workspace.path()).string() +
                                       ", which sessions of this daemon can write"),
              std::string::npos)
        << started.stderr_text;
    EXPECT_NE(started.stderr_text.find("Put it where no session can write"), std::string::npos)
        << started.stderr_text;
    EXPECT_FALSE(fs::exists(inside)) << flag;
  }
  // A writable root of the operator's policy is a session root too.
  TempDir elsewhere;
  const fs::path policy = elsewhere.path() / "operator.yaml";
  fs::create_directories(elsewhere.path() / "cache");
  WriteFile(policy, "version: 1\nwritable: [" + (elsewhere.path() / "cache").string() + "]\n");
  Startup in_root = StartServe({"--policy", policy.string(), "--audit-log",
                                (elsewhere.path() / "cache" / "audit.jsonl").string()},
                               workspace.path());
  EXPECT_EQ(in_root.status, 1) << in_root.stderr_text;
  EXPECT_NE(
      in_root.stderr_text.find("lies inside " + fs::canonical(elsewhere.path() / "cache").string()),
      std::string::npos)
      << in_root.stderr_text;
  // ptybox run refuses the same, as a sandbox problem (125), before the command runs.
  Startup run = StartServe({"--audit-log", (workspace.path() / "run.jsonl").string()},
                           workspace.path(), "run");
  EXPECT_EQ(run.status, 125) << run.stderr_text;
  EXPECT_NE(run.stderr_text.find("ptybox run: the audit log"), std::string::npos)
      << run.stderr_text;
  // Beside the workspace is fine.
  Startup beside =
      StartServe({"--audit-log", (elsewhere.path() / "audit.jsonl").string()}, workspace.path());
  EXPECT_EQ(beside.status, 0) << beside.stderr_text;
  EXPECT_EQ(FileMode(elsewhere.path() / "audit.jsonl"), 0600u);
}

TEST(AuditLogTest, AFullDiskIsReportedOnceAndTheGapIsCountedWhenSpaceReturns) {
  TempDir dir;
  const fs::path disk = dir.path() / "disk";
  Tmpfs mount(disk, "size=64k");
  if (!mount.ok()) GTEST_SKIP() << "needs root to mount a small tmpfs";
  Shell("dd if=/dev/zero of=" + (disk / "filler").string() + " bs=4k 2>/dev/null");
  const fs::path log = disk / "audit.jsonl";
  Daemon daemon(Daemon::Options{{"--audit-log", log.string()}, {}});
  {
    RpcClient client(daemon.socket());
    std::string id = OpenSession(client, "workspace-write");
    ASSERT_FALSE(id.empty());
    for (int i = 0; i < 3; ++i) {
      EXPECT_EQ(Send(client, id, "echo disk-full\n")["viewport"], "disk-full");
    }
    // The writer works beside the reactor: space returns only once it has met the full disk
    // (its one report), or a busy machine would let it write everything after the removal.
    const auto guard = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (daemon.Log().find("No space left on device") == std::string::npos &&
           std::chrono::steady_clock::now() < guard) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    fs::remove(disk / "filler");
    // The writer retries with each new line: this one lands, after the count of the lost ones.
    EXPECT_EQ(Send(client, id, "echo space-again\n")["viewport"], "space-again");
  }
  daemon.Stop(SIGTERM);
  const std::string stderr_log = daemon.Log();
  EXPECT_EQ(Count(stderr_log, "the audit log "), 1u) << stderr_log;
  EXPECT_NE(stderr_log.find("No space left on device"), std::string::npos) << stderr_log;
  std::vector<Json> records = ReadAuditLog(log);
  std::vector<std::string> names = EventNames(records);
  ASSERT_FALSE(records.empty());
  EXPECT_EQ(names.front(), "dropped");
  // How many were lost depends on how far the writer had got when space returned (at least the
  // line it reported); every line after the count is whole and in order.
  EXPECT_GE(records.front()["events"].get<int>(), 1) << records.front().dump();
  EXPECT_GT(records.front()["bytes"].get<int>(), 0) << records.front().dump();
  std::vector<Json> sends = EventsNamed(records, "send");
  ASSERT_FALSE(sends.empty());
  EXPECT_EQ(sends.back()["input"], "echo space-again\n");
}

TEST(AuditLogTest, AHostileSessionsOutputStaysBoundedValidJson) {
  TempDir logs;
  const fs::path log = logs.path() / "audit.jsonl";
  Daemon daemon(Daemon::Options{{"--audit-log", log.string()}, {}});
  {
    RpcClient client(daemon.socket());
    std::string id = OpenSession(client, "workspace-write");
    Json huge = Send(client, id, "head -c 200000 /dev/zero | tr '\\0' x; echo\n");
    EXPECT_EQ(huge["exitCode"], 0) << huge.dump().substr(0, 300);
    Json bad = Send(client, id, "printf 'a\\377\\376b\\300\\200c\\033[31m\\001\\n'\n");
    EXPECT_EQ(bad["exitCode"], 0) << bad.dump();
  }
  daemon.Stop(SIGTERM);
  // Every line parses (ReadAuditLog fails the test otherwise) and stays under 32 KiB.
  std::vector<Json> results = EventsNamed(ReadAuditLog(log, 32 * 1024), "send_result");
  ASSERT_EQ(results.size(), 2u);
  EXPECT_GT(results[0]["viewportBytes"].get<size_t>(), 100000u) << results[0].dump();
  EXPECT_LE(results[0]["viewport"].get<std::string>().size(), 4096u + 48u);
  const std::string replaced = results[1]["viewport"];
  EXPECT_NE(replaced.find("\xEF\xBF\xBD"), std::string::npos) << results[1].dump();
  EXPECT_NE(replaced.find("c"), std::string::npos) << results[1].dump();
}

TEST(AuditLogTest, PtyboxRunRecordsItsCommand) {
  TempDir work;
  TempDir logs;
  const fs::path log = logs.path() / "run.jsonl";
  const std::string command =
      "cd " + work.path().string() + " && PTYBOX_INIT=" + InitBinary().string() +
      " PTYBOX_OPERATOR_POLICY=/nonexistent/ptybox.yaml " + PtyboxBinary().string() +
      " run --workspace " + work.path().string() + " --audit-log " + log.string() +
      " -- sh -c 'echo ran; exit 3' >/dev/null 2>&1";
  EXPECT_EQ(Shell(command), 3);
  std::vector<Json> records = ReadAuditLog(log);
  EXPECT_EQ(EventNames(records), (std::vector<std::string>{"audit_started", "run_started",
                                                           "run_ended", "audit_stopped"}));
  ASSERT_EQ(records.size(), 4u);
  EXPECT_EQ(records[0]["program"], "run");
  EXPECT_EQ(records[1]["command"], (Json{"sh", "-c", "echo ran; exit 3"}));
  EXPECT_EQ(records[1]["mode"], "workspace-write");
  EXPECT_EQ(records[1]["workspace"], fs::canonical(work.path()).string());
  EXPECT_EQ(records[2]["exitCode"], 3);
  EXPECT_EQ(FileMode(log), 0600u);
}

// A stdio client's owner is closed at its end of input and again by the shutdown that follows:
// the audit log says owner_disconnected once, for `serve --stdio` and for `mcp` alike.
TEST(AuditLogTest, AStdioClientsDisconnectIsAuditedOnce) {
  const std::string open = R"({"jsonrpc":"2.0","id":1,"method":"terminal_open","params":{}})";
  const std::string initialize =
      R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18",)"
      R"("capabilities":{},"clientInfo":{"name":"t","version":"1"}}})";
  for (const auto& [program, input] : {std::pair<std::string, std::string>{"serve --stdio", open},
                                       std::pair<std::string, std::string>{"mcp", initialize}}) {
    SCOPED_TRACE(program);
    TempDir work;
    TempDir logs;
    const fs::path log = logs.path() / "audit.jsonl";
    WriteFile(logs.path() / "input", input + "\n");
    const std::string command =
        "cd " + work.path().string() + " && PTYBOX_INIT=" + InitBinary().string() +
        " PTYBOX_OPERATOR_POLICY=/nonexistent/ptybox.yaml " + PtyboxBinary().string() + " " +
        program + " --audit-log " + log.string() + " <" + (logs.path() / "input").string() +
        " >/dev/null 2>&1";
    EXPECT_EQ(Shell(command), 0);
    const std::vector<Json> records = ReadAuditLog(log);
    EXPECT_EQ(EventsNamed(records, "owner_disconnected").size(), 1u) << [&] {
      std::string all;
      for (const std::string& name : EventNames(records)) all += name + " ";
      return all;
    }();
  }
}

}  // namespace
}  // namespace ptybox::testing
