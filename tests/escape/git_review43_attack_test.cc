// Fiftieth outside review of "Git for agents" (docs/security.md), on 7589980, the forty-third of
// the feature. Time-boxed (14 minutes).
//
// Finding 1 (goal 3, an ordinary race with the person's git): ReadLaunchState takes HEAD and the
// index as one state when no index.lock/HEAD.lock is held and HEAD, the branch and the index's
// identity read the same again after a 20 ms pause. `git switch other` (git 2.39, checkout.c
// merge_working_tree) commits the index, then prints the local changes it carries
// (show_local_changes, "M\t<path>" per modified file, to stdout), and only then writes HEAD. No
// lock is held while it prints, and the printing takes as long as its stdout does (a pipe read
// slowly, a terminal paused with ^S, a large worktree's diff). A launch in that gap reads HEAD on
// main with other's index twice over and accepts it. The session's ordinary `git add y; git
// commit` makes a commit on main with other's files; at the copy-back the host's HEAD still names
// main and the host's index is the snapshot's, so the index "follows" and the CAS passes: the
// person's main takes other's files. ALaunchDuringASwitchThatIsPrintingNeverPutsOthersFilesOnMain.
//
// Finding 2 (goal 3, the same race in a linked worktree): PrepareWorktrees reads a linked
// worktree's HEAD and index once each, with no look at its index.lock/HEAD.lock and no second
// reading. The person's `git -C wt switch other` in that gap gives the session HEAD on feat with
// other's index; the session's commit in wt moves the person's feat to other's files.
// ALaunchDuringALinkedWorktreesSwitchNeverPutsOthersFilesOnItsBranch.

#include <fcntl.h>
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <string>
#include <thread>

#include "tests/escape/escape_support.h"
#include "tests/escape/git_attack_support.h"

extern char** environ;

namespace ptybox::testing {
namespace {

using git_attack::HostGit;
using git_attack::Line;

// Finding 1 (goal 3): the person's `git switch other`, its stdout a pipe read later (`git switch
// other | less`, a paused terminal): git has written other's index and waits to print the local
// changes it carries before it writes HEAD. A session launched then must not move main to
// other's files.
//
// `linked`: the person works in a linked worktree `wt` (branch feat) instead of the main one.
void SwitchDuringLaunch(bool linked) {
  Daemon daemon(Daemon::Options{.extra_args = {}, .env = {}});
  const std::filesystem::path ws = daemon.workspace();
  RpcClient client{daemon.socket()};
  ASSERT_NO_FATAL_FAILURE(git_attack::MakeRepository(ws));
  const std::filesystem::path git_dir = ws / ".git";
  const std::string branch = linked ? "feat" : "main";
  const std::filesystem::path wt = linked ? ws / "wt" : ws;
  const std::filesystem::path git = linked ? git_dir / "worktrees" / "wt" : git_dir;
  // Files both branches have, which the person has modified and carries across the switch.
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
  ASSERT_EQ(HostGit(ws, {"switch", "-q", "main"}).exit_code, 0);
  if (linked) {
    ASSERT_EQ(HostGit(ws, {"worktree", "add", "-q", "-b", "feat", "wt", "main"}).exit_code, 0);
  }
  const std::string main_tip = Line(HostGit(ws, {"rev-parse", branch}).out);
  const std::string index_main = git_attack::Slurp(git / "index");
  for (int i = 0; i < kCarried; ++i) {
    std::ofstream(wt / ("carried-file-with-a-rather-long-name-" + std::to_string(i) + ".txt"))
        << "the person's edit " << i << "\n";
  }
  // The person's `git switch other`, stdout a small pipe nobody reads yet.
  int out[2];
  ASSERT_EQ(::pipe(out), 0);
  ::fcntl(out[1], F_SETPIPE_SZ, 4096);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out[1], 1);
  posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addclose(&actions, out[0]);
  posix_spawn_file_actions_addclose(&actions, out[1]);
  const std::string repo = wt.string();
  std::vector<std::string> args = {"/usr/bin/git", "-C", repo, "switch", "other"};
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
  // However the test ends, the person's git is let finish.
  struct Drained {
    std::function<int()> drain;
    ~Drained() { drain(); }
  } drained{drain};
  // Wait until git has committed other's index (and holds no index.lock).
  bool written = false;
  for (int i = 0; i < 600 && !written; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    written = !std::filesystem::exists(git / "index.lock") &&
              git_attack::Slurp(git / "index") != index_main;
  }
  const std::string head_then = Line(git_attack::Slurp(git / "HEAD"));
  std::cout << "  index written by the person's switch: " << written << "; HEAD then `" << head_then
            << "`\n";
  if (!written || head_then != "ref: refs/heads/" + branch) {
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
      std::string(git_attack::kIdentity) + (linked ? "cd wt && " : "") +
          "echo head=$(git symbolic-ref -q HEAD); echo a=$(git show :a.txt); echo y > y.txt; "
          "git add y.txt && git commit -q -m work && echo committed-ok");
  std::cout << "  " << work.Show() << "\n";
  Observed settle = RunInSession(client, id, "workspace-write", "settle", "echo settle-$((40+2))");
  const std::string during = Line(HostGit(ws, {"show", branch + ":a.txt"}).out);
  drain();
  std::cout << "  the person's switch exited " << WEXITSTATUS(status) << "; host HEAD now `"
            << Line(git_attack::Slurp(git / "HEAD")) << "`\n";
  Observed settle2 =
      RunInSession(client, id, "workspace-write", "settle2", "echo settle-$((40+2))");
  ASSERT_TRUE(settle2.Says("settle-42")) << settle2.Show();
  client.Call("terminal_close", Json{{"sessionId", id}}, std::chrono::seconds(60));
  const std::string main_now = Line(HostGit(ws, {"rev-parse", branch}).out);
  const std::string shown = Line(HostGit(ws, {"show", branch + ":a.txt"}).out);
  std::cout << "  " << branch << " was " << main_tip << ", now " << main_now << "; " << branch
            << ":a.txt `" << shown << "` (during the switch: `" << during << "`)\n";
  EXPECT_EQ(shown, "one") << "a session launched while the person's `git switch other` was "
                             "printing (index written, HEAD not yet) committed other's files "
                             "onto the branch, and the copy-back moved the person's branch\n"
                          << git_attack::LogTail(daemon.Log());
}

TEST(GitReview43AttackTest, ALaunchDuringASwitchThatIsPrintingNeverPutsOthersFilesOnMain) {
  SwitchDuringLaunch(false);
}

// Finding 2 (goal 3): the same in a linked worktree, whose HEAD and index PrepareWorktrees reads
// once each, with no look at a lock and no second reading at all.
TEST(GitReview43AttackTest, ALaunchDuringALinkedWorktreesSwitchNeverPutsOthersFilesOnItsBranch) {
  SwitchDuringLaunch(true);
}

}  // namespace
}  // namespace ptybox::testing
