// Eighth outside review of "Git for agents" (docs/security.md; review 15 of the project),
// attacked from a workspace-write session. Each test fails while its hole is open (root daemon
// and ptybox-ci):
//  - IndexForHost judges an index entry's path, mode and flags, never the object it names: an
//    entry of mode 100644 naming a commit (or a tree), or an object the host does not have,
//    comes back. git never writes either (update_index checks existence and type when it hashes
//    a file). On the host, `git gc` then fails ("is a commit, not a blob": "unable to add index
//    blob to traversal"), and the person's next `git commit` either fails ("invalid object ...
//    Error building trees") or records a tree whose blob entry is a commit: a history that
//    `git fsck`, `git gc`, `git clone` and a server's `receive.fsckObjects` all refuse, only
//    mended by rewriting the person's commits.
//  - UpdateHostRef deletes a ref's packed-refs line from a packed-refs it read before taking
//    git's lock (packed-refs.lock), and writes that copy back without looking again: a
//    `git pack-refs` of the person's (what every `git gc --auto` runs) that lands between the
//    read and the lock is undone, and the branches it packed (their loose files already pruned)
//    are lost. The session only has to delete branches it made while the person packs.
//  - a ref that comes back onto an old unreachable commit the host has, written while the
//    person's `git prune` runs, named a commit that prune then deleted (the copy-back now makes
//    what the ref brings recent first, FreshenHostObjects);
//  - a ref the session made and then deleted leaves its reflog on the host (git deletes a ref's
//    log with the ref; UpdateHostRef never does): the person's later `git branch <name>/x`
//    fails ("unable to append to .git/logs/refs/heads/<name>/x: Not a directory"), and their own
//    later branch <name> inherits the session's entries (`<name>@{1}`); a dropped stash's log
//    stays, and the session's dropped entry is back in the person's `git stash list`;
//  - a branch the session made is deleted on the host while the person has it checked out (git
//    refuses that): their HEAD names no branch, and their next commit is a root commit.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "tests/escape/escape_support.h"
#include "tests/escape/git_attack_support.h"

namespace ptybox::testing {
namespace {

using git_attack::HostGit;
using git_attack::kIdentity;
using git_attack::Line;
using git_attack::MakeRepository;
using git_attack::WriteManyPackedTags;

namespace fs = std::filesystem;

// What the host's index names for `path` after the session's `work`: the entry's object id
// (`git ls-files -s`), and its type (`git cat-file -t`, empty when the host lacks it).
struct IndexedObject {
  std::string id;
  std::string type;
};

IndexedObject RunAndReadIndex(Daemon& daemon, const std::string& work, const std::string& name,
                              const std::string& path) {
  IndexedObject got;
  const fs::path ws = daemon.workspace();
  RpcClient client(daemon.socket());
  const std::string id = OpenSession(client, "workspace-write");
  EXPECT_FALSE(id.empty()) << daemon.Log();
  if (id.empty()) return got;
  Observed did = RunInSession(client, id, "workspace-write", name, std::string(kIdentity) + work);
  std::cout << "  observed " << did.Show() << "\n";
  EXPECT_TRUE(did.Says("staged")) << did.Show();
  const std::string staged = Line(HostGit(ws, {"ls-files", "-s", "--", path}).out);
  std::cout << "  host ls-files -s " << path << ": " << staged << "\n";
  // `<mode> <id> <stage>\t<path>`
  const size_t space = staged.find(' ');
  if (space != std::string::npos) {
    got.id = staged.substr(space + 1, staged.find(' ', space + 1) - space - 1);
    got.type = Line(HostGit(ws, {"cat-file", "-t", got.id}).out);
  }
  return got;
}

// The session stages the host's own HEAD commit as the blob of a.txt (`git update-index
// --cacheinfo 100644,<HEAD>,a.txt`: git checks neither existence nor type there). The private
// index passes IndexForHost (a known path, mode 100644, no flags) and is written to the host.
// Then the person's git: `git gc` exits 128 ("object ... is a commit, not a blob"); their next
// `git commit` (of their own file, `git add b.txt`) records a tree whose a.txt is a commit, and
// from then on `git fsck`, `git gc`, `git clone` and a push to a fsck-ing server all fail.
TEST(GitReview8AttackTest, AnIndexEntryNeverNamesACommitAsABlob) {
  Daemon daemon(Daemon::Options{.extra_args = {}, .env = {"PTYBOX_GIT_WRITE=1"}});
  const fs::path ws = daemon.workspace();
  MakeRepository(ws);
  const IndexedObject got =
      RunAndReadIndex(daemon,
                      "git update-index --cacheinfo 100644,$(git rev-parse HEAD),a.txt && "
                      "git ls-files -s a.txt && echo staged",
                      "index-commit-as-blob", "a.txt");
  const auto gc = HostGit(ws, {"gc", "-q"});
  std::cout << "  host git gc: " << gc.exit_code << " " << gc.err;
  std::ofstream(ws / "b.txt") << "the person's work\n";
  HostGit(ws, {"add", "b.txt"});
  const auto commit = HostGit(ws, {"commit", "-q", "-m", "mine"});
  const auto fsck = HostGit(ws, {"fsck"});
  std::cout << "  host git commit: " << commit.exit_code << ", then git fsck: " << fsck.exit_code
            << " " << fsck.err.substr(0, 600) << "\n";
  EXPECT_EQ(got.type, "blob") << "the host's index names " << got.id << ", a " << got.type
                              << ", as the blob of a.txt\n"
                              << daemon.Log();
  EXPECT_EQ(gc.exit_code, 0) << "the person's `git gc` fails on the index the session wrote";
  EXPECT_EQ(fsck.exit_code, 0) << "the person's next commit made their history corrupt";
}

// The same with an object nobody has: the session's index names
// eeee... as a.txt. The person's next `git commit` (of their own b.txt) fails:
// "invalid object 100644 eeee... for 'a.txt'", "Error building trees"; so does `git stash`.
TEST(GitReview8AttackTest, AnIndexEntryNeverNamesAnObjectTheHostLacks) {
  Daemon daemon(Daemon::Options{.extra_args = {}, .env = {"PTYBOX_GIT_WRITE=1"}});
  const fs::path ws = daemon.workspace();
  MakeRepository(ws);
  const IndexedObject got = RunAndReadIndex(
      daemon,
      "git update-index --cacheinfo 100644,$(git rev-parse HEAD | tr 0-9a-f e),a.txt && "
      "git ls-files -s a.txt && echo staged",
      "index-missing-object", "a.txt");
  std::ofstream(ws / "b.txt") << "the person's work\n";
  HostGit(ws, {"add", "b.txt"});
  const auto commit = HostGit(ws, {"commit", "-q", "-m", "mine"});
  std::cout << "  host git commit: " << commit.exit_code << " " << commit.err;
  EXPECT_EQ(got.type, "blob") << "the host's index names " << got.id
                              << ", which the host does not have, as the blob of a.txt\n"
                              << daemon.Log();
  EXPECT_EQ(commit.exit_code, 0) << "the person's `git commit` fails on the session's index";
}

// The person's repository has a large packed-refs (20,000 tags: a monorepo's release tags), and
// the session's 128 branches `zz100`..`zz227`, which came back and which the person's
// `git pack-refs --all` packed. The person goes on working: `git branch p<i>` then `git
// pack-refs --all` (what `git gc --auto` does), in a loop. The session deletes its 128 branches
// in one send: the copy-back rewrites packed-refs 128 times, each from a copy read before
// packed-refs.lock was taken. A pack of the person's that lands in between is overwritten by the
// stale copy: the branch p<i> it packed is gone (its loose file was pruned by pack-refs).
TEST(GitReview8AttackTest, DeletingBranchesNeverUndoesThePersonsPackRefs) {
  git_attack::GitWriteSession git;
  auto& [daemon, ws, client, id] = git;
  ASSERT_NO_FATAL_FAILURE(MakeRepository(ws));
  ASSERT_NO_FATAL_FAILURE(WriteManyPackedTags(ws, 20000));
  ASSERT_EQ(HostGit(ws, {"pack-refs", "--all"}).exit_code, 0);
  ASSERT_NO_FATAL_FAILURE(git.OpenSession());
  Observed made = RunInSession(client, id, "workspace-write", "make-branches",
                               "for i in $(seq 100 227); do git branch zz$i; done; echo made");
  ASSERT_TRUE(made.Says("made")) << made.Show();
  Observed again = RunInSession(client, id, "workspace-write", "again", "echo again");
  ASSERT_TRUE(again.Says("again")) << again.Show();
  ASSERT_EQ(HostGit(ws, {"rev-parse", "--verify", "-q", "refs/heads/zz227"}).exit_code, 0)
      << daemon.Log();
  ASSERT_EQ(HostGit(ws, {"pack-refs", "--all"}).exit_code, 0);
  std::atomic<bool> stop{false};
  std::vector<std::string> made_by_person;
  std::thread person([&] {
    for (int i = 0; !stop.load(); ++i) {
      const std::string branch = "p" + std::to_string(i);
      if (HostGit(ws, {"branch", branch}).exit_code == 0) made_by_person.push_back(branch);
      HostGit(ws, {"pack-refs", "--all"});
    }
  });
  Observed deleted =
      RunInSession(client, id, "workspace-write", "delete-branches",
                   "git branch -q -D $(seq -f zz%g 100 227) >/dev/null && echo deleted");
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  stop = true;
  person.join();
  EXPECT_TRUE(deleted.Says("deleted")) << deleted.Show();
  std::vector<std::string> lost;
  for (const std::string& branch : made_by_person) {
    if (HostGit(ws, {"rev-parse", "--verify", "-q", "refs/heads/" + branch}).exit_code != 0) {
      lost.push_back(branch);
    }
  }
  std::string names;
  for (const std::string& branch : lost) names += " " + branch;
  std::cout << "  the person made " << made_by_person.size() << " branches; lost " << lost.size()
            << ":" << names << "\n";
  EXPECT_TRUE(lost.empty()) << "the person's branches" << names
                            << " are gone: the copy-back wrote back a packed-refs read before "
                               "their `git pack-refs`\n"
                            << daemon.Log().substr(0, 4000);
}

// The session makes a branch `feature` (it comes back, with its reflog line), then deletes it
// (the host's ref goes, its log `logs/refs/heads/feature` stays). Later the person makes
// `feature/login`: git cannot create that branch's log beneath a file, and `git branch` fails.
TEST(GitReview8AttackTest, ADeletedBranchLeavesNoReflogThatBlocksThePersonsBranches) {
  git_attack::GitWriteSession git;
  ASSERT_NO_FATAL_FAILURE(git.Open());
  auto& [daemon, ws, client, id] = git;
  Observed made = RunInSession(client, id, "workspace-write", "make-feature",
                               std::string(kIdentity) + "git branch feature && echo made");
  ASSERT_TRUE(made.Says("made")) << made.Show();
  ASSERT_EQ(HostGit(ws, {"rev-parse", "--verify", "-q", "refs/heads/feature"}).exit_code, 0)
      << daemon.Log();
  Observed gone = RunInSession(client, id, "workspace-write", "delete-feature",
                               "git branch -q -D feature && echo deleted");
  ASSERT_TRUE(gone.Says("deleted")) << gone.Show();
  ASSERT_NE(HostGit(ws, {"rev-parse", "--verify", "-q", "refs/heads/feature"}).exit_code, 0)
      << daemon.Log();
  std::cout << "  host logs/refs/heads/feature after the deletion: "
            << (fs::exists(ws / ".git" / "logs" / "refs" / "heads" / "feature") ? "present"
                                                                                : "absent")
            << "\n";
  const auto branch = HostGit(ws, {"branch", "feature/login"});
  std::cout << "  host git branch feature/login: " << branch.exit_code << " " << branch.err;
  EXPECT_EQ(branch.exit_code, 0) << "the person's `git branch feature/login` fails on the log "
                                    "the session's deleted branch left\n"
                                 << daemon.Log();
}

// The same for the stash: the session stashes (refs/stash and its log come back), then drops
// it (the host's refs/stash goes, logs/refs/stash stays). The person's next `git stash` appends
// to that log: `git stash list` shows the session's dropped entry as stash@{1}, and their second
// `git stash pop` applies the session's change.
TEST(GitReview8AttackTest, ADroppedStashNeverComesBackInThePersonsStashList) {
  git_attack::GitWriteSession git;
  ASSERT_NO_FATAL_FAILURE(git.Open());
  auto& [daemon, ws, client, id] = git;
  Observed stashed =
      RunInSession(client, id, "workspace-write", "stash",
                   std::string(kIdentity) + "echo agent > a.txt && git stash -q && echo stashed");
  ASSERT_TRUE(stashed.Says("stashed")) << stashed.Show();
  ASSERT_EQ(HostGit(ws, {"rev-parse", "--verify", "-q", "refs/stash"}).exit_code, 0)
      << daemon.Log();
  Observed dropped =
      RunInSession(client, id, "workspace-write", "drop", "git stash drop -q && echo dropped");
  ASSERT_TRUE(dropped.Says("dropped")) << dropped.Show();
  ASSERT_NE(HostGit(ws, {"rev-parse", "--verify", "-q", "refs/stash"}).exit_code, 0)
      << daemon.Log();
  std::ofstream(ws / "a.txt") << "the person's work\n";
  ASSERT_EQ(HostGit(ws, {"stash", "-q"}).exit_code, 0);
  const std::string list = HostGit(ws, {"stash", "list"}).out;
  std::cout << "  host git stash list after the person's one stash:\n" << list;
  EXPECT_EQ(std::count(list.begin(), list.end(), '\n'), 1)
      << "the session's dropped stash is back in the person's stash list\n"
      << daemon.Log();
}

// git never deletes a branch some worktree has checked out ("Cannot delete branch ... checked
// out at"). The session makes `agent` with a commit (it comes back); the person checks it out
// on the host to look at the agent's work; the session then deletes `agent` (as an agent does
// once it merged it). The host's ref is unchanged since the copy-back wrote it, so the deletion
// is written: the person's HEAD names a branch that no longer exists. Their `git log` fails,
// `git status` shows every file as new, and their next `git commit` is a root commit with no
// parent.
TEST(GitReview8AttackTest, ABranchThePersonHasCheckedOutIsNeverDeleted) {
  git_attack::GitWriteSession git;
  ASSERT_NO_FATAL_FAILURE(git.Open());
  auto& [daemon, ws, client, id] = git;
  Observed made = RunInSession(client, id, "workspace-write", "make-agent",
                               std::string(kIdentity) +
                                   "git checkout -q -b agent && echo agent > a.txt && "
                                   "git commit -qam agent && git checkout -q main && echo made");
  ASSERT_TRUE(made.Says("made")) << made.Show();
  ASSERT_EQ(HostGit(ws, {"rev-parse", "--verify", "-q", "refs/heads/agent"}).exit_code, 0)
      << daemon.Log();
  // The person looks at the agent's work.
  ASSERT_EQ(HostGit(ws, {"checkout", "-q", "agent"}).exit_code, 0);
  Observed gone = RunInSession(client, id, "workspace-write", "delete-agent",
                               "git branch -q -D agent && echo deleted");
  ASSERT_TRUE(gone.Says("deleted")) << gone.Show();
  const auto log = HostGit(ws, {"log", "-1", "--format=%s"});
  std::cout << "  host HEAD: " << Line(HostGit(ws, {"symbolic-ref", "HEAD"}).out)
            << "; git log: " << log.exit_code << " " << log.out << log.err;
  std::ofstream(ws / "b.txt") << "the person's work\n";
  HostGit(ws, {"add", "b.txt"});
  HostGit(ws, {"commit", "-q", "-m", "mine"});
  const auto parents = HostGit(ws, {"rev-list", "--count", "HEAD"});
  std::cout << "  commits in the person's branch after their commit: " << parents.out;
  EXPECT_EQ(HostGit(ws, {"rev-parse", "--verify", "-q", "refs/heads/agent"}).exit_code, 0)
      << "the branch the person has checked out was deleted under them\n"
      << daemon.Log();
  EXPECT_NE(Line(parents.out), "1") << "the person's next commit is a root commit (no parent)";
}

// The person deleted a branch `old` long ago (`git branch -D` drops its reflog too): its 64
// commits are unreachable loose objects, a month old. The session, which sees the host's
// objects, makes 64 branches keep-NN on them (a deleted branch revived: an ordinary thing).
// The copy-back writes each ref once HostHasObject says the commit is there, and leaves the
// object's mtime a month old. Meanwhile the person's `git gc` runs `git prune --expire
// 2.weeks.ago`, which read the refs before the branch was written: it deletes the commit the
// branch now names. Afterwards branches name missing commits: `git fsck` fails, `git log
// keep-NN` fails, `git gc` fails.
TEST(GitReview8AttackTest, ARevivedCommitIsNeverPrunedUnderTheBranchThatNamesIt) {
  Daemon daemon(Daemon::Options{.extra_args = {}, .env = {"PTYBOX_GIT_WRITE=1"}});
  const fs::path ws = daemon.workspace();
  MakeRepository(ws);
  ASSERT_EQ(HostGit(ws, {"checkout", "-q", "-b", "old"}).exit_code, 0);
  for (int i = 0; i < 64; ++i) {
    std::ofstream(ws / "a.txt", std::ios::app) << "old " << i << "\n";
    ASSERT_EQ(HostGit(ws, {"commit", "-q", "-a", "-m", "old " + std::to_string(i)}).exit_code, 0);
  }
  ASSERT_EQ(HostGit(ws, {"checkout", "-q", "main"}).exit_code, 0);
  ASSERT_EQ(HostGit(ws, {"branch", "-q", "-D", "old"}).exit_code, 0);
  ASSERT_EQ(HostGit(ws, {"reflog", "expire", "--expire=now", "--all"}).exit_code, 0);
  // And what any repository that has not been gc'd for a while holds: other unreachable loose
  // objects (30,000 small blobs here), which make the person's prune take about a second.
  ASSERT_EQ(
      sandbox::testing::RunProcess({"/usr/bin/python3", "-c",
                                    "import hashlib, os, sys, zlib\n"
                                    "d = sys.argv[1]\n"
                                    "for i in range(30000):\n"
                                    "    body = b'junk %d\\n' % i\n"
                                    "    raw = b'blob %d\\0' % len(body) + body\n"
                                    "    h = hashlib.sha1(raw).hexdigest()\n"
                                    "    os.makedirs(os.path.join(d, h[:2]), exist_ok=True)\n"
                                    "    with open(os.path.join(d, h[:2], h[2:]), 'wb') as f:\n"
                                    "        f.write(zlib.compress(raw))\n",
                                    (ws / ".git" / "objects").string()})
          .exit_code,
      0);
  const auto month_ago = fs::file_time_type::clock::now() - std::chrono::hours(24 * 30);
  for (const auto& entry : fs::recursive_directory_iterator(ws / ".git" / "objects")) {
    if (entry.is_regular_file()) fs::last_write_time(entry.path(), month_ago);
  }
  RpcClient client(daemon.socket());
  const std::string id = OpenSession(client, "workspace-write");
  ASSERT_FALSE(id.empty()) << daemon.Log();
  // The unreachable commits, as the session finds them (oldest first), one branch each; then a
  // mark in the workspace, and the send ends a moment later (its copy-back follows).
  const std::string work =
      "n=0; for c in $(git fsck --unreachable --no-reflogs 2>/dev/null | "
      "awk '$2==\"commit\"{print $3}' | xargs git rev-list --no-walk --reverse "
      "--date-order); do git branch keep-$(printf %02d $n) $c; n=$((n+1)); done; "
      "touch .escape/ready; echo made $n";
  // The person's `git gc` prunes (what it runs: --expire 2.weeks.ago) from the moment the
  // session's branches exist in its private copy.
  std::atomic<bool> stop{false};
  int prunes = 0;
  std::thread person([&] {
    while (!stop.load() && !fs::exists(ws / ".escape" / "ready")) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    while (!stop.load()) {
      HostGit(ws, {"prune", "--expire", "2.weeks.ago"});
      ++prunes;
    }
  });
  Observed made = RunInSession(client, id, "workspace-write", "revive", work);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  stop = true;
  person.join();
  std::cout << "  observed " << made.Show() << "\n";
  EXPECT_TRUE(made.Says("made 64")) << made.Show();
  const std::string refs =
      HostGit(ws, {"for-each-ref", "--format=%(refname:short)", "refs/heads/keep-*"}).out;
  std::string dangling;
  size_t count = 0;
  for (size_t start = 0, end; (end = refs.find('\n', start)) != std::string::npos;
       start = end + 1) {
    const std::string name = refs.substr(start, end - start);
    ++count;
    if (HostGit(ws, {"cat-file", "-e", name + "^{commit}"}).exit_code != 0) {
      dangling += " " + name;
    }
  }
  const auto fsck = HostGit(ws, {"fsck"});
  std::cout << "  " << prunes << " prunes; the host has " << count
            << " keep-* branches; naming a missing commit:" << dangling << "; git fsck "
            << fsck.exit_code << "\n";
  EXPECT_TRUE(dangling.empty()) << "the person's prune deleted the commits of branches the "
                                   "copy-back wrote:"
                                << dangling << "\n"
                                << fsck.err.substr(0, 1000);
  // Nor their trees and blobs: what a branch names is whole.
  EXPECT_EQ(fsck.exit_code, 0) << fsck.err.substr(0, 1000);
}

}  // namespace
}  // namespace ptybox::testing
