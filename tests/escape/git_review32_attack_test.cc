// Thirty-second outside review of "Git for agents" (docs/security.md; review 39 of the project),
// on 6374452. Each test asserts a goal and fails while the hole is open:
//  (a) a tree whose `.gitmodules` blob comes back in a later copy-back than the tree escapes
//      git's `.gitmodules` checks (goal 3: "no failing git fsck/push"). IndexPack runs
//      `git index-pack --fsck-objects`, which checks a `.gitmodules` blob only when the tree
//      naming it is in the same pack (or the blob is in the host's repository already); a tree
//      naming a `.gitmodules` blob neither holds nor finds is passed, git printing the blob's id
//      on its standard output for the caller to check later (as receive-pack and fetch-pack do).
//      IndexPack reads past those lines (only the pack's name is kept). The session writes a
//      `.gitmodules` blob whose url git's fsck refuses (`-upayload`), a tree and a commit naming
//      it, and removes the blob's loose file: the copy-back copies the tree and the commit (the
//      person's `git fsck` now exits 1: gitmodulesMissing). At the next send the session writes
//      the blob again and moves `main` to the commit: the blob, packed alone, is no
//      `.gitmodules` to git and passes; `main` moves. The person's `git fsck` exits 1
//      (gitmodulesUrl: disallowed submodule url) and their push of `main` to a server with
//      receive.fsckObjects is refused.
//      Fix direction: keep the ids index-pack prints before the pack's name (the `.gitmodules`
//      blobs it could not check) and refuse the pack (or the loose objects' pack) while any is
//      missing, or remember them with the session's snapshot and check each blob that arrives
//      later with `git fsck`'s gitmodules rules (e.g. a pack of the blob plus the tree naming it,
//      read from the host); at the least, never move a ref to a tip whose objects were not
//      checked together.
//  (b) a tag object that calls the person's commit a blob passes git's fsck rules and breaks the
//      person's `git fsck` and `git gc` (goal 3). `git index-pack --fsck-objects` checks a tag's
//      form (`object`, `type`, `tag`, `tagger` lines), never that the object it names is of the
//      type it says, even when the host has that object: the session writes
//      `git hash-object -t tag -w` of a tag naming the host's HEAD commit with `type blob`; the
//      loose object is copied into the host's objects (no ref names it). The person's
//      `git fsck` then exits non-zero ("object ... is a commit, not a blob", "bad tag pointer",
//      and, from the order git parses them, their own HEAD and main reported as invalid
//      pointers), and `git gc` exits 128 ("unable to parse object", "failed to run prune"):
//      prune walks recent unreachable objects, for the two weeks of gc.pruneExpire.
//      Fix direction: for each tag that would come back, check the named object's type with the
//      host's git (`git cat-file --batch-check` over the host's and the pack's objects, as
//      HostObjectTypes does), and refuse a tag whose `type` differs or whose object is in
//      neither; the same for trees naming a blob/tree/commit by a mode that disagrees with an
//      object the host or the pack has (a tree entry `100644` naming a commit).
#include <gtest/gtest.h>

#include <filesystem>
#include <iostream>
#include <string>

#include "tests/escape/escape_support.h"
#include "tests/escape/git_attack_support.h"

namespace ptybox::testing {
namespace {

namespace fs = std::filesystem;

using git_attack::HostGit;
using git_attack::Line;

// (a) The tree first, its `.gitmodules` blob at the next copy-back.
TEST(GitReview32AttackTest, AGitmodulesBlobArrivingAfterItsTreeIsHeldToGitsRules) {
  git_attack::GitWriteSession git;
  auto& [daemon, ws, client, id] = git;
  ASSERT_NO_FATAL_FAILURE(git.Open());
  const std::string before = git_attack::Rev(ws, "refs/heads/main");
  // The blob's bytes, the same in both sends.
  const std::string blob = "printf '[submodule \"x\"]\\n\\tpath = x\\n\\turl = -upayload\\n'";
  // Shell variables `m` (the blob) and `c` (the commit) live on in the session's shell.
  Observed plant = RunInSession(
      client, id, "workspace-write", "plant",
      std::string(git_attack::kIdentity) + "m=$(" + blob +
          " | git hash-object -w --stdin) && b=$(git rev-parse HEAD:a.txt) && "
          "g=$(git rev-parse HEAD:.gitignore) && "
          "t=$(printf '100644 blob %s\\t.gitignore\\n100644 blob %s\\t.gitmodules\\n100644 blob "
          "%s\\ta.txt\\n' $g $m $b | git mktree) && c=$(git commit-tree $t -p HEAD -m gm) && "
          "rm -f $(git rev-parse --git-path objects/$(echo $m | cut -c1-2)/$(echo $m | cut "
          "-c3-)) && echo planted-$((40+2))");
  ASSERT_TRUE(plant.Says("planted-42")) << plant.Show();
  ASSERT_NO_FATAL_FAILURE(git_attack::Settle(git, 2));
  std::cout << "  after the tree's copy-back, without its blob:\n";
  git_attack::ExpectPersonsGitSucceeds(ws, {"fsck", "--no-progress"}, "the session's tree");
  // The blob again, alone, and main onto the commit.
  Observed move = RunInSession(
      client, id, "workspace-write", "move",
      blob +
          " | git hash-object -w --stdin >/dev/null && git update-ref refs/heads/main $c && "
          "echo moved-$((40+2))");
  ASSERT_TRUE(move.Says("moved-42")) << move.Show();
  ASSERT_NO_FATAL_FAILURE(git_attack::Settle(git, 2));
  const std::string after = git_attack::Rev(ws, "refs/heads/main");
  std::cout << "  the host's main: " << before << " -> " << after << "\n";
  git_attack::ExpectPersonsGitSucceeds(ws, {"fsck", "--no-progress"}, "the session's .gitmodules");
  git_attack::ExpectFsckingPushSucceeds(ws, daemon.Log());
}

// (b) A dangling tag calling the person's HEAD commit a blob.
TEST(GitReview32AttackTest, ATagNamingACommitAsABlobNeverReachesTheHost) {
  git_attack::GitWriteSession git;
  auto& [daemon, ws, client, id] = git;
  ASSERT_NO_FATAL_FAILURE(git.Open());
  const std::string head = git_attack::Rev(ws, "HEAD");
  Observed plant = RunInSession(
      client, id, "workspace-write", "plant",
      "printf 'object %s\\ntype blob\\ntag review32\\ntagger a <a@b> 1 +0000\\n\\nm\\n' "
      "$(git rev-parse HEAD) | git hash-object -t tag -w --stdin >/dev/null && echo "
      "planted-$((40+2))");
  ASSERT_TRUE(plant.Says("planted-42")) << plant.Show();
  ASSERT_NO_FATAL_FAILURE(git_attack::Settle(git, 2));
  git_attack::ExpectPersonsGitSucceeds(ws, {"fsck", "--no-progress"}, "the session's tag");
  git_attack::ExpectPersonsGitSucceeds(ws, {"gc", "-q"}, "the session's tag", daemon.Log());
  EXPECT_EQ(git_attack::Rev(ws, "HEAD"), head);
}

}  // namespace
}  // namespace ptybox::testing
