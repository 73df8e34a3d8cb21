// Thirty-ninth outside review of "Git for agents" (docs/security.md; review 46 of the project),
// on f6bff1f. Ordinary uses of HEAD and the index the launch's preparation of the private copy
// (PreparePrivateGit, PrepareWorktrees) meets in the person's repositories: a shallow clone, an
// index git writes as version 4 without a checksum (`feature.manyFiles`), a linked worktree in
// the writable root. Each asserts goal 3 after the session's ordinary commit came back (the
// person's status clean, fsck passing, the session's commit on its branch). The review found no
// hole: these are the scenarios it tried that held, kept as regression checks; each passes on
// f6bff1f, as root and as an unprivileged user. The other four, two-sided: the person stages in
// the shared worktree while the session commits there; a shallow host is sent a commit naming
// the boundary's missing parent; the person's gc prunes the objects of a session commit whose
// branch waits; the person's `checkout -b` while the session commits on main. Last, a session's
// submodule: a commit in a non-absorbed submodule and its new gitlink in the superproject.
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

// After the session's ordinary commit on `branch` in `tree` (the repository's root or a
// worktree of it), the host's branch holds it, and the person's status there is clean.
void ExpectCommitCameBackCleanly(git_attack::GitWriteSession& git,
                                 const std::filesystem::path& tree, const std::string& branch) {
  const std::string subject = Line(HostGit(tree, {"log", "-1", "--format=%s", branch}).out);
  const std::string status = HostGit(tree, {"status", "--porcelain"}).out;
  const std::string staged = HostGit(tree, {"diff", "--cached", "--name-status", "HEAD"}).out;
  std::cout << "  the host's " << branch << ": \"" << subject << "\"; status: [" << status
            << "]; staged: [" << staged << "]\n";
  EXPECT_EQ(subject, "agent") << "the session's commit did not come back\n"
                              << git_attack::LogTail(git.daemon.Log());
  EXPECT_EQ(staged, "") << "the person's index shows the session's commit undone or staged\n"
                        << git_attack::LogTail(git.daemon.Log());
  git_attack::ExpectPersonsGitSucceeds(git.ws, {"fsck", "--no-progress"}, "the copy-back",
                                       git.daemon.Log());
}

// Makes `ws` a clone of depth 1 of a three-commit history (the source in a TempDir, removed
// however the test ends).
void CloneShallowInto(const std::filesystem::path& ws) {
  const TempDir dir;
  const std::filesystem::path src = dir.path() / "src";
  ASSERT_EQ(HostGit(dir.path(), {"init", "-q", "-b", "main", src.string()}).exit_code, 0);
  for (int i = 1; i <= 3; ++i) {
    std::ofstream(src / "a.txt") << "v" << i << "\n";
    ASSERT_EQ(HostGit(src, {"add", "a.txt"}).exit_code, 0);
    ASSERT_EQ(HostGit(src, {"commit", "-q", "-m", "v" + std::to_string(i)}).exit_code, 0);
  }
  for (const auto& e : std::filesystem::directory_iterator(ws)) std::filesystem::remove_all(e);
  ASSERT_EQ(
      HostGit(dir.path(), {"clone", "-q", "--depth", "1", "file://" + src.string(), ws.string()})
          .exit_code,
      0);
}

TEST(GitReview39AttackTest, AShallowClonesCommitComesBackCleanly) {
  git_attack::GitWriteSession git;
  auto& [daemon, ws, client, id] = git;
  ASSERT_NO_FATAL_FAILURE(CloneShallowInto(ws));
  ASSERT_NO_FATAL_FAILURE(git.OpenSession());
  ASSERT_NO_FATAL_FAILURE(git_attack::CommitAgentChange(git));
  ASSERT_NO_FATAL_FAILURE(git_attack::Settle(git, 1));
  ExpectCommitCameBackCleanly(git, ws, "main");
}

TEST(GitReview39AttackTest, AManyFilesIndexCommitComesBackCleanly) {
  git_attack::GitWriteSession git;
  auto& [daemon, ws, client, id] = git;
  ASSERT_NO_FATAL_FAILURE(git_attack::MakeRepository(ws));
  ASSERT_EQ(HostGit(ws, {"config", "feature.manyFiles", "true"}).exit_code, 0);
  ASSERT_EQ(HostGit(ws, {"config", "index.skipHash", "true"}).exit_code, 0);
  ASSERT_EQ(HostGit(ws, {"update-index", "--index-version", "4"}).exit_code, 0);
  ASSERT_EQ(HostGit(ws, {"status", "--porcelain"}).exit_code, 0);
  ASSERT_NO_FATAL_FAILURE(git.OpenSession());
  ASSERT_NO_FATAL_FAILURE(git_attack::CommitAgentChange(git));
  ASSERT_NO_FATAL_FAILURE(git_attack::Settle(git, 1));
  ExpectCommitCameBackCleanly(git, ws, "main");
}

TEST(GitReview39AttackTest, ALinkedWorktreesCommitComesBackCleanly) {
  git_attack::GitWriteSession git;
  auto& [daemon, ws, client, id] = git;
  ASSERT_NO_FATAL_FAILURE(git_attack::MakeRepository(ws));
  std::ofstream(ws / ".gitignore", std::ios::app) << "wt/\n";
  ASSERT_EQ(HostGit(ws, {"commit", "-qam", "ignore wt"}).exit_code, 0);
  ASSERT_EQ(HostGit(ws, {"worktree", "add", "-q", "-b", "wtb", (ws / "wt").string()}).exit_code, 0);
  ASSERT_NO_FATAL_FAILURE(git.OpenSession());
  Observed committed = RunInSession(client, id, "workspace-write", "commit",
                                    std::string(kIdentity) +
                                        "cd wt && echo agent >> a.txt && git add a.txt && "
                                        "git commit -qm agent && echo committed");
  ASSERT_TRUE(committed.Says("committed")) << committed.Show();
  ASSERT_NO_FATAL_FAILURE(git_attack::Settle(git, 1));
  ExpectCommitCameBackCleanly(git, ws / "wt", "wtb");
  const std::string main_status = HostGit(ws, {"status", "--porcelain"}).out;
  std::cout << "  the main worktree's status: [" << main_status << "]\n";
  EXPECT_EQ(main_status, "");
}

// The person stages a file in the shared linked worktree while the session commits there: the
// person's staged file stays staged, and the session's commit is never shown undone.
TEST(GitReview39AttackTest, APersonsStageInASharedWorktreeSurvivesTheSessionsCommit) {
  git_attack::GitWriteSession git;
  auto& [daemon, ws, client, id] = git;
  ASSERT_NO_FATAL_FAILURE(git_attack::MakeRepository(ws));
  std::ofstream(ws / ".gitignore", std::ios::app) << "wt/\n";
  ASSERT_EQ(HostGit(ws, {"commit", "-qam", "ignore wt"}).exit_code, 0);
  ASSERT_EQ(HostGit(ws, {"worktree", "add", "-q", "-b", "wtb", (ws / "wt").string()}).exit_code, 0);
  ASSERT_NO_FATAL_FAILURE(git.OpenSession());
  std::ofstream(ws / "wt" / "mine.txt") << "mine\n";
  ASSERT_EQ(HostGit(ws / "wt", {"add", "mine.txt"}).exit_code, 0);
  Observed committed = RunInSession(client, id, "workspace-write", "commit",
                                    std::string(kIdentity) +
                                        "cd wt && echo agent >> a.txt && git add a.txt && "
                                        "git commit -qm agent && echo committed");
  ASSERT_TRUE(committed.Says("committed")) << committed.Show();
  ASSERT_NO_FATAL_FAILURE(git_attack::Settle(git, 2));
  const std::string subject = Line(HostGit(ws / "wt", {"log", "-1", "--format=%s", "wtb"}).out);
  const std::string staged = HostGit(ws / "wt", {"diff", "--cached", "--name-status", "HEAD"}).out;
  std::cout << "  the host's wtb: \"" << subject << "\"; staged in wt: [" << staged << "]\n";
  EXPECT_EQ(staged, "A\tmine.txt\n") << git_attack::LogTail(daemon.Log());
}

// The session makes a commit naming a parent the shallow host lacks (the boundary's own parent,
// named in its header): it never reaches the host's refs, and the person's fsck passes.
TEST(GitReview39AttackTest, AShallowHostGetsNoCommitPastItsBoundary) {
  git_attack::GitWriteSession git;
  auto& [daemon, ws, client, id] = git;
  ASSERT_NO_FATAL_FAILURE(CloneShallowInto(ws));
  ASSERT_NO_FATAL_FAILURE(git.OpenSession());
  Observed made = RunInSession(
      client, id, "workspace-write", "make",
      std::string(kIdentity) +
          "p=$(git cat-file -p HEAD | sed -n 's/^parent //p') && t=$(git rev-parse HEAD^{tree}) && "
          "c=$(printf 'tree %s\\nparent %s\\nauthor a <a@b> 1 +0000\\ncommitter a <a@b> 1 "
          "+0000\\n\\npast\\n' $t $p | git hash-object -t commit -w --stdin) && "
          "git update-ref refs/heads/past $c && echo made-$((40+2))");
  ASSERT_TRUE(made.Says("made-42")) << made.Show();
  ASSERT_NO_FATAL_FAILURE(git_attack::Settle(git, 2));
  std::cout << "  the host's past: [" << git_attack::Rev(ws, "refs/heads/past") << "]\n";
  EXPECT_EQ(git_attack::Rev(ws, "refs/heads/past"), "") << git_attack::LogTail(daemon.Log());
  git_attack::ExpectPersonsGitSucceeds(ws, {"fsck", "--no-progress"}, "a commit past the boundary",
                                       daemon.Log());
}

// The session's commit on main waits (the person staged a file); its objects came back
// unreachable, and the person's `git gc --prune=now` removes them; the person unstages. The
// session's main then comes back whole (its objects copied again), or not at all: never a
// branch naming a commit the host lacks.
TEST(GitReview39AttackTest, ACommitWhoseObjectsThePersonsGcPrunedComesBackWhole) {
  git_attack::GitWriteSession git;
  auto& [daemon, ws, client, id] = git;
  ASSERT_NO_FATAL_FAILURE(git.Open());
  std::ofstream(ws / "mine.txt") << "mine\n";
  ASSERT_EQ(HostGit(ws, {"add", "mine.txt"}).exit_code, 0);
  ASSERT_NO_FATAL_FAILURE(git_attack::CommitAgentChange(git));
  ASSERT_NO_FATAL_FAILURE(git_attack::Settle(git, 1));
  const std::string before = Line(HostGit(ws, {"log", "-1", "--format=%s", "main"}).out);
  const auto gc = HostGit(ws, {"gc", "-q", "--prune=now"});
  ASSERT_EQ(HostGit(ws, {"reset", "-q"}).exit_code, 0);
  std::filesystem::remove(ws / "mine.txt");
  ASSERT_NO_FATAL_FAILURE(git_attack::Settle(git, 3));
  const std::string subject = Line(HostGit(ws, {"log", "-1", "--format=%s", "main"}).out);
  std::cout << "  main before gc: \"" << before << "\" (gc exit " << gc.exit_code << "); after: \""
            << subject << "\"\n";
  git_attack::ExpectPersonsGitSucceeds(ws, {"fsck", "--no-progress"}, "a pruned commit",
                                       daemon.Log());
  git_attack::ExpectPersonsGitSucceeds(ws, {"status"}, "a pruned commit", daemon.Log());
  EXPECT_EQ(subject, "agent") << "the session's commit never comes back\n"
                              << git_attack::LogTail(daemon.Log());
}

// The person switches to a new branch on the host (`git checkout -b feature`: their HEAD moves,
// their index stays); the session then commits on main. main comes back (no worktree holds it);
// the session's index must not: over the person's feature it shows the session's commit staged.
TEST(GitReview39AttackTest, ThePersonsNewBranchGetsNoStagedSessionCommit) {
  git_attack::GitWriteSession git;
  auto& [daemon, ws, client, id] = git;
  ASSERT_NO_FATAL_FAILURE(git.Open());
  ASSERT_EQ(HostGit(ws, {"checkout", "-q", "-b", "feature"}).exit_code, 0);
  ASSERT_NO_FATAL_FAILURE(git_attack::CommitAgentChange(git));
  ASSERT_NO_FATAL_FAILURE(git_attack::Settle(git, 2));
  const std::string head = Line(HostGit(ws, {"symbolic-ref", "-q", "HEAD"}).out);
  const std::string main = Line(HostGit(ws, {"log", "-1", "--format=%s", "main"}).out);
  const std::string staged = HostGit(ws, {"diff", "--cached", "--name-status", "HEAD"}).out;
  std::cout << "  the host's HEAD: " << head << "; main: \"" << main << "\"; staged: [" << staged
            << "]\n";
  EXPECT_EQ(staged, "") << "the session's commit shows staged on the person's branch\n"
                        << git_attack::LogTail(daemon.Log());
  // The person's next commit on feature records only their own work.
  ASSERT_EQ(HostGit(ws, {"commit", "-q", "--allow-empty", "-m", "mine"}).exit_code, 0);
  const std::string changed = HostGit(ws, {"diff", "--name-status", "feature~1", "feature"}).out;
  std::cout << "  the person's commit on feature changed: [" << changed << "]\n";
  EXPECT_EQ(changed, "") << "the person's commit recorded the session's change";
}

// A submodule added from an existing repository (its `.git` a directory in the superproject's
// tree, as `git submodule add` of a repository already there leaves it): the session commits in
// it and records the new gitlink in the superproject. Both come back; the person's status and
// fsck in both are clean.
TEST(GitReview39AttackTest, ANonAbsorbedSubmodulesCommitComesBackCleanly) {
  git_attack::GitWriteSession git;
  auto& [daemon, ws, client, id] = git;
  ASSERT_NO_FATAL_FAILURE(git_attack::MakeRepository(ws));
  const std::filesystem::path sub = ws / "sub";
  ASSERT_EQ(HostGit(ws, {"init", "-q", "-b", "main", sub.string()}).exit_code, 0);
  std::ofstream(sub / "s.txt") << "s\n";
  ASSERT_EQ(HostGit(sub, {"add", "s.txt"}).exit_code, 0);
  ASSERT_EQ(HostGit(sub, {"commit", "-q", "-m", "s1"}).exit_code, 0);
  ASSERT_EQ(HostGit(ws, {"submodule", "add", "-q", "./sub", "sub"}).exit_code, 0);
  ASSERT_EQ(HostGit(ws, {"commit", "-q", "-m", "add sub"}).exit_code, 0);
  ASSERT_TRUE(std::filesystem::is_directory(sub / ".git"));
  ASSERT_NO_FATAL_FAILURE(git.OpenSession());
  Observed committed = RunInSession(
      client, id, "workspace-write", "commit",
      std::string(kIdentity) +
          "cd sub && echo agent >> s.txt && git commit -qam agent-sub && cd .. && git add sub && "
          "git commit -qm agent && echo committed");
  ASSERT_TRUE(committed.Says("committed")) << committed.Show();
  ASSERT_NO_FATAL_FAILURE(git_attack::Settle(git, 2));
  const std::string sub_subject = Line(HostGit(sub, {"log", "-1", "--format=%s", "main"}).out);
  const std::string sub_status = HostGit(sub, {"status", "--porcelain"}).out;
  std::cout << "  the host's sub main: \"" << sub_subject << "\"; its status: [" << sub_status
            << "]\n";
  EXPECT_EQ(sub_status, "") << git_attack::LogTail(daemon.Log());
  git_attack::ExpectPersonsGitSucceeds(sub, {"fsck", "--no-progress"}, "the submodule's copy-back",
                                       daemon.Log());
  ExpectCommitCameBackCleanly(git, ws, "main");
  const std::string status = HostGit(ws, {"status", "--porcelain"}).out;
  std::cout << "  the superproject's status: [" << status << "]\n";
  EXPECT_EQ(status, "") << git_attack::LogTail(daemon.Log());
}

}  // namespace
}  // namespace ptybox::testing
