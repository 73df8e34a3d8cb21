// Forty-second outside review of "Git for agents" (docs/security.md; review 49 of the project), on
// 3ddd157. Time-boxed (15 minutes).
//
// Finding 1 (goal 3, an ordinary race with the person's git): PreparePrivateGit reads the main
// worktree's HEAD, then its index (then the refs), one after another, and never again; `git
// switch other` writes the index, then HEAD. A launch during the person's `git switch other`
// (from main) gives the session HEAD on main with other's index (no lock is looked at either, so
// git's own moment between the two writes is taken as well). The session's ordinary
// `echo y > y.txt; git add y.txt; git commit` makes a commit on main whose tree is other's + y. At
// the copy-back the person is on other, so no worktree holds main and no index has to follow
// (HeldMoveRefusal: kNone); main still holds the snapshot's value, the CAS passes, and the
// person's main moves to a commit that silently replaces main's files with other's (undoing what
// main has and other lacks). ThePersonsSwitchDuringALaunchNeverPutsAnotherBranchsFilesOnMain.
//
// Tried first, held (kept as a guard) (goal 3, an ordinary race with the person's git):
// PreparePrivateGit reads the main worktree's HEAD, then its index, then the refs
// (ReadRefsAsGitDoes), one after another, with no reading again and no look at index.lock. The
// person's `git reset --hard` between two commits during a launch does leave some sessions (about
// one launch in seven here) with the branch at the person's commit B and the index of A: the
// session's `git status` shows B's change staged as undone, and the session's ordinary `git add y
// && git commit` makes C (parent B, A's tree + y), undoing the person's commit. The copy-back did
// not let it through: main, checked out on the host, moves only with its index following
// (HeldMoveRefusal's follower, IndexFollows against the snapshot's index), and the host's index
// (B's) is not the snapshot's (A's), so main stays at B.
// ThePersonsResetDuringALaunchIsNeverUndoneByTheSessionsCommit asserts that.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <thread>

#include "tests/escape/escape_support.h"
#include "tests/escape/git_attack_support.h"

namespace ptybox::testing {
namespace {

using git_attack::HostGit;
using git_attack::Line;

// The race tried (goal 3). The person's `git reset --hard A` and `git reset --hard B` (B changes
// a.txt from "one" to "two") are played by a loop doing what they do to the files, in git's order
// (the index written, then the branch); the loop stops before the session's first send and leaves
// the host at B, consistently, as the person's last `git reset --hard B` does. The session then
// does ordinary work: adds a new file and commits.
TEST(GitReview42AttackTest, ThePersonsResetDuringALaunchIsNeverUndoneByTheSessionsCommit) {
  Daemon daemon(Daemon::Options{.extra_args = {}, .env = {}});
  const std::filesystem::path ws = daemon.workspace();
  RpcClient client{daemon.socket()};
  ASSERT_NO_FATAL_FAILURE(git_attack::MakeRepository(ws));
  const std::filesystem::path git = ws / ".git";
  const std::filesystem::path index = git / "index";
  const std::filesystem::path branch = git / "refs" / "heads" / "main";
  ASSERT_TRUE(std::filesystem::exists(branch));
  const std::string index_a = git_attack::Slurp(index);
  const std::string a = git_attack::Slurp(branch);
  std::ofstream(ws / "a.txt") << "two\n";
  ASSERT_EQ(HostGit(ws, {"commit", "-q", "-a", "-m", "the person's change"}).exit_code, 0);
  const std::string index_b = git_attack::Slurp(index);
  const std::string b = git_attack::Slurp(branch);
  ASSERT_NE(Line(a), Line(b));
  int undone = 0;
  int saw_mixed = 0;
  std::string show;
  constexpr int kAttempts = 30;
  for (int attempt = 0; attempt < kAttempts && undone == 0; ++attempt) {
    std::atomic<bool> stop{false};
    std::thread person([&] {
      while (!stop.load()) {
        WriteFileByRename(index, index_a);  // git reset --hard A: the index, then the branch
        WriteFileByRename(branch, a);
        WriteFileByRename(index, index_b);  // git reset --hard B
        WriteFileByRename(branch, b);
      }
    });
    const std::string id = OpenSession(client, "workspace-write");
    stop = true;
    person.join();
    ASSERT_FALSE(id.empty()) << daemon.Log();
    WriteFileByRename(index, index_b);  // the person's last `git reset --hard B`
    WriteFileByRename(branch, b);
    const std::string file = "y" + std::to_string(attempt) + ".txt";
    Observed work = RunInSession(
        client, id, "workspace-write", "work",
        std::string(git_attack::kIdentity) +
            "if git diff --cached --quiet; then echo view=clean; else "
            "echo view=mixed; fi; echo head=$(git rev-parse HEAD); echo y > " +
            file + "; git add " + file + " && git commit -q -m work && echo committed-ok");
    if (work.Says("view=mixed")) {
      ++saw_mixed;
      std::cout << "  attempt " << attempt << ": mixed view; " << work.Show()
                << "\n  host main after the work: " << HostGit(ws, {"rev-parse", "main"}).out;
    }
    Observed settle =
        RunInSession(client, id, "workspace-write", "settle", "echo settle-$((40+2))");
    ASSERT_TRUE(settle.Says("settle-42")) << settle.Show();
    show = HostGit(ws, {"show", "main:a.txt"}).out;
    if (Line(show) != "two") {
      ++undone;
      const std::string staged = HostGit(ws, {"diff", "--cached", "--name-status"}).out;
      std::cout << "  attempt " << attempt << ": the person's main now has a.txt `" << Line(show)
                << "` (their commit B made it `two`); their index against main:\n"
                << staged;
    }
    client.Call("terminal_close", Json{{"sessionId", id}}, std::chrono::seconds(60));
    WriteFileByRename(index, index_b);  // back to B for the next attempt
    WriteFileByRename(branch, b);
  }
  std::cout << "  launches whose session saw the person's commit staged as undone: " << saw_mixed
            << "; the person's commit undone on their main: " << undone << "\n";
  EXPECT_EQ(undone, 0) << "the session's ordinary commit, made on a launch that read the index "
                          "before the person's reset and the branch after it, moved the person's "
                          "main to a commit undoing their own\n"
                       << git_attack::LogTail(daemon.Log());
}

// Finding 1 (goal 3): the person's `git switch other` during a launch (git writes the index,
// then HEAD; the launch reads HEAD, then the index). A session that saw HEAD on main with other's
// index commits on main; once the person is on other, main is held by no worktree, so no index
// has to follow: the person's main must still not take other's files.
TEST(GitReview42AttackTest, ThePersonsSwitchDuringALaunchNeverPutsAnotherBranchsFilesOnMain) {
  Daemon daemon(Daemon::Options{.extra_args = {}, .env = {}});
  const std::filesystem::path ws = daemon.workspace();
  RpcClient client{daemon.socket()};
  ASSERT_NO_FATAL_FAILURE(git_attack::MakeRepository(ws));
  const std::filesystem::path git = ws / ".git";
  const std::filesystem::path index = git / "index";
  const std::filesystem::path head = git / "HEAD";
  const std::filesystem::path main_ref = git / "refs" / "heads" / "main";
  const std::string index_main = git_attack::Slurp(index);
  const std::string main_tip = git_attack::Slurp(main_ref);
  ASSERT_EQ(HostGit(ws, {"switch", "-q", "-c", "other"}).exit_code, 0);
  std::ofstream(ws / "a.txt") << "two\n";
  ASSERT_EQ(HostGit(ws, {"commit", "-q", "-a", "-m", "other's change"}).exit_code, 0);
  const std::string index_other = git_attack::Slurp(index);
  const std::string on_main = "ref: refs/heads/main\n";
  const std::string on_other = "ref: refs/heads/other\n";
  int moved = 0;
  int saw_mixed = 0;
  constexpr int kAttempts = 30;
  for (int attempt = 0; attempt < kAttempts && moved == 0; ++attempt) {
    WriteFileByRename(main_ref, main_tip);
    std::atomic<bool> stop{false};
    std::thread person([&] {
      while (!stop.load()) {
        WriteFileByRename(index, index_main);  // git switch main: the index, then HEAD
        WriteFileByRename(head, on_main);
        WriteFileByRename(index, index_other);  // git switch other
        WriteFileByRename(head, on_other);
      }
    });
    const std::string id = OpenSession(client, "workspace-write");
    stop = true;
    person.join();
    ASSERT_FALSE(id.empty()) << daemon.Log();
    WriteFileByRename(index, index_other);  // the person's last `git switch other`
    WriteFileByRename(head, on_other);
    const std::string file = "y" + std::to_string(attempt) + ".txt";
    Observed work = RunInSession(
        client, id, "workspace-write", "work",
        std::string(git_attack::kIdentity) +
            "if git diff --cached --quiet; then echo view=clean; else echo view=mixed; fi; "
            "echo head=$(git symbolic-ref -q HEAD); echo y > " +
            file + "; git add " + file + " && git commit -q -m work && echo committed-ok");
    if (work.Says("view=mixed")) ++saw_mixed;
    Observed settle =
        RunInSession(client, id, "workspace-write", "settle", "echo settle-$((40+2))");
    ASSERT_TRUE(settle.Says("settle-42")) << settle.Show();
    const std::string shown = Line(HostGit(ws, {"show", "main:a.txt"}).out);
    if (shown != "one") {
      ++moved;
      std::cout << "  attempt " << attempt << ": the person's main now has a.txt `" << shown
                << "` (other's); " << work.Show() << "\n";
    }
    client.Call("terminal_close", Json{{"sessionId", id}}, std::chrono::seconds(60));
  }
  std::cout << "  launches whose session saw a mixed HEAD and index: " << saw_mixed
            << "; the person's main given other's files: " << moved << "\n";
  EXPECT_EQ(moved, 0) << "a session launched during the person's `git switch other` committed "
                         "other's files onto main, and the copy-back moved the person's main\n"
                      << git_attack::LogTail(daemon.Log());
}

}  // namespace
}  // namespace ptybox::testing
