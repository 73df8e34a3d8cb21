// Fifteenth outside review of "Git for agents" (docs/security.md; review 22 of the project), on
// d344e7d (PlanIndex, HostIndexLocks held across the writes only, CommitLock/SameFileAt,
// OperationInProgress). Each test asserts a goal and failed while the hole was open; closed in
// sandbox/git_private.cc: (a) HEAD and the index wait while the branch the session's HEAD names
// holds what the host's does not (CopyBackHeadAndIndex); (b) an index with unmerged entries
// waits (IndexPlan::Kind::kWait); (c) the session's HEADs and refs are read once per copy-back
// (SessionView); (d) the person's merge, cherry-pick or revert under way holds their branch
// (HoldOf).
//  (a) The index comes back without the branch it goes with. HEAD stays `ref: refs/heads/main`
//      (the session committed on the branch the person has checked out), so CopyBackIndex's
//      "the index goes with the session's HEAD" check passes, while the branch itself did not
//      come back (its compare-and-swap failed: the person reworded their last commit with
//      `git commit --amend -m`, which moves main and leaves the index's entries as they were).
//      The host keeps the person's main and gets the session's index: the session's commit
//      shows as changes the person staged, ready for their next commit under their name, and
//      so does every later commit of the session's (the branch conflicts forever).
//      With no person at all, the same when the copy-back refuses the branch (a new commit
//      adds a gitlink, the next removes it) and passes the index.
//  (b) Half-way states git leaves without any of OperationInProgress's markers come back: a
//      session's `git stash pop` that conflicts (as do `git merge --squash`, `git cherry-pick
//      -n`, `git checkout -m`) leaves unmerged entries and no rebase-merge/, MERGE_HEAD,
//      CHERRY_PICK_HEAD...; the person's index gets them and their `git commit` fails.
//  (c) A hostile session flips its private HEAD while the copy-back runs: the session's HEAD is
//      read once where the branch is judged (HeldMoveRefusal) and again where its index is
//      written (CopyBackIndex), and read between the two it makes the branch move while the
//      index stays (review 21's (a) symptom), or the index come back without the branch.
//  (d) The person's merge in progress (conflict resolved and staged, not committed) is copied
//      into the session with its MERGE_HEAD; the session's ordinary `git commit` concludes it,
//      and the merge commit comes back with the index while the host's MERGE_HEAD, MERGE_MSG
//      stay: the person's git says they are still merging, and their next commit takes
//      "Merge branch 'feature'" as its message.
// Each failed 3 of 3 runs as root and as ptybox-ci ((c) within 1 to 10 of its 20 sends).
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

// (a) The person rewords their last commit while the session works (`git commit --amend -m`:
// main moves, the index's entries stay). The session commits on main. Its branch cannot come
// back (the host's main moved); whatever comes back, nothing is staged against the person's
// HEAD: the session's work never shows as a change the person staged.
TEST(GitReview15AttackTest, TheIndexNeverComesBackWithoutTheBranchItGoesWith) {
  git_attack::GitWriteSession git;
  ASSERT_NO_FATAL_FAILURE(git.Open());
  auto& [daemon, ws, client, id] = git;
  ASSERT_EQ(HostGit(ws, {"commit", "-q", "--amend", "-m", "first, reworded"}).exit_code, 0);
  ASSERT_NO_FATAL_FAILURE(git_attack::CommitAgentChange(git));
  const auto [subject, staged] = git_attack::HostMainAndStaged(ws);
  EXPECT_EQ(staged, "") << "the session's branch did not come back (the person's main moved) "
                           "but its index did: the session's commit shows as the person's "
                           "staged change, in their next commit\n"
                        << daemon.Log();
  // The person's next commit, as they would make it: it must hold only what they committed.
  ASSERT_EQ(HostGit(ws, {"commit", "-q", "--allow-empty", "-m", "mine"}).exit_code, 0);
  const std::string a = HostGit(ws, {"show", "HEAD:a.txt"}).out;
  std::cout << "  a.txt in the person's next commit: [" << a << "]\n";
  if (subject != "agent") {
    EXPECT_EQ(a, "one\n") << "the person's next commit carried the session's change under their "
                             "name";
  }
}

// (a), with no person at all: the session's branch is refused (one of its new commits adds a
// gitlink, CommitAddsGitlink; the next removes it) while the index it goes with, which holds no
// gitlink, passes. Nothing may be staged against the person's HEAD.
TEST(GitReview15AttackTest, ARefusedBranchNeverLeavesItsIndexStagedOnTheHost) {
  git_attack::GitWriteSession git;
  ASSERT_NO_FATAL_FAILURE(git.Open());
  auto& [daemon, ws, client, id] = git;
  Observed committed =
      RunInSession(client, id, "workspace-write", "commit",
                   std::string(kIdentity) +
                       "git update-index --add --cacheinfo 160000,$(git rev-parse HEAD),sub && "
                       "git commit -qm link && git rm -q --cached sub && echo agent >> a.txt && "
                       "git add a.txt && git commit -qm agent && echo committed");
  ASSERT_TRUE(committed.Says("committed")) << committed.Show();
  const std::string subject = Line(HostGit(ws, {"log", "-1", "--format=%s", "main"}).out);
  const std::string staged = HostGit(ws, {"diff", "--cached", "--name-status", "HEAD"}).out;
  std::cout << "  the host's main: \"" << subject << "\"; staged against HEAD: [" << staged
            << "]\n";
  EXPECT_EQ(staged, "") << "the session's branch was refused but its index came back: the "
                           "session's work shows as the person's staged change\n"
                        << daemon.Log();
}

// (b) The session stashes an edit, commits another edit of the same file, and pops the stash:
// it conflicts, and git leaves the index with unmerged entries and no operation in progress.
// Whatever comes back, the person's git commit keeps working.
TEST(GitReview15AttackTest, AConflictedStashPopNeverReachesThePersonsIndex) {
  git_attack::GitWriteSession git;
  ASSERT_NO_FATAL_FAILURE(git.Open());
  auto& [daemon, ws, client, id] = git;
  Observed popped =
      RunInSession(client, id, "workspace-write", "stash-pop",
                   std::string(kIdentity) +
                       "echo stashed >> a.txt && git stash -q && echo other > a.txt && "
                       "git commit -qam other && git stash pop >/dev/null 2>&1; "
                       "git ls-files -u | wc -l | sed 's/^/unmerged=/'; echo popped");
  ASSERT_TRUE(popped.Says("popped")) << popped.Show();
  const std::string unmerged = HostGit(ws, {"ls-files", "-u"}).out;
  const auto commit = HostGit(ws, {"commit", "-q", "--allow-empty", "-m", "mine"});
  std::cout << "  the host's unmerged entries: [" << unmerged << "]; the person's git commit: exit "
            << commit.exit_code << " " << commit.err;
  EXPECT_EQ(unmerged, "") << "the session's conflicted stash pop came back half-way\n"
                          << daemon.Log();
  EXPECT_EQ(commit.exit_code, 0) << "the person's git commit failed after the session's stash pop";
}

// (d) The person's own merge in progress: they merged `feature`, resolved the conflict and
// staged it, and have not committed yet when the session starts (its private copy gets their
// MERGE_HEAD). The session's ordinary commit concludes the person's merge; whatever comes back,
// the person's git is not left merging a merge that is already made.
TEST(GitReview15AttackTest, ThePersonsMergeIsNeverLeftHalfConcluded) {
  git_attack::GitWriteSession git;
  auto& [daemon, ws, client, id] = git;
  ASSERT_NO_FATAL_FAILURE(git_attack::MakeRepository(ws));
  ASSERT_EQ(HostGit(ws, {"checkout", "-q", "-b", "feature"}).exit_code, 0);
  std::ofstream(ws / "a.txt") << "feature\n";
  ASSERT_EQ(HostGit(ws, {"commit", "-qam", "feature"}).exit_code, 0);
  ASSERT_EQ(HostGit(ws, {"checkout", "-q", "main"}).exit_code, 0);
  std::ofstream(ws / "a.txt") << "main\n";
  ASSERT_EQ(HostGit(ws, {"commit", "-qam", "main"}).exit_code, 0);
  ASSERT_NE(HostGit(ws, {"merge", "-q", "feature"}).exit_code, 0);
  std::ofstream(ws / "a.txt") << "resolved\n";
  ASSERT_EQ(HostGit(ws, {"add", "a.txt"}).exit_code, 0);
  ASSERT_NO_FATAL_FAILURE(git.OpenSession());
  Observed committed = RunInSession(client, id, "workspace-write", "commit",
                                    std::string(kIdentity) +
                                        "echo b > b.txt && git add b.txt && "
                                        "git commit -qm agent && echo committed");
  ASSERT_TRUE(committed.Says("committed")) << committed.Show();
  const std::string subject = Line(HostGit(ws, {"log", "-1", "--format=%s %p", "main"}).out);
  const bool merging = HostGit(ws, {"rev-parse", "-q", "--verify", "MERGE_HEAD"}).exit_code == 0;
  const auto commit = HostGit(ws, {"commit", "-q", "--no-edit"});
  const std::string next = Line(HostGit(ws, {"log", "-1", "--format=%s (%p)", "HEAD"}).out);
  std::cout << "  the host's main: \"" << subject << "\"; still merging: " << merging
            << "; the person's next git commit: exit " << commit.exit_code << ", \"" << next
            << "\"\n";
  if (subject.starts_with("agent")) {
    EXPECT_FALSE(merging) << "the session's commit concluded the person's merge and the host "
                             "was left merging it: git status says \"you are still merging\", "
                             "and the person's next commit takes the merge's message\n"
                          << daemon.Log();
  }
}

// (c) The session commits on main, then (in the background, while the copy-back runs) flips its
// private HEAD between main and a tag, as hostile code in it may. After every send, the host's
// index goes with its HEAD: nothing staged against it.
TEST(GitReview15AttackTest, AFlippingSessionHeadNeverSplitsTheBranchFromItsIndex) {
  git_attack::GitWriteSession git;
  ASSERT_NO_FATAL_FAILURE(git.Open());
  auto& [daemon, ws, client, id] = git;
  // Flips .git/HEAD for 1 s (random 1-25 ms each way: the copy-back after the send runs within
  // it), then leaves it on main. (3 s, 2 s of it after the copy-back, cost CI 80 s a run.)
  std::ofstream(ws / ".escape" / "flip.py")
      << "import os, random, time\n"
         "end = time.time() + 1\n"
         "def put(text):\n"
         "    with open('.git/HEAD.flip', 'w') as f: f.write(text)\n"
         "    os.replace('.git/HEAD.flip', '.git/HEAD')\n"
         "while time.time() < end:\n"
         "    put('ref: refs/tags/flip\\n'); time.sleep(random.uniform(0.001, 0.025))\n"
         "    put('ref: refs/heads/main\\n'); time.sleep(random.uniform(0.001, 0.025))\n"
         "put('ref: refs/heads/main\\n')\n";
  int split = 0;
  std::string seen;
  for (int i = 1; i <= 20 && split == 0; ++i) {
    const std::string n = std::to_string(i);
    Observed sent = RunInSession(client, id, "workspace-write", "flip" + n,
                                 std::string(kIdentity) + "wait; echo " + n +
                                     " >> a.txt && git add a.txt && " + "git commit -qm agent" + n +
                                     " && { python3 .escape/flip.py & } && echo sent" + n);
    ASSERT_TRUE(sent.Says("sent" + n)) << sent.Show();
    const std::string subject = Line(HostGit(ws, {"log", "-1", "--format=%s", "main"}).out);
    const std::string staged = HostGit(ws, {"diff", "--cached", "--name-status", "HEAD"}).out;
    seen += "send " + n + ": main \"" + subject + "\", staged [" + Line(staged) + "]\n";
    if (!staged.empty()) ++split;
  }
  std::cout << seen;
  RunInSession(client, id, "workspace-write", "settle", "wait; echo settled");
  EXPECT_EQ(split, 0) << "the host's branch and its index parted: the session's commit shows "
                         "undone, or as the person's staged change\n"
                      << seen << daemon.Log();
}

}  // namespace
}  // namespace ptybox::testing
