// Thirty-fifth outside review of "Git for agents" (docs/security.md; review 42 of the project),
// on 08aa72b. Each test asserts a goal and fails while the hole is open:
//  (a) a branch a host worktree holds unborn (its HEAD names refs/heads/X, which does not exist
//      yet: `git switch --orphan X`, `git worktree add --orphan`, `git checkout --orphan X`) is
//      created on the host by the session (goal 3: the person's worktree's HEAD now resolves to
//      the session's commit while its index and files are the person's own start: `git status`
//      there shows the session's commit undone and staged, and the person's first commit on
//      their orphan branch has the session's commit as its parent, the session's history now
//      theirs, pushed with their branch). The copy-back checks holds (HeldMoveRefusal,
//      CheckedOutOnTheHost) only for a branch that moves (`host_unmoved` needs a start value) or
//      is deleted; a branch made anew is never checked against the host's worktrees' HEADs.
//      The session's git cannot see the hold either way (git's `branch` checks checked-out
//      branches only when forcing over an existing one), so a plain `git branch X main` made in
//      the session does it. Fix direction: judge a new refs/heads/X like a move: refused (left
//      for later) while any host worktree other than one the session works in on it holds X
//      (HoldOf / CheckedOutElsewhere over the host's HEADs, rebase and bisect state), under the
//      same rules as HeldMoveRefusal.
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

// (a) The person's linked worktree outside the workspace is on an orphan branch `pages` with a
// file staged for its first commit; the session makes a branch `pages` at main.
TEST(GitReview35AttackTest, ABranchAHostWorktreeHoldsUnbornIsNeverMadeUnderIt) {
  git_attack::GitWriteSession git;
  auto& [daemon, ws, client, id] = git;
  ASSERT_NO_FATAL_FAILURE(MakeRepository(ws));
  const TempDir dir;  // removed with what is in it, however the test ends
  const std::filesystem::path linked = dir.path() / "wt";
  ASSERT_EQ(HostGit(ws, {"worktree", "add", "-q", "--detach", linked.string()}).exit_code, 0);
  ASSERT_EQ(HostGit(linked, {"switch", "-q", "--orphan", "pages"}).exit_code, 0);
  std::ofstream(linked / "index.html") << "<p>pages</p>\n";
  ASSERT_EQ(HostGit(linked, {"add", "index.html"}).exit_code, 0);
  ASSERT_NE(HostGit(ws, {"rev-parse", "-q", "--verify", "refs/heads/pages"}).exit_code, 0);
  ASSERT_NO_FATAL_FAILURE(git.OpenSession());
  Observed made = RunInSession(client, id, "workspace-write", "make-pages",
                               std::string(kIdentity) +
                                   "echo agent >> a.txt && git commit -qam agent && "
                                   "git branch pages HEAD && echo made-$((40+2))");
  ASSERT_TRUE(made.Says("made-42")) << made.Show();
  ASSERT_NO_FATAL_FAILURE(git_attack::Settle(git, 2));
  const sandbox::testing::RunResult pages =
      HostGit(ws, {"rev-parse", "-q", "--verify", "refs/heads/pages"});
  const std::string status = HostGit(linked, {"status", "--porcelain"}).out;
  // The person makes the first commit of their orphan branch.
  const sandbox::testing::RunResult committed =
      HostGit(linked, {"commit", "-q", "-m", "pages: first"});
  const int has_parent = HostGit(linked, {"rev-parse", "-q", "--verify", "HEAD^"}).exit_code;
  std::cout << "  host refs/heads/pages after the send: "
            << (pages.exit_code == 0 ? Line(pages.out) : std::string("(none)"))
            << "\n  git status in the person's orphan worktree:\n"
            << status << "  their first commit: exit " << committed.exit_code
            << ", has a parent (the session's history): " << (has_parent == 0 ? "yes" : "no")
            << "\n";
  HostGit(ws, {"worktree", "remove", "--force", linked.string()});
  EXPECT_NE(pages.exit_code, 0)
      << "the session made a branch the person's linked worktree holds unborn\n"
      << git_attack::LogTail(daemon.Log());
  EXPECT_NE(has_parent, 0)
      << "the person's first commit on their orphan branch has the session's commit as parent";
}

}  // namespace
}  // namespace ptybox::testing
