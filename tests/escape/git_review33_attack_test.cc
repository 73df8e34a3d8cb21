// Thirty-third outside review of "Git for agents" (docs/security.md; review 40 of the project),
// on 4fdf2b3 (bc4d826). Each test asserts a goal and fails while the hole is open:
//  (a) a loose commit whose link to a missing object lies past LinkFinder's 64 KiB header read is
//      looked at again at every copy-back, and holds every other loose object of the session back
//      with it, for good (goal 4: work the copy-back spends again and again; the waiting memory
//      never takes it). `git index-pack --strict` dies "did not receive expected object X" for a
//      commit with 6,000 `parent` lines naming the host's HEAD and a last one naming X, an object
//      nobody has (git's fsck passes duplicate parents). RefuseWhatNames looks for the loose
//      objects naming X with LooseObjectLinksTo, whose LinkFinder stops reading a commit's header
//      once it holds more than 64 KiB without the empty line (after the second 64 KiB inflate
//      chunk): the `parent X` line at ~288 KiB is never read, no object "names" X, and
//      LooseObjectsGitPasses returns with nothing passed ("naming none of the N loose objects in
//      it: none is copied by this copy-back"). Nothing is judged nor held, so the next copy-back
//      packs, inflates and indexes the same objects again, and again at every send, up to 4,096
//      objects and the 1 GiB inflate budget each time; the session's ordinary commit made later
//      never comes back either (its loose objects are in the same refused pack). Measured: with
//      a 4 MiB random loose blob beside it, the daemon writes ~21 MB over 5 plain sends (the
//      blob repacked at each), and the host's main never moves to the session's commit.
//      Fix direction: when no loose object is found naming what git names, do not give up on
//      all of them: bisect the pack (index halves) to find the culprit, or judge the objects
//      whose links could not be read whole; have LinkFinder read a commit's `tree`/`parent`
//      lines to their end (they come first and are bounded only by the object's size) or refuse
//      a commit/tag whose header exceeds the bound outright (judged, as any refused object).
#include <gtest/gtest.h>

#include <filesystem>
#include <iostream>
#include <string>

#include "tests/escape/escape_support.h"
#include "tests/escape/git_attack_support.h"
#include "tests/support/files.h"

namespace ptybox::testing {
namespace {

using git_attack::HostGit;

// (a) A commit whose missing parent is named past 64 KiB of header.
TEST(GitReview33AttackTest, ACommitNamingAMissingObjectFarInItsHeaderIsJudgedOnce) {
  git_attack::GitWriteSession git;
  auto& [daemon, ws, client, id] = git;
  ASSERT_NO_FATAL_FAILURE(git.Open());
  const std::string before = git_attack::Rev(ws, "refs/heads/main");
  Observed plant = RunInSession(
      client, id, "workspace-write", "plant",
      "h=$(git rev-parse HEAD) && t=$(git rev-parse 'HEAD^{tree}') && "
      "x=$(echo review33-missing | git hash-object --stdin) && "
      "c=$({ printf 'tree %s\\n' $t; i=0; while [ $i -lt 6000 ]; do printf 'parent %s\\n' $h; "
      "i=$((i+1)); done; printf 'parent %s\\n' $x; "
      "printf 'author a <a@b> 1 +0000\\ncommitter a <a@b> 1 +0000\\n\\nm\\n'; } | "
      "git hash-object -t commit -w --stdin) && echo planted-$((40+2)) $c");
  ASSERT_TRUE(plant.Says("planted-42")) << plant.Show();
  ASSERT_NO_FATAL_FAILURE(git_attack::CommitAgentChange(git));
  ASSERT_NO_FATAL_FAILURE(git_attack::Settle(git, 1));
  // The repeated work, measured: a 4 MiB incompressible loose blob of the session's is written
  // into the daemon's pack of loose objects at each copy-back that looks at it again.
  Observed big = RunInSession(client, id, "workspace-write", "big",
                              "head -c 4194304 /dev/urandom | git hash-object -w --stdin "
                              ">/dev/null && echo big-$((40+2))");
  ASSERT_TRUE(big.Says("big-42")) << big.Show();
  ASSERT_NO_FATAL_FAILURE(git_attack::Settle(git, 1));
  const int64_t writes = git_attack::DaemonWritesOver(git, 4, git_attack::PlainSend, "plain-42");
  const std::string log = daemon.Log();
  const std::string after = git_attack::Rev(ws, "refs/heads/main");
  std::cout << "  copy-back lines giving up on every loose object (\"naming none of the\"): "
            << Count(log, "naming none of the") << "\n  the daemon wrote " << writes
            << " bytes over 4 plain sends and a settle\n  the host's main: " << before << " -> "
            << after << "\n";
  ASSERT_GE(writes, 0) << "/proc/<daemon>/io unreadable";
  EXPECT_LT(writes, int64_t{4} << 20)
      << "the same loose objects are packed, inflated and indexed again at every copy-back\n"
      << git_attack::LogTail(log);
  EXPECT_NE(after, before) << "the session's ordinary commit never comes back: its objects are "
                              "held with the hostile commit's at every copy-back";
  const sandbox::testing::RunResult fsck = HostGit(ws, {"fsck", "--no-progress"});
  std::cout << "  the person's `git fsck`: exit " << fsck.exit_code << "\n" << fsck.err;
  EXPECT_EQ(fsck.exit_code, 0) << fsck.Describe();
}

}  // namespace
}  // namespace ptybox::testing
