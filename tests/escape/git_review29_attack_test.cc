// Twenty-ninth outside review of "Git for agents" (docs/security.md; review 36 of the project),
// on 900ffe1. Each test asserts a goal and fails while the hole is open:
//  (a) the person's `git stash drop` is undone by the session's own `git stash drop` (goal 3:
//      "the stash list wrong after drops/pops on either side"; the person's history stays
//      theirs). The session stashes twice (S1, S2: both come back, the host's log "0 -> S1",
//      "S1 -> S2"). The person drops their stash@{1} (S1): the host's log is "0 -> S2". The
//      session then runs `git stash drop` (its stash@{0}, S2): its refs/stash is S1, its log
//      rewritten to "0 -> S1". StashLogHolds(S1) is false (the person dropped S1), so the
//      copy-back writes the host's refs/stash S2 -> S1 (its CAS passes), CopyBackReflog refuses
//      the rewritten log, and EnsureStashTop (900ffe1) then appends "S2 -> S1" to the host's
//      stash log. The person's list is now S1, S2: the stash they dropped is back, at
//      stash@{0}, and their next `git stash pop` applies it (and the session's drop of S2 did
//      not stand either). Before 900ffe1 refs/stash named S1 with a log of S2 only (review 35).
//      Fix direction: refs/stash moves on the host only forward, to a stash the session made
//      since the snapshot (a value one of its taken lines names); a session's drop that exposes
//      an older stash is, like StashLogHolds' case, left alone (the host keeps its top), and
//      EnsureStashTop never appends a line for a stash the host's log once had and lost.
//  (b) the same with the person's `git stash pop stash@{1}` in place of the drop: S1, already
//      applied to their work tree and dropped, is back at their stash@{0}; their next
//      `git stash pop` applies it a second time.
#include <gtest/gtest.h>

#include <filesystem>
#include <iostream>
#include <string>

#include "tests/escape/escape_support.h"
#include "tests/escape/git_attack_support.h"

namespace ptybox::testing {
namespace {

namespace fs = std::filesystem;

using git_attack::Rev;
using git_attack::StashList;

// (a) Two stashes; the person drops stash@{1}; the session drops stash@{0}.
TEST(GitReview29AttackTest, APersonsStashDropStandsAfterTheSessionsDrop) {
  git_attack::GitWriteSession git;
  auto& [daemon, ws, client, id] = git;
  ASSERT_NO_FATAL_FAILURE(git.Open());
  Observed two = RunInSession(client, id, "workspace-write", "two",
                              std::string(git_attack::kIdentity) +
                                  "echo s1 >> a.txt && git stash -q && echo s2 >> a.txt && "
                                  "git stash -q && echo two-$(git stash list | wc -l)");
  ASSERT_TRUE(two.Says("two-2")) << two.Show();
  Observed settle = RunInSession(client, id, "workspace-write", "settle", "echo settle-$((40+2))");
  ASSERT_TRUE(settle.Says("settle-42")) << settle.Show();
  const std::string s2 = Rev(ws, "refs/stash");
  const std::string s1 = Rev(ws, "refs/stash@{1}");
  ASSERT_FALSE(s1.empty()) << "the session's two stashes did not come back\n"
                           << StashList(ws) << daemon.Log();
  std::cout << "  the session's two stashes came back (S1 " << s1 << ", S2 " << s2
            << "); the person's list:\n"
            << StashList(ws);
  // The person drops their older stash, S1.
  ASSERT_EQ(git_attack::HostGit(ws, {"stash", "drop", "-q", "stash@{1}"}).exit_code, 0);
  ASSERT_EQ(StashList(ws).find(s1), std::string::npos);
  std::cout << "  the person dropped stash@{1} (S1); their list:\n" << StashList(ws);
  // The session drops its top, S2 (an ordinary `git stash drop`).
  Observed drop = RunInSession(client, id, "workspace-write", "drop",
                               std::string(git_attack::kIdentity) +
                                   "git stash drop -q && echo dropped-$(git stash list | wc -l)");
  ASSERT_TRUE(drop.Says("dropped-1")) << drop.Show();
  for (int i = 0; i < 2; ++i) {
    Observed again = RunInSession(client, id, "workspace-write", "settle", "echo settle-$((40+2))");
    ASSERT_TRUE(again.Says("settle-42")) << again.Show();
  }
  const std::string ref = Rev(ws, "refs/stash");
  const std::string top = Rev(ws, "refs/stash@{0}");
  const std::string list = StashList(ws);
  std::cout << "  after the session's `git stash drop`: the host's refs/stash " << ref
            << ", stash@{0} " << top << ", the person's list:\n"
            << list;
  EXPECT_EQ(list.find(s1), std::string::npos)
      << "the stash the person dropped (S1 " << s1 << ") is back in their stash list\n"
      << daemon.Log();
  EXPECT_NE(ref, s1) << "the host's refs/stash moved back to S1, the stash the person dropped";
  EXPECT_EQ(ref, top) << "refs/stash and stash@{0} disagree";
  // What the person's next `git stash pop` applies.
  sandbox::testing::RunResult show = git_attack::HostGit(ws, {"stash", "show", "-p"});
  std::cout << "  the person's `git stash show -p` (what their next pop applies):\n" << show.out;
}

// (b) The same with the person's `git stash pop stash@{1}`: S1 is applied to their tree, dropped,
// and comes back at their stash@{0}.
TEST(GitReview29AttackTest, AStashThePersonPoppedIsNotBackOnTop) {
  git_attack::GitWriteSession git;
  auto& [daemon, ws, client, id] = git;
  ASSERT_NO_FATAL_FAILURE(git.Open());
  Observed two = RunInSession(client, id, "workspace-write", "two",
                              std::string(git_attack::kIdentity) +
                                  "echo s1 >> a.txt && git stash -q && echo s2 >> a.txt && "
                                  "git stash -q && echo two-$(git stash list | wc -l)");
  ASSERT_TRUE(two.Says("two-2")) << two.Show();
  Observed settle = RunInSession(client, id, "workspace-write", "settle", "echo settle-$((40+2))");
  ASSERT_TRUE(settle.Says("settle-42")) << settle.Show();
  const std::string s2 = Rev(ws, "refs/stash");
  const std::string s1 = Rev(ws, "refs/stash@{1}");
  ASSERT_FALSE(s1.empty()) << "the session's two stashes did not come back\n"
                           << StashList(ws) << daemon.Log();
  std::cout << "  the session's two stashes came back (S1 " << s1 << ", S2 " << s2
            << "); the person's list:\n"
            << StashList(ws);
  // The person drops their older stash, S1.
  ASSERT_EQ(git_attack::HostGit(ws, {"stash", "pop", "-q", "stash@{1}"}).exit_code, 0);
  ASSERT_EQ(StashList(ws).find(s1), std::string::npos);
  std::cout << "  the person popped stash@{1} (S1: applied, dropped); their list:\n"
            << StashList(ws);
  // The session drops its top, S2 (an ordinary `git stash drop`).
  Observed drop = RunInSession(client, id, "workspace-write", "drop",
                               std::string(git_attack::kIdentity) +
                                   "git stash drop -q && echo dropped-$(git stash list | wc -l)");
  ASSERT_TRUE(drop.Says("dropped-1")) << drop.Show();
  for (int i = 0; i < 2; ++i) {
    Observed again = RunInSession(client, id, "workspace-write", "settle", "echo settle-$((40+2))");
    ASSERT_TRUE(again.Says("settle-42")) << again.Show();
  }
  const std::string ref = Rev(ws, "refs/stash");
  const std::string top = Rev(ws, "refs/stash@{0}");
  const std::string list = StashList(ws);
  std::cout << "  after the session's `git stash drop`: the host's refs/stash " << ref
            << ", stash@{0} " << top << ", the person's list:\n"
            << list;
  EXPECT_EQ(list.find(s1), std::string::npos)
      << "the stash the person popped (S1 " << s1 << ") is back in their stash list\n"
      << daemon.Log();
  EXPECT_NE(ref, s1) << "the host's refs/stash moved back to S1, the stash the person dropped";
  EXPECT_EQ(ref, top) << "refs/stash and stash@{0} disagree";
  // What the person's next `git stash pop` applies.
  sandbox::testing::RunResult show = git_attack::HostGit(ws, {"stash", "show", "-p"});
  std::cout << "  the person's `git stash show -p` (what their next pop applies):\n" << show.out;
}

}  // namespace
}  // namespace ptybox::testing
