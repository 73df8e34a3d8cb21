// Thirteenth outside review of "Git for agents" (docs/security.md; review 20 of the project),
// attacked from a workspace-write session with the person's own git working beside it. Closed
// in sandbox/git_private.cc (HostIndexLocks, LockFollowingIndex, WriteHostIndex):
//  (a) The branch the person has checked out, where the session works on it, moved after a
//      check that the host's index still held what the session last saw, and the index was
//      written after the ref. A person's `git add` between the two writes left the branch
//      moved and the index behind: the session's commit shown undone and staged, for the
//      person's next commit to revert. Now the index.lock is held from the check until both are
//      written. Likewise a HEAD moving with a new index.
//  (b) The index copy-back never looked at the host's HEAD: after the person's
//      `git checkout -b other`, the session's index (its commit's tree on main) landed under
//      `other`, the session's commit shown staged there.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <thread>

#include "tests/escape/escape_support.h"
#include "tests/escape/git_attack_support.h"

namespace ptybox::testing {
namespace {

using git_attack::HostGit;
using git_attack::kIdentity;
using git_attack::Line;
using git_attack::MakeRepository;

namespace fs = std::filesystem;

// (a) The session commits on main, which the person has checked out. The moment the host's main
// moves, the person stages b.txt. Whatever the order their `git add` meets, the host's index
// never lags the moved branch: nothing but b.txt is ever staged against HEAD.
TEST(GitReview13AttackTest, APersonsAddNeverFindsTheBranchMovedAndTheIndexBehind) {
  git_attack::GitWriteSession git;
  ASSERT_NO_FATAL_FAILURE(git.Open());
  auto& [daemon, ws, client, id] = git;
  const fs::path loose_main = ws / ".git" / "refs" / "heads" / "main";
  const std::string before = git_attack::Slurp(loose_main);
  ASSERT_FALSE(before.empty());
  std::ofstream(ws / "b.txt") << "the person's\n";
  std::atomic<bool> stop{false};
  int first_add = -1;
  std::string first_err;
  std::thread person([&] {
    while (!stop.load() && git_attack::Slurp(loose_main) == before) {
      std::this_thread::yield();
    }
    if (stop.load()) return;
    const auto added = HostGit(ws, {"add", "b.txt"});
    first_add = added.exit_code;
    first_err = added.err;
  });
  Observed committed = RunInSession(client, id, "workspace-write", "commit",
                                    std::string(kIdentity) +
                                        "for i in $(seq 1 64); do echo $i > f$i.txt; done; "
                                        "echo agent >> a.txt && git add . ':!b.txt' && "
                                        "git commit -qm agent && echo committed");
  stop = true;
  person.join();
  ASSERT_TRUE(committed.Says("committed")) << committed.Show();
  // A refused add (the copy-back held index.lock) is the person's to run again, as after any
  // git of theirs that held it.
  if (first_add != 0) {
    ASSERT_EQ(HostGit(ws, {"add", "b.txt"}).exit_code, 0);
  }
  const std::string staged = HostGit(ws, {"diff", "--cached", "--name-only", "HEAD"}).out;
  std::cout << "  the person's add as main moved: exit " << first_add << " " << first_err
            << "; staged against HEAD now: [" << staged << "]\n";
  EXPECT_EQ(HostGit(ws, {"log", "-1", "--format=%s", "main"}).out, "agent\n") << daemon.Log();
  EXPECT_EQ(staged, "b.txt\n") << "the host's main moved and its index stayed behind: the "
                                  "session's commit shows undone and staged\n"
                               << daemon.Log();
}

// (b) The person switches to a new branch `other` while the session works on main. The
// session's commit comes back to main; its index never lands under `other`.
TEST(GitReview13AttackTest, TheSessionsIndexNeverLandsOnABranchThePersonCheckedOut) {
  git_attack::GitWriteSession git;
  ASSERT_NO_FATAL_FAILURE(git.Open());
  auto& [daemon, ws, client, id] = git;
  ASSERT_EQ(HostGit(ws, {"checkout", "-q", "-b", "other"}).exit_code, 0);
  Observed committed = RunInSession(
      client, id, "workspace-write", "commit",
      std::string(kIdentity) + "echo agent >> a.txt && git commit -qam agent && echo committed");
  ASSERT_TRUE(committed.Says("committed")) << committed.Show();
  EXPECT_EQ(HostGit(ws, {"log", "-1", "--format=%s", "main"}).out, "agent\n") << daemon.Log();
  EXPECT_EQ(Line(HostGit(ws, {"rev-parse", "--abbrev-ref", "HEAD"}).out), "other");
  EXPECT_EQ(HostGit(ws, {"diff", "--cached", "--name-only"}).out, "")
      << "the session's index landed under the person's `other`: its commit shows staged there\n"
      << daemon.Log();
}

// (a), HEAD's side: the person staged b.txt; the session makes and commits on a branch of its
// own. HEAD, moved alone, left the person's index under `feature`, where their next commit
// deleted the session's c.txt. HEAD waits; the branch comes back.
TEST(GitReview13AttackTest, HeadNeverMovesOverTheIndexThePersonStagedIn) {
  git_attack::GitWriteSession git;
  ASSERT_NO_FATAL_FAILURE(git.Open());
  auto& [daemon, ws, client, id] = git;
  std::ofstream(ws / "b.txt") << "the person's\n";
  ASSERT_EQ(HostGit(ws, {"add", "b.txt"}).exit_code, 0);
  Observed committed =
      RunInSession(client, id, "workspace-write", "feature",
                   std::string(kIdentity) +
                       "git checkout -q -b feature && echo c > c.txt && git add c.txt && "
                       "git commit -qm feature && echo committed");
  ASSERT_TRUE(committed.Says("committed")) << committed.Show();
  const std::string head = Line(HostGit(ws, {"rev-parse", "--abbrev-ref", "HEAD"}).out);
  const std::string staged = HostGit(ws, {"diff", "--cached", "--name-only", "HEAD"}).out;
  std::cout << "  host HEAD " << head << ", staged against it: [" << staged << "]\n";
  EXPECT_EQ(HostGit(ws, {"log", "-1", "--format=%s", "feature"}).out, "feature\n") << daemon.Log();
  EXPECT_EQ(staged, "b.txt\n") << "the host's HEAD is " << head
                               << " and its index is not what the person staged there\n"
                               << daemon.Log();
}

}  // namespace
}  // namespace ptybox::testing
