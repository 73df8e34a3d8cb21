// Fifty-third outside review of "Git for agents" (docs/security.md), on 76dc18f, the
// forty-sixth of the feature. Time-boxed (25 minutes). Both findings are about review 52's fix:
// the daemon looks for the person's git in /proc (sandbox/persons_git.cc, PersonsGitRunsIn).
//
// Finding 1 (the feature off in ordinary use, and the session's work held back; no wall broken):
// PersonsGitRunsIn counts a process by its subcommand alone, and a long-lived git whose
// subcommand is in kGitSwitchesHead/kGitMovesHead but that moves nothing counts as a switch under
// way for as long as it lives. `git stash list` (and `git stash show -p`) run the pager: the
// `git stash` process (comm `git`, cwd the worktree's top) waits for it, minutes or hours while
// the person reads it in a terminal left open. Meanwhile every launch retries eight times and
// keeps .git read-only ("the person's git ... is at work"), and HoldOf holds HEAD's branch.
// (The uncommitted denylist seen in the work tree during this review, kGitLeavesHead, makes it
// wider: `git reflog`, `git branch` (both paged), `git worktree list`, `git gui`, `git difftool`
// would be waited for too.) The test fails on 76dc18f and on that work tree alike.
// APersonsStashListInAPagerLeavesGitForAgentsOn.
//
// Finding 2 (goal 3, an ordinary race with the person's git): PersonsGitRunsIn knows the
// person's git only by its comm being exactly `git`. The comm is the basename of the path git was
// executed by: a git run through a link of another name (`~/bin/g -> /usr/bin/git`), by its dashed
// name (`git-commit` in git's exec-path, as hooks and scripts find it on PATH), or through a
// renamed wrapper binary is not seen at all. Review 52's race is back for that person: while their
// `g commit`'s pre-commit hook runs (no lock held), the session's copy-back moves main and the
// person's commit fails ("cannot lock ref 'HEAD'").
// APersonsCommitThroughALinkNamedGStillLands.

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "tests/escape/escape_support.h"
#include "tests/escape/git_attack_support.h"
#include "tests/escape/persons_git_waiting.h"

namespace ptybox::testing {
namespace {

using git_attack::HostGit;
using git_attack::kIdentity;
using git_attack::Line;
using git_attack::PersonsGitWaiting;

namespace fs = std::filesystem;

// Finding 1: the person reads their stash list in the pager; a session opened meanwhile must
// still commit, and its commit come back.
TEST(GitReview46AttackTest, APersonsStashListInAPagerLeavesGitForAgentsOn) {
  git_attack::GitWriteSession git({"PTYBOX_LOG=info"});
  auto& [daemon, ws, client, id] = git;
  ASSERT_NO_FATAL_FAILURE(git_attack::MakeRepository(ws));
  std::ofstream(ws / "a.txt") << "the person's stashed work\n";
  ASSERT_EQ(HostGit(ws, {"stash", "-q"}).exit_code, 0);
  PersonsGitWaiting person(PersonsGitWaiting::Step::kPager, "/usr/bin/git", {"stash", "list"}, ws);
  ASSERT_TRUE(person.Waiting()) << person.Said();
  ASSERT_NO_FATAL_FAILURE(git.OpenSession());
  Observed committed = RunInSession(client, id, "workspace-write", "commit",
                                    std::string(kIdentity) +
                                        "echo agent > b.txt && git add b.txt && "
                                        "git commit -qm agent && echo committed-ok");
  std::cout << "  " << committed.Show() << "\n";
  Observed settle = RunInSession(client, id, "workspace-write", "settle", "echo settle-$((40+2))");
  const std::string subject = Line(HostGit(ws, {"log", "-1", "--format=%s", "main"}).out);
  const int status = person.Finish();
  std::cout << "  the person's `git stash list` (in its pager during the session) exited " << status
            << "; the host's main after the session's sends: \"" << subject << "\"\n";
  EXPECT_TRUE(committed.Says("committed-ok"))
      << "a session opened while the person read `git stash list` in the pager got a read-only "
         ".git: the waiting `git stash` process was taken for a switch under way\n"
      << git_attack::LogTail(daemon.Log());
  EXPECT_EQ(subject, "agent") << "the session's commit did not come back while the person's "
                                 "`git stash list` sat in its pager";
}

// Finding 2: the person runs git through a link named `g`; their commit is under way (its
// pre-commit hook running) while the session commits on main and its send settles. The person's
// commit must still land.
TEST(GitReview46AttackTest, APersonsCommitThroughALinkNamedGStillLands) {
  char bin[] = "/tmp/ptybox-r53-bin-XXXXXX";
  ASSERT_NE(::mkdtemp(bin), nullptr);
  struct Removed {
    fs::path dir;
    ~Removed() { fs::remove_all(dir); }
  } removed{bin};
  fs::permissions(bin, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                           fs::perms::others_read | fs::perms::others_exec);
  fs::create_symlink("/usr/bin/git", fs::path(bin) / "g");
  git_attack::PersonsCommitDuringACopyBack(
      PersonsGitWaiting::Step::kPreCommitHook, (fs::path(bin) / "g").string(),
      {"-m", "the person's message"}, true,
      "git run through a link named `g`, comm `g`, not seen in /proc; its pre-commit hook "
      "running");
}

}  // namespace
}  // namespace ptybox::testing
