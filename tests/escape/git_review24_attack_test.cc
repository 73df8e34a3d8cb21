// Twenty-fourth outside review of "Git for agents" (docs/security.md; review 31 of the project), on
// b38727c. Each test asserts a goal and fails while the hole is open:
//  (a) A pending reflog (GitSnapshot::reflog_pending, review 30's fix) is appended to the host's
//      log whatever the host's ref now holds (goal 3: the person's history is not theirs). The
//      session makes 40 commits on `topic` in one send: the copy-back moves the host's topic to
//      c40 and appends 32 of the 41 lines, 9 wait. The person then moves their topic (`git branch
//      -f topic main`, git appends "c40 -> main"). At the session's next send (it touches nothing
//      of topic) CopyBackReflog appends the 9 waiting lines after the person's: the host's
//      `topic@{0}` is c40 while topic is main, `topic@{1}` is c39 (not c40, where the person's
//      reset came from), and `git reset --hard topic@{1}` to undo their reset goes elsewhere.
//      CopyBackReflog checks nothing of the host's ref for a ref it did not move.
//  (b) The same when the person deletes the branch (`git branch -D topic`, which removes its log):
//      the waiting lines are appended with O_CREAT, so the host's .git gains
//      logs/refs/heads/topic for a ref that does not exist (goal 2: a file outside what the
//      copy-back of a moved ref writes; goal 3: the person's `git branch topic/x` then cannot make
//      its log directory, and a later `git branch topic` inherits the session's 9 lines).
//  Fix direction: append a log's lines only under the ref's lock, and only while the host's ref
//  holds the value of the last line appended before (the snapshot's value, which the session's
//  lines continue); a ref the host no longer has, or holds elsewhere, drops its pending lines
//  (and its reflog_taken) rather than appending them.
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

using git_attack::MakeFortyCommitsOnTopic;
using git_attack::Settle;

// (a) The person resets topic after it came back; the session's waiting lines follow theirs.
TEST(GitReview24AttackTest, WaitingReflogLinesNeverFollowThePersonsOwnMoveOfTheRef) {
  git_attack::GitWriteSession git;
  auto& [daemon, ws, client, id] = git;
  ASSERT_NO_FATAL_FAILURE(git.Open());
  ASSERT_NO_FATAL_FAILURE(MakeFortyCommitsOnTopic(git));
  const size_t before =
      git_attack::CountLines(git_attack::HostGit(ws, {"reflog", "show", "refs/heads/topic"}).out);
  const std::string c40 = git_attack::Line(git_attack::HostGit(ws, {"rev-parse", "topic"}).out);
  ASSERT_EQ(git_attack::HostGit(ws, {"branch", "-f", "topic", "main"}).exit_code, 0);
  const std::string mine = git_attack::Line(git_attack::HostGit(ws, {"rev-parse", "topic"}).out);
  ASSERT_NO_FATAL_FAILURE(Settle(git));
  const std::string tip = git_attack::Line(git_attack::HostGit(ws, {"rev-parse", "topic"}).out);
  const std::string newest =
      git_attack::Line(git_attack::HostGit(ws, {"rev-parse", "topic@{0}"}).out);
  const std::string previous =
      git_attack::Line(git_attack::HostGit(ws, {"rev-parse", "topic@{1}"}).out);
  const std::string log =
      git_attack::HostGit(ws, {"log", "-g", "-3", "--format=%gd %H %gs", "refs/heads/topic"}).out;
  std::cout << "  the host's topic log had " << before << " lines when the person reset topic ("
            << c40 << " -> " << mine << "); now topic is " << tip << ", topic@{0} " << newest
            << ", topic@{1} " << previous << "; its newest entries:\n"
            << log;
  EXPECT_EQ(tip, mine) << "the person's topic moved\n" << daemon.Log();
  EXPECT_EQ(newest, mine) << "the host's topic@{0} is not topic: the session's waiting reflog "
                             "lines were appended after the person's own move of the ref";
  EXPECT_EQ(previous, c40) << "`git reset --hard topic@{1}` no longer undoes the person's reset";
}

// (b) The person deletes topic (and its log); the session's waiting lines make the log again.
TEST(GitReview24AttackTest, WaitingReflogLinesNeverRemakeTheLogOfABranchThePersonDeleted) {
  git_attack::GitWriteSession git;
  auto& [daemon, ws, client, id] = git;
  ASSERT_NO_FATAL_FAILURE(git.Open());
  ASSERT_NO_FATAL_FAILURE(MakeFortyCommitsOnTopic(git));
  ASSERT_EQ(git_attack::HostGit(ws, {"branch", "-q", "-D", "topic"}).exit_code, 0);
  ASSERT_FALSE(fs::exists(ws / ".git/logs/refs/heads/topic"));
  ASSERT_NO_FATAL_FAILURE(Settle(git));
  const bool ref =
      git_attack::HostGit(ws, {"rev-parse", "-q", "--verify", "refs/heads/topic"}).exit_code == 0;
  const bool log = fs::exists(ws / ".git/logs/refs/heads/topic");
  const sandbox::testing::RunResult nested = git_attack::HostGit(ws, {"branch", "topic/x", "main"});
  std::cout << "  after the person's `git branch -D topic`: ref topic "
            << (ref ? "present" : "absent") << ", .git/logs/refs/heads/topic "
            << (log ? "present" : "absent") << " ("
            << (log ? git_attack::Slurp(ws / ".git/logs/refs/heads/topic").size() : 0)
            << " bytes); the person's `git branch topic/x main` exited " << nested.exit_code << ": "
            << nested.err << "\n";
  EXPECT_FALSE(ref) << "the deleted branch came back\n" << daemon.Log();
  EXPECT_FALSE(log) << "the copy-back made a log for a branch the host does not have: the "
                       "session's waiting lines were appended with O_CREAT";
  EXPECT_EQ(nested.exit_code, 0) << "the person's git cannot make a branch under topic/";
}

}  // namespace
}  // namespace ptybox::testing
