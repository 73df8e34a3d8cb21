// Thirty-eighth outside review of "Git for agents" (docs/security.md; review 45 of the project),
// on 27ddd76. Each test asserts what the goal needs and fails while the hole is open:
//  (a) goal 4, a tip checked again and again (a regression of 27ddd76): CheckTip now remembers
//      a refusal only when the host's git timed out; any other failure of CommitAddsGitlink is
//      "left as it is for now" and checked again by every later copy-back for the session's
//      life. That covers failures that can never change: a lightweight tag on a blob (git.git's
//      own `junio-gpg-pub` is one; `<blob>^{commit}` fails, "not a commit"), and a commit whose
//      new history lists more than the 16 MiB `git log --raw` may print (a tree of ~200,000
//      entries, made in a second with `git mktree`). Each such ref costs every send's copy-back
//      a run of the host's git (`git log ... --not --all`, which walks all the person's refs),
//      up to 64 refs and 30 s of checks per copy-back, every send answered that much later,
//      for the session's life, as outside review 11 found for timeouts (GitReview7AttackTest:
//      "a tip already refused is checked again at every copy-back"). Before 27ddd76 each was
//      refused once and remembered. (Also seen, older and not tested here: a remembered
//      refusal still takes one of the copy-back's 64 checked-ref slots, so 64 such refs sort
//      before and starve the session's own refs after them; self-harm only.) Fix direction:
//      forget only a failure that names a missing object (what review 44's race gives: "Could not
//      read", "bad object", "missing"), or remember every refusal keyed with what the host's object
//      store held then (e.g. only until an object the tip's check named missing arrives); a
//      "not a commit" and an output past the cap are final.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <iostream>
#include <sstream>
#include <string>

#include "tests/escape/escape_support.h"
#include "tests/escape/git_attack_support.h"

namespace ptybox::testing {
namespace {

using git_attack::HostGit;
using git_attack::kIdentity;
using git_attack::Rev;

// Later copy-backs (from the daemon's log past `before`) that ran the host's git on a tip.
size_t CopyBacksCheckingTips(const std::string& log, size_t before) {
  size_t checking = 0;
  std::istringstream lines(log.substr(before));
  for (std::string line; std::getline(lines, line);) {
    const size_t at = line.find(" tips checked by the host's git");
    if (at == std::string::npos) continue;
    const size_t from = line.rfind(' ', at - 1) + 1;
    if (line.substr(from, at - from) != "0") ++checking;
  }
  return checking;
}

// The session makes refs whose check fails for good (`make`), then sends plain commands: after
// the first copy-back that refused them, no copy-back runs the host's git on them again.
void RefusedTipIsCheckedOnce(const std::string& make, const std::string& made_ref) {
  // At info the daemon logs each copy-back's runs of the host's git checking tips.
  git_attack::GitWriteSession git({"PTYBOX_LOG=info"});
  auto& [daemon, ws, client, id] = git;
  ASSERT_NO_FATAL_FAILURE(git.Open());
  Observed made = RunInSession(client, id, "workspace-write", "make",
                               std::string(kIdentity) + make + " && echo made-$((40+2))");
  ASSERT_TRUE(made.Says("made-42")) << made.Show();
  ASSERT_NO_FATAL_FAILURE(git_attack::Settle(git, 1));
  const size_t before = daemon.Log().size();
  for (int i = 0; i < 4; ++i) {
    Observed again = RunInSession(client, id, "workspace-write", "again", "echo again-$((40+2))");
    ASSERT_TRUE(again.Says("again-42")) << again.Show();
  }
  const std::string log = daemon.Log();
  const size_t said = log.find(made_ref + ": ");
  std::cout << "  the daemon on it: "
            << log.substr(said == std::string::npos ? log.size() : said,
                          said == std::string::npos ? 0 : log.find('\n', said) - said)
            << "\n";
  const size_t checking = CopyBacksCheckingTips(log, before);
  std::cout << "  the host's " << made_ref << ": [" << Rev(ws, made_ref) << "]\n"
            << "  of the 4 later copy-backs, " << checking
            << " ran the host's git on a tip again\n";
  EXPECT_EQ(checking, 0u) << "a tip refused for good is checked again at every copy-back\n"
                          << git_attack::LogTail(log.substr(before));
}

// (a) A lightweight tag on a blob (a key file, as git.git tags its maintainer's key).
TEST(GitReview38AttackTest, ATagOnABlobIsNotCheckedAtEverySend) {
  RefusedTipIsCheckedOnce("git tag key-blob $(git hash-object -w a.txt)", "refs/tags/key-blob");
}

// (a) Eight branches at commits (one tree of 200,000 entries) whose new history is more than
// the 16 MiB the check reads: every copy-back spends a run of the host's git on each.
TEST(GitReview38AttackTest, ABranchPastTheChecksOutputIsNotCheckedAtEverySend) {
  RefusedTipIsCheckedOnce(
      "b=$(git hash-object -w a.txt) && t=$(seq 1 200000 | awk -v b=$b "
      "'{printf \"100644 blob %s\\tfile-%d\\n\", b, $1}' | git mktree) && "
      "for i in 1 2 3 4 5 6 7 8; do git branch big-$i $(echo big $i | git commit-tree $t); done",
      "refs/heads/big-1");
}

}  // namespace
}  // namespace ptybox::testing
