// Thirty-first outside review of "Git for agents" (docs/security.md; review 38 of the project),
// on 54a34b6. Each test asserts a goal and fails while the hole is open:
//  (a) an object whose content git cannot parse, loose, breaks the person's `git gc` and
//      `git fsck` (goal 3: "no failing git status/commit/gc/fsck/push"). The copy-back checks a
//      loose object's zlib stream, header and that its content hashes to its name
//      (LooseObjectMatchesName), never that the content is a well-formed object of its type. The
//      session writes `git hash-object -t commit --literally -w` of a line that is no commit:
//      the copy-back copies it into the host's objects (no ref needs to name it). The person's
//      `git fsck` then exits non-zero ("bogus commit object") and their `git gc` exits 128
//      ("unable to parse object", "failed to run prune"): prune walks recent unreachable
//      objects, so this lasts the two weeks of gc.pruneExpire, whatever the person does short of
//      deleting the file by hand.
//      Fix direction: judge every object copied back as `git fsck` does (run the host's
//      `git fsck --strict`-like check, or `git index-pack --strict` over a pack made of the
//      session's loose objects, with fsck.* configuration of the daemon's own), or copy back only
//      objects reachable from a ref, HEAD, a reflog line or an index entry that comes back, each
//      parsed as its type.
//  (b) the same object in a pack (goal 3). Packs are indexed by the host's `git index-pack`
//      without `--strict`, which checks hashes and deltas only: a pack of one bogus commit is
//      copied into the host's objects/pack, and the person's `git fsck` fails, and `git gc`
//      exits 128 ("failed to run repack").
//      Fix direction: `git index-pack --strict` (with `--fsck-objects`' messages as errors) in
//      IndexPack, and the same for loose objects as in (a).
//  (c) a commit whose tree git's fsck refuses comes back on the person's branch (goal 3: "no
//      failing git fsck/push"). The tip check (CheckTip) asks the host's git whether the commit
//      adds a gitlink and which objects no host ref reaches, never whether they are well formed:
//      the session writes, with `git mktree` (which does not check), a tree that names `a.txt`
//      twice, commits it onto `main` and moves `main` to it (`git update-ref`). The host's `main`
//      moves; the person's `git fsck` exits non-zero ("duplicateEntries") and their `git push` to
//      a server with receive.fsckObjects is refused.
//      Fix direction: check every object a tip brings (what ObjectsNoHostRefReaches lists) with
//      git's fsck rules before the ref moves (`git fsck --strict` limited to those objects, or
//      `git index-pack --strict --fsck-objects` over a pack of them), and refuse the tip on any
//      error.
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

// The host's git on the repository after the session's object came back: `fsck` and `gc`.
void ExpectHostGitWorks(const fs::path& ws, const std::string& id, const std::string& log) {
  const sandbox::testing::RunResult has = HostGit(ws, {"cat-file", "-t", id});
  std::cout << "  the host's `git cat-file -t " << id << "`: exit " << has.exit_code << ", "
            << Line(has.out) << Line(has.err) << "\n";
  git_attack::ExpectPersonsGitSucceeds(ws, {"fsck", "--no-progress"}, "the session's object");
  git_attack::ExpectPersonsGitSucceeds(ws, {"gc", "-q"}, "the session's object", log);
  EXPECT_EQ(HostGit(ws, {"status", "--porcelain"}).exit_code, 0);
}

// (a) A loose object that is no commit, under the name of its bytes.
TEST(GitReview31AttackTest, ALooseObjectGitCannotParseNeverReachesTheHost) {
  git_attack::GitWriteSession git;
  auto& [daemon, ws, client, id] = git;
  ASSERT_NO_FATAL_FAILURE(git.Open());
  Observed plant = RunInSession(
      client, id, "workspace-write", "plant",
      "id=$(printf 'no tree, no author: review 31 loose\\n' | git hash-object -t commit "
      "--literally -w --stdin) && echo planted-$id-$((40+2))");
  ASSERT_TRUE(plant.Says("-42")) << plant.Show();
  ASSERT_NO_FATAL_FAILURE(git_attack::Settle(git, 2));
  // The id is that of the bytes planted, computed here as the host's git computes it.
  const sandbox::testing::RunResult hashed = sandbox::testing::RunProcess(
      {"/bin/sh", "-c",
       "printf 'no tree, no author: review 31 loose\\n' | /usr/bin/git hash-object -t commit "
       "--literally --stdin"});
  ASSERT_EQ(hashed.exit_code, 0) << hashed.Describe();
  const std::string object = Line(hashed.out);
  ASSERT_TRUE(plant.Says("planted-" + object)) << plant.Show();
  const fs::path file = ws / ".git" / "objects" / object.substr(0, 2) / object.substr(2);
  std::cout << "  the session planted " << object
            << "; on the host: " << (fs::exists(file) ? "copied back" : "absent") << "\n";
  ExpectHostGitWorks(ws, object, daemon.Log());
}

// (b) The same in a pack of the session's.
TEST(GitReview31AttackTest, APackedObjectGitCannotParseNeverReachesTheHost) {
  git_attack::GitWriteSession git;
  auto& [daemon, ws, client, id] = git;
  ASSERT_NO_FATAL_FAILURE(git.Open());
  Observed plant = RunInSession(
      client, id, "workspace-write", "plant",
      "set -e; id=$(printf 'no tree, no author: review 31 packed\\n' | git hash-object -t commit "
      "--literally -w --stdin); p=$(echo $id | git pack-objects -q "
      "$(git rev-parse --git-path objects/pack/pack)); rm -f $(git rev-parse --git-path "
      "objects/$(echo $id | cut -c1-2)/$(echo $id | cut -c3-)); echo packed-$p-$((40+2))");
  ASSERT_TRUE(plant.Says("-42")) << plant.Show();
  ASSERT_NO_FATAL_FAILURE(git_attack::Settle(git, 2));
  const sandbox::testing::RunResult hashed = sandbox::testing::RunProcess(
      {"/bin/sh", "-c",
       "printf 'no tree, no author: review 31 packed\\n' | /usr/bin/git hash-object -t commit "
       "--literally --stdin"});
  ASSERT_EQ(hashed.exit_code, 0) << hashed.Describe();
  const std::string object = Line(hashed.out);
  int packs = 0;
  for (const auto& e : fs::directory_iterator(ws / ".git" / "objects" / "pack")) {
    if (e.path().extension() == ".pack") ++packs;
  }
  std::cout << "  the session packed " << object << "; the host's objects/pack holds " << packs
            << " packs\n";
  ExpectHostGitWorks(ws, object, daemon.Log());
}

// (c) A commit of a tree with `a.txt` twice, on the person's `main`.
TEST(GitReview31AttackTest, ACommitWhoseTreeFsckRefusesNeverMovesThePersonsBranch) {
  git_attack::GitWriteSession git;
  auto& [daemon, ws, client, id] = git;
  ASSERT_NO_FATAL_FAILURE(git.Open());
  const std::string before = git_attack::Rev(ws, "refs/heads/main");
  Observed plant = RunInSession(
      client, id, "workspace-write", "plant",
      std::string(git_attack::kIdentity) +
          "set -e; b=$(git rev-parse HEAD:a.txt); g=$(git rev-parse HEAD:.gitignore); "
          "t=$(printf '100644 blob %s\\t.gitignore\\n100644 blob %s\\ta.txt\\n100644 blob "
          "%s\\ta.txt\\n' $g $b $b | git mktree); c=$(git commit-tree $t -p HEAD -m dup); "
          "git update-ref refs/heads/main $c; echo moved-$c-$((40+2))");
  ASSERT_TRUE(plant.Says("-42")) << plant.Show();
  ASSERT_NO_FATAL_FAILURE(git_attack::Settle(git, 2));
  const std::string after = git_attack::Rev(ws, "refs/heads/main");
  std::cout << "  the host's main: " << before << " -> " << after << "\n";
  ASSERT_TRUE(plant.Says("moved-" + after) || after == before) << plant.Show();
  git_attack::ExpectPersonsGitSucceeds(ws, {"fsck", "--no-progress"}, "the session's commit");
  git_attack::ExpectFsckingPushSucceeds(ws, daemon.Log());
}

}  // namespace
}  // namespace ptybox::testing
