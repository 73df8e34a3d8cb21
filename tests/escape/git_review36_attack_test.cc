// Thirty-sixth outside review of "Git for agents" (docs/security.md; review 43 of the project),
// on 2564f71. Each test asserts a goal and fails while the hole is open:
//  (a) whether the session works in a linked worktree (GitWorktreeSnapshot::shared: its
//      directory within the session's writable roots) is judged once, at the launch
//      (MarkSharedWorktrees), from that worktree's `gitdir`. The person's own `git worktree
//      move` of it out of the workspace during the session (or `git worktree remove` and a new
//      `git worktree add` elsewhere that takes the same id) leaves the session counted as
//      working there: HeldMoveRefusal takes that worktree as the session's own (`works_there`),
//      so the branch it has checked out moves on the host, "with its index" -- whose entries are
//      the person's unchanged ones, so LockFollowingIndex's check passes. The person's worktree,
//      now outside the session's reach, has its HEAD moved under its index: `git status` there
//      shows the session's commit undone and staged, and their next commit reverts it (goal 3;
//      the review-17 hole again, through the person's ordinary worktree move). A hostile
//      session needs only `git update-ref refs/heads/<branch>` (its git believes the worktree
//      still holds the branch, so `git branch -f` refuses). Fix direction: judge `shared` at
//      every copy-back, from the host's `worktrees/<id>/gitdir` read then (and the snapshot's
//      gitdir: an id whose gitdir changed since the launch is a worktree the session never
//      worked in), and treat a hold by a worktree not shared now as the person's.
//  (b) the same at the launch: a linked worktree outside the writable roots from the start
//      (never `shared`) still has its HEAD and index copied back from the session's private
//      `worktrees/<id>` (CopyBackWorktrees never asks `shared`), which the session's git can
//      write (`git --git-dir=.git/worktrees/<id> update-ref --no-deref HEAD <commit>` and a
//      `read-tree` into its index). The person's worktree, whose files the session cannot
//      reach, comes back detached at the session's commit with its index, over their files:
//      `git status` there shows the session's commit undone, their branch left, and their
//      next `git commit -a` there records the revert on a detached HEAD (goal 3; goal 2 in
//      spirit: a worktree outside the session's roots written). Fix direction: copy back HEAD
//      and the index only for a worktree the session works in (shared, judged now, as for (a)).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>

#include "tests/escape/escape_support.h"
#include "tests/escape/git_attack_support.h"
#include "tests/support/temp_dir.h"

namespace ptybox::testing {
namespace {

using git_attack::HostGit;
using git_attack::kIdentity;
using git_attack::Line;
using git_attack::MakeRepository;
using git_attack::Rev;

// (a) The person's linked worktree `feature` is inside the workspace at the launch; they move it
// out (`git worktree move`), then the session moves `feature`.
TEST(GitReview36AttackTest, ABranchOfAWorktreeThePersonMovedOutOfTheRootsNeverMovesUnderIt) {
  git_attack::GitWriteSession git;
  auto& [daemon, ws, client, id] = git;
  ASSERT_NO_FATAL_FAILURE(MakeRepository(ws));
  const std::filesystem::path inside = ws / ".escape" / "feature";
  ASSERT_EQ(HostGit(ws, {"worktree", "add", "-q", "-b", "feature", inside.string()}).exit_code, 0);
  const std::string start = Rev(ws, "refs/heads/feature");
  ASSERT_NO_FATAL_FAILURE(git.OpenSession());
  const TempDir dir;  // removed with what is in it, however the test ends
  const std::filesystem::path outside = dir.path() / "feature";
  // The person moves their worktree out of the workspace (the session's roots).
  const sandbox::testing::RunResult moved =
      HostGit(ws, {"worktree", "move", inside.string(), outside.string()});
  ASSERT_EQ(moved.exit_code, 0) << moved.out << moved.err;
  ASSERT_EQ(HostGit(outside, {"status", "--porcelain"}).out, "");
  Observed made = RunInSession(client, id, "workspace-write", "move-feature",
                               std::string(kIdentity) +
                                   "echo agent >> a.txt && git commit -qam agent && "
                                   "git update-ref refs/heads/feature HEAD && echo made-$((40+2))");
  ASSERT_TRUE(made.Says("made-42")) << made.Show();
  ASSERT_NO_FATAL_FAILURE(git_attack::Settle(git, 2));
  const std::string feature = Rev(ws, "refs/heads/feature");
  const std::string main = Rev(ws, "refs/heads/main");
  const std::string status = HostGit(outside, {"status", "--porcelain"}).out;
  std::cout << "  feature at the launch: " << start << "\n  host main after the sends: " << main
            << "\n  host feature after the sends: " << feature
            << "\n  git status in the person's moved worktree " << outside.string() << ":\n"
            << status;
  HostGit(ws, {"worktree", "remove", "--force", outside.string()});
  EXPECT_EQ(feature, start)
      << "the branch the person's worktree outside the roots holds moved under its index\n"
      << git_attack::LogTail(daemon.Log());
  EXPECT_EQ(status, "") << "the person's worktree shows the session's commit undone and staged";
}

// (b) The person's linked worktree `feature` is outside the workspace from the launch; the
// session moves its private HEAD and index of it.
TEST(GitReview36AttackTest, AWorktreeOutsideTheRootsNeverHasItsHeadAndIndexWritten) {
  git_attack::GitWriteSession git;
  auto& [daemon, ws, client, id] = git;
  ASSERT_NO_FATAL_FAILURE(MakeRepository(ws));
  const TempDir dir;  // removed with what is in it, however the test ends
  const std::filesystem::path outside = dir.path() / "feature";
  ASSERT_EQ(HostGit(ws, {"worktree", "add", "-q", "-b", "feature", outside.string()}).exit_code, 0);
  const std::string start = Rev(ws, "refs/heads/feature");
  ASSERT_NO_FATAL_FAILURE(git.OpenSession());
  Observed made = RunInSession(
      client, id, "workspace-write", "move-its-head",
      std::string(kIdentity) +
          "echo agent >> a.txt && git commit -qam agent && "
          "GIT_INDEX_FILE=$PWD/.git/worktrees/feature/index git read-tree HEAD && "
          "git --git-dir=.git/worktrees/feature update-ref --no-deref HEAD $(git rev-parse HEAD) "
          "&& echo made-$((40+2))");
  ASSERT_TRUE(made.Says("made-42")) << made.Show();
  ASSERT_NO_FATAL_FAILURE(git_attack::Settle(git, 2));
  const std::string head = git_attack::Slurp(ws / ".git" / "worktrees" / "feature" / "HEAD");
  const std::string status = HostGit(outside, {"status", "--porcelain"}).out;
  std::cout << "  the person's worktree's HEAD after the sends: " << head << "  git status there ("
            << outside.string() << "):\n"
            << status;
  HostGit(ws, {"worktree", "remove", "--force", outside.string()});
  EXPECT_EQ(Line(head), "ref: refs/heads/feature")
      << "the HEAD of the person's worktree outside the roots was moved by the session\n"
      << git_attack::LogTail(daemon.Log());
  EXPECT_EQ(status, "") << "the person's worktree shows the session's commit undone";
  EXPECT_EQ(Rev(ws, "refs/heads/feature"), start);
}

}  // namespace
}  // namespace ptybox::testing
