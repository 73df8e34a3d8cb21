// Fifty-ninth outside review of "Git for agents" (docs/security.md), on f07d18b, the fifty-second
// of the feature. Time-boxed (25 minutes).
//
// Finding 1 (goals 1 and 3, review 58's hole with the borrower outside the writable roots): the
// new wall (`protect_alternates` in sandbox/repository_walk.cc) reads the alternates of the
// repositories inside the writable roots and of those above them (`enclosing`) only. A
// repository of the person's elsewhere on the host that borrows from one inside the workspace
// (`git clone --shared ~/ws/upstream ~/down`: down's objects/info/alternates names
// `~/ws/upstream/.git/objects`; it holds no object of its own) is never read, so nothing pins
// `upstream`: the session does `mv upstream u2`, copies u2's objects into a new
// `upstream/.git/objects` and replaces the blob of `f` with a forged loose object at the same id
// (`EVIL!`). The person's `git show HEAD:f` / `git checkout -- f` in their own `~/down` (a
// repository the session never saw) write the session's bytes, and `git fsck` there fails.
// ABorrowerOutsideTheWorkspaceNeverReadsTheSessionsObjects (open: a documented limit).
//
// Finding 2 (goals 1 and 3, a repository INSIDE the workspace): `protect_alternates` reads
// `<git dir>/objects/info/alternates`, with the git dir a gitfile names; for a linked worktree
// that is `<main>/.git/worktrees/<name>`, which has no objects of its own: git reads the common
// directory's (`commondir`). A linked worktree `ws/wt` of the person's clone `~/main` (made with
// `git clone --shared ~/ws/upstream ~/main`, then `git -C ~/main worktree add ~/ws/wt`) is a
// repository the walk finds, yet its borrowed `ws/upstream/.git/objects` is never read, never
// pinned: the same `mv upstream u2` and forged blob make the person's `git checkout -- f` in
// ws/wt write `EVIL!`. ALinkedWorktreeWhoseCommonDirectoryBorrowsIsKept.

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
using git_attack::Line;

namespace fs = std::filesystem;

// The session's forgery: upstream set aside, a new one made with u2's objects (loose, as a
// small fetch leaves them) and `blob` replaced by the loose object of "EVIL!\n".
std::string ForgeUpstream(const std::string& blob) {
  const std::string object = "upstream/.git/objects/" + blob.substr(0, 2) + "/" + blob.substr(2);
  return "mv upstream u2 && git init -q upstream && git -C upstream fetch -q ../u2 main && "
         "n=$(printf 'EVIL!\\n' | git -C upstream hash-object -w --stdin) && rm -f " +
         object + " && cp upstream/.git/objects/$(echo $n | cut -c1-2)/$(echo $n | cut -c3-) " +
         object + " && echo forged-ok";
}

// The content of `f` after the person's `git checkout -- f` in `repo`.
std::string CheckedOut(const fs::path& repo) {
  fs::remove(repo / "f");
  HostGit(repo, {"checkout", "--", "f"});
  std::string line;
  std::ifstream in(repo / "f");
  std::getline(in, line);
  return line;
}

// Open, and disabled: the launch cannot find a repository outside every writable root that
// borrows from one inside them; docs/security.md ("Borrowed object directories") names the limit
// and what keeps such a clone safe (`git repack -a -d` and the alternates file removed, or the
// source kept outside the workspace). Kept to run by hand (--gtest_also_run_disabled_tests).
TEST(GitReview49AttackTest, DISABLED_ABorrowerOutsideTheWorkspaceNeverReadsTheSessionsObjects) {
  git_attack::GitWriteSession git({"PTYBOX_LOG=info"});
  auto& [daemon, ws, client, id] = git;
  ASSERT_EQ(HostGit(ws, {"init", "-q", "-b", "main", "upstream"}).exit_code, 0);
  std::ofstream(ws / "upstream" / "f") << "hello\n";
  ASSERT_EQ(HostGit(ws / "upstream", {"add", "f"}).exit_code, 0);
  ASSERT_EQ(HostGit(ws / "upstream", {"commit", "-q", "-m", "f"}).exit_code, 0);
  const std::string blob = Line(HostGit(ws / "upstream", {"rev-parse", "HEAD:f"}).out);
  ASSERT_EQ(blob.size(), 40u) << blob;
  // The person's own clone elsewhere on the host, borrowing upstream's objects.
  TempDir elsewhere;
  const fs::path down = elsewhere.path() / "down";
  ASSERT_EQ(HostGit(elsewhere.path(),
                    {"clone", "-q", "--shared", (ws / "upstream").string(), down.string()})
                .exit_code,
            0);
  ASSERT_EQ(Line(HostGit(down, {"show", "HEAD:f"}).out), "hello");

  ASSERT_NO_FATAL_FAILURE(git.OpenSession());
  Observed did = RunInSession(client, id, "workspace-write", "forge", ForgeUpstream(blob));
  std::cout << "  observed: " << did.Show() << "\n";
  const std::string shown = Line(HostGit(down, {"show", "HEAD:f"}).out);
  const std::string checked_out = CheckedOut(down);
  const sandbox::testing::RunResult fsck = HostGit(down, {"fsck", "--no-progress"});
  std::cout << "  the person's `git show HEAD:f` in " << down << ": [" << shown
            << "]; `git checkout -- f` wrote: [" << checked_out << "]; `git fsck` exit "
            << fsck.exit_code << "\n";
  EXPECT_FALSE(did.Says("forged-ok"))
      << "the session set aside upstream (borrowed by a repository of the person's outside the "
         "workspace) and made a new object directory in its place\n";
  EXPECT_EQ(shown, "hello") << "the person's git in their own repository (outside the workspace) "
                               "read the session's forged object\n";
  EXPECT_EQ(checked_out, "hello") << "the person's `git checkout -- f` wrote the session's bytes\n";
  EXPECT_EQ(fsck.exit_code, 0) << fsck.Describe();
}

TEST(GitReview49AttackTest, ALinkedWorktreeWhoseCommonDirectoryBorrowsIsKept) {
  git_attack::GitWriteSession git({"PTYBOX_LOG=info"});
  auto& [daemon, ws, client, id] = git;
  ASSERT_EQ(HostGit(ws, {"init", "-q", "-b", "main", "upstream"}).exit_code, 0);
  std::ofstream(ws / "upstream" / "f") << "hello\n";
  ASSERT_EQ(HostGit(ws / "upstream", {"add", "f"}).exit_code, 0);
  ASSERT_EQ(HostGit(ws / "upstream", {"commit", "-q", "-m", "f"}).exit_code, 0);
  const std::string blob = Line(HostGit(ws / "upstream", {"rev-parse", "HEAD:f"}).out);
  ASSERT_EQ(blob.size(), 40u) << blob;
  // The person's clone outside the workspace borrows upstream's objects; its linked worktree
  // `wt` is in the workspace (a repository the walk finds: wt/.git is a gitfile naming
  // main/.git/worktrees/wt, whose objects are the common directory's).
  TempDir elsewhere;
  const fs::path main = elsewhere.path() / "main";
  ASSERT_EQ(HostGit(elsewhere.path(),
                    {"clone", "-q", "--shared", (ws / "upstream").string(), main.string()})
                .exit_code,
            0);
  ASSERT_EQ(HostGit(main, {"worktree", "add", "-q", "-b", "topic", (ws / "wt").string()}).exit_code,
            0);
  ASSERT_EQ(Line(HostGit(ws / "wt", {"show", "HEAD:f"}).out), "hello");

  ASSERT_NO_FATAL_FAILURE(git.OpenSession());
  Observed did = RunInSession(client, id, "workspace-write", "forge", ForgeUpstream(blob));
  std::cout << "  observed: " << did.Show() << "\n";
  const std::string shown = Line(HostGit(ws / "wt", {"show", "HEAD:f"}).out);
  const std::string checked_out = CheckedOut(ws / "wt");
  const sandbox::testing::RunResult fsck = HostGit(ws / "wt", {"fsck", "--no-progress"});
  std::cout << "  the person's `git show HEAD:f` in the workspace's wt: [" << shown
            << "]; `git checkout -- f` wrote: [" << checked_out << "]; `git fsck` exit "
            << fsck.exit_code << "\n";
  EXPECT_FALSE(did.Says("forged-ok"))
      << "the session set aside upstream, whose objects the linked worktree wt (inside the "
         "workspace) reads through its common directory's alternates\n";
  EXPECT_EQ(shown, "hello") << "the person's git in wt read the session's forged object\n";
  EXPECT_EQ(checked_out, "hello") << "the person's `git checkout -- f` in wt wrote the session's "
                                     "bytes\n";
  EXPECT_EQ(fsck.exit_code, 0) << fsck.Describe();
}

}  // namespace
}  // namespace ptybox::testing
