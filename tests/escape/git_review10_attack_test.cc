// Tenth outside review of "Git for agents" (docs/security.md; review 17 of the project),
// attacked from a workspace-write session. Each test failed while its hole was open (root
// daemon and ptybox-ci); all are closed (HoldOf, HeldMoveRefusal in sandbox/git_private.cc):
//  - review 16's fix (WorktreeHolds) keeps a branch a host worktree holds (its HEAD, or the
//    branch it is rebasing or bisecting) from being deleted, and keeps another HEAD off it. It
//    never keeps the session from *moving* it. git refuses that too (`git branch -f`: "cannot
//    force update the branch ... used by worktree", `fetch` and `push` into a checked-out
//    branch): the branch belongs to that worktree's HEAD, index and files.
//    (a) The person rebases `agent` on the host; the session moves `agent` (`git branch -f`):
//        the person's `git rebase --continue` fails ("could not update refs/heads/agent"), the
//        rebase stuck half-done, as with review 16's deletion.
//    (b) The person has their branch `feature` checked out in a linked worktree; the session
//        adds a commit to it (`git update-ref`): the linked worktree's HEAD moves under its
//        index and files, `git status` there shows the session's commit undone and staged, and
//        the person's next `git commit -a` there reverts it silently (review 11's finding 4,
//        through a ref instead of HEAD).
//    (c) WorktreeHolds also misses the branches a rebase `--update-refs` will move (listed in
//        `rebase-merge/update-refs`, which git counts as checked out): the session deletes one,
//        and the person's `git rebase --continue` fails.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>

#include "tests/escape/escape_support.h"
#include "tests/escape/git_attack_support.h"

namespace ptybox::testing {
namespace {

using git_attack::HostGit;
using git_attack::kIdentity;
using git_attack::Line;
using git_attack::MakeAgentBranch;
using git_attack::MakeRepository;

namespace fs = std::filesystem;

// (a) The person rebases the agent's branch on the host to edit its last commit (`git rebase
// -i`, the commit marked `edit`): HEAD is detached, `rebase-merge/head-name` names agent, and
// `git branch -f agent ...` on the host refuses. The session, whose private copy knows nothing
// of the rebase, drops its last commit from `agent` (`git branch -f agent agent~1`, as an agent
// does). The copy-back moves it; the rebase's finish is a compare-and-swap against the branch's
// value when it started (`orig-head`), so the person's `git rebase --continue` fails.
TEST(GitReview10AttackTest, ABranchThePersonIsRebasingNeverMoves) {
  git_attack::GitWriteSession git;
  ASSERT_NO_FATAL_FAILURE(git.Open());
  auto& [daemon, ws, client, id] = git;
  ASSERT_NO_FATAL_FAILURE(MakeAgentBranch(client, id, ws, daemon));
  const std::string before = Line(HostGit(ws, {"rev-parse", "refs/heads/agent"}).out);
  ASSERT_EQ(HostGit(ws, {"checkout", "-q", "agent"}).exit_code, 0);
  ASSERT_EQ(
      HostGit(ws, {"-c", "sequence.editor=sed -i s/^pick/edit/", "rebase", "-q", "-i", "HEAD~1"})
          .exit_code,
      0);
  ASSERT_TRUE(fs::exists(ws / ".git" / "rebase-merge" / "head-name"));
  // git itself refuses to move it now.
  ASSERT_NE(HostGit(ws, {"branch", "-f", "agent", "agent~1"}).exit_code, 0);
  Observed moved = RunInSession(client, id, "workspace-write", "move-agent",
                                "git branch -f agent agent~1 && echo moved");
  ASSERT_TRUE(moved.Says("moved")) << moved.Show();
  const std::string after = Line(HostGit(ws, {"rev-parse", "refs/heads/agent"}).out);
  std::ofstream(ws / "a.txt") << "the person's edit\n";
  const auto amended = HostGit(ws, {"commit", "-q", "-a", "--amend", "-m", "person"});
  const auto resumed = HostGit(ws, {"-c", "core.editor=true", "rebase", "--continue"});
  std::cout << "  host refs/heads/agent " << before << " -> " << after
            << " during the person's rebase; their amend " << amended.exit_code
            << ", rebase --continue " << resumed.exit_code << " " << resumed.err;
  EXPECT_EQ(after, before) << "the branch the person is rebasing was moved under them\n"
                           << daemon.Log();
  EXPECT_EQ(resumed.exit_code, 0) << "the person's rebase cannot finish";
}

// (c) The same gap for a deletion, with a branch git counts as held that WorktreeHolds never
// reads: one the person's `git rebase --update-refs` will move when it finishes (listed in
// `rebase-merge/update-refs`; git's `branch -D` refuses it: "Cannot delete branch ... checked
// out at"). The session made `agent` and `agent-mid` (a stack: agent-mid at agent~1). The
// person rebases the stack onto main with --update-refs, stopping to edit its first commit. The
// session deletes its `agent-mid` (as an agent does once it is merged); it is deleted on the
// host, and the person's `git rebase --continue` fails.
TEST(GitReview10AttackTest, ABranchThePersonsRebaseWillUpdateIsNeverDeleted) {
  git_attack::GitWriteSession git;
  ASSERT_NO_FATAL_FAILURE(git.Open());
  auto& [daemon, ws, client, id] = git;
  ASSERT_NO_FATAL_FAILURE(MakeAgentBranch(client, id, ws, daemon));
  Observed stacked = RunInSession(client, id, "workspace-write", "stack",
                                  "git branch agent-mid agent~1 && echo stacked");
  ASSERT_TRUE(stacked.Says("stacked")) << stacked.Show();
  ASSERT_EQ(HostGit(ws, {"rev-parse", "--verify", "-q", "refs/heads/agent-mid"}).exit_code, 0)
      << daemon.Log();
  ASSERT_EQ(HostGit(ws, {"checkout", "-q", "agent"}).exit_code, 0);
  ASSERT_EQ(HostGit(ws, {"-c", "sequence.editor=sed -i 1s/^pick/edit/", "rebase", "-q", "-i",
                         "--update-refs", "main"})
                .exit_code,
            0);
  ASSERT_NE(
      git_attack::Slurp(ws / ".git" / "rebase-merge" / "update-refs").find("refs/heads/agent-mid"),
      std::string::npos);
  // git itself refuses to delete it now.
  ASSERT_NE(HostGit(ws, {"branch", "-D", "agent-mid"}).exit_code, 0);
  Observed gone = RunInSession(client, id, "workspace-write", "delete-agent-mid",
                               "git branch -q -D agent-mid && echo deleted");
  ASSERT_TRUE(gone.Says("deleted")) << gone.Show();
  const bool still =
      HostGit(ws, {"rev-parse", "--verify", "-q", "refs/heads/agent-mid"}).exit_code == 0;
  // The person's edit, in a file of their own (agent2 and agent3 rewrite a.txt).
  std::ofstream(ws / "p.txt") << "the person's edit\n";
  ASSERT_EQ(HostGit(ws, {"add", "p.txt"}).exit_code, 0);
  const auto amended = HostGit(ws, {"commit", "-q", "--amend", "-m", "person"});
  const auto resumed = HostGit(ws, {"-c", "core.editor=true", "rebase", "--continue"});
  std::cout << "  host refs/heads/agent-mid after the session's deletion: "
            << (still ? "present" : "absent") << "; the person's amend " << amended.exit_code
            << ", rebase --continue " << resumed.exit_code << " " << resumed.err;
  EXPECT_TRUE(still) << "a branch the person's rebase --update-refs holds was deleted\n"
                     << daemon.Log();
  EXPECT_EQ(resumed.exit_code, 0) << "the person's rebase cannot finish";
}

// (b) The person's own branch `feature` (made before the session) is checked out in a linked
// worktree of theirs outside the workspace. The session adds a commit to `feature` without
// checking it out (a temporary index, commit-tree, update-ref: git's own `branch -f` would
// refuse, its worktree being known to the session's git). The copy-back moves `feature`: the
// linked worktree's HEAD is now the session's commit while its index and files are the old
// one's, so `git status` there shows the session's commit undone and staged, and the person's
// next `git commit -a` there reverts the session's commit without a word.
TEST(GitReview10AttackTest, ABranchAnotherWorktreeHasCheckedOutNeverMoves) {
  git_attack::GitWriteSession git;
  auto& [daemon, ws, client, id] = git;
  ASSERT_NO_FATAL_FAILURE(MakeRepository(ws));
  char dir[] = "/tmp/ptybox-review17-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  const fs::path linked = fs::path(dir) / "wt";
  ASSERT_EQ(HostGit(ws, {"worktree", "add", "-q", "-b", "feature", linked.string()}).exit_code, 0);
  std::ofstream(linked / "f.txt") << "feature\n";
  ASSERT_EQ(HostGit(linked, {"add", "f.txt"}).exit_code, 0);
  ASSERT_EQ(HostGit(linked, {"commit", "-q", "-m", "feature"}).exit_code, 0);
  ASSERT_EQ(HostGit(linked, {"diff", "--cached", "--quiet"}).exit_code, 0);
  const std::string before = Line(HostGit(ws, {"rev-parse", "refs/heads/feature"}).out);
  ASSERT_NO_FATAL_FAILURE(git.OpenSession());
  Observed moved = RunInSession(
      client, id, "workspace-write", "advance-feature",
      std::string(kIdentity) +
          "export GIT_INDEX_FILE=$PWD/.escape/idx; git read-tree feature && "
          "b=$(echo agent fix | git hash-object -w --stdin) && "
          "git update-index --add --cacheinfo 100644,$b,fix.txt && t=$(git write-tree) && "
          "c=$(git commit-tree $t -p feature -m agent-fix) && unset GIT_INDEX_FILE && "
          "git update-ref refs/heads/feature $c && echo advanced");
  ASSERT_TRUE(moved.Says("advanced")) << moved.Show();
  const std::string after = Line(HostGit(ws, {"rev-parse", "refs/heads/feature"}).out);
  const std::string status = HostGit(linked, {"status", "--porcelain"}).out;
  const int staged = HostGit(linked, {"diff", "--cached", "--quiet"}).exit_code;
  // The person goes on in their worktree: one edit of theirs, `git commit -a`.
  std::ofstream(linked / "f.txt") << "feature, more\n";
  const auto committed = HostGit(linked, {"commit", "-q", "-a", "-m", "person"});
  const int fix_kept = HostGit(linked, {"cat-file", "-e", "HEAD:fix.txt"}).exit_code;
  std::cout << "  host refs/heads/feature " << before << " -> " << after
            << "; git status in the person's linked worktree:\n"
            << status << "  their commit -a " << committed.exit_code
            << "; the session's fix.txt in their new commit: " << (fix_kept == 0 ? "yes" : "no")
            << "\n";
  HostGit(ws, {"worktree", "remove", "--force", linked.string()});
  fs::remove_all(dir);
  EXPECT_EQ(after, before)
      << "a branch the person's linked worktree has checked out was moved under it\n"
      << daemon.Log();
  EXPECT_EQ(staged, 0) << "the person's worktree shows the session's commit undone and staged";
}

}  // namespace
}  // namespace ptybox::testing
