// Sixth outside review of "Git for agents" (docs/security.md; review 10 of the project): the
// copy-back attacked once more from a workspace-write session before it becomes the default.
// Each test failed while its hole was open (root daemon and ptybox-ci); all seven are closed
// (CheckTip, NewRefNameClash, kPacksPerCopyBack in sandbox/git_private.cc):
//  - the fix of review 8 (a new tag named as a branch, or the reverse, is refused) compares
//    refs/heads/X with refs/tags/X only. git resolves a short name as refs/tags/X, then
//    refs/heads/X, then refs/remotes/X: a session's tag (or branch) `origin/main` comes back and
//    the person's `git reset --hard origin/main` ("throw the agent's work away") lands on the
//    session's commit;
//  - git resolves a name that is a ref before it tries it as an abbreviated object id: a
//    session's tag named as the abbreviated id of one of the person's commits (what `git log
//    --oneline` shows them) comes back, and the person's `git reset --hard <that id>`, `git
//    show`, `git revert`, `git cherry-pick` take the session's commit instead;
//  - a reflog line whose new id is all zeros skips every check (CopyBackReflog): appended to the
//    host's logs/refs/stash, it becomes the person's stash@{0}, and their `git stash pop` fails
//    ("not a stash-like commit");
//  - a ref written by hand beneath the person's packed ref (refs/tags/v1/x beside a packed v1)
//    comes back, and git's rule that a ref and a directory of refs never share a name is broken:
//    the person's `git gc` fails from then on;
//  - a ref's value is checked as `<id>^{commit}`, which an annotated tag object passes: the
//    person's main names a tag object, and their next `git commit` fails;
//  - the count of refs checked per copy-back is bounded (64), their time is not: each check is
//    a `git log` under a 2-minute timeout, which a 5 MiB history fills, so one branch holds the
//    close 2 minutes (64: two hours) on a core outside the session's cgroup;
//  - packs are not counted per copy-back: 2,000 one-object packs hold the close 35-42 s (the
//    search for host objects grows with the square of the packs) and all reach the host.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <thread>

#include "tests/escape/escape_support.h"
#include "tests/escape/git_attack_support.h"

namespace ptybox::testing {
namespace {

using git_attack::HostGit;
using git_attack::kIdentity;
using git_attack::MakeRepository;

namespace fs = std::filesystem;

// The session's commit `agent` on a branch of its own, then back on main: what every ref attack
// below names.
constexpr const char* kAgentCommit =
    "git checkout -q -b agent && echo agent > a.txt && git commit -qam agent && "
    "git checkout -q main && ";

// CopyBackRefs refuses a new refs/tags/X when refs/heads/X exists (and the reverse), but not
// when refs/remotes/X does. git's lookup of `origin/main` tries refs/tags/origin/main and
// refs/heads/origin/main before refs/remotes/origin/main: the person's `git reset --hard
// origin/main`, `git diff origin/main`, `git rebase origin/main` use the session's commit, with
// only an "ambiguous" warning on stderr.
TEST(GitReview6AttackTest, ASessionsRefNeverTakesTheNameOfARemoteTrackingBranch) {
  git_attack::GitWriteSession git;
  auto& [daemon, ws, client, id] = git;
  ASSERT_NO_FATAL_FAILURE(MakeRepository(ws));
  ASSERT_EQ(HostGit(ws, {"remote", "add", "origin", "https://example.com/repo.git"}).exit_code, 0);
  ASSERT_EQ(HostGit(ws, {"update-ref", "refs/remotes/origin/main", "HEAD"}).exit_code, 0);
  ASSERT_EQ(HostGit(ws, {"update-ref", "refs/remotes/upstream/main", "main"}).exit_code, 0);
  const std::string remote_before = HostGit(ws, {"rev-parse", "refs/remotes/origin/main"}).out;
  ASSERT_FALSE(remote_before.empty());
  ASSERT_NO_FATAL_FAILURE(git.OpenSession());
  const std::string work = std::string(kIdentity) + kAgentCommit +
                           "git tag origin/main agent && git branch upstream/main agent && "
                           "echo tagged";
  Observed did = RunInSession(client, id, "workspace-write", "tag-origin-main", work);
  std::cout << "  observed " << did.Show() << "\n";
  ASSERT_TRUE(did.Says("tagged")) << did.Show();
  const auto resolved = HostGit(ws, {"rev-parse", "origin/main"});
  std::cout << "  host rev-parse origin/main: " << resolved.out << resolved.err;
  EXPECT_EQ(resolved.out, remote_before)
      << "the person's `origin/main` resolves to the session's tag\n"
      << daemon.Log();
  // The same with a branch: refs/heads/upstream/main before refs/remotes/upstream/main, a
  // remote the person has under that name. (A remote the person adds only after the session's
  // branch came back is the documented limit: nothing at the copy-back names it, and git warns
  // "refname 'upstream/main' is ambiguous".)
  const auto upstream = HostGit(ws, {"rev-parse", "upstream/main"});
  std::cout << "  host rev-parse upstream/main: " << upstream.out << upstream.err;
  EXPECT_EQ(upstream.out, remote_before)
      << "the person's `upstream/main` resolves to the session's branch\n"
      << daemon.Log();
}

// git's get_oid_basic looks a name up as a ref (repo_dwim_ref) before it tries it as an
// abbreviated object id: a tag named as the abbreviated id of the person's commit (the seven
// digits `git log --oneline` shows) is what `git reset --hard <abbrev>` resets to, with only
// "refname '<abbrev>' is ambiguous" on stderr.
TEST(GitReview6AttackTest, ASessionsTagNeverTakesTheAbbreviatedIdOfThePersonsCommit) {
  git_attack::GitWriteSession git;
  auto& [daemon, ws, client, id] = git;
  ASSERT_NO_FATAL_FAILURE(MakeRepository(ws));
  const std::string full = HostGit(ws, {"rev-parse", "HEAD"}).out;
  std::string abbrev = HostGit(ws, {"rev-parse", "--short", "HEAD"}).out;
  while (!abbrev.empty() && abbrev.back() == '\n') abbrev.pop_back();
  ASSERT_GE(abbrev.size(), 4u);
  ASSERT_NO_FATAL_FAILURE(git.OpenSession());
  const std::string work =
      std::string(kIdentity) + kAgentCommit + "git tag " + abbrev + " agent && echo tagged";
  Observed did = RunInSession(client, id, "workspace-write", "tag-abbrev", work);
  std::cout << "  observed " << did.Show() << "\n";
  ASSERT_TRUE(did.Says("tagged")) << did.Show();
  const auto resolved = HostGit(ws, {"rev-parse", abbrev});
  std::cout << "  host rev-parse " << abbrev << ": " << resolved.out << resolved.err;
  EXPECT_EQ(resolved.out, full) << "the person's commit " << abbrev
                                << " resolves to the session's tag of that name\n"
                                << daemon.Log();
  // The person goes back to their own commit as `git log --oneline` shows it.
  ASSERT_EQ(HostGit(ws, {"reset", "-q", "--hard", abbrev}).exit_code, 0);
  std::cout << "  host a.txt after `git reset --hard " << abbrev
            << "`: " << git_attack::Slurp(ws / "a.txt");
  EXPECT_EQ(git_attack::Slurp(ws / "a.txt"), "one\n")
      << "`git reset --hard " << abbrev << "` checked out the session's commit\n"
      << daemon.Log();
}

// CopyBackReflog checks a line's new id against the host's objects and for gitlinks unless it
// is all zeros. The session stashes (refs/stash moves, so its reflog is copied) and appends
// `<stash> 0000… agent <…> <time> +0000\tx` to its logs/refs/stash. The host's stash@{0} is then
// the null id: the person's `git stash list` shows a stash that is not there and `git stash pop`
// fails ("is not a stash-like commit") until they repair the reflog by hand.
TEST(GitReview6AttackTest, AStashReflogLineNeverBreaksThePersonsStashPop) {
  git_attack::GitWriteSession git;
  auto& [daemon, ws, client, id] = git;
  ASSERT_NO_FATAL_FAILURE(MakeRepository(ws));
  std::ofstream(ws / "a.txt", std::ios::app) << "the person's work in progress\n";
  ASSERT_EQ(HostGit(ws, {"stash", "-q"}).exit_code, 0);
  ASSERT_NO_FATAL_FAILURE(git.OpenSession());
  const std::string work =
      std::string(kIdentity) +
      "echo agent >> a.txt && git stash -q && s=$(git rev-parse refs/stash) && "
      "printf '%s %s agent <agent@example.com> 1700000000 +0000\\tx\\n' \"$s\" "
      "0000000000000000000000000000000000000000 >> .git/logs/refs/stash && echo appended";
  Observed did = RunInSession(client, id, "workspace-write", "stash-null", work);
  std::cout << "  observed " << did.Show() << "\n";
  ASSERT_TRUE(did.Says("appended")) << did.Show();
  const auto top = HostGit(ws, {"rev-parse", "stash@{0}"});
  std::cout << "  host stash@{0}: " << top.out << top.err;
  EXPECT_NE(top.out, "0000000000000000000000000000000000000000\n")
      << "the person's stash@{0} is the null id\n"
      << daemon.Log();
  const auto pop = HostGit(ws, {"stash", "pop"});
  std::cout << "  host git stash pop: exit " << pop.exit_code << " " << pop.err;
  EXPECT_EQ(pop.exit_code, 0) << "the person's `git stash pop` fails: " << pop.err << "\n"
                              << daemon.Log();
}

// git never lets refs/tags/v1 and refs/tags/v1/x both exist (a ref and a directory of refs of
// the same name). The session's git refuses to make one, but the session writes the loose file
// itself; CopyBackRefs checks only that the host has no refs/tags/v1/x. When the person's tag
// (or branch) is packed (every tag of a fresh clone is, and every ref after `git gc`), the
// daemon makes the directory refs/tags/v1/ beside it. From then on the person's `git gc` (and
// the `git gc --auto` their commits run) fails: "cannot lock ref 'refs/tags/v1':
// 'refs/tags/v1/x' exists", "failed to run reflog".
TEST(GitReview6AttackTest, ASessionsRefNeverNestsBeneathThePersonsPackedRef) {
  git_attack::GitWriteSession git;
  auto& [daemon, ws, client, id] = git;
  ASSERT_NO_FATAL_FAILURE(MakeRepository(ws));
  ASSERT_EQ(HostGit(ws, {"tag", "v1"}).exit_code, 0);
  ASSERT_EQ(HostGit(ws, {"branch", "feature"}).exit_code, 0);
  ASSERT_EQ(HostGit(ws, {"pack-refs", "--all"}).exit_code, 0);
  ASSERT_EQ(HostGit(ws, {"gc", "-q"}).exit_code, 0);
  ASSERT_NO_FATAL_FAILURE(git.OpenSession());
  const std::string work = std::string(kIdentity) + kAgentCommit +
                           "mkdir -p .git/refs/tags/v1 .git/refs/heads/feature && "
                           "git rev-parse agent > .git/refs/tags/v1/x && "
                           "git rev-parse agent > .git/refs/heads/feature/x && echo nested";
  Observed did = RunInSession(client, id, "workspace-write", "nested-ref", work);
  std::cout << "  observed " << did.Show() << "\n";
  ASSERT_TRUE(did.Says("nested")) << did.Show();
  EXPECT_FALSE(fs::exists(ws / ".git" / "refs" / "tags" / "v1"))
      << "refs/tags/v1/ beside the person's packed tag v1\n"
      << daemon.Log();
  EXPECT_FALSE(fs::exists(ws / ".git" / "refs" / "heads" / "feature"))
      << "refs/heads/feature/ beside the person's packed branch feature\n"
      << daemon.Log();
  const auto gc = HostGit(ws, {"gc", "-q"});
  std::cout << "  host git gc: exit " << gc.exit_code << " " << gc.err;
  EXPECT_EQ(gc.exit_code, 0) << "the person's `git gc` fails: " << gc.err << "\n" << daemon.Log();
}

// CommitAddsGitlink checks a ref's value as `<id>^{commit}`: an annotated tag object peels to its
// commit and passes, so a branch may come back naming a tag object. git never writes one to a
// branch (update-ref refuses: "trying to write non-commit object"). The session writes the id of
// its annotated tag into its refs/heads/main by hand; the person's main then names a tag, and
// their next `git commit` fails ("cannot lock ref 'HEAD'"), `git fsck` says "HEAD: not a
// commit", and a push of main is refused by the server, until they repair the ref by hand.
TEST(GitReview6AttackTest, ThePersonsBranchNeverNamesATagObject) {
  git_attack::GitWriteSession git;
  ASSERT_NO_FATAL_FAILURE(git.Open());
  auto& [daemon, ws, client, id] = git;
  const std::string work = std::string(kIdentity) +
                           "git tag -a -m annotated t && git rev-parse t > .git/refs/heads/main && "
                           "echo pointed";
  Observed did = RunInSession(client, id, "workspace-write", "branch-tag-object", work);
  std::cout << "  observed " << did.Show() << "\n";
  ASSERT_TRUE(did.Says("pointed")) << did.Show();
  const auto type = HostGit(ws, {"cat-file", "-t", "refs/heads/main"});
  std::cout << "  host main is a " << type.out;
  EXPECT_EQ(type.out, "commit\n") << "the person's main names a " << type.out << daemon.Log();
  // The same tag object is a fine value for a tag: the branch's refusal is not remembered
  // against it.
  EXPECT_EQ(HostGit(ws, {"cat-file", "-t", "refs/tags/t"}).out, "tag\n") << daemon.Log();
  std::ofstream(ws / "a.txt", std::ios::app) << "mine\n";
  const auto commit = HostGit(ws, {"commit", "-q", "-a", "-m", "mine"});
  std::cout << "  the person's commit: exit " << commit.exit_code << " " << commit.err;
  EXPECT_EQ(commit.exit_code, 0) << "the person's `git commit` fails: " << commit.err << "\n"
                                 << daemon.Log();
}

// One copy-back checks at most 64 moved refs (kRefsCheckedPerCopyBack: review 3's "closes held
// by counts"), but each check is a run of the host's `git log --raw -m --root <tip> --not --all`
// bounded only by a 2-minute timeout (CommitAddsGitlink), and a timeout is a refusal that the
// next copy-back meets again. A session's history whose commits alternate between two flat
// 1,000,000-entry trees (5 MiB of objects) makes each run take its full 2 minutes of a core, as
// the daemon's user and outside the session's cgroup. Each branch at such a tip costs 2 minutes:
// 64 of them hold one copy-back 128 minutes, every send's and the last one, which
// `terminal_close`, `ptybox run`'s exit and the daemon's shutdown wait for; 16 sessions of one
// owner keep 16 cores busy. Two branches here: the close took about 4 minutes.
TEST(GitReview6AttackTest, ASlowHistoryNeverHoldsTheCloseForMinutes) {
  git_attack::GitWriteSession git;
  auto& [daemon, ws, client, id] = git;
  ASSERT_NO_FATAL_FAILURE(MakeRepository(ws));
  std::ofstream(ws / ".escape" / "slow.sh")
      << git_attack::SlowHistoryScript("git branch slow1 $p\ngit branch slow2 $p~1");
  ASSERT_NO_FATAL_FAILURE(git.OpenSession());
  const std::string work = std::string(kIdentity) +
                           "(bash .escape/slow.sh > .escape/slow.out 2>&1; touch .escape/made) "
                           ">/dev/null 2>&1 & echo started";
  Observed did = RunInSession(client, id, "workspace-write", "slow-history", work);
  ASSERT_TRUE(did.Says("started")) << did.Show();
  ASSERT_TRUE(git_attack::AwaitMade(ws, std::chrono::seconds(300))) << daemon.Log();
  std::cout << "  the session's script said: " << git_attack::Slurp(ws / ".escape" / "slow.out")
            << "\n";
  const auto [closed, seconds] = git_attack::TimedClose(client, id, std::chrono::seconds(1800));
  EXPECT_TRUE(closed.contains("result")) << closed.dump();
  // Review 3's close tests ask for 10 s; a minute is lenient on a shared machine.
  EXPECT_LT(seconds, 60) << "two branches held the session's close for " << seconds << " s\n"
                         << daemon.Log();
}

// Loose objects (4,096) and checked refs (64) are bounded per copy-back; packs are not. Each
// session pack costs a `git index-pack` process, and PackIndexNamesNoHostObject asks
// HostHasObject for each of its objects, which lists the host's objects/pack and searches every
// .idx there: the work grows with the square of the packs. A background job writes 2,000
// one-object packs (`git pack-objects` per blob) after the last send; `terminal_close` waits for
// all of it (35 s here), and the person's repository is left with 2,000 packs. 20,000 packs
// would be minutes: nothing counts them.
TEST(GitReview6AttackTest, ManyPacksNeverHoldTheCloseForLong) {
  git_attack::GitWriteSession git;
  ASSERT_NO_FATAL_FAILURE(git.Open());
  auto& [daemon, ws, client, id] = git;
  const std::string work =
      "(for i in $(seq 2000); do echo $i | git hash-object -w --stdin | "
      "git pack-objects -q .git/objects/pack/pack >/dev/null; done; git prune-packed; "
      "ls .git/objects/pack | grep -c 'idx$' > .escape/packs; touch .escape/made) "
      ">/dev/null 2>&1 & echo started";
  Observed did = RunInSession(client, id, "workspace-write", "many-packs", work);
  ASSERT_TRUE(did.Says("started")) << did.Show();
  ASSERT_TRUE(git_attack::AwaitMade(ws, std::chrono::seconds(600))) << daemon.Log();
  std::cout << "  packs made in the session: " << git_attack::Slurp(ws / ".escape" / "packs");
  const auto [closed, seconds] = git_attack::TimedClose(client, id, std::chrono::seconds(3600));
  const auto count = HostGit(ws, {"count-objects", "-v"});
  std::cout << "  host count-objects: " << count.out;
  EXPECT_TRUE(closed.contains("result")) << closed.dump();
  // As review 3's close tests: a close without git work is answered in well under a second.
  // Measured here: 35 s (root), and the host kept all 2,000 packs.
  EXPECT_LT(seconds, 10) << "2,000 packs held the session's close for " << seconds << " s\n";
}

}  // namespace
}  // namespace ptybox::testing
