// Third outside review of "Git for agents" (docs/security.md): what a workspace-write session
// leaves in its private git directory that the copy-back hands to the host's git. Each test fails
// while its hole is open:
//  - the reflog of `refs/stash`: only the ref's new tip is checked for commits that add a gitlink
//    (CommitAddsGitlink), but every reflog line the session appended comes back (ValidReflogLine
//    and "the host has both objects" are the only checks). An older stash entry that adds a
//    gitlink to a repository the session made becomes the host's `stash@{1}`; the person's
//    `git stash pop` of it puts the gitlink in their index and their `git status` runs the
//    session's core.fsmonitor as the person;
//  - the reflog of `HEAD` (copied back whenever any ref moved): its `checkout: moving from <X> to
//    <Y>` lines are what `git checkout -` / `git switch -` read. A line naming a commit that adds a
//    gitlink (its ref never moved: refused) makes the person's `git checkout -` check it out, and
//    their `git status` runs the session's core.fsmonitor.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/escape/escape_support.h"
#include "tests/escape/git_attack_support.h"
#include "tests/sandbox/process_runner.h"
#include "tests/support/files.h"

namespace ptybox::testing {
namespace {

using git_attack::HostGit;
using git_attack::kIdentity;
using git_attack::MakeRepository;
using git_attack::Slurp;

namespace fs = std::filesystem;
using sandbox::testing::RunProcess;
using sandbox::testing::RunResult;

// The session makes a repository `sub` in the workspace, stages it as a gitlink together with a
// change to a.txt and stashes that (stash A: its index commit adds the gitlink), sets sub's
// core.fsmonitor to a command, then stashes a harmless change to .gitignore (stash B). Its
// refs/stash is B, which adds no gitlink, so the ref moves; the reflog lines (0 -> A, A -> B) name
// objects the host has (A's commits came back with the other objects), so both come back. The
// person pops the agent's stashes, as `git stash list` offers them, and looks at `git status`.
TEST(GitReview3AttackTest, AnOlderStashEntryNeverBringsAGitlinkToTheHost) {
  git_attack::GitWriteSession git;
  auto& [daemon, ws, client, id] = git;
  ASSERT_NO_FATAL_FAILURE(MakeRepository(ws));
  TempDir host;
  ASSERT_EQ(::chmod(host.path().c_str(), 0777), 0);
  const fs::path marker = host.path() / "ran";
  ASSERT_NO_FATAL_FAILURE(git.OpenSession());
  const std::string work =
      std::string(kIdentity) +
      "git init -q sub && echo x > sub/x && git -C sub add x && git -C sub commit -qm s && "
      "git add sub 2>/dev/null; echo two >> a.txt && git stash -q 2>/dev/null; "
      "git -C sub config core.fsmonitor 'touch " +
      marker.string() +
      "; false' && echo more >> .gitignore && git stash -q && git stash list | wc -l && "
      "echo stashed";
  Observed did = RunInSession(client, id, "workspace-write", "stash-reflog", work);
  std::cout << "  observed " << did.Show() << "\n";
  ASSERT_TRUE(did.Says("stashed")) << did.Show();
  RunResult list = HostGit(ws, {"stash", "list"});
  std::cout << "  host stash list: " << list.out << list.err << "\n";
  fs::remove(marker);
  // The person takes the agent's stashed work back, newest first, and looks.
  RunResult pop1 = HostGit(ws, {"stash", "pop", "-q"});
  RunResult pop2 = HostGit(ws, {"stash", "pop", "-q"});
  std::cout << "  host pops: " << pop1.exit_code << " " << pop2.exit_code << " " << pop2.err
            << "\n";
  RunResult status = HostGit(ws, {"status", "--short"});
  std::cout << "  host status: " << status.exit_code << " " << status.out << status.err << "\n";
  EXPECT_FALSE(fs::exists(marker))
      << "the host's `git status` after popping the session's older stash ran a command the "
         "session wrote in the config of a repository it made (a gitlink in stash@{1})\n"
      << daemon.Log();
}

// The session commits, on a detached HEAD, a commit that adds a gitlink to a repository it made
// (no ref names it: nothing is refused, its objects come back), goes back to main and commits a
// plain change there. main moves on the host (its new commit adds no gitlink), so the session's
// HEAD reflog comes back too, with `checkout: moving from <the gitlink commit> to main`. The
// person's `git checkout -` ("back to where I was") reads that line.
TEST(GitReview3AttackTest, TheHostsCheckoutDashNeverLandsOnAGitlinkTheSessionLeftInItsReflog) {
  git_attack::GitWriteSession git;
  auto& [daemon, ws, client, id] = git;
  ASSERT_NO_FATAL_FAILURE(MakeRepository(ws));
  TempDir host;
  ASSERT_EQ(::chmod(host.path().c_str(), 0777), 0);
  const fs::path marker = host.path() / "ran";
  ASSERT_NO_FATAL_FAILURE(git.OpenSession());
  const std::string work =
      std::string(kIdentity) +
      "git checkout -q --detach && git init -q sub && echo x > sub/x && git -C sub add x && "
      "git -C sub commit -qm s && git add sub 2>/dev/null && git commit -qm with-sub && "
      "git checkout -q main 2>/dev/null && git -C sub config core.fsmonitor 'touch " +
      marker.string() +
      "; false' && echo d > d.txt && git add d.txt && git commit -qm plain && echo committed";
  Observed did = RunInSession(client, id, "workspace-write", "head-reflog", work);
  std::cout << "  observed " << did.Show() << "\n";
  ASSERT_TRUE(did.Says("committed")) << did.Show();
  EXPECT_EQ(HostGit(ws, {"log", "-1", "--format=%s", "main"}).out, "plain\n") << daemon.Log();
  RunResult reflog = HostGit(ws, {"reflog", "-5"});
  std::cout << "  host reflog: " << reflog.out << reflog.err << "\n";
  fs::remove(marker);
  RunResult back = HostGit(ws, {"checkout", "-q", "-"});
  std::cout << "  host checkout -: " << back.exit_code << " " << back.err << "\n";
  RunResult status = HostGit(ws, {"status", "--short"});
  std::cout << "  host status: " << status.exit_code << " " << status.out << status.err << "\n";
  EXPECT_FALSE(fs::exists(marker))
      << "the host's `git checkout -` checked out the gitlink commit named in the session's HEAD "
         "reflog, and its `git status` ran the session's command\n"
      << daemon.Log();
}

}  // namespace
}  // namespace ptybox::testing

namespace ptybox::testing {
namespace {

using git_attack::HostGit;
using git_attack::kIdentity;
using git_attack::MakeRepository;
using git_attack::Slurp;

// The copy-back bounds refs by count (kGitMaxRefs, 100,000) but not its work per ref: each new
// branch naming a commit the host has costs a run of the host's `git log` (CommitAddsGitlink,
// a process of its own beneath a keeper) and a locked, fsynced write into the host's .git, plus
// its reflog. A background job creates the branches after the last send (one `git update-ref
// --stdin`, seconds), and `terminal_close`, `ptybox run`'s exit and the daemon's shutdown wait
// for the last copy-back. The person's repository is left with that many branches. Measured here
// (root daemon, 2 shared cores): 1,000 branches held the close 17 s, 3,000 held it 115 s (the
// work per ref grows with the host's ref count: `--not --all`), so 100,000 is hours.
TEST(GitReview3AttackTest, DISABLED_ManyBranchesDoNotHoldTheCloseForLong) {
  const char* env = std::getenv("REVIEW3_REFS");
  const int count = env ? std::atoi(env) : 3000;
  git_attack::GitWriteSession git;
  ASSERT_NO_FATAL_FAILURE(git.Open());
  auto& [daemon, ws, client, id] = git;
  const std::string work = "(seq " + std::to_string(count) +
                           " | sed 's|.*|create refs/heads/b& HEAD|' | git update-ref --stdin; "
                           "git for-each-ref refs/heads | wc -l > .escape/refs; touch "
                           ".escape/made) >/dev/null 2>&1 & echo started";
  Observed did = RunInSession(client, id, "workspace-write", "many-refs", work);
  ASSERT_TRUE(did.Says("started")) << did.Show();
  ASSERT_TRUE(git_attack::AwaitMade(ws, std::chrono::seconds(300))) << daemon.Log();
  std::ifstream refs(ws / ".escape" / "refs");
  std::string made;
  std::getline(refs, made);
  std::cout << "  branches made in the session: " << made << "\n";
  const auto [closed, seconds] = git_attack::TimedClose(client, id, std::chrono::seconds(3600));
  RunResult host = HostGit(ws, {"for-each-ref", "--count=100000", "refs/heads"});
  std::cout << "  host branches: " << std::count(host.out.begin(), host.out.end(), '\n') << "\n";
  EXPECT_TRUE(closed.contains("result")) << closed.dump();
  // As GitReview2AttackTest.InflatingObjectsDoNotHoldTheCloseForLong: a close without git work
  // is answered in well under a second; 10 s is ten times that and more.
  EXPECT_LT(seconds, 10) << count << " branches held the session's close for " << seconds << " s\n";
}

}  // namespace
}  // namespace ptybox::testing

namespace ptybox::testing {
namespace {

using git_attack::HostGit;
using git_attack::kIdentity;
using git_attack::MakeRepository;
using git_attack::Slurp;

// CommitAddsGitlink asks `git log --raw <tip> --not --all`; a tip that is a tree (a lightweight
// tag naming a tree, or an annotated tag of one) has no commits, so git lists nothing, exits 0,
// and the tag comes back. The session tags the tree of an index holding a gitlink to a repository
// it made; the person restores the agent's snapshot from that tag (`git restore --source=snap`),
// the gitlink lands in their index, and their `git status` runs the session's core.fsmonitor.
TEST(GitReview3AttackTest, ATagNamingATreeNeverBringsAGitlinkToTheHost) {
  git_attack::GitWriteSession git;
  auto& [daemon, ws, client, id] = git;
  ASSERT_NO_FATAL_FAILURE(MakeRepository(ws));
  TempDir host;
  ASSERT_EQ(::chmod(host.path().c_str(), 0777), 0);
  const fs::path marker = host.path() / "ran";
  ASSERT_NO_FATAL_FAILURE(git.OpenSession());
  const std::string work =
      std::string(kIdentity) +
      "git init -q sub && echo x > sub/x && git -C sub add x && git -C sub commit -qm s && "
      "git add sub 2>/dev/null; T=$(git write-tree) && git rm -qf --cached sub && "
      "git tag snap $T && git -C sub config core.fsmonitor 'touch " +
      marker.string() + "; false' && git cat-file -t snap && echo tagged";
  Observed did = RunInSession(client, id, "workspace-write", "tree-tag", work);
  std::cout << "  observed " << did.Show() << "\n";
  ASSERT_TRUE(did.Says("tagged")) << did.Show();
  RunResult type = HostGit(ws, {"cat-file", "-t", "snap"});
  std::cout << "  host cat-file -t snap: " << type.out << type.err << "\n";
  fs::remove(marker);
  RunResult restore = HostGit(ws, {"restore", "--source=snap", "--staged", "--worktree", "."});
  std::cout << "  host restore: " << restore.exit_code << " " << restore.err << "\n";
  RunResult status = HostGit(ws, {"status", "--short"});
  std::cout << "  host status: " << status.exit_code << " " << status.out << status.err << "\n";
  EXPECT_FALSE(fs::exists(marker))
      << "a tag naming a tree with a gitlink came back; the host's restore from it and `git "
         "status` ran the session's command\n"
      << daemon.Log();
}

}  // namespace
}  // namespace ptybox::testing

namespace ptybox::testing {
namespace {

using git_attack::HostGit;
using git_attack::kIdentity;
using git_attack::MakeRepository;
using git_attack::Slurp;

// The same for loose objects: each well-formed object is inflated, hashed, written into the
// host's .git and fsynced; their number is not bounded (docs/security.md says this "slows only
// that session's sends", but the last copy-back holds terminal_close, `ptybox run`'s exit and the
// daemon's shutdown). A background job writes small distinct blobs after the last send.
// Measured here (root daemon): 5,000 objects held the close 8 s, 20,000 held it 14 s (about
// 0.7 ms each): a million small blobs (a few GiB of the session's disk at most) is minutes.
TEST(GitReview3AttackTest, DISABLED_ManyLooseObjectsDoNotHoldTheCloseForLong) {
  const char* env = std::getenv("REVIEW3_OBJECTS");
  const int count = env ? std::atoi(env) : 20000;
  git_attack::GitWriteSession git;
  ASSERT_NO_FATAL_FAILURE(git.Open());
  auto& [daemon, ws, client, id] = git;
  const std::string work = "(mkdir -p .escape/o && for i in $(seq " + std::to_string(count) +
                           "); do echo $i > .escape/o/$i; done; ls -d $PWD/.escape/o/* | "
                           "git hash-object -w --stdin-paths | wc -l > .escape/objects; touch "
                           ".escape/made) >/dev/null 2>&1 & echo started";
  Observed did = RunInSession(client, id, "workspace-write", "many-objects", work);
  ASSERT_TRUE(did.Says("started")) << did.Show();
  ASSERT_TRUE(git_attack::AwaitMade(ws, std::chrono::seconds(300))) << daemon.Log();
  std::ifstream objects(ws / ".escape" / "objects");
  std::string made;
  std::getline(objects, made);
  std::cout << "  objects written in the session: " << made << "\n";
  const auto [closed, seconds] = git_attack::TimedClose(client, id, std::chrono::seconds(3600));
  EXPECT_TRUE(closed.contains("result")) << closed.dump();
  EXPECT_LT(seconds, 10) << count << " loose objects held the session's close for " << seconds
                         << " s\n";
}

}  // namespace
}  // namespace ptybox::testing

namespace ptybox::testing {
namespace {

using git_attack::HostGit;
using git_attack::kIdentity;
using git_attack::MakeRepository;
using git_attack::Slurp;

// The same gap in the other direction: nothing checks that a branch names a commit. `git log
// <blob>` lists nothing and exits 0, so the session's `refs/heads/main` written to name a blob
// (by hand: git's own update-ref refuses a non-commit on a branch) comes back, and the person's
// repository has no main: `git log`, `commit` and `status` fail until they find the old id in the
// reflog and reset the branch by hand.
TEST(GitReview3AttackTest, ABranchNeverComesBackNamingABlob) {
  git_attack::GitWriteSession git;
  auto& [daemon, ws, client, id] = git;
  ASSERT_NO_FATAL_FAILURE(MakeRepository(ws));
  const std::string head = HostGit(ws, {"rev-parse", "HEAD"}).out;
  ASSERT_NO_FATAL_FAILURE(git.OpenSession());
  const std::string work =
      "B=$(echo junk | git hash-object -w --stdin) && echo $B > .git/refs/heads/main && "
      "git cat-file -t main && echo planted";
  Observed did = RunInSession(client, id, "workspace-write", "blob-branch", work);
  std::cout << "  observed " << did.Show() << "\n";
  ASSERT_TRUE(did.Says("planted")) << did.Show();
  RunResult type = HostGit(ws, {"cat-file", "-t", "main"});
  RunResult log = HostGit(ws, {"log", "-1", "--format=%H"});
  std::cout << "  host cat-file -t main: " << type.out << "  host log: " << log.exit_code << " "
            << log.out << log.err << "\n";
  EXPECT_EQ(type.out, "commit\n") << "the host's main names a blob the session wrote\n"
                                  << daemon.Log();
  EXPECT_EQ(log.out, head);
}

}  // namespace
}  // namespace ptybox::testing

namespace ptybox::testing {
namespace {

using git_attack::HostGit;
using git_attack::kIdentity;
using git_attack::MakeRepository;
using git_attack::Slurp;

// Not the copy-back at all: the person's repository has a submodule that is not checked out (a
// clone without --recurse-submodules: a gitlink in the index and HEAD, an empty directory). The
// session makes a repository in that directory (after the launch's walk: it is the session's own)
// and sets its core.fsmonitor. The host's index already holds the gitlink, so nothing is refused;
// the person's `git status` runs `git status` inside every gitlink whose directory has a `.git`,
// reads the session's config and runs its command as the person. Closed: every submodule
// directory without a .git is protected as a whole at launch (also without PTYBOX_GIT_WRITE:
// MountWallsTest.AnUnpopulatedSubmoduleNeverBecomesASessionsRepository).
TEST(GitReview3AttackTest, AnUnpopulatedSubmoduleNeverBecomesASessionRepository) {
  git_attack::GitWriteSession git;
  auto& [daemon, ws, client, id] = git;
  ASSERT_NO_FATAL_FAILURE(MakeRepository(ws));
  ASSERT_EQ(HostGit(ws, {"update-index", "--add", "--cacheinfo",
                         "160000,1111111111111111111111111111111111111111,sub"})
                .exit_code,
            0);
  ASSERT_EQ(HostGit(ws, {"commit", "-q", "-m", "with a submodule"}).exit_code, 0);
  fs::create_directories(ws / "sub");
  TempDir host;
  ASSERT_EQ(::chmod(host.path().c_str(), 0777), 0);
  const fs::path marker = host.path() / "ran";
  ASSERT_NO_FATAL_FAILURE(git.OpenSession());
  const std::string work = std::string(kIdentity) +
                           "git init -q sub && git -C sub config core.fsmonitor 'touch " +
                           marker.string() + "; false' && echo made";
  Observed did = RunInSession(client, id, "workspace-write", "unpopulated-submodule", work);
  std::cout << "  observed " << did.Show() << "\n";
  // The submodule's directory is protected as a whole (docs/security.md, "Protected paths"):
  // the repository is never made.
  EXPECT_FALSE(did.Says("made")) << did.Show();
  fs::remove(marker);
  RunResult status = HostGit(ws, {"status", "--short"});
  std::cout << "  host status: " << status.exit_code << " " << status.out << status.err << "\n";
  EXPECT_FALSE(fs::exists(marker))
      << "the host's `git status` ran a command from the config of a repository the session made "
         "in the directory of a submodule that was not checked out\n"
      << daemon.Log();
}

}  // namespace
}  // namespace ptybox::testing
