// Eighteenth outside review of "Git for agents" (docs/security.md; review 25 of the project), on
// 6f76932 (CopyBackHead's LockFollowingIndex for every HEAD move). Each test asserts a goal and
// failed while the hole was open; closed in CopyBackHead (sandbox/git_private.cc), which now
// moves HEAD only while the branch the host's HEAD names holds what the session last saw of it:
//  (a) HEAD comes back over a commit of the person's whose index entries the launch already
//      had. CopyBackHead now checks, under the host's index.lock, that the host's HEAD text is
//      what the session saw ("ref: refs/heads/main") and that the host's index holds the
//      entries the session saw (IndexFollows/IndexEntriesAlike); HostWorktreeRefusal checks
//      only the branch the session's HEAD names (the new one). Nothing checks that the branch
//      the host's HEAD names still holds the commit the session saw. A person who had changes
//      staged when the session started and then commits them (`git commit`: main moves, the
//      index's entries stay byte for byte, only its cache-tree changes) is on a commit the
//      session never saw, with an index the check finds "unchanged". The session's ordinary
//      `git checkout -b topic` (or `--detach`) then brings HEAD onto the launch tip over that
//      index: the person's committed work shows as changes staged against the new HEAD, and
//      their next `git commit` lands off `main`, recording their commit's changes a second time
//      (goal 3: HEAD moved behind their back onto an index that is not its own, the index
//      showing work staged that is already committed). Review 17's finding again, through an
//      index whose entries a commit leaves as they were.
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

// (a) The person has a change staged when the session starts, and commits it while the session
// works; the session then switches to a new branch (or detaches) at what it saw as HEAD.
// Whatever comes back, the host's index goes with the host's HEAD: nothing the person committed
// shows as staged.
void HeadMovesOnlyOverTheCommitItSaw(const std::string& session_command) {
  git_attack::GitWriteSession git;
  auto& [daemon, ws, client, id] = git;
  ASSERT_NO_FATAL_FAILURE(git_attack::MakeRepository(ws));
  // Staged, not committed, when the session starts.
  std::ofstream(ws / "a.txt") << "the person's work\n";
  ASSERT_EQ(HostGit(ws, {"add", "a.txt"}).exit_code, 0);
  ASSERT_NO_FATAL_FAILURE(git.OpenSession());
  Observed seen =
      RunInSession(client, id, "workspace-write", "look", "git status --porcelain && echo looked");
  ASSERT_TRUE(seen.Says("looked")) << seen.Show();
  // The person commits what they had staged: main moves, the index's entries stay.
  ASSERT_EQ(HostGit(ws, {"commit", "-qm", "mine"}).exit_code, 0);
  const std::string mine = Line(HostGit(ws, {"rev-parse", "HEAD"}).out);
  ASSERT_EQ(HostGit(ws, {"diff", "--cached", "--name-status", "HEAD"}).out, "");
  ASSERT_NO_FATAL_FAILURE(git_attack::SwitchAfterThePersonsCommit(
      git, mine, session_command,
      "HEAD came back onto the launch tip over the index of the person's later commit: their "
      "committed work shows as staged again"));
}

TEST(GitReview18AttackTest, HeadNeverComesBackOntoANewBranchOverACommitItDidNotSee) {
  HeadMovesOnlyOverTheCommitItSaw("git checkout -q -b topic");
}

TEST(GitReview18AttackTest, HeadNeverComesBackDetachedOverACommitItDidNotSee) {
  HeadMovesOnlyOverTheCommitItSaw("git checkout -q --detach");
}

}  // namespace
}  // namespace ptybox::testing
