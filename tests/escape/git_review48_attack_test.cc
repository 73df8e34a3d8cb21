// Fifty-seventh outside review of "Git for agents" (docs/security.md), on e986942, the fiftieth
// of the feature. Time-boxed (25 minutes).
//
// Finding 1 (goal 3, the session hides its change from the person's git; a hole the fix of
// review 56 reopened for sparse checkouts): a new skip-worktree entry now passes the index judge
// whenever the host's worktree is a sparse checkout (`HostSparseCheckout`: core.sparseCheckout
// on, sparse.expectFilesOutsideOfPatterns not), on the ground that git 2.36+ clears the mark of a
// file *present* in the worktree. It does nothing for a file that is absent: the session marks a
// tracked file inside the cone skip-worktree (`git update-index --skip-worktree a.txt`) and
// deletes it. The index comes back; the person's `git status` is clean while a.txt is gone from
// their working tree, and `git restore .`/`checkout -- .` never bring it back (review 2's hole,
// with a deletion).
// ASkipWorktreeMarkOnADeletedFileInsideTheConeNeverHidesTheDeletion.

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>

#include "tests/escape/escape_support.h"
#include "tests/escape/git_attack_support.h"

namespace ptybox::testing {
namespace {

using git_attack::HostGit;
using git_attack::Line;

namespace fs = std::filesystem;

TEST(GitReview48AttackTest, ASkipWorktreeMarkOnADeletedFileInsideTheConeNeverHidesTheDeletion) {
  git_attack::GitWriteSession git({"PTYBOX_LOG=info"});
  auto& [daemon, ws, client, id] = git;
  ASSERT_NO_FATAL_FAILURE(git_attack::MakeRepository(ws));
  // The person's cone sparse checkout (no sparse index): the root's files and dir/ are in it,
  // out/ is not.
  fs::create_directories(ws / "dir");
  fs::create_directories(ws / "out");
  std::ofstream(ws / "dir" / "c.txt") << "c\n";
  std::ofstream(ws / "out" / "d.txt") << "d\n";
  ASSERT_EQ(HostGit(ws, {"add", "dir", "out"}).exit_code, 0);
  ASSERT_EQ(HostGit(ws, {"commit", "-q", "-m", "second"}).exit_code, 0);
  ASSERT_EQ(HostGit(ws, {"sparse-checkout", "set", "--cone", "dir"}).exit_code, 0);
  ASSERT_TRUE(fs::exists(ws / "a.txt"));
  ASSERT_FALSE(fs::exists(ws / "out" / "d.txt"));
  ASSERT_EQ(HostGit(ws, {"status", "--porcelain"}).out, "");

  ASSERT_NO_FATAL_FAILURE(git.OpenSession());
  Observed hid = RunInSession(
      client, id, "workspace-write", "hide",
      "git update-index --skip-worktree a.txt dir/c.txt && rm a.txt dir/c.txt && echo hid-ok");
  std::cout << "  " << hid.Show() << "\n";
  ASSERT_TRUE(hid.Says("hid-ok"));
  ASSERT_NO_FATAL_FAILURE(git_attack::Settle(git));

  const std::string flags = HostGit(ws, {"ls-files", "-v", "a.txt", "dir/c.txt"}).out;
  const std::string status = HostGit(ws, {"status", "--porcelain"}).out;
  std::cout << "  a.txt in the host's worktree: " << fs::exists(ws / "a.txt")
            << "; the host's `ls-files -v`: [" << Line(flags) << "]; its `status --porcelain`: ["
            << Line(status) << "]\n";
  ASSERT_FALSE(fs::exists(ws / "a.txt"));
  EXPECT_NE(status.find("a.txt"), std::string::npos)
      << "the session deleted a.txt (inside the person's sparse cone) and marked it "
         "skip-worktree; the mark came back and the person's git no longer sees the deletion\n"
      << git_attack::LogTail(daemon.Log());
  EXPECT_NE(status.find("dir/c.txt"), std::string::npos)
      << "the same for dir/c.txt (inside the cone)\n";
  // The person's `git restore .` brings the tracked files of their cone back.
  HostGit(ws, {"restore", "."});
  std::cout << "  after the person's `git restore .`: a.txt exists: " << fs::exists(ws / "a.txt")
            << "\n";
  EXPECT_TRUE(fs::exists(ws / "a.txt")) << "the person's `git restore .` did not bring a.txt back";
}

}  // namespace
}  // namespace ptybox::testing
