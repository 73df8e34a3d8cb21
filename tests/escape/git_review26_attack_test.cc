// Twenty-sixth outside review of "Git for agents" (docs/security.md; review 33 of the project), on
// 62b54c4. Each test asserts a goal and fails while the hole is open:
//  (a) The line of a move the copy-back refused still lands once the session moves the ref back
//      (goal 3: the host's log names a value the branch never held on the host; review 25 (b)
//      again, through review 32's run rule). The session makes 40 commits on `topic` (9 log lines
//      wait, the log is pending). The person checks topic out on the host. The session runs
//      `git branch -f topic main`: HeldMoveRefusal leaves the host's topic at c40, and its line
//      "c40 -> main" waits (its new value is not the host's). At the next send the session runs
//      `git branch -f topic c40`: its line "main -> c40" ends a run that continues the host's log
//      (c40) and whose last new value is the host's ref, so CopyBackReflog appends both: the
//      host's `topic@{1}` is main, a value the person's checked-out topic never took, and the
//      person's `git reset --hard topic@{1}` (or `git rebase --fork-point`) takes the session's
//      refused move for theirs.
//      Fix direction: a line lands only if its new value is one the host's ref took by the
//      copy-back (keep with the snapshot the values the copy-back wrote to each ref since its
//      log's last append, and drop a run's lines naming values the host's ref never held), or drop
//      the lines of a move the copy-back refused when it refuses it.
//  (b) The host's reflogs grow without bound while no host ref moves (goal 4, and goal 3's "git
//      keeps working": the person's disk, `git reflog`, and every send's copy-back time). A line
//      whose old and new values are both the host's ref ("H -> H", as `git reset --hard HEAD`
//      writes) continues the host's log and ends a run at the host's value, so CopyBackReflog
//      appends it; a ref stays pending (GitSnapshot::reflog_pending) while its log ends in a
//      partial line (`more`). A session that made 16 branches appends, in each send, 32 lines of
//      4 KiB ("H H ...\t<3,900 bytes>") to each branch's private log and leaves a partial line:
//      each send appends about 1 MiB to the person's .git/logs (3 MiB over three sends observed;
//      up to 32 lines of 4 KiB per log and copy-back, 1,024 logs: 128 MiB a copy-back as far as
//      the 30 s of tip checks reach, three host git runs per line, the same tip checked again
//      line after line), none of it a value any ref took, with no end over the session's life.
//      Fix direction: count reflog bytes appended per copy-back and per session (as
//      kPackBytesPerCopyBack bounds packs), drop lines whose old and new values are equal (or keep
//      at most one per run), and remember tips checked good within a copy-back.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <iostream>
#include <string>
#include <system_error>

#include "tests/escape/escape_support.h"
#include "tests/escape/git_attack_support.h"

namespace ptybox::testing {
namespace {

namespace fs = std::filesystem;

using git_attack::Rev;

// (a) A refused `git branch -f topic main`, then `git branch -f topic c40` in the next send.
TEST(GitReview26AttackTest, ARefusedMoveMovedBackNeverReachesTheHostsReflog) {
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
  const std::string c40 = Rev(ws, "topic");
  const std::string main = Rev(ws, "main");
  ASSERT_EQ(git_attack::Line(git_attack::HostGit(ws, {"log", "-1", "--format=%s", "topic"}).out),
            "c40")
      << "the session's branch did not come back\n"
      << daemon.Log();
  const std::string c39 = Rev(ws, "topic~1");
  ASSERT_EQ(git_attack::HostGit(ws, {"checkout", "-q", "topic"}).exit_code, 0);
  Observed away = RunInSession(client, id, "workspace-write", "away",
                               "git branch -f topic main && echo away-$((40+2))");
  ASSERT_TRUE(away.Says("away-42")) << away.Show();
  ASSERT_EQ(Rev(ws, "topic"), c40) << "the person's checked-out branch moved\n" << daemon.Log();
  const std::string after_away = Rev(ws, "topic@{1}");
  std::cout << "  after the refused move, topic@{1} is " << after_away << " (c39 " << c39 << ")\n";
  EXPECT_EQ(after_away, c39) << "the refused move's line landed at once";
  Observed back = RunInSession(client, id, "workspace-write", "back",
                               "git branch -f topic " + c40 + " && echo back-$((40+2))");
  ASSERT_TRUE(back.Says("back-42")) << back.Show();
  for (int i = 0; i < 2; ++i) {
    Observed settle =
        RunInSession(client, id, "workspace-write", "settle", "echo settle-$((40+2))");
    ASSERT_TRUE(settle.Says("settle-42")) << settle.Show();
  }
  const std::string tip = Rev(ws, "topic");
  const std::string log =
      git_attack::HostGit(ws, {"log", "-g", "-4", "--format=%gd %H %gs", "refs/heads/topic"}).out;
  std::cout << "  the person has topic (" << c40 << ") checked out; the session ran `git branch -f "
            << "topic main` (" << main << ", refused) then `git branch -f topic c40`; now the "
            << "host's topic is " << tip << ", topic@{1} " << Rev(ws, "topic@{1}")
            << "; the newest entries:\n"
            << log;
  EXPECT_EQ(tip, c40) << daemon.Log();
  EXPECT_EQ(Rev(ws, "topic@{1}"), c39)
      << "the host's topic@{1} is not c39 (the person's own previous value): the line of the "
         "session's refused move to main landed with its move back, a value topic never took on "
         "the host";
}

// Bytes beneath the host's .git/logs.
uint64_t LogBytes(const fs::path& ws) {
  uint64_t total = 0;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(ws / ".git" / "logs", ec);
       it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (ec) break;
    if (it->is_regular_file(ec)) total += it->file_size(ec);
  }
  return total;
}

// (b) 32 lines "H -> H" of 4 KiB per branch and send, a partial line kept at the end.
TEST(GitReview26AttackTest, TheHostsReflogsNeverGrowWithoutBoundWhileNoRefMoves) {
  git_attack::GitWriteSession git;
  auto& [daemon, ws, client, id] = git;
  ASSERT_NO_FATAL_FAILURE(git.Open());
  const std::string head = Rev(ws, "main");
  // Before each send: complete the partial line, 31 more lines, a new partial line.
  const std::string grow =
      "pad=$(head -c 3900 /dev/zero | tr '\\0' x); for i in $(seq 1 16); do "
      "log=$(git rev-parse --git-path logs/refs/heads/b$i); h=$(git rev-parse b$i); "
      "{ [ -s \"$log\" ] && [ \"$(tail -c 1 \"$log\")\" != \"\" ] && printf '\\n'; "
      "for j in $(seq 1 31); do printf '%s %s a <a@x> 1700000000 +0000\\t%s\\n' $h $h $pad; "
      "done; printf '%s %s a <a@x> 1700000000 +0000\\tpartial' $h $h; } >> \"$log\"; done; "
      "echo grown-$((40+2))";
  // The first round makes the branches (their logs come back, a partial line keeps them pending);
  // the growth is measured over the next three.
  Observed first = RunInSession(client, id, "workspace-write", "grow",
                                "for i in $(seq 1 16); do git branch b$i; done; " + grow);
  ASSERT_TRUE(first.Says("grown-42")) << first.Show();
  ASSERT_EQ(Rev(ws, "b16"), head) << daemon.Log();
  const uint64_t before = LogBytes(ws);
  for (int round = 0; round < 3; ++round) {
    Observed grown = RunInSession(client, id, "workspace-write", "grow", grow);
    ASSERT_TRUE(grown.Says("grown-42")) << grown.Show();
  }
  const uint64_t after = LogBytes(ws);
  const std::string entries =
      git_attack::HostGit(ws, {"reflog", "show", "--format=%H", "refs/heads/b1"}).out;
  const size_t lines = static_cast<size_t>(std::count(entries.begin(), entries.end(), '\n'));
  std::cout << "  16 branches at " << head << " (the host's refs never moved after the first "
            << "send): the host's .git/logs grew from " << before << " to " << after
            << " bytes over three sends; b1's host log holds " << lines << " entries; b16 is "
            << Rev(ws, "b16") << "\n";
  EXPECT_EQ(Rev(ws, "b16"), head);
  EXPECT_LE(after - before, 256u << 10)
      << "the copy-back appended the session's lines of moves no ref made to the person's reflogs: "
      << (after - before) << " bytes in three sends, without bound over the session";
}

}  // namespace
}  // namespace ptybox::testing
