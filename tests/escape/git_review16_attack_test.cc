// Sixteenth outside review of "Git for agents" (docs/security.md; review 23 of the project), on
// 9ac56d2 (SessionView, PlanIndex, CopyBackHeadAndIndex's wait, HostIndexLocks, HoldOf's
// kState). Each test asserts a goal and failed while the hole was open; both closed in
// sandbox/git_private.cc (HostWorktreeRefusal, checked before and under the locks of HEAD and
// the index, and OperationInProgress of the host's worktree in LockFollowingIndex):
//  (a) HEAD and the index come back onto a branch the person moved. CopyBackHeadAndIndex makes
//      HEAD and the index wait while the branch the session's HEAD names differs from the
//      *snapshot's* value (the launch's, or the last copy-back's), never from the host's value
//      now, and LockFollowingIndex checks the host's HEAD text and index only. The person moves
//      a branch they do not have checked out (`git branch -f feature ...`, `git fetch origin
//      feature:feature`, `git push . x:feature`) while the session works; the session's ordinary
//      `git checkout feature` then brings HEAD `ref: refs/heads/feature` (the person's new tip)
//      with the session's index of the old tip: the person's new commits show as staged
//      changes undone, and their next `git commit` reverts them (goal 3). With the branch
//      deleted by the person instead (`git branch -D feature`), HEAD comes back naming a branch
//      the host does not have: the person's `git log` fails ("does not have any commits yet")
//      and every file shows staged as new.
//  (b) The person's merge under way (stopped on a conflict, MERGE_HEAD on the host) holds their
//      branch (HoldOf, kState) but not their index. A session's `git merge --abort` (or `git
//      reset --hard`, what an agent does on meeting conflict markers) writes the pre-merge index
//      into its private copy and drops its copy of MERGE_HEAD; OperationInProgress asks only the
//      session's directory, so the clean index comes back while the host's MERGE_HEAD stays.
//      The person's git then says "All conflicts fixed but you are still merging", and their
//      `git commit` records a merge of `feature` whose tree is main's: feature's change dropped
//      from history under a merge commit that claims it (goal 3). The same with the person's
//      rebase stopped on a conflict (rebase-merge/ is never copied into the session, so its git
//      sees a detached HEAD with conflicts): the session's `git reset --hard` brings a clean
//      index back, and the person's `git rebase --continue` silently drops the commit they were
//      rebasing from their branch. And with the person's bisect under way (HEAD detached at the
//      commit to test), the session's `git checkout main` moves the host's HEAD: the person's
//      next `git bisect good` judges the session's choice of commit, not the one bisect gave.
// Each failed 3 of 3 runs as root and as ptybox-ci (deterministic: no timing involved).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>

#include "tests/escape/escape_support.h"
#include "tests/escape/git_attack_support.h"
#include "tests/sandbox/process_runner.h"

namespace ptybox::testing {
namespace {

using git_attack::HostGit;
using git_attack::kIdentity;
using git_attack::Line;

namespace fs = std::filesystem;

// (a) The person's `feature` (not checked out) is moved by them after the launch; the session
// checks `feature` out. Whatever comes back, the host's index goes with the host's HEAD: nothing
// staged against it.
TEST(GitReview16AttackTest, HeadNeverComesBackOntoABranchThePersonMovedWithTheOldTipsIndex) {
  git_attack::GitWriteSession git;
  auto& [daemon, ws, client, id] = git;
  ASSERT_NO_FATAL_FAILURE(git_attack::MakeRepository(ws));
  ASSERT_EQ(HostGit(ws, {"checkout", "-q", "-b", "feature"}).exit_code, 0);
  std::ofstream(ws / "a.txt") << "feature1\n";
  ASSERT_EQ(HostGit(ws, {"commit", "-qam", "feature1"}).exit_code, 0);
  ASSERT_EQ(HostGit(ws, {"checkout", "-q", "main"}).exit_code, 0);
  ASSERT_NO_FATAL_FAILURE(git.OpenSession());
  // The person moves `feature` on (as a fetch of theirs would), without checking it out.
  ASSERT_EQ(HostGit(ws, {"checkout", "-q", "-b", "next", "feature"}).exit_code, 0);
  std::ofstream(ws / "a.txt") << "feature2\n";
  ASSERT_EQ(HostGit(ws, {"commit", "-qam", "feature2"}).exit_code, 0);
  ASSERT_EQ(HostGit(ws, {"checkout", "-q", "main"}).exit_code, 0);
  ASSERT_EQ(HostGit(ws, {"branch", "-f", "feature", "next"}).exit_code, 0);
  Observed switched = RunInSession(
      client, id, "workspace-write", "checkout",
      std::string(kIdentity) + "git checkout -q feature && cat a.txt && echo switched");
  ASSERT_TRUE(switched.Says("switched")) << switched.Show();
  const std::string head = Line(HostGit(ws, {"symbolic-ref", "-q", "HEAD"}).out);
  const std::string tip = Line(HostGit(ws, {"log", "-1", "--format=%s", "HEAD"}).out);
  const std::string staged = HostGit(ws, {"diff", "--cached", "--name-status", "HEAD"}).out;
  const std::string staged_a = HostGit(ws, {"show", ":a.txt"}).out;
  std::cout << "  the host's HEAD: " << head << " (\"" << tip << "\"); staged against it: ["
            << Line(staged) << "]; the index's a.txt: [" << Line(staged_a) << "]\n";
  EXPECT_EQ(staged, "") << "HEAD came back onto the branch the person moved, with the index of "
                           "the tip the session saw: the person's commit shows undone and "
                           "staged\n"
                        << daemon.Log();
  // The person's next commit, as they would make it: it must not revert their own feature2.
  if (head == "refs/heads/feature") {
    ASSERT_EQ(HostGit(ws, {"commit", "-q", "--allow-empty", "-m", "mine"}).exit_code, 0);
    const std::string a = HostGit(ws, {"show", "HEAD:a.txt"}).out;
    std::cout << "  a.txt in the person's next commit: [" << Line(a) << "]\n";
    EXPECT_EQ(a, "feature2\n") << "the person's next commit reverted their own commit";
  }
}

// (a), the person deleted `feature` after the launch; the session checks it out. The host's HEAD
// never comes back naming a branch the host does not have.
TEST(GitReview16AttackTest, HeadNeverComesBackOntoABranchThePersonDeleted) {
  git_attack::GitWriteSession git;
  auto& [daemon, ws, client, id] = git;
  ASSERT_NO_FATAL_FAILURE(git_attack::MakeRepository(ws));
  ASSERT_EQ(HostGit(ws, {"branch", "feature"}).exit_code, 0);
  ASSERT_NO_FATAL_FAILURE(git.OpenSession());
  ASSERT_EQ(HostGit(ws, {"branch", "-D", "feature"}).exit_code, 0);
  Observed switched =
      RunInSession(client, id, "workspace-write", "checkout",
                   std::string(kIdentity) + "git checkout -q feature && echo switched");
  ASSERT_TRUE(switched.Says("switched")) << switched.Show();
  const std::string head = Line(HostGit(ws, {"symbolic-ref", "-q", "HEAD"}).out);
  const auto log = HostGit(ws, {"log", "-1", "--format=%s"});
  std::cout << "  the host's HEAD: " << head << "; the person's git log: exit " << log.exit_code
            << " " << log.err;
  EXPECT_EQ(log.exit_code, 0) << "HEAD came back naming a branch the person deleted: their git "
                                 "log fails\n"
                              << daemon.Log();
}

// (b) The person's merge of `feature` stopped on a conflict when the session starts. The
// session aborts it in its private copy. While the host is still merging, its index is the
// person's: their unmerged entries stay, and the merge they conclude keeps feature's change.
TEST(GitReview16AttackTest, ASessionNeverUndoesThePersonsMergeUnderWayBehindTheirMergeHead) {
  git_attack::GitWriteSession git;
  auto& [daemon, ws, client, id] = git;
  ASSERT_NO_FATAL_FAILURE(git_attack::MakeRepository(ws));
  ASSERT_EQ(HostGit(ws, {"checkout", "-q", "-b", "feature"}).exit_code, 0);
  std::ofstream(ws / "a.txt") << "feature\n";
  std::ofstream(ws / "f.txt") << "feature only\n";
  ASSERT_EQ(HostGit(ws, {"add", "f.txt"}).exit_code, 0);
  ASSERT_EQ(HostGit(ws, {"commit", "-qam", "feature"}).exit_code, 0);
  ASSERT_EQ(HostGit(ws, {"checkout", "-q", "main"}).exit_code, 0);
  std::ofstream(ws / "a.txt") << "main\n";
  ASSERT_EQ(HostGit(ws, {"commit", "-qam", "main"}).exit_code, 0);
  ASSERT_NE(HostGit(ws, {"merge", "-q", "feature"}).exit_code, 0);
  const std::string unmerged_before = HostGit(ws, {"ls-files", "-u"}).out;
  ASSERT_NE(unmerged_before, "");
  ASSERT_NO_FATAL_FAILURE(git.OpenSession());
  Observed aborted =
      RunInSession(client, id, "workspace-write", "abort",
                   std::string(kIdentity) + "git merge --abort; git status --short; echo aborted");
  ASSERT_TRUE(aborted.Says("aborted")) << aborted.Show();
  const bool merging = HostGit(ws, {"rev-parse", "-q", "--verify", "MERGE_HEAD"}).exit_code == 0;
  const std::string unmerged = HostGit(ws, {"ls-files", "-u"}).out;
  const std::string status = HostGit(ws, {"status"}).out;
  std::cout << "  the host still merging: " << merging << "; its unmerged entries: [" << unmerged
            << "]\n  its git status:\n"
            << status;
  if (merging) {
    EXPECT_EQ(unmerged, unmerged_before)
        << "the host is still merging, but the session's index (its merge aborted) replaced the "
           "person's conflicted one\n"
        << daemon.Log();
    // The person concludes their merge as git tells them to.
    const auto commit = HostGit(ws, {"commit", "-q", "--no-edit"});
    const std::string made = Line(HostGit(ws, {"log", "-1", "--format=%s (%p)", "HEAD"}).out);
    const bool has_f = HostGit(ws, {"cat-file", "-e", "HEAD:f.txt"}).exit_code == 0;
    std::cout << "  the person's git commit: exit " << commit.exit_code << ", \"" << made
              << "\"; f.txt (feature's) in it: " << has_f << "\n";
    if (commit.exit_code == 0) {
      EXPECT_TRUE(has_f) << "the person's merge commit names feature as merged but holds none "
                            "of its change (f.txt): the session undid their merge behind their "
                            "MERGE_HEAD";
    }
  }
}

// (b), a rebase: the person's `git rebase main` of `topic` stopped on a conflict in its first
// commit. The session (whose git sees no rebase) resets its detached HEAD. While the host is still
// rebasing, its index is the person's; the rebase they continue keeps every commit of theirs.
TEST(GitReview16AttackTest, ASessionNeverUndoesThePersonsStoppedRebaseBehindTheirBack) {
  git_attack::GitWriteSession git;
  auto& [daemon, ws, client, id] = git;
  ASSERT_NO_FATAL_FAILURE(git_attack::MakeRepository(ws));
  ASSERT_EQ(HostGit(ws, {"checkout", "-q", "-b", "topic"}).exit_code, 0);
  std::ofstream(ws / "a.txt") << "topic\n";
  ASSERT_EQ(HostGit(ws, {"commit", "-qam", "topic"}).exit_code, 0);
  std::ofstream(ws / "t.txt") << "t2\n";
  ASSERT_EQ(HostGit(ws, {"add", "t.txt"}).exit_code, 0);
  ASSERT_EQ(HostGit(ws, {"commit", "-qm", "t2"}).exit_code, 0);
  ASSERT_EQ(HostGit(ws, {"checkout", "-q", "main"}).exit_code, 0);
  std::ofstream(ws / "a.txt") << "main\n";
  ASSERT_EQ(HostGit(ws, {"commit", "-qam", "main"}).exit_code, 0);
  ASSERT_EQ(HostGit(ws, {"checkout", "-q", "topic"}).exit_code, 0);
  ASSERT_NE(HostGit(ws, {"rebase", "main"}).exit_code, 0);
  const std::string unmerged_before = HostGit(ws, {"ls-files", "-u"}).out;
  ASSERT_NE(unmerged_before, "");
  ASSERT_NO_FATAL_FAILURE(git.OpenSession());
  Observed reset = RunInSession(
      client, id, "workspace-write", "reset",
      std::string(kIdentity) + "git reset -q --hard; git status --short; echo reset-done");
  ASSERT_TRUE(reset.Says("reset-done")) << reset.Show();
  const bool rebasing = fs::exists(ws / ".git" / "rebase-merge");
  const std::string unmerged = HostGit(ws, {"ls-files", "-u"}).out;
  std::cout << "  the host still rebasing: " << rebasing << "; its unmerged entries: [" << unmerged
            << "]\n";
  if (rebasing) {
    EXPECT_EQ(unmerged, unmerged_before)
        << "the host is still rebasing, but the session's index replaced the person's "
           "conflicted one\n"
        << daemon.Log();
    const auto cont = HostGit(ws, {"-c", "core.editor=true", "rebase", "--continue"});
    const std::string log = HostGit(ws, {"log", "--format=%s", "topic"}).out;
    std::cout << "  the person's git rebase --continue: exit " << cont.exit_code
              << "; topic's history: [" << log << "]\n";
    if (cont.exit_code == 0) {
      EXPECT_NE(log.find("topic\n"), std::string::npos)
          << "the person's rebase dropped their commit `topic`: the session's index, with the "
             "conflict undone, came back under their rebase";
    }
  }
}

// (b), a bisect: the person's `git bisect start main <first>` has HEAD detached at the commit to
// test. The session checks out main. While the host is bisecting, its HEAD stays where the
// person's bisect put it.
TEST(GitReview16AttackTest, ASessionNeverMovesTheHeadOfThePersonsBisect) {
  git_attack::GitWriteSession git;
  auto& [daemon, ws, client, id] = git;
  ASSERT_NO_FATAL_FAILURE(git_attack::MakeRepository(ws));
  const std::string first = Line(HostGit(ws, {"rev-parse", "HEAD"}).out);
  for (int i = 2; i <= 4; ++i) {
    std::ofstream(ws / "a.txt") << i << "\n";
    ASSERT_EQ(HostGit(ws, {"commit", "-qam", "c" + std::to_string(i)}).exit_code, 0);
  }
  ASSERT_EQ(HostGit(ws, {"bisect", "start", "main", first}).exit_code, 0);
  const std::string bisect_head = Line(HostGit(ws, {"rev-parse", "HEAD"}).out);
  ASSERT_NO_FATAL_FAILURE(git.OpenSession());
  Observed switched =
      RunInSession(client, id, "workspace-write", "checkout",
                   std::string(kIdentity) + "git checkout -q main && echo switched");
  ASSERT_TRUE(switched.Says("switched")) << switched.Show();
  const bool bisecting = fs::exists(ws / ".git" / "BISECT_START");
  const std::string head = Line(HostGit(ws, {"rev-parse", "HEAD"}).out);
  const std::string symbolic = Line(HostGit(ws, {"symbolic-ref", "-q", "HEAD"}).out);
  std::cout << "  the host still bisecting: " << bisecting << "; its HEAD: " << head << " ["
            << symbolic << "], bisect's: " << bisect_head << "\n";
  if (bisecting) {
    EXPECT_EQ(head, bisect_head) << "the session moved the HEAD of the person's bisect: their "
                                    "next `git bisect good/bad` judges another commit\n"
                                 << daemon.Log();
  }
}

}  // namespace
}  // namespace ptybox::testing
