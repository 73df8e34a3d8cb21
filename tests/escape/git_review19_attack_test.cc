// Nineteenth outside review of "Git for agents" (docs/security.md; review 26 of the project), on
// 26d2ad4. Each test asserts a goal and fails while the hole is open:
//  (a) The copy-back walks, whole and at every copy-back, directories of the session's private
//      git whose entries nothing counts. kGitMaxRefs (100,000) counts only the refs the walk
//      keeps, kLooseObjectsPerCopyBack and kPacksPerCopyBack only what is copied: every other
//      entry of the session's `refs/` (a name git refuses, a `*.lock` file, an empty
//      directory, a link), of `objects/pack/` and of `objects/<xx>/` is listed by List (its
//      name kept in a vector and sorted), and each one refused becomes a line of `refused`
//      (ReadLooseRefs, CopyableObjectFile), copied into the copy-back's result
//      (CopyBackPrivateGit, which also copies the session's read refusals) and, past the first
//      1,024 lines a session logged, written to the daemon's log again at every copy-back
//      (`log_once`: "past the bound every line"). Nothing bounds how many such entries the
//      session makes. One `python3` loop of the session's (200,000 empty files `x~<n>` padded
//      to 200 bytes, in `refs/junk/` or `objects/pack/`) then raised the daemon's peak memory
//      by 133-137 MiB at one copy-back (about 700 bytes each: 35 MiB for 50,000, so 1,000,000
//      would be about 700 MiB, per session at once), and every later send and the close wrote
//      200,000 more lines (about 50 MiB) to the daemon's log: 99 MiB after two copy-backs
//      (goal 4: unbounded memory and work copying back, and a log that fills the disk).
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <iostream>
#include <string>

#include "sandbox/git_private.h"
#include "tests/escape/escape_support.h"
#include "tests/escape/git_attack_support.h"
#include "tests/support/files.h"

namespace ptybox::testing {
namespace {

// The session's script: `count` empty files in the directory `argv[2]` of its private .git, each
// named so that the copy-back refuses it (`x~<n>`: no ref name has a `~`, nor an object or pack
// name), 200 bytes long.
constexpr const char* kJunkScript = R"PY(import os, sys
count = int(sys.argv[1])
d = os.path.join('.git', sys.argv[2])
os.makedirs(d, exist_ok=True)
pad = 'p' * 180
for i in range(count):
    os.close(os.open('%s/x~%08d%s' % (d, i, pad), os.O_CREAT | os.O_WRONLY, 0o644))
print('made', len(os.listdir(d)), 'junk entries')
)PY";

// The session piles `kJunk` refused entries into `dir` of its private .git; the copy-back that
// follows, and the one of the next ordinary send, neither raise the daemon's peak memory with
// their number nor log each of them again (`refusal`: what the daemon's log says of each).
void JunkCostsTheCopyBackNothingUnbounded(const std::string& dir, const std::string& refusal) {
  git_attack::GitWriteSession git;
  auto& [daemon, ws, client, id] = git;
  ASSERT_NO_FATAL_FAILURE(git.Open());
  std::filesystem::create_directories(ws / ".escape");
  WriteFile(ws / ".escape" / "junk.py", kJunkScript);
  // A first copy-back (an ordinary commit), so that what every copy-back costs is there before.
  ASSERT_NO_FATAL_FAILURE(git_attack::CommitAgentChange(git));
  const long rss_before = ProcStatusKib(daemon.pid(), "VmRSS");
  const long peak_before = ProcStatusKib(daemon.pid(), "VmHWM");
  constexpr int kJunk = 200'000;
  // Made by a background job (a few seconds, or more on a busy disk), outside any send.
  Observed started = RunInSession(client, id, "workspace-write", "junk",
                                  "(python3 .escape/junk.py " + std::to_string(kJunk) + " " + dir +
                                      " > .escape/junk.out 2>&1; touch .escape/made) "
                                      ">/dev/null 2>&1 & echo started");
  ASSERT_TRUE(started.Says("started")) << started.Show();
  ASSERT_TRUE(git_attack::AwaitMade(ws, std::chrono::seconds(600)));
  std::cout << "  the session's script said: " << git_attack::Slurp(ws / ".escape" / "junk.out");
  // An ordinary send: its copy-back walks the junk.
  Observed once = RunInSession(client, id, "workspace-write", "once", "echo once-$((40 + 2))");
  ASSERT_TRUE(once.Says("once-42")) << once.Show();
  const long peak = ProcStatusKib(daemon.pid(), "VmHWM");
  const size_t logged_once = Count(daemon.Log(), refusal);
  // And the next: its copy-back walks it again.
  Observed again = RunInSession(client, id, "workspace-write", "again", "echo again-$((40 + 2))");
  ASSERT_TRUE(again.Says("again-42")) << again.Show();
  const std::string log = daemon.Log();
  const size_t logged_twice = Count(log, refusal);
  std::cout << "  " << dir << ": daemon RSS before " << rss_before / 1024 << " MiB (peak "
            << peak_before / 1024 << " MiB), peak after the junk's copy-back " << peak / 1024
            << " MiB; \"" << refusal << "\" logged " << logged_once << " times after the first "
            << "copy-back, " << logged_twice << " after one more; the daemon's log is "
            << (log.size() >> 20) << " MiB\n";
  // The same bound as review 5's for a 4 MiB session index: a copy-back's memory does not grow
  // with what the session piles up where it copies nothing.
  // Under ASan every allocation carries redzones and freed memory waits in its quarantine: the
  // bounded copy-back peaks at about three times as much (review 5's test has the figures).
#if defined(__SANITIZE_ADDRESS__)
  constexpr long kBoundKib = 256 * 1024;
#else
  constexpr long kBoundKib = 64 * 1024;
#endif
  EXPECT_LT(peak - rss_before, kBoundKib)
      << kJunk << " refused entries of the session's " << dir << " raised the daemon's peak "
      << "memory by " << (peak - rss_before) / 1024 << " MiB at one copy-back";
  // Nor does its work (here, what it logs): each send re-did it whole.
  EXPECT_LT(logged_twice, size_t{10'000})
      << "every copy-back logged each junk entry again (" << logged_twice << " lines after two)";
  // What the copy-back did instead: one line refusing the listing past its bound, logged once.
  EXPECT_EQ(Count(log, "more than " + std::to_string(sandbox::kGitListedEntriesMax)), 1u) << log;
  // The person's git still works.
  EXPECT_EQ(git_attack::HostGit(ws, {"status", "--porcelain"}).exit_code, 0);
}

// (a) Entries of the session's refs/ that are no ref.
TEST(GitReview19AttackTest, JunkInTheSessionsRefsCostsTheCopyBackBoundedMemoryAndWork) {
  JunkCostsTheCopyBackNothingUnbounded("refs/junk", "not a valid refname");
}

// (a) The same through the session's objects/pack/.
TEST(GitReview19AttackTest, JunkInTheSessionsPacksCostsTheCopyBackBoundedMemoryAndWork) {
  JunkCostsTheCopyBackNothingUnbounded("objects/pack", "not a pack file name");
}

}  // namespace
}  // namespace ptybox::testing
