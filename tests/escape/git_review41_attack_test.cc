// Forty-first outside review of "Git for agents" (docs/security.md; review 48 of the project), on
// ff614b8. Time-boxed (18 minutes).
//
// Finding 1 (goal 3, an ordinary race with the person's git): the launch reads each linked
// worktree's HEAD twice (PrepareWorktrees): once for the snapshot (GitWorktreeSnapshot::head),
// then again, after the index, in the loop over kGitWorktreeStateFiles that writes the session's
// private copy. The person's `git switch other` in that worktree landing between the two leaves
// the snapshot at `wt` and the session's HEAD at `other`. The session never touches the worktree;
// once the person is back on `wt` (`git switch wt`), its next copy-back (after a plain `echo`)
// reads the session's HEAD as moved from wt to other, the host's HEAD holds wt, the index is the
// same, the compare-and-swap passes, and the person's worktree is switched to `other` behind
// their back. ThePersonsSwitchInAWorktreeDuringALaunchIsNeverUndone.

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

// Finding 1 (goal 3): the person's `git switch` in a linked worktree during a launch, undone by the
// next copy-back of a session that never touched the worktree. The person's switches are played
// by a loop doing what `git switch` between two branches on one commit does to the files (the
// worktree's HEAD replaced by a rename; the index is the same); the loop stops before the
// session's first send and leaves the worktree on `wt`, as the person's last `git switch wt` does.
TEST(GitReview41AttackTest, ThePersonsSwitchInAWorktreeDuringALaunchIsNeverUndone) {
  Daemon daemon(Daemon::Options{.extra_args = {}, .env = {}});
  const std::filesystem::path ws = daemon.workspace();
  RpcClient client{daemon.socket()};
  ASSERT_NO_FATAL_FAILURE(git_attack::MakeRepository(ws));
  std::ofstream(ws / ".gitignore", std::ios::app) << "wt/\n";
  ASSERT_EQ(HostGit(ws, {"add", ".gitignore"}).exit_code, 0);
  ASSERT_EQ(HostGit(ws, {"commit", "-q", "-m", "ignore wt"}).exit_code, 0);
  ASSERT_EQ(HostGit(ws, {"branch", "other"}).exit_code, 0);
  const sandbox::testing::RunResult added =
      HostGit(ws, {"worktree", "add", "-q", "-b", "wt", (ws / "wt").string()});
  ASSERT_EQ(added.exit_code, 0) << added.Describe();
  const std::filesystem::path head = ws / ".git" / "worktrees" / "wt" / "HEAD";
  ASSERT_TRUE(std::filesystem::exists(head));
  const std::string on_wt = "ref: refs/heads/wt\n";
  const std::string on_other = "ref: refs/heads/other\n";
  int switched_back = 0;
  int seen_other = 0;
  constexpr int kAttempts = 100;  // the session saw `other` at about one launch in three
  for (int attempt = 0; attempt < kAttempts && switched_back == 0; ++attempt) {
    std::atomic<bool> stop{false};
    std::thread person([&] {
      while (!stop.load()) {
        WriteFileByRename(head, on_other);  // git switch other
        WriteFileByRename(head, on_wt);     // git switch wt
      }
    });
    const std::string id = OpenSession(client, "workspace-write");
    stop = true;
    person.join();
    ASSERT_FALSE(id.empty()) << daemon.Log();
    WriteFileByRename(head, on_wt);  // the person's last `git switch wt`
    Observed seen = RunInSession(client, id, "workspace-write", "see",
                                 "echo wt-head=$(git -C wt symbolic-ref -q HEAD)");
    if (seen.Says("wt-head=refs/heads/other")) ++seen_other;
    Observed settle =
        RunInSession(client, id, "workspace-write", "settle", "echo settle-$((40+2))");
    ASSERT_TRUE(settle.Says("settle-42")) << settle.Show();
    const std::string now = Line(git_attack::Slurp(head));
    if (now != Line(on_wt)) {
      ++switched_back;
      std::cout << "  attempt " << attempt << ": the person's worktree HEAD is now `" << now
                << "` (they had switched to wt)\n";
    }
    client.Call("terminal_close", Json{{"sessionId", id}}, std::chrono::seconds(60));
    WriteFileByRename(head, on_wt);
  }
  std::cout << "  launches whose session saw the worktree on other: " << seen_other
            << "; the person's worktree switched behind their back: " << switched_back << "\n";
  EXPECT_EQ(switched_back, 0) << "a session that never touched the worktree switched the person's "
                                 "worktree to the branch they had left, after their `git switch` "
                                 "ran at its launch\n"
                              << git_attack::LogTail(daemon.Log());
}

}  // namespace
}  // namespace ptybox::testing
