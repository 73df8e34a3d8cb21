// Thirty-seventh outside review of "Git for agents" (docs/security.md; review 44 of the project),
// on 6c04eeb. The test asserts what the session's ordinary use needs and fails while the hole is
// open:
//  (a) the session's own `git repack -d` (what its `git gc --auto` runs once loose objects pile
//      up, and what agents run to tidy a repository) after a send whose commit came back: the
//      new pack holds that earlier commit's objects too, which the host already has, so
//      CopyBackPacks refuses the pack whole ("it names <id>, an object the host already has")
//      and, judged, never looks at it again. The commit made in the same send before the repack
//      lives only in that pack: its branch never moves on the host (`its commit ... is not in
//      the host's objects`), and HEAD and the index wait behind it for the session's life; the
//      person's `git status` shows the session's committed work as uncommitted changes for good
//      (the person's next `git commit -a` takes it as theirs, and the session's branch then
//      diverges). No goal of the five is broken outright (the host stays whole); this is the
//      copy-back's own promise (commits come back) failing in ordinary use, with goal 3's
//      "index showing the session's work undone" in spirit. Fix direction: copy from a refused
//      pack the objects the host lacks (write them, checked, into a pack of the daemon's, as
//      LooseObjectPack does for loose ones, or explode the pack's new objects to loose
//      candidates), rather than refusing the pack whole; at the least do not judge such a pack
//      for good.
//  Also found, with no test here (a race, 1 run in 10 to 30 under the person's `git gc` loop, too
//  rare for a test that must not flake; see the review's report): a loose object's copy goes
//  into an `objects/xx` directory opened earlier, which the person's gc (prune-packed) removes
//  meanwhile (`openat O_EXCL ....lock: No such file or directory`), so a commit comes over
//  without its tree; the tip's check then fails ("Could not read <tree>") and CheckTip remembers
//  the refusal (refused_tips) for the session's life: the branch never comes back, though the
//  tree arrives at the next copy-back.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <iostream>
#include <string>

#include "tests/escape/escape_support.h"
#include "tests/escape/git_attack_support.h"

namespace ptybox::testing {
namespace {

using git_attack::HostGit;
using git_attack::kIdentity;
using git_attack::Rev;

// (a) The session's own `git repack -d` (what its `git gc --auto` runs once loose objects pile
// up) after a send whose commit came back: the new pack holds that commit's objects too, which
// the host has, so the pack is refused whole ("names an object the host already has") and is
// never looked at again; the commit made before the repack never comes back.
void RepackThenCommitComesBack(const std::string& pack_command) {
  git_attack::GitWriteSession git;
  auto& [daemon, ws, client, id] = git;
  ASSERT_NO_FATAL_FAILURE(git.Open());
  Observed first = RunInSession(client, id, "workspace-write", "first",
                                std::string(kIdentity) +
                                    "git checkout -q -b agent && echo one > s.txt && git add s.txt "
                                    "&& git commit -qm one && echo first-$((40+2))");
  ASSERT_TRUE(first.Says("first-42")) << first.Show();
  ASSERT_NO_FATAL_FAILURE(git_attack::Settle(git, 1));
  ASSERT_FALSE(Rev(ws, "refs/heads/agent").empty()) << git_attack::LogTail(daemon.Log());
  Observed second = RunInSession(client, id, "workspace-write", "second",
                                 std::string(kIdentity) +
                                     "echo two >> s.txt && git commit -qam two && " + pack_command +
                                     " >/dev/null 2>&1; git rev-parse HEAD; echo second-$((40+2))");
  ASSERT_TRUE(second.Says("second-42")) << second.Show();
  ASSERT_NO_FATAL_FAILURE(git_attack::Settle(git, 2));
  Observed tip = RunInSession(client, id, "workspace-write", "tip",
                              "echo tip-$(git rev-parse refs/heads/agent)");
  ASSERT_TRUE(tip.Says("tip-")) << tip.Show();
  const std::string host = Rev(ws, "refs/heads/agent");
  std::cout << "  " << tip.Show() << "\n  the host's agent: " << host
            << "\n  the person's git status --porcelain: ["
            << HostGit(ws, {"status", "--porcelain"}).out << "]\n";
  EXPECT_TRUE(tip.Says("tip-" + host))
      << "the session's commit made before its " << pack_command << " never came back\n"
      << git_attack::LogTail(daemon.Log());
}

TEST(GitReview37AttackTest, ACommitBeforeTheSessionsRepackComesBack) {
  RepackThenCommitComesBack("git repack -q -d");
}

}  // namespace
}  // namespace ptybox::testing
