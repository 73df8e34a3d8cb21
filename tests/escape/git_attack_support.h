// What the outside reviews' attacks on "Git for agents" share (tests/escape/git_review*_test.cc):
// the host's git as the person runs it, the repository every attack starts from, the agent's
// branch many begin with, the identity a session's commit needs.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/escape/escape_support.h"
#include "tests/sandbox/process_runner.h"

namespace ptybox::testing::git_attack {

// What most attacks open with: a daemon with Git for agents on, a client of it, and once Open()
// ran, the repository (MakeRepository) in its workspace `ws` and one workspace-write session
// `id`. A test names the parts it uses: `auto& [daemon, ws, client, id] = git;`.
struct GitWriteSession {
  // `env`: more of the daemon's environment (PTYBOX_LOG=info).
  explicit GitWriteSession(std::vector<std::string> env = {})
      : daemon{Daemon::Options{.extra_args = {}, .env = WithGitWrite(std::move(env))}} {}
  static std::vector<std::string> WithGitWrite(std::vector<std::string> env) {
    env.insert(env.begin(), "PTYBOX_GIT_WRITE=1");
    return env;
  }
  Daemon daemon;
  std::filesystem::path ws = daemon.workspace();
  RpcClient client{daemon.socket()};
  std::string id;

  // ASSERT_NO_FATAL_FAILURE(git.Open()): the repository, then the session.
  void Open();
  // The session alone, for a test that prepares the repository its own way first.
  void OpenSession();
  // The session, or the launch's refusal (its message): for a layout the launch may refuse.
  std::optional<std::string> OpenOrRefusal();
};

// The host's git in `repo`, as the person who owns it runs it (a submodule from a local path
// allowed, as the submodule attacks add them).
inline sandbox::testing::RunResult HostGit(const std::filesystem::path& repo,
                                           std::vector<std::string> args) {
  std::vector<std::string> argv = {"/usr/bin/git",
                                   "-C",
                                   repo.string(),
                                   "-c",
                                   "user.name=host",
                                   "-c",
                                   "user.email=host@example.com",
                                   "-c",
                                   "protocol.file.allow=always"};
  argv.insert(argv.end(), args.begin(), args.end());
  return sandbox::testing::RunProcess(argv);
}

// A repository with one commit (a.txt, a .gitignore that ignores .escape/, where the attacks
// keep their scripts).
inline void MakeRepository(const std::filesystem::path& ws) {
  ASSERT_EQ(HostGit(ws, {"init", "-q", "-b", "main"}).exit_code, 0);
  std::ofstream(ws / "a.txt") << "one\n";
  std::ofstream(ws / ".gitignore") << ".escape/\n";
  ASSERT_EQ(HostGit(ws, {"add", "a.txt", ".gitignore"}).exit_code, 0);
  ASSERT_EQ(HostGit(ws, {"commit", "-q", "-m", "first"}).exit_code, 0);
  std::filesystem::create_directories(ws / ".escape");
}

inline void GitWriteSession::Open() {
  ASSERT_NO_FATAL_FAILURE(MakeRepository(ws));
  ASSERT_NO_FATAL_FAILURE(OpenSession());
}

inline std::optional<std::string> GitWriteSession::OpenOrRefusal() {
  const Json set = client.Call("policy_set_mode", Json{{"mode", "workspace-write"}});
  EXPECT_TRUE(set.contains("result")) << set.dump();
  const Json opened = client.Call("terminal_open", Json::object());
  if (opened.contains("result")) {
    id = opened["result"]["sessionId"].get<std::string>();
    return std::nullopt;
  }
  return opened.dump();
}

inline void GitWriteSession::OpenSession() {
  id = ::ptybox::testing::OpenSession(client, "workspace-write");
  ASSERT_FALSE(id.empty()) << daemon.Log();
}

// A packed-refs of `count` tags `refs/tags/release-NNNNN` on HEAD (a monorepo's release tags):
// large enough that each read of it takes the copy-back, and the person's `git pack-refs`, a
// while.
inline void WriteManyPackedTags(const std::filesystem::path& ws, int count) {
  sandbox::testing::RunResult head = HostGit(ws, {"rev-parse", "HEAD"});
  ASSERT_EQ(head.exit_code, 0);
  std::string id = head.out;
  while (!id.empty() && id.back() == '\n') id.pop_back();
  std::ofstream packed(ws / ".git" / "packed-refs");
  packed << "# pack-refs with: peeled fully-peeled sorted \n";
  char name[64];
  for (int i = 0; i < count; ++i) {
    std::snprintf(name, sizeof name, "refs/tags/release-%05d", i);
    packed << id << " " << name << "\n";
  }
}

// The person pushes `main` of `ws` to a bare server of their own that checks what it receives
// (`receive.fsckObjects`, as most hosting services do); the push's result.
inline sandbox::testing::RunResult PushToFsckingServer(const std::filesystem::path& ws) {
  char dir[] = "/tmp/ptybox-git-server-XXXXXX";
  if (::mkdtemp(dir) == nullptr) {
    sandbox::testing::RunResult failed;
    failed.err = "mkdtemp failed";
    return failed;
  }
  const std::filesystem::path server = std::filesystem::path(dir) / "server.git";
  HostGit(ws, {"init", "-q", "--bare", server.string()});
  HostGit(server, {"config", "receive.fsckObjects", "true"});
  sandbox::testing::RunResult push = HostGit(ws, {"push", "-q", server.string(), "main"});
  std::filesystem::remove_all(dir);
  return push;
}

// The last 3,000 bytes of a daemon's log, for a failure's message.
inline std::string LogTail(const std::string& log) {
  return log.substr(log.size() > 3000 ? log.size() - 3000 : 0);
}

// The person's `git <args>` on `ws` (fsck, gc) succeeds, printed as observed; `what` names what
// of the session's would have made it fail, `log` the daemon's log for the failure's message.
inline void ExpectPersonsGitSucceeds(const std::filesystem::path& ws,
                                     const std::vector<std::string>& args, const std::string& what,
                                     const std::string& log = {}) {
  const sandbox::testing::RunResult run = HostGit(ws, args);
  std::cout << "  the person's `git " << args.front() << "`: exit " << run.exit_code << "\n"
            << run.err;
  EXPECT_EQ(run.exit_code, 0) << "the person's git " << args.front() << " fails on " << what << "\n"
                              << run.Describe() << "\n"
                              << LogTail(log);
}

// The person's push of `main` to a server that checks objects succeeds (PushToFsckingServer).
inline void ExpectFsckingPushSucceeds(const std::filesystem::path& ws, const std::string& log) {
  const sandbox::testing::RunResult push = PushToFsckingServer(ws);
  std::cout << "  the person's `git push` of main to a fsck-ing server: exit " << push.exit_code
            << "\n"
            << push.err;
  EXPECT_EQ(push.exit_code, 0) << "the person's push of main is refused\n"
                               << push.Describe() << "\n"
                               << LogTail(log);
}

// `text` without its trailing line ends (one line of a command's output).
inline std::string Line(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  return text;
}

inline std::string Slurp(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

inline constexpr const char* kIdentity =
    "export GIT_AUTHOR_NAME=agent GIT_AUTHOR_EMAIL=agent@example.com "
    "GIT_COMMITTER_NAME=agent GIT_COMMITTER_EMAIL=agent@example.com; ";

// A session's script: two flat trees of 1,000,000 entries each (the same blob; the second lacks
// the last entry), then a chain of 1,200 commits alternating between them, its tip in $p, then
// `branches` (e.g. "git branch slow $p"). About 5 MiB of objects; the host's `git log --raw` of
// the chain diffs two 1,000,000-entry trees per commit (~0.1 s of a core each here).
inline std::string SlowHistoryScript(const std::string& branches) {
  return R"SH(set -e
b=$(echo x | git hash-object -w --stdin)
python3 -c "
import sys
for i in range(1000000): sys.stdout.write('100644 blob $b\tf%07d\n' % i)
" > .escape/lines
ta=$(git mktree < .escape/lines)
tb=$(sed '$d' .escape/lines | git mktree)
rm .escape/lines
p=$(git commit-tree $ta -m 0)
for i in $(seq 1 1200); do
  if [ $((i % 2)) = 1 ]; then t=$tb; else t=$ta; fi
  p=$(git commit-tree $t -p $p -m $i)
done
)SH" + branches +
         "\n";
}

// The session `id` makes `agent` with three commits (it comes back to the host's `ws`), and goes
// back to main.
inline void MakeAgentBranch(RpcClient& client, const std::string& id,
                            const std::filesystem::path& ws, Daemon& daemon) {
  Observed made =
      RunInSession(client, id, "workspace-write", "make-agent",
                   std::string(kIdentity) +
                       "git checkout -q -b agent && for i in 1 2 3; do echo agent$i > a.txt && "
                       "git commit -qam agent$i; done && git checkout -q main && "
                       "echo made");
  ASSERT_TRUE(made.Says("made")) << made.Show();
  ASSERT_EQ(HostGit(ws, {"rev-parse", "--verify", "-q", "refs/heads/agent"}).exit_code, 0)
      << daemon.Log();
}

// The session's ordinary commit: a line appended to a.txt, committed as "agent" on its branch.
inline void CommitAgentChange(GitWriteSession& git) {
  Observed committed = RunInSession(git.client, git.id, "workspace-write", "commit",
                                    std::string(kIdentity) +
                                        "echo agent >> a.txt && git add a.txt && "
                                        "git commit -qm agent && echo committed");
  ASSERT_TRUE(committed.Says("committed")) << committed.Show();
}

// The subject of the host's main and what is staged against the host's HEAD
// (`git diff --cached --name-status HEAD`), printed.
struct MainAndStaged {
  std::string subject;
  std::string staged;
};
inline MainAndStaged HostMainAndStaged(const std::filesystem::path& ws) {
  MainAndStaged now{Line(HostGit(ws, {"log", "-1", "--format=%s", "main"}).out),
                    HostGit(ws, {"diff", "--cached", "--name-status", "HEAD"}).out};
  std::cout << "  the host's main: \"" << now.subject << "\"; staged against HEAD: [" << now.staged
            << "]\n";
  return now;
}

// After the person's commit `mine` on main, the session moves its HEAD (`session_command`, e.g.
// `git checkout -q -b topic`). Whatever comes back, nothing is staged against the host's HEAD
// (`why` says what it means if something is), and the person's next commit lands on main.
inline void SwitchAfterThePersonsCommit(GitWriteSession& git, const std::string& mine,
                                        const std::string& session_command, const char* why) {
  const std::filesystem::path& ws = git.ws;
  Observed switched = RunInSession(git.client, git.id, "workspace-write", "switch",
                                   std::string(kIdentity) + session_command + " && echo switched");
  ASSERT_TRUE(switched.Says("switched")) << switched.Show();
  const std::string head = Line(HostGit(ws, {"rev-parse", "HEAD"}).out);
  const std::string symbolic = Line(HostGit(ws, {"symbolic-ref", "-q", "HEAD"}).out);
  const std::string staged = HostGit(ws, {"diff", "--cached", "--name-status", "HEAD"}).out;
  std::cout << "  the host's HEAD: " << head << " [" << symbolic << "] (the person's commit "
            << mine << "); staged against it: [" << Line(staged) << "]\n";
  EXPECT_EQ(staged, "") << why << "\n" << git.daemon.Log();
  // The person's next commit, as they would make it: it goes on main, after their own.
  if (head != mine) {
    ASSERT_EQ(HostGit(ws, {"commit", "-q", "--allow-empty", "-m", "next"}).exit_code, 0);
    const std::string main_tip = Line(HostGit(ws, {"log", "-1", "--format=%s", "main"}).out);
    std::cout << "  main's tip after the person's next commit: \"" << main_tip << "\"\n";
    EXPECT_EQ(main_tip, "next") << "the person's next commit did not land on their branch";
  }
}

// Waits up to `guard` for a session's background job to touch `.escape/made` in `ws`.
inline bool AwaitMade(const std::filesystem::path& ws, std::chrono::seconds guard) {
  const auto until = std::chrono::steady_clock::now() + guard;
  while (!std::filesystem::exists(ws / ".escape" / "made") &&
         std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return std::filesystem::exists(ws / ".escape" / "made");
}

// Closes session `id` and times it: the answer and the whole seconds it took (printed), for
// the attacks that make the last copy-back heavy.
struct ClosedIn {
  Json answer;
  int64_t seconds = 0;
};
inline ClosedIn TimedClose(RpcClient& client, const std::string& id, std::chrono::seconds guard) {
  const auto start = std::chrono::steady_clock::now();
  ClosedIn closed{client.Call("terminal_close", Json{{"sessionId", id}}, guard), 0};
  closed.seconds =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - start)
          .count();
  std::cout << "  terminal_close answered in " << closed.seconds << " s\n";
  return closed;
}

// One count of process `pid`'s /proc/<pid>/io (`field`: "rchar:", bytes read through read(2) and
// the like; "wchar:", written): a count of the work done, not a time. -1 when unreadable.
inline int64_t IoCount(pid_t pid, const std::string& field) {
  std::ifstream io("/proc/" + std::to_string(pid) + "/io");
  std::string key;
  int64_t value = 0;
  while (io >> key >> value) {
    if (key == field) return value;
  }
  return -1;
}
inline int64_t BytesRead(pid_t pid) { return IoCount(pid, "rchar:"); }
inline int64_t BytesWritten(pid_t pid) { return IoCount(pid, "wchar:"); }

// Bytes the daemon writes over `sends` sends of the session, the i-th running `command(i)` (which
// must print `says`), and one more send after them (a copy-back may outlast its send's answer:
// the next send waits for it). -1 when /proc/<pid>/io is unreadable.
inline int64_t DaemonWritesOver(GitWriteSession& git, int sends,
                                const std::function<std::string(int)>& command,
                                const std::string& says) {
  auto& [daemon, ws, client, id] = git;
  const int64_t start = BytesWritten(daemon.pid());
  if (start < 0) return -1;
  for (int i = 1; i <= sends; ++i) {
    Observed sent = RunInSession(client, id, "workspace-write", "send", command(i));
    EXPECT_TRUE(sent.Says(says)) << sent.Show();
  }
  Observed settle = RunInSession(client, id, "workspace-write", "settle", "echo settle-$((40+2))");
  EXPECT_TRUE(settle.Says("settle-42")) << settle.Show();
  return BytesWritten(daemon.pid()) - start;
}

// What a plain send prints, for DaemonWritesOver.
inline std::string PlainSend(int) { return "echo plain-$((40+2))"; }

// The non-empty lines of `text` (a `git stash list`, a reflog).
inline size_t CountLines(const std::string& text) {
  size_t n = 0;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) ++n;
  }
  return n;
}

// The host's value of `what` (a ref or revision), empty when it names nothing.
inline std::string Rev(const std::filesystem::path& ws, const std::string& what) {
  return Line(HostGit(ws, {"rev-parse", "-q", "--verify", what}).out);
}

// The person's `git stash list`, a line per entry: `stash@{n} <id>`.
inline std::string StashList(const std::filesystem::path& ws) {
  return HostGit(ws, {"stash", "list", "--format=%gd %H"}).out;
}

// The first `lines` lines of `text`.
inline std::string Head(const std::string& text, size_t lines) {
  size_t at = 0;
  for (size_t i = 0; i < lines && at != std::string::npos; ++i) {
    at = text.find('\n', at);
    if (at != std::string::npos) ++at;
  }
  return at == std::string::npos ? text : text.substr(0, at);
}

// `sends` plain sends, each answered after its copy-back.
inline void Settle(GitWriteSession& git, int sends = 2) {
  for (int i = 0; i < sends; ++i) {
    Observed settle =
        RunInSession(git.client, git.id, "workspace-write", "settle", "echo settle-$((40+2))");
    ASSERT_TRUE(settle.Says("settle-42")) << settle.Show();
  }
}

// Forty commits on `topic` in one send (32 of the 41 log lines come back at once, 9 wait), then
// back to main.
inline void MakeFortyCommitsOnTopic(GitWriteSession& git) {
  Observed made = RunInSession(
      git.client, git.id, "workspace-write", "topic",
      std::string(kIdentity) +
          "git checkout -q -b topic && for i in $(seq 1 40); do echo c$i >> a.txt && "
          "git commit -qam c$i; done && git checkout -q main && echo made-$(git reflog show topic "
          "| wc -l)");
  ASSERT_TRUE(made.Says("made-41")) << made.Show();
  const std::string subject = Line(HostGit(git.ws, {"log", "-1", "--format=%s", "topic"}).out);
  ASSERT_EQ(subject, "c40") << "the session's branch did not come back\n" << git.daemon.Log();
}

}  // namespace ptybox::testing::git_attack
