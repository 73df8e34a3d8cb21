// Twenty-seventh outside review of "Git for agents" (docs/security.md; review 34 of the project),
// on 6db5f3f. Each test asserts a goal and fails while the hole is open:
//  (a) Lines that tell no move still land with every move (goal 3: "a line landing that tells no
//      move the host's ref made", and goal 4's spirit: the person's disk and `git reflog`). Review
//      33 (b) was closed by tying a run to the value written (`ReflogTaken::to`, `until`) and by a
//      1 MiB per copy-back / 64 MiB per session budget, but lines whose old and new values are
//      equal ("W -> W", 4 KiB each) still follow the one before and end at the value written, so
//      CopyBackReflog appends them as part of the move's run. A session with 16 branches moves
//      each of them once per send (`git branch -f bN <other commit>`, which the copy-back writes)
//      and appends 14 lines "W W ...\t<3,900 bytes>" to each branch's private log after the real
//      line: each send appends about 0.9 MiB of lines no ref took to the person's .git/logs, up to
//      64 MiB per session, and again for every new session (the budget is the session's).
//      Fix direction: keep at most one line per run whose old and new values are equal (git
//      writes one for `git branch -m` and `git reset --hard HEAD`, never many in a row), and count
//      the budget per repository across sessions rather than per session.
//  (b) The same lines make one stash many in the person's `git stash list` (goal 3: the person's
//      stash list is the session's text). The session runs `git stash` once (refs/stash made, its
//      log "0 -> S") and appends five lines "S S ...\tOn main: forged" to its private stash log:
//      refs/stash is written to the host, and the six lines are one run that ends at the value
//      written, so all land. The person's `git stash list` shows six stashes where there is one;
//      each `git stash drop` removes one line, so the person needs six drops to clear what is a
//      single stash (and each `git stash pop` finds the same stash again).
//      Fix direction: as (a); for refs/stash in particular, a line lands only if its new value is
//      not already a stash of the host's log or of the run.
//  (c) In ordinary use, a stash comes back twice after the session drops an older one (goal 3: "a
//      line twice"; the design since review 30 says no line twice). The session runs `git stash`
//      twice (S1, S2: both come back, the host's log "0 -> S1", "S1 -> S2"), then `git stash drop
//      stash@{1}` and `git stash` again (S3). git's drop rewrites the session's log to "0 -> S2"
//      (another file), then appends "S2 -> S3". CopyBackReflog finds another file whose part taken
//      ("S1 -> S2") is not in it and which starts with a null old id: `made_anew` (the first line
//      is not ReflogTaken::first) resets the part taken and reads it from its start, before
//      AfterLastStashTaken is ever asked; "0 -> S2" continues the host's log (a null old id
//      continues any kLine end, review 29's rule) and the run ends at S3, so both land. The
//      person's `git stash list` shows S3, S2, S2, S1: `git stash pop` twice applies S2 twice.
//      Fix direction: for refs/stash, ask AfterLastStashTaken before the made-anew rule (or never
//      treat a stash log as a branch's making), and never land a line whose new value is a stash
//      the host's log already keeps.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>
#include <string>
#include <system_error>

#include "tests/escape/escape_support.h"
#include "tests/escape/git_attack_support.h"

namespace ptybox::testing {
namespace {

namespace fs = std::filesystem;

using git_attack::Rev;

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

// Lines of the host's log of `ref` whose old and new values are the same.
size_t NoMoveLines(const fs::path& ws, const std::string& ref) {
  std::ifstream in(ws / ".git" / "logs" / ref);
  size_t count = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.size() > 82 && line.compare(0, 40, line, 41, 40) == 0) ++count;
  }
  return count;
}

// (a) Each send: every branch moved to the other of two commits, 14 lines "W W" of 4 KiB after.
TEST(GitReview27AttackTest, LinesOfNoMoveNeverLandWithARealMove) {
  git_attack::GitWriteSession git;
  auto& [daemon, ws, client, id] = git;
  ASSERT_NO_FATAL_FAILURE(git.Open());
  const std::string head = Rev(ws, "main");
  const std::string grow =
      "pad=$(head -c 3900 /dev/zero | tr '\\0' x); s=$(git rev-parse side); m=$(git rev-parse "
      "main); for i in $(seq 1 16); do if [ \"$(git rev-parse b$i)\" = \"$m\" ]; then t=$s; "
      "else t=$m; fi; git branch -f b$i $t; log=$(git rev-parse --git-path logs/refs/heads/b$i); "
      "for j in $(seq 1 14); do printf '%s %s a <a@x> 1700000000 +0000\\t%s\\n' $t $t $pad; "
      "done >> \"$log\"; done; echo grown-$((40+2))";
  Observed first = RunInSession(
      client, id, "workspace-write", "make",
      std::string(git_attack::kIdentity) +
          "git branch side && git checkout -q side && echo s > s.txt && git add s.txt && "
          "git commit -qm side && git checkout -q main && for i in $(seq 1 16); do git branch "
          "b$i; done && echo made-$((40+2))");
  ASSERT_TRUE(first.Says("made-42")) << first.Show();
  ASSERT_EQ(Rev(ws, "b16"), head) << daemon.Log();
  ASSERT_FALSE(Rev(ws, "side").empty()) << daemon.Log();
  const uint64_t before = LogBytes(ws);
  for (int round = 0; round < 3; ++round) {
    Observed grown = RunInSession(client, id, "workspace-write", "grow", grow);
    ASSERT_TRUE(grown.Says("grown-42")) << grown.Show();
  }
  const uint64_t after = LogBytes(ws);
  const size_t no_move = NoMoveLines(ws, "refs/heads/b1");
  const std::string entries =
      git_attack::HostGit(ws, {"reflog", "show", "--format=%H", "refs/heads/b1"}).out;
  const size_t lines = static_cast<size_t>(std::count(entries.begin(), entries.end(), '\n'));
  std::cout << "  16 branches each moved once per send (main " << head << " <-> side "
            << Rev(ws, "side") << "): the host's .git/logs grew from " << before << " to " << after
            << " bytes over three sends; b1 is " << Rev(ws, "b1") << ", its host log "
            << "holds " << lines << " entries, " << no_move << " of them lines of no move\n";
  EXPECT_EQ(no_move, 0u) << "lines whose old and new values are equal landed in the host's log of "
                            "b1: they tell no move its ref made";
  EXPECT_LE(after - before, 256u << 10)
      << "the copy-back appended " << (after - before)
      << " bytes of the session's lines to the person's reflogs in three sends, 48 real moves";
}

// (b) One `git stash`, five lines "S S" after its line.
TEST(GitReview27AttackTest, OneStashIsOneEntryOfThePersonsStashList) {
  git_attack::GitWriteSession git;
  auto& [daemon, ws, client, id] = git;
  ASSERT_NO_FATAL_FAILURE(git.Open());
  Observed stashed = RunInSession(
      client, id, "workspace-write", "stash",
      std::string(git_attack::kIdentity) +
          "echo two >> a.txt && git stash -q && s=$(git rev-parse refs/stash) && "
          "log=$(git rev-parse --git-path logs/refs/stash) && for j in $(seq 1 5); do "
          "printf '%s %s agent <agent@example.com> 1700000000 +0000\\tOn main: forged\\n' $s $s; "
          "done >> \"$log\" && echo stashed-$((40+2))");
  ASSERT_TRUE(stashed.Says("stashed-42")) << stashed.Show();
  for (int i = 0; i < 2; ++i) {
    Observed settle =
        RunInSession(client, id, "workspace-write", "settle", "echo settle-$((40+2))");
    ASSERT_TRUE(settle.Says("settle-42")) << settle.Show();
  }
  const std::string stash = Rev(ws, "refs/stash");
  ASSERT_FALSE(stash.empty()) << "the session's stash did not come back\n" << daemon.Log();
  const std::string list = git_attack::HostGit(ws, {"stash", "list", "--format=%gd %H"}).out;
  const size_t entries = static_cast<size_t>(std::count(list.begin(), list.end(), '\n'));
  std::cout << "  the session made one stash (" << stash << "); the person's `git stash list`:\n"
            << list;
  EXPECT_EQ(entries, 1u) << "the person's stash list shows the session's one stash " << entries
                         << " times";
}

// (c) Ordinary use: two stashes, the older dropped, a third made.
TEST(GitReview27AttackTest, AStashDroppedThenANewOneNeverRepeatsAStash) {
  git_attack::GitWriteSession git;
  auto& [daemon, ws, client, id] = git;
  ASSERT_NO_FATAL_FAILURE(git.Open());
  Observed two = RunInSession(client, id, "workspace-write", "two",
                              std::string(git_attack::kIdentity) +
                                  "echo s1 >> a.txt && git stash -q && echo s2 >> a.txt && "
                                  "git stash -q && echo two-$(git stash list | wc -l)");
  ASSERT_TRUE(two.Says("two-2")) << two.Show();
  std::cout << "  after two stashes, the person's list:\n"
            << git_attack::HostGit(ws, {"stash", "list", "--format=%gd %H"}).out;
  Observed drop = RunInSession(client, id, "workspace-write", "drop",
                               std::string(git_attack::kIdentity) +
                                   "git stash drop -q stash@{1} && echo s3 >> a.txt && "
                                   "git stash -q && echo three-$(git stash list | wc -l)");
  ASSERT_TRUE(drop.Says("three-2")) << drop.Show();
  for (int i = 0; i < 2; ++i) {
    Observed settle =
        RunInSession(client, id, "workspace-write", "settle", "echo settle-$((40+2))");
    ASSERT_TRUE(settle.Says("settle-42")) << settle.Show();
  }
  const std::string list = git_attack::HostGit(ws, {"stash", "list", "--format=%H"}).out;
  std::cout << "  after `git stash drop stash@{1}` and a third stash, the person's list:\n"
            << git_attack::HostGit(ws, {"stash", "list", "--format=%gd %H"}).out;
  std::istringstream in(list);
  std::set<std::string> seen;
  std::string repeated;
  for (std::string line; std::getline(in, line);) {
    if (!seen.insert(line).second) repeated = line;
  }
  EXPECT_EQ(Rev(ws, "refs/stash"), git_attack::Line(list.substr(0, list.find('\n'))));
  EXPECT_TRUE(repeated.empty()) << "the person's stash list holds the stash " << repeated
                                << " twice\n"
                                << daemon.Log();
}

}  // namespace
}  // namespace ptybox::testing
