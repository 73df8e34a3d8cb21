// Fifty-first outside review of "Git for agents" (docs/security.md), on 7bbd8c3, the forty-fourth
// of the feature. Time-boxed (40 minutes).
//
// Finding 1 (the feature off for good in ordinary use; no security goal, a regression of f55c4eb):
// IndexOfAnotherTree takes an index whose cache-tree (TREE) root is valid and names another tree
// than HEAD's commit for a `git switch`/`git reset` held between its writes, and says "a staged
// change invalidates the root, and is not this". But the person's plain `git commit` (git 2.39,
// builtin/commit.c prepare_index, COMMIT_AS_IS) updates the cache tree over what is staged and
// commits the index (no lock kept) BEFORE it runs the pre-commit hook, opens the editor or reads
// the message. While that editor is open, and for good once the commit is aborted (a failing
// pre-commit hook, an empty message), the index holds staged changes under a valid root naming
// the staged tree: every launch reads it eight times (eight `git rev-parse`, 20 ms pauses) and
// keeps .git read-only, saying a switch or reset is under way. The same staged change without the
// aborted commit launches with Git for agents on. (`git write-tree`, as the pre-commit framework
// runs at every commit, does the same.)
// AnAbortedCommitOfStagedWorkLeavesGitForAgentsOn.
//
// Finding 2 (goal 3, an ordinary race with the person's git): the session's copy-back moves the
// branch the host's HEAD names when the host's HEAD and index entries are what the session saw
// (LockFollowingIndex, IndexFollows: entries alike, extensions ignored). A person's commit whose
// index entries do not change is under way with no marker and no lock while its editor is open:
// `git commit --amend` (the message reworded), or `git commit` of what was staged before the
// launch. The copy-back moves main under it; when the person saves the message, git's update of
// HEAD expects the old main and fails ("cannot lock ref 'HEAD': is at <session's> but expected
// <old>"): the person's commit is lost, and their next `--amend` rewrites the session's commit.
// APersonsAmendWithItsEditorOpenStillLands, APersonsCommitOfWhatWasStagedStillLands.
//
// Finding 3 (the feature off for a later session; the warm pool): a pooled shell whose launch
// found the person's git at work (a lock held: `git commit -a` with its editor open) composed
// .git read-only, and the claim judges again only the private copies a shell has
// (RepositoryClaim::Refusal, HostStillAt over `gits`): a shell with none is handed to the next
// open however long after the person's git finished, and that session cannot commit.
// APooledShellLaunchedWhileThePersonsGitHeldALockIsNotHandedOutReadOnly.
//
// Finding 4 (the session's git broken in ordinary use; no security goal): with `core.splitIndex`
// (or `git update-index --split-index`) the host's index is a small file with a `link` extension
// naming .git/sharedindex.<id>. PreparePrivateGit copies `index` alone; the shared part is
// neither copied nor bound, so in the session `git status`, `diff`, `add` and `commit` all die
// ("fatal: .git/sharedindex.<id>: index file open failed"), where a read-only .git (Git for
// agents off) would have let them read. ASplitIndexRepositoryKeepsGitStatusWorkingInTheSession.

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

// The agent's ordinary commit of a.txt in the open session; what it printed.
Observed AgentCommits(git_attack::GitWriteSession& git) {
  Observed committed = RunInSession(git.client, git.id, "workspace-write", "commit",
                                    std::string(kIdentity) +
                                        "echo agent >> a.txt && git add a.txt && "
                                        "git commit -qm agent && echo committed-ok");
  std::cout << "  " << committed.Show() << "\n";
  return committed;
}

// The subject of the host's main.
std::string MainSubject(const fs::path& ws) {
  return Line(HostGit(ws, {"log", "-1", "--format=%s", "main"}).out);
}

// Finding 1: the person staged b.txt and tried to commit it; the commit was aborted (an empty
// message here; a failing pre-commit hook does the same). A session opened now must still commit.
TEST(GitReview44AttackTest, AnAbortedCommitOfStagedWorkLeavesGitForAgentsOn) {
  git_attack::GitWriteSession git({"PTYBOX_LOG=info"});
  auto& [daemon, ws, client, id] = git;
  ASSERT_NO_FATAL_FAILURE(git_attack::MakeRepository(ws));
  std::ofstream(ws / "b.txt") << "the person's staged work\n";
  ASSERT_EQ(HostGit(ws, {"add", "b.txt"}).exit_code, 0);
  const auto aborted = HostGit(ws, {"commit", "-m", ""});
  std::cout << "  the person's commit with an empty message: exit " << aborted.exit_code << " "
            << Line(aborted.err) << "\n";
  ASSERT_NE(aborted.exit_code, 0);
  ASSERT_EQ(Line(HostGit(ws, {"diff", "--cached", "--name-only"}).out), "b.txt");
  ASSERT_NO_FATAL_FAILURE(git.OpenSession());
  Observed committed = AgentCommits(git);
  const std::string subject = MainSubject(ws);
  std::cout << "  the host's main after the send: \"" << subject << "\"\n";
  EXPECT_TRUE(committed.Says("committed-ok"))
      << "a session opened after the person's aborted commit of staged work (its index's "
         "cache-tree root valid, naming the staged tree) got a read-only .git: Git for agents "
         "is off until the person commits, though the same staged work without the aborted "
         "commit launches with it on\n"
      << git_attack::LogTail(daemon.Log());
}

TEST(GitReview44AttackTest, APersonsAmendWithItsEditorOpenStillLands) {
  git_attack::PersonsCommitDuringACopyBack(PersonsGitWaiting::Step::kEditor, "/usr/bin/git",
                                           {"--amend"}, false, "its editor open");
}

TEST(GitReview44AttackTest, APersonsCommitOfWhatWasStagedStillLands) {
  git_attack::PersonsCommitDuringACopyBack(PersonsGitWaiting::Step::kEditor, "/usr/bin/git", {},
                                           true, "its editor open");
}

// Finding 3: the refill after the first open ran while the person's `git commit -a` held
// index.lock (its editor open). Once that commit is done, the next open (served from the pool)
// must still commit.
TEST(GitReview44AttackTest, APooledShellLaunchedWhileThePersonsGitHeldALockIsNotHandedOutReadOnly) {
  git_attack::GitWriteSession git({"PTYBOX_LOG=info"});
  auto& [daemon, ws, client, id] = git;
  ASSERT_NO_FATAL_FAILURE(git_attack::MakeRepository(ws));
  std::ofstream(ws / "a.txt") << "the person's edit\n";
  {
    PersonsGitWaiting person(PersonsGitWaiting::Step::kEditor, "/usr/bin/git", {"commit", "-a"},
                             ws);
    ASSERT_TRUE(person.Waiting()) << person.Said();
    ASSERT_TRUE(fs::exists(ws / ".git" / "index.lock"));
    ASSERT_NO_FATAL_FAILURE(git.OpenSession());
    // The refill that follows the open, while the lock is held.
    const auto guard = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    auto ready = [&] {
      const std::string log = daemon.Log();
      size_t n = 0;
      for (size_t at = log.find("a pre-started shell is ready"); at != std::string::npos;
           at = log.find("a pre-started shell is ready", at + 1)) {
        ++n;
      }
      return n;
    };
    while (ready() < 1 && std::chrono::steady_clock::now() < guard) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ASSERT_GE(ready(), 1u) << git_attack::LogTail(daemon.Log());
    client.Call("terminal_close", Json{{"sessionId", id}}, std::chrono::seconds(60));
    ASSERT_EQ(person.Finish(), 0) << person.Said();
  }
  ASSERT_FALSE(fs::exists(ws / ".git" / "index.lock"));
  std::cout << "  the person's commit done: main \"" << MainSubject(ws) << "\"\n";
  // Long after: the next open.
  ASSERT_NO_FATAL_FAILURE(git.OpenSession());
  Observed committed = AgentCommits(git);
  const std::string subject = MainSubject(ws);
  std::cout << "  the host's main after the second session's send: \"" << subject << "\"\n";
  EXPECT_TRUE(committed.Says("committed-ok"))
      << "the shell pre-started while the person's git held a lock kept .git read-only and was "
         "handed to an open after the person's git had finished: that session cannot commit\n"
      << git_attack::LogTail(daemon.Log());
}

// Finding 4: a repository with `core.splitIndex` (its index a `link` to .git/sharedindex.<id>).
// The session's git must still read its index.
TEST(GitReview44AttackTest, ASplitIndexRepositoryKeepsGitStatusWorkingInTheSession) {
  git_attack::GitWriteSession git;
  auto& [daemon, ws, client, id] = git;
  ASSERT_NO_FATAL_FAILURE(git_attack::MakeRepository(ws));
  ASSERT_EQ(HostGit(ws, {"config", "core.splitIndex", "true"}).exit_code, 0);
  ASSERT_EQ(HostGit(ws, {"update-index", "--split-index"}).exit_code, 0);
  ASSERT_EQ(HostGit(ws, {"status", "--porcelain"}).exit_code, 0);
  ASSERT_NO_FATAL_FAILURE(git.OpenSession());
  Observed status = RunInSession(client, id, "workspace-write", "status",
                                 "git status --porcelain >/dev/null; echo status-rc=$?");
  std::cout << "  " << status.Show() << "\n";
  EXPECT_TRUE(status.Says("status-rc=0"))
      << "in a split-index repository the session's private .git holds the index but not its "
         "shared part (.git/sharedindex.<id>): every git command that reads the index fails "
         "in the session\n"
      << git_attack::LogTail(daemon.Log());
}

}  // namespace
}  // namespace ptybox::testing
