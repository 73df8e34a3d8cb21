// Eleventh outside review of "Git for agents" (docs/security.md; review 18 of the project),
// attacked from a workspace-write session. Each test failed while its hole was open (root
// daemon and ptybox-ci); all are closed (HeldMoveRefusal, IndexEntriesAlike, NewRefNameClash in
// sandbox/git_private.cc):
//  (a) ee15ea9 refuses a new ref whose whole name differs from another only in case
//      (`refs/heads/Main` beside `main`). It compares whole names only: a ref one of whose
//      *directories* differs from another ref only in case (`refs/heads/Main/x` beside the
//      person's `main`; `refs/heads/Feature` beside the person's `feature/a`) comes back. On a
//      case-insensitive view of the repository (a Samba export, a copy or clone on macOS or
//      Windows) `refs/heads/Main/` and `refs/heads/main` are one name: a directory of refs and a
//      ref under one name, which ee15ea9's own rule ("git keeps no ref and directory of refs
//      under one name") refuses when the case matches.
//  (b) The branch the host's main worktree has checked out moves with the session's commit even
//      when the session's index does not come back (the person changed the host's index during
//      the session, e.g. `git add`): the host's HEAD moves under the person's index, and their
//      next `git commit` silently reverts the session's commit. The person needs to stage
//      nothing: the copy-back zeroes the stat data of the entries it changes, so their next
//      `git status` rewrites the host's index, and the agent's next commit finds it changed.
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
using git_attack::MakeRepository;

namespace fs = std::filesystem;

// (a) The person has `main` and their own `feature/a` (made before the session). The session
// makes `Main/x` (a directory `Main` of refs beside the branch `main`) and `Feature` (a branch
// beside the directory `feature` of refs), and an ordinary `agent`. `agent` comes back; the other
// two must not: on a case-insensitive view each is a ref and a directory of refs under one name.
TEST(GitReview11AttackTest, ARefWhoseDirectoryDiffersOnlyInCaseNeverComesBack) {
  git_attack::GitWriteSession git;
  auto& [daemon, ws, client, id] = git;
  ASSERT_NO_FATAL_FAILURE(MakeRepository(ws));
  ASSERT_EQ(HostGit(ws, {"branch", "feature/a"}).exit_code, 0);
  ASSERT_NO_FATAL_FAILURE(git.OpenSession());
  Observed made = RunInSession(client, id, "workspace-write", "case-dirs",
                               "git branch Main/x && git branch Feature && git tag MAIN/y && "
                               "git branch agent && echo made");
  ASSERT_TRUE(made.Says("made")) << made.Show();
  auto host_has = [&](const std::string& ref) {
    return HostGit(ws, {"show-ref", "--verify", "-q", ref}).exit_code == 0;
  };
  ASSERT_TRUE(host_has("refs/heads/agent")) << "an ordinary new branch comes back\n"
                                            << daemon.Log();
  const bool main_dir = host_has("refs/heads/Main/x");
  const bool feature = host_has("refs/heads/Feature");
  std::cout << "  host refs/heads/Main/x " << (main_dir ? "present" : "absent")
            << ", refs/heads/Feature " << (feature ? "present" : "absent") << ", refs/tags/MAIN/y "
            << (host_has("refs/tags/MAIN/y") ? "present" : "absent") << "\n";
  EXPECT_FALSE(main_dir) << "a directory of refs Main/ came back beside the branch main\n"
                         << daemon.Log();
  EXPECT_FALSE(feature) << "a branch Feature came back beside the directory of refs feature/";
  EXPECT_TRUE(host_has("refs/heads/main"));
  EXPECT_TRUE(host_has("refs/heads/feature/a"));
}

// (b) The person and the agent work in the same checkout. During the session the person stages
// a file of their own (`git add p.txt` on the host: the host's index changes). The session then
// commits on `main`, the branch the host has checked out (`git commit -am agent`, an ordinary
// commit). The copy-back moves `main` (the host's main still had the value the session started
// from) but leaves the index (the host changed it since): the host's HEAD moves under the
// person's index. `git status` there shows the session's commit undone and staged, and the
// person's next `git commit` (of their p.txt) silently reverts the session's commit: review 17's
// finding (b) (a HEAD moved under its index), in the main worktree.
TEST(GitReview11AttackTest, TheHostsCheckedOutBranchNeverMovesWithoutItsIndex) {
  git_attack::GitWriteSession git;
  ASSERT_NO_FATAL_FAILURE(git.Open());
  auto& [daemon, ws, client, id] = git;
  Observed started = RunInSession(client, id, "workspace-write", "start", "echo started");
  ASSERT_TRUE(started.Says("started")) << started.Show();
  const std::string before = Line(HostGit(ws, {"rev-parse", "refs/heads/main"}).out);
  // The person stages a file of their own.
  std::ofstream(ws / "p.txt") << "the person's file\n";
  ASSERT_EQ(HostGit(ws, {"add", "p.txt"}).exit_code, 0);
  Observed committed = RunInSession(client, id, "workspace-write", "commit",
                                    std::string(kIdentity) +
                                        "echo agent > a.txt && git commit -qam agent && "
                                        "echo committed");
  ASSERT_TRUE(committed.Says("committed")) << committed.Show();
  const std::string after = Line(HostGit(ws, {"rev-parse", "refs/heads/main"}).out);
  const std::string staged = HostGit(ws, {"diff", "--cached", "--name-only"}).out;
  const auto mine = HostGit(ws, {"commit", "-q", "-m", "the person's file"});
  const std::string a_txt = HostGit(ws, {"show", "HEAD:a.txt"}).out;
  std::cout << "  host main " << before << " -> " << after << "; staged on the host after the "
            << "copy-back: [" << staged << "]; the person's commit " << mine.exit_code
            << ", its a.txt: " << a_txt;
  EXPECT_EQ(staged, "p.txt\n")
      << "the host's HEAD moved under the person's index: the session's commit shows as "
         "undone and staged\n"
      << daemon.Log();
  EXPECT_TRUE(after == before || a_txt == "agent\n")
      << "the person's next commit silently reverted the session's commit";
}

// (b), without the person staging anything: only a `git status` on the host between two of the
// agent's commits. The copy-back writes the index with the stat data of each entry it changed
// zeroed, so the person's next `git status` refreshes it and writes the host's index: it is no
// longer the one the copy-back wrote, and the agent's second commit moves `main` without its
// index. The person's `git status` then shows the second commit undone and staged; a commit of
// theirs (here a new file, `git add p.txt; git commit`) reverts it.
TEST(GitReview11AttackTest, APersonsGitStatusBetweenTwoCommitsLeavesHeadMovedUnderTheIndex) {
  git_attack::GitWriteSession git;
  ASSERT_NO_FATAL_FAILURE(git.Open());
  auto& [daemon, ws, client, id] = git;
  Observed first = RunInSession(client, id, "workspace-write", "first",
                                std::string(kIdentity) +
                                    "echo agent1 > a.txt && git commit -qam agent1 && "
                                    "echo first");
  ASSERT_TRUE(first.Says("first")) << first.Show();
  ASSERT_TRUE(HostGit(ws, {"diff", "--cached", "--name-only"}).out.empty()) << daemon.Log();
  // The person looks: nothing to commit (their git refreshes the index and writes it).
  const auto status = HostGit(ws, {"status", "--porcelain"});
  ASSERT_EQ(status.exit_code, 0);
  Observed second = RunInSession(client, id, "workspace-write", "second",
                                 std::string(kIdentity) +
                                     "echo agent2 > a.txt && git commit -qam agent2 && "
                                     "echo second");
  ASSERT_TRUE(second.Says("second")) << second.Show();
  const std::string head_a = HostGit(ws, {"show", "HEAD:a.txt"}).out;
  const std::string staged = HostGit(ws, {"diff", "--cached", "--name-only"}).out;
  std::ofstream(ws / "p.txt") << "the person's file\n";
  ASSERT_EQ(HostGit(ws, {"add", "p.txt"}).exit_code, 0);
  const auto mine = HostGit(ws, {"commit", "-q", "-m", "the person's file"});
  const std::string a_txt = HostGit(ws, {"show", "HEAD:a.txt"}).out;
  std::cout << "  status before the second commit: [" << status.out << "]; host HEAD:a.txt after "
            << "it: " << head_a << "  staged on the host: [" << staged << "]; the person's commit "
            << mine.exit_code << ", its a.txt: " << a_txt;
  EXPECT_TRUE(staged.empty()) << "the host's HEAD moved under the index after a git status\n"
                              << daemon.Log();
  // A refresh of the person's is no change of theirs: the agent's second commit comes back
  // with its index, as the first did.
  EXPECT_EQ(head_a, "agent2\n") << "a git status of the person's held the agent's commit back";
  EXPECT_TRUE(head_a != "agent2\n" || a_txt == "agent2\n")
      << "the person's next commit silently reverted the agent's second commit";
}

}  // namespace
}  // namespace ptybox::testing
