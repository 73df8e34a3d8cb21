// Seventeenth outside review of "Git for agents" (docs/security.md; review 24 of the project), on
// c1bdc07 (HostWorktreeRefusal, SessionView, PlanIndex, CopyBackHeadAndIndex's wait,
// HostIndexLocks, HoldOf's kState). Each test asserts a goal and failed while the hole was
// open; closed in CopyBackHead (sandbox/git_private.cc), which now checks the host's index under
// its lock (LockFollowingIndex) for every HEAD move:
//  (a) HEAD comes back alone over an index the person changed. CopyBackHead checks that the
//      host's index still holds what the session last saw (LockFollowingIndex) only when the
//      session's index changed too (IndexPlan::kWrite). A HEAD move that leaves the session's
//      index as it was (`git checkout -b topic`, `git checkout --detach`, a checkout of any
//      branch whose tree is the launch tip's: the index's bytes stay the launch's) is
//      written checking the host's HEAD text and HostWorktreeRefusal only, and
//      HostWorktreeRefusal asks nothing of the index, nor anything at all of a detached HEAD.
//      The person commits on their `main` while the session works (their index now holds their
//      commit's tree); the session's ordinary `git checkout -b topic` (or `--detach`) then
//      brings HEAD onto the launch tip over the person's index: the person's commit shows as
//      changes staged against the new HEAD, and their next `git commit` lands on `topic` (or a
//      detached HEAD), not on `main` (goal 3: HEAD moved behind their back onto an index that is
//      not its own, the index showing work staged that nobody staged).
// Both failed 3 of 3 runs as root and as ptybox-ci (deterministic: no timing involved).
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

// (a) The session switches to a new branch at the launch tip (its index untouched) after the
// person committed on main. Whatever comes back, the host's index goes with the host's HEAD.
void HeadMovesOnlyOverItsOwnIndex(const std::string& session_command) {
  git_attack::GitWriteSession git;
  auto& [daemon, ws, client, id] = git;
  ASSERT_NO_FATAL_FAILURE(git.Open());
  // The person's own commit on main after the launch: their index now holds its tree.
  std::ofstream(ws / "a.txt") << "the person's work\n";
  ASSERT_EQ(HostGit(ws, {"commit", "-qam", "mine"}).exit_code, 0);
  const std::string mine = Line(HostGit(ws, {"rev-parse", "HEAD"}).out);
  ASSERT_NO_FATAL_FAILURE(git_attack::SwitchAfterThePersonsCommit(
      git, mine, session_command,
      "HEAD came back alone over the person's index: their commit shows as changes staged on a "
      "HEAD that lacks it"));
}

TEST(GitReview17AttackTest, HeadNeverComesBackOntoANewBranchOverThePersonsIndex) {
  HeadMovesOnlyOverItsOwnIndex("git checkout -q -b topic");
}

TEST(GitReview17AttackTest, HeadNeverComesBackDetachedOverThePersonsIndex) {
  HeadMovesOnlyOverItsOwnIndex("git checkout -q --detach");
}

}  // namespace
}  // namespace ptybox::testing
