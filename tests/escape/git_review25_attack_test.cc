// Twenty-fifth outside review of "Git for agents" (docs/security.md; review 32 of the project), on
// c183f06. Each test asserts a goal and fails while the hole is open:
//  (a) Waiting reflog lines (GitSnapshot::reflog_pending) pass review 31's check on a stale memo
//      (goal 3: the person's history is not theirs). The check is only that the host's ref holds
//      the snapshot's value, never that the host's log still ends where the copy-back left it. The
//      session makes 40 commits on `topic` in one send (32 of 41 lines come back, 9 wait). The
//      person moves topic away and back (`git branch -f topic main`, then `git branch -f topic
//      topic@{1}` to undo it): their git appends "c40 -> main" and "main -> c40". At the next
//      send CopyBackReflog sees topic at c40 again and appends the 9 waiting lines (c31 -> c32 ..
//      c39 -> c40) after the person's: `topic@{1}` is c39, not main, and the person's two entries
//      are buried under lines older than them (out of order in time).
//  (b) A move of the session's the copy-back refuses still has its log line appended (goal 3:
//      the host's `topic@{0}` names a value topic never took on the host). After the 40 commits
//      the person checks topic out on the host; the session (on main) runs `git branch -f topic
//      main`. HeldMoveRefusal leaves the host's topic at c40 (a worktree of the host holds it), but
//      the log is still pending, the host's topic still holds the snapshot's c40, so the waiting
//      lines are appended with the session's "c40 -> main" as the newest: the host's `topic@{0}`
//      is main while topic (the person's checked-out branch) is c40: the log names a value the
//      branch never held on the host, and the person's `git reset --hard topic@{0}` (or
//      `git rebase --fork-point`, `git reflog` reading) takes the session's refused move for
//      theirs.
//  Fix direction: keep with the snapshot what the host's log held after the copy-back's last
//  append (its file key and size, or its last line) and append waiting lines only while the
//  host's log, under <ref>.lock, is still exactly that; and append only the session's lines up to
//  the one whose new value is what the host's ref holds (never lines of a move that did not come
//  back), dropping the rest.
#include <gtest/gtest.h>

#include <filesystem>
#include <iostream>
#include <string>

#include "tests/escape/escape_support.h"
#include "tests/escape/git_attack_support.h"

namespace ptybox::testing {
namespace {

namespace fs = std::filesystem;

using git_attack::MakeFortyCommitsOnTopic;
using git_attack::Rev;
using git_attack::Settle;

// (a) The person moves topic away and back; the session's waiting lines land after theirs.
TEST(GitReview25AttackTest, WaitingReflogLinesNeverLandAfterThePersonsMoveAwayAndBack) {
  git_attack::GitWriteSession git;
  auto& [daemon, ws, client, id] = git;
  ASSERT_NO_FATAL_FAILURE(git.Open());
  ASSERT_NO_FATAL_FAILURE(MakeFortyCommitsOnTopic(git));
  const std::string c40 = Rev(ws, "topic");
  const std::string main = Rev(ws, "main");
  ASSERT_EQ(git_attack::HostGit(ws, {"branch", "-f", "topic", "main"}).exit_code, 0);
  ASSERT_EQ(git_attack::HostGit(ws, {"branch", "-f", "topic", c40}).exit_code, 0);
  const std::string last_before = git_attack::Line(
      git_attack::HostGit(ws, {"log", "-g", "-1", "--format=%H %gs", "refs/heads/topic"}).out);
  ASSERT_EQ(Rev(ws, "topic@{1}"), main);
  ASSERT_NO_FATAL_FAILURE(Settle(git));
  const std::string tip = Rev(ws, "topic");
  const std::string previous = Rev(ws, "topic@{1}");
  const std::string before_that = Rev(ws, "topic@{2}");
  const std::string log =
      git_attack::HostGit(ws, {"log", "-g", "-4", "--format=%gd %H %gs", "refs/heads/topic"}).out;
  std::cout << "  the person moved topic " << c40 << " -> " << main << " -> " << c40
            << " (newest entry then: " << last_before
            << "); after the session's next sends topic is " << tip << ", topic@{1} " << previous
            << ", topic@{2} " << before_that << "; the newest entries:\n"
            << log;
  EXPECT_EQ(tip, c40) << daemon.Log();
  EXPECT_EQ(previous, main) << "topic@{1} is no longer where the person's undo came from: the "
                               "session's waiting reflog lines were appended after the person's "
                               "own moves (the ref held the snapshot's value again)";
  EXPECT_EQ(before_that, c40) << "the person's own move away from c40 is not topic@{2}";
}

// (b) The session's `git branch -f topic main` is refused (the person has topic checked out), yet
// its log line comes back: the host's topic@{0} names a value topic never took.
TEST(GitReview25AttackTest, ARefusedMoveOfTheSessionsNeverReachesTheHostsReflog) {
  git_attack::GitWriteSession git;
  auto& [daemon, ws, client, id] = git;
  ASSERT_NO_FATAL_FAILURE(git.Open());
  ASSERT_NO_FATAL_FAILURE(MakeFortyCommitsOnTopic(git));
  const std::string c40 = Rev(ws, "topic");
  const std::string main = Rev(ws, "main");
  ASSERT_EQ(git_attack::HostGit(ws, {"checkout", "-q", "topic"}).exit_code, 0);
  Observed moved = RunInSession(client, id, "workspace-write", "force",
                                "git branch -f topic main && echo forced-$((40+2))");
  ASSERT_TRUE(moved.Says("forced-42")) << moved.Show();
  ASSERT_NO_FATAL_FAILURE(Settle(git));
  const std::string tip = Rev(ws, "topic");
  const std::string newest = Rev(ws, "topic@{0}");
  const std::string log =
      git_attack::HostGit(ws, {"log", "-g", "-3", "--format=%gd %H %gs", "refs/heads/topic"}).out;
  std::cout << "  the person has topic (" << c40 << ") checked out; the session ran `git branch -f "
            << "topic main` (" << main << "); now the host's topic is " << tip << ", topic@{0} "
            << newest << "; the newest entries:\n"
            << log;
  EXPECT_EQ(tip, c40) << "the person's checked-out branch moved\n" << daemon.Log();
  EXPECT_EQ(newest, tip) << "the host's topic@{0} is not topic: the log line of a move the "
                            "copy-back refused was appended with the waiting ones";
}

}  // namespace
}  // namespace ptybox::testing
