// Twenty-third outside review of "Git for agents" (docs/security.md; review 30 of the project), on
// 0dbf841. Each test asserts a goal and fails while the hole is open:
//  (a) A branch's reflog lines past the first kReflogLinesChecked (32) of one copy-back never come
//      back unless the branch moves again (goal 3: a log line lost on the host). CopyBackReflog
//      runs only for the refs CopyBackRefs wrote in this copy-back (`moved`); "the rest wait for
//      the next one" holds only while the branch keeps moving. An ordinary session that makes 40
//      commits on `topic` in one send (a loop of commits, `git am` of a series) and then works
//      elsewhere leaves the host's `topic` at its 40th commit with a reflog of 32 lines (the
//      branch's making and 31 commits): `topic@{0}` is the 31st commit, not the branch, `git reset
//      --hard topic@{1}` goes to the 30th, not the 39th, and the 9 lines never come back (nor at
//      close). The same for lines left by a tip check's `kLater` (the check's time spent).
//  (b) The session's `git stash drop` (or a `git stash pop` with more than one stash) after its
//      stashes came back: git rewrites logs/refs/stash into a new file without the dropped line
//      and moves refs/stash back to the older stash. Since 0dbf841 the new file is "made anew"
//      (its first line has a null old id, the session's first stash) and lacks the last line
//      taken, so CopyBackReflog reads it from its start and appends the older stash's line again
//      (goal 3: a log line duplicated on the host): the person's `git stash list` shows three
//      stashes, the dropped one among them and the kept one twice, where the session has one.
//      Before 0dbf841 the dropped line stayed (two entries, `stash@{0}` the dropped stash while
//      refs/stash names the kept one).
//  Closed (the nineteenth round): (a) the refs whose logs had lines left are read again at every
//  copy-back (GitSnapshot::reflog_pending); (b) refs/stash never moves back to an older entry of
//  the host's stash log (the person keeps a stash the session drops), and a stash log made anew
//  that keeps the first line taken is not read from its start; the test asserts that design.
//  Fix direction for (a): read the reflog of every ref whose session log has lines not yet taken
//  (keep the names with lines waiting in the snapshot, and try them at each copy-back and at
//  close), not only the refs moved now. For (b): a log made anew is an append only when the part
//  taken stands in it as a prefix; otherwise (the stash's drop, `reflog delete`, `expire`) either
//  rewrite the host's log of a session-made ref under its lock to the lines the session keeps
//  (each checked), or take nothing of it, never its start again.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <iostream>
#include <sstream>
#include <string>

#include "tests/escape/escape_support.h"
#include "tests/escape/git_attack_support.h"

namespace ptybox::testing {
namespace {

namespace fs = std::filesystem;

// (a) Forty commits on a branch in one send, then the session works elsewhere.
TEST(GitReview23AttackTest, EveryReflogLineOfABranchComesBackEvenWhenItStopsMoving) {
  git_attack::GitWriteSession git;
  auto& [daemon, ws, client, id] = git;
  ASSERT_NO_FATAL_FAILURE(git.Open());
  Observed made = RunInSession(
      client, id, "workspace-write", "topic",
      std::string(git_attack::kIdentity) +
          "git checkout -q -b topic && for i in $(seq 1 40); do echo c$i >> a.txt && "
          "git commit -qam c$i; done && git checkout -q main && echo made-$(git reflog show topic "
          "| wc -l)");
  ASSERT_TRUE(made.Says("made-41")) << made.Show();
  // Three more sends that touch nothing of topic (each a copy-back), then the close's.
  for (int i = 0; i < 3; ++i) {
    Observed settle =
        RunInSession(client, id, "workspace-write", "settle", "echo settle-$((40+2))");
    ASSERT_TRUE(settle.Says("settle-42")) << settle.Show();
  }
  (void)client.Call("terminal_close", Json{{"sessionId", id}}, std::chrono::seconds(120));
  const std::string tip = git_attack::Line(git_attack::HostGit(ws, {"rev-parse", "topic"}).out);
  const std::string subject =
      git_attack::Line(git_attack::HostGit(ws, {"log", "-1", "--format=%s", "topic"}).out);
  ASSERT_EQ(subject, "c40") << "the session's branch did not come back\n" << daemon.Log();
  const std::string newest = git_attack::Line(
      git_attack::HostGit(ws, {"log", "-g", "-1", "--format=%H %s", "refs/heads/topic"}).out);
  const std::string previous =
      git_attack::Line(git_attack::HostGit(ws, {"log", "-1", "--format=%s", "topic@{1}"}).out);
  const size_t lines =
      git_attack::CountLines(git_attack::HostGit(ws, {"reflog", "show", "refs/heads/topic"}).out);
  std::cout << "  the host's topic: " << tip << " (\"" << subject << "\"); its reflog holds "
            << lines << " lines (the session's 41); newest entry: " << newest << "; topic@{1}: \""
            << previous << "\"\n";
  EXPECT_EQ(lines, 41u) << "the session's reflog lines past the 32nd of one copy-back never came "
                           "back: CopyBackReflog runs only for refs moved in that copy-back";
  EXPECT_EQ(newest.substr(0, tip.size()), tip)
      << "the host's topic@{0} is not topic: its reflog stops short of the branch";
  EXPECT_EQ(previous, "c39") << "`git reset --hard topic@{1}` goes elsewhere than the value "
                                "before";
}

// (b) Two stashes come back, then the session drops the newest.
// What holds since: the person keeps a stash the session drops (refs/stash never moves back to an
// older entry of the host's stash log), so the host's refs/stash, its stash@{0} and its list agree,
// and no line comes twice.
TEST(GitReview23AttackTest, ADroppedStashStaysThePersonsWholeAndNoLineComesTwice) {
  git_attack::GitWriteSession git;
  auto& [daemon, ws, client, id] = git;
  ASSERT_NO_FATAL_FAILURE(git.Open());
  for (const char* n : {"1", "2"}) {
    Observed stashed = RunInSession(client, id, "workspace-write", "stash",
                                    std::string(git_attack::kIdentity) + "echo s" + n +
                                        " >> a.txt && git stash -q && echo stashed-" + n);
    ASSERT_TRUE(stashed.Says(std::string("stashed-") + n)) << stashed.Show();
    Observed settle =
        RunInSession(client, id, "workspace-write", "settle", "echo settle-$((40+2))");
    ASSERT_TRUE(settle.Says("settle-42")) << settle.Show();
  }
  const std::string before = git_attack::HostGit(ws, {"stash", "list", "--format=%H %gs"}).out;
  std::cout << "  the host's stash list before the drop:\n" << before;
  ASSERT_EQ(git_attack::CountLines(before), 2u) << "the session's stashes did not come back\n"
                                                << daemon.Log();
  const std::string newest =
      git_attack::Line(git_attack::HostGit(ws, {"rev-parse", "stash@{0}"}).out);
  Observed dropped =
      RunInSession(client, id, "workspace-write", "drop",
                   std::string(git_attack::kIdentity) +
                       "git stash drop -q && echo dropped-$(git stash list | wc -l)");
  ASSERT_TRUE(dropped.Says("dropped-1")) << dropped.Show();
  for (int i = 0; i < 2; ++i) {
    Observed settle =
        RunInSession(client, id, "workspace-write", "settle", "echo settle-$((40+2))");
    ASSERT_TRUE(settle.Says("settle-42")) << settle.Show();
  }
  const std::string ref =
      git_attack::Line(git_attack::HostGit(ws, {"rev-parse", "refs/stash"}).out);
  const std::string after = git_attack::HostGit(ws, {"stash", "list", "--format=%H %gs"}).out;
  std::cout << "  the host's refs/stash: " << ref << " (the stash the session dropped " << newest
            << "); its stash list after the session's drop:\n"
            << after;
  EXPECT_EQ(ref, newest) << "refs/stash moved back under the person's stash log\n" << daemon.Log();
  EXPECT_EQ(after, before)
      << "the person's `git stash list` changed: a line came twice (the log made anew begins with "
         "a null old id, so CopyBackReflog read it from its start) or the list lost its newest";
  EXPECT_EQ(git_attack::Line(after).substr(0, ref.size()), ref)
      << "the person's stash@{0} is not refs/stash";
}

}  // namespace
}  // namespace ptybox::testing
