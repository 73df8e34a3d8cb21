// Twenty-eighth outside review of "Git for agents" (docs/security.md; review 35 of the project),
// on e779a84. Each test asserts a goal and fails while the hole is open:
//  (a) refs/stash comes back while its log line is refused, after an ordinary interleaving of the
//      person's `git stash drop` and the session's (goal 3: "the stash list wrong after
//      drops/pops on either side"; review 30's design: refs/stash, stash@{0} and the list agree).
//      The session stashes twice (S1, S2: both come back, the host's log "0 -> S1", "S1 -> S2").
//      The person drops their stash@{1} (S1): git rewrites the host's log to "0 -> S2". The
//      session then runs `git stash drop` (its stash@{0}, S2; its log rewritten to "0 -> S1", its
//      refs/stash S1) and `git stash` (S3, "S1 -> S3"). The copy-back writes refs/stash S2 -> S3
//      (the host's ref holds the snapshot's S2: the CAS passes), then CopyBackReflog finds another
//      file that keeps the first line taken ("0 -> S1", ReflogTaken::first) but not the last,
//      asks AfterLastStashTaken, which finds no line naming a stash the host's log still has (S1
//      is gone from it, S2 from the session's) and refuses the whole log ("made anew without the
//      lines already copied"). The host is left with refs/stash = S3 and a stash log whose only
//      entry is S2: the person's `git stash list` does not show S3, their stash@{0} and
//      `git stash pop` name S2 while refs/stash names S3, and that pop (the log then empty)
//      deletes refs/stash: the session's stash S3 is lost from every ref and list, to be pruned.
//      Fix direction: decide the log before the ref: for refs/stash, write the ref only when its
//      line(s) will land (or append the line continuing the host's log end, "S2 -> S3", when the
//      session's log was rewritten); at least never leave refs/stash naming a stash its log lacks.
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

// (a) Two stashes; the person drops stash@{1}; the session drops stash@{0} and stashes again.
TEST(GitReview28AttackTest, AStashRefComesBackOnlyWithItsLogLine) {
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
  ASSERT_FALSE(Rev(ws, "refs/stash@{1}").empty()) << "the session's two stashes did not come back\n"
                                                  << StashList(ws) << daemon.Log();
  std::cout << "  the session's two stashes came back; the person's list:\n" << StashList(ws);
  // The person drops their older stash.
  ASSERT_EQ(git_attack::HostGit(ws, {"stash", "drop", "-q", "stash@{1}"}).exit_code, 0);
  Observed three = RunInSession(client, id, "workspace-write", "three",
                                std::string(git_attack::kIdentity) +
                                    "git stash drop -q && echo s3 >> a.txt && git stash -q && "
                                    "git rev-parse refs/stash && echo three-$(git stash list | wc "
                                    "-l)");
  ASSERT_TRUE(three.Says("three-2")) << three.Show();
  for (int i = 0; i < 2; ++i) {
    Observed again = RunInSession(client, id, "workspace-write", "settle", "echo settle-$((40+2))");
    ASSERT_TRUE(again.Says("settle-42")) << again.Show();
  }
  const std::string ref = Rev(ws, "refs/stash");
  const std::string top = Rev(ws, "refs/stash@{0}");
  const std::string list = StashList(ws);
  std::cout << "  after the person's `git stash drop stash@{1}` and the session's `git stash drop` "
               "and `git stash`: the host's refs/stash "
            << ref << " (was " << s2 << "), stash@{0} " << top << ", the person's list:\n"
            << list;
  const bool listed = !ref.empty() && list.find(ref) != std::string::npos;
  EXPECT_EQ(ref, top) << "the host's refs/stash names a stash its stash@{0} and `git stash pop` "
                         "do not\n"
                      << daemon.Log();
  EXPECT_TRUE(listed) << "refs/stash names " << ref << ", absent from the person's stash list";
  // What the person's next `git stash pop` does to it.
  sandbox::testing::RunResult pop = git_attack::HostGit(ws, {"stash", "pop", "-q"});
  std::cout << "  the person's `git stash pop` exited " << pop.exit_code << "; refs/stash now '"
            << Rev(ws, "refs/stash") << "', list:\n"
            << StashList(ws);
  if (!ref.empty() && ref != s2) {
    EXPECT_FALSE(Rev(ws, "refs/stash").empty() && StashList(ws).find(ref) == std::string::npos)
        << "the session's stash " << ref << " is in no ref nor list of the person's";
  }
}

}  // namespace
}  // namespace ptybox::testing
