// Fifty-second outside review of "Git for agents" (docs/security.md), on 8e0b941, the
// forty-fifth of the feature. Time-boxed (40 minutes).
//
// Finding 1 (goal 3, an ordinary race with the person's git; review 51's fix (4) misses it):
// CommitUnderWay tells the person's `git commit` under way by COMMIT_EDITMSG newer than the
// worktree's logs/HEAD. But git (2.39, builtin/commit.c) runs the pre-commit hook BEFORE it
// writes COMMIT_EDITMSG (prepare_to_commit), and a plain `git commit` (no -a, no paths) has
// committed the index and holds no lock then. While the hook runs (the pre-commit framework,
// husky/lint-staged, a test suite: seconds to minutes), COMMIT_EDITMSG is the previous commit's,
// older than logs/HEAD: nothing holds main. The session's copy-back moves main; the person's
// commit then fails at its ref update ("cannot lock ref 'HEAD': is at <session's> but expected
// <old>"). Also with `git commit -m` (no editor at all).
// APersonsCommitWhosePreCommitHookRunsStillLands, APersonsAmendWhosePreCommitHookRunsStillLands.
//
// Finding 2 (goal 3, an ordinary race; review 50's hole back through review 51's fix (1)):
// IndexOfAnotherTree now refuses a launch only when the index's root tree is a ref's commit's or
// one of the 1,024 newest commits of `git rev-list --all`. A `git switch --detach <commit>` (or
// `git checkout ORIG_HEAD`, `HEAD@{n}`, a commit of a deleted branch, any commit older than the
// newest 1,024) held between its index write and its HEAD write (printing the local changes it
// carries into a slow stdout) is not refused: the launch takes HEAD on main with that commit's
// index, the session's ordinary commit puts its files on main, and the copy-back moves the
// person's main. ALaunchDuringADetachedSwitchToAReflogCommitNeverPutsItsFilesOnMain.
//
// Finding 3 (the feature off in ordinary use; no security goal, as review 51's finding 1):
// `git stash` then `git stash apply --index` (restore the stash with what was staged) leaves an
// index whose cache-tree root is valid and is the tree of the stash's index commit (refs/stash^2),
// which `git rev-list --all` lists among the newest commits. Every later launch takes it for a
// switch under way and keeps .git read-only, until the person commits (or drops the stash and
// changes the index). AStashAppliedWithItsIndexLeavesGitForAgentsOn.

#include <fcntl.h>
#include <gtest/gtest.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "tests/escape/escape_support.h"
#include "tests/escape/git_attack_support.h"
#include "tests/escape/persons_git_waiting.h"

extern char** environ;

namespace ptybox::testing {
namespace {

using git_attack::HostGit;
using git_attack::kIdentity;
using git_attack::Line;
using git_attack::PersonsGitWaiting;

namespace fs = std::filesystem;

TEST(GitReview45AttackTest, APersonsCommitWhosePreCommitHookRunsStillLands) {
  git_attack::PersonsCommitDuringACopyBack(
      PersonsGitWaiting::Step::kPreCommitHook, "/usr/bin/git", {"-m", "the person's message"}, true,
      "its pre-commit hook running, COMMIT_EDITMSG not yet written");
}

TEST(GitReview45AttackTest, APersonsAmendWhosePreCommitHookRunsStillLands) {
  git_attack::PersonsCommitDuringACopyBack(
      PersonsGitWaiting::Step::kPreCommitHook, "/usr/bin/git",
      {"--amend", "-m", "the person's message"}, false,
      "its pre-commit hook running, COMMIT_EDITMSG not yet written");
}

// Finding 2: the person's `git switch --detach <commit only the reflog has>` (a deleted branch's),
// its stdout a small pipe nobody reads yet: git has written that commit's index and waits to
// print the local changes it carries before it writes HEAD. A session launched then must not move
// main to that commit's files.
TEST(GitReview45AttackTest, ALaunchDuringADetachedSwitchToAReflogCommitNeverPutsItsFilesOnMain) {
  Daemon daemon(Daemon::Options{.extra_args = {}, .env = {"PTYBOX_GIT_WRITE=1"}});
  const fs::path ws = daemon.workspace();
  RpcClient client{daemon.socket()};
  ASSERT_NO_FATAL_FAILURE(git_attack::MakeRepository(ws));
  const fs::path git_dir = ws / ".git";
  constexpr int kCarried = 600;
  for (int i = 0; i < kCarried; ++i) {
    std::ofstream(ws / ("carried-file-with-a-rather-long-name-" + std::to_string(i) + ".txt"))
        << "base " << i << "\n";
  }
  ASSERT_EQ(HostGit(ws, {"add", "-A"}).exit_code, 0);
  ASSERT_EQ(HostGit(ws, {"commit", "-q", "-m", "carried files"}).exit_code, 0);
  ASSERT_EQ(HostGit(ws, {"switch", "-q", "-c", "other"}).exit_code, 0);
  std::ofstream(ws / "a.txt") << "two\n";
  ASSERT_EQ(HostGit(ws, {"commit", "-q", "-a", "-m", "other's change"}).exit_code, 0);
  const std::string other = Line(HostGit(ws, {"rev-parse", "other"}).out);
  ASSERT_EQ(HostGit(ws, {"switch", "-q", "main"}).exit_code, 0);
  // The branch is gone; its commit stays in the reflog (`git switch --detach HEAD@{1}`).
  ASSERT_EQ(HostGit(ws, {"branch", "-q", "-D", "other"}).exit_code, 0);
  const std::string main_tip = Line(HostGit(ws, {"rev-parse", "main"}).out);
  const std::string index_main = git_attack::Slurp(git_dir / "index");
  for (int i = 0; i < kCarried; ++i) {
    std::ofstream(ws / ("carried-file-with-a-rather-long-name-" + std::to_string(i) + ".txt"))
        << "the person's edit " << i << "\n";
  }
  int out[2];
  ASSERT_EQ(::pipe(out), 0);
  ::fcntl(out[1], F_SETPIPE_SZ, 4096);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out[1], 1);
  posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addclose(&actions, out[0]);
  posix_spawn_file_actions_addclose(&actions, out[1]);
  std::vector<std::string> args = {"/usr/bin/git", "-C", ws.string(), "switch", "--detach", other};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  ASSERT_EQ(::posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ), 0);
  posix_spawn_file_actions_destroy(&actions);
  ::close(out[1]);
  int status = -1;
  auto drain = [&, pid, fd = out[0]] {
    if (status != -1) return status;
    char buf[65536];
    while (::read(fd, buf, sizeof buf) > 0) {
    }
    status = 0;
    ::waitpid(pid, &status, 0);
    ::close(fd);
    return status;
  };
  struct Drained {
    std::function<int()> drain;
    ~Drained() { drain(); }
  } drained{drain};
  bool written = false;
  for (int i = 0; i < 600 && !written; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    written =
        !fs::exists(git_dir / "index.lock") && git_attack::Slurp(git_dir / "index") != index_main;
  }
  const std::string head_then = Line(git_attack::Slurp(git_dir / "HEAD"));
  std::cout << "  index written by the person's switch: " << written << "; HEAD then `" << head_then
            << "`\n";
  if (!written || head_then != "ref: refs/heads/main") {
    drain();
    GTEST_SKIP() << "git's switch did not stop between its index and HEAD here";
  }
  std::this_thread::sleep_for(std::chrono::seconds(2));  // the index is no longer fresh
  const std::string id = OpenSession(client, "workspace-write");
  if (id.empty()) {
    drain();
    FAIL() << daemon.Log();
  }
  Observed work = RunInSession(
      client, id, "workspace-write", "work",
      std::string(kIdentity) +
          "echo head=$(git symbolic-ref -q HEAD); echo a=$(git show :a.txt); echo y > y.txt; "
          "git add y.txt && git commit -q -m work && echo committed-ok");
  std::cout << "  " << work.Show() << "\n";
  Observed settle = RunInSession(client, id, "workspace-write", "settle", "echo settle-$((40+2))");
  const std::string during = Line(HostGit(ws, {"show", "main:a.txt"}).out);
  drain();
  std::cout << "  the person's switch exited " << WEXITSTATUS(status) << "; host HEAD now `"
            << Line(git_attack::Slurp(git_dir / "HEAD")) << "`\n";
  Observed settle2 =
      RunInSession(client, id, "workspace-write", "settle2", "echo settle-$((40+2))");
  ASSERT_TRUE(settle2.Says("settle-42")) << settle2.Show();
  client.Call("terminal_close", Json{{"sessionId", id}}, std::chrono::seconds(60));
  const std::string main_now = Line(HostGit(ws, {"rev-parse", "main"}).out);
  const std::string shown = Line(HostGit(ws, {"show", "main:a.txt"}).out);
  std::cout << "  main was " << main_tip << ", now " << main_now << "; main:a.txt `" << shown
            << "` (during the switch: `" << during << "`)\n";
  EXPECT_EQ(shown, "one") << "a session launched while the person's `git switch --detach "
                             "<a reflog's commit>` was printing (index written, HEAD not yet) "
                             "committed that commit's files onto main, and the copy-back moved "
                             "the person's main\n"
                          << git_attack::LogTail(daemon.Log());
}

// Finding 3: the person stashed staged work and applied it back with its index. A session opened
// now must still commit.
TEST(GitReview45AttackTest, AStashAppliedWithItsIndexLeavesGitForAgentsOn) {
  git_attack::GitWriteSession git({"PTYBOX_LOG=info"});
  auto& [daemon, ws, client, id] = git;
  ASSERT_NO_FATAL_FAILURE(git_attack::MakeRepository(ws));
  std::ofstream(ws / "b.txt") << "the person's staged work\n";
  ASSERT_EQ(HostGit(ws, {"add", "b.txt"}).exit_code, 0);
  ASSERT_EQ(HostGit(ws, {"stash", "-q"}).exit_code, 0);
  ASSERT_EQ(HostGit(ws, {"stash", "apply", "-q", "--index"}).exit_code, 0);
  ASSERT_EQ(Line(HostGit(ws, {"diff", "--cached", "--name-only"}).out), "b.txt");
  ASSERT_NO_FATAL_FAILURE(git.OpenSession());
  Observed committed = RunInSession(client, id, "workspace-write", "commit",
                                    std::string(kIdentity) +
                                        "echo agent >> a.txt && git add a.txt && "
                                        "git commit -qm agent && echo committed-ok");
  std::cout << "  " << committed.Show() << "\n";
  const std::string subject = Line(HostGit(ws, {"log", "-1", "--format=%s", "main"}).out);
  std::cout << "  the host's main after the send: \"" << subject << "\"\n";
  EXPECT_TRUE(committed.Says("committed-ok"))
      << "a session opened after the person's `git stash; git stash apply --index` (its index's "
         "cache-tree root valid, naming the tree of refs/stash^2, a commit `git rev-list --all` "
         "lists) got a read-only .git: Git for agents is off until the person commits\n"
      << git_attack::LogTail(daemon.Log());
}

}  // namespace
}  // namespace ptybox::testing
