// Seventh outside review of "Git for agents" (docs/security.md; review 11 of the project): the
// fixes of review 10 (CheckTip, NewRefNameClash, null reflog ids, kPacksPerCopyBack) attacked
// from a workspace-write session. Each test fails while its hole is open (root daemon and
// ptybox-ci):
//  - NewRefNameClash judges a new ref against the snapshot's refs (the launch's, and what the
//    copy-backs wrote), never against the host's refs of now: a branch the person makes while
//    the session runs (or a remote-tracking ref their `git fetch` brings) is unknown to it, and
//    the session's tag of the same name comes back. git reads refs/tags/N before refs/heads/N
//    and refs/remotes/N: review 8's and review 10's findings, open again for every ref the
//    person makes during the session;
//  - a linked worktree's HEAD (or the main HEAD) comes back naming the branch another worktree
//    has checked out, which git never allows ("already checked out"): the person's commit in
//    one worktree moves the branch under the other, whose next `git commit -a` undoes it;
//  - CheckTip means to remember a tip whose check timed out, but a check cut short by the
//    copy-back's 30 s is "left for later" whenever less than 30 s were left, which is always
//    (the budget starts before the first check): a slow tip is checked again, a full 30 s, at
//    every copy-back, every foreground send of the session is answered 30 s late, and the refs
//    after it (the session's ordinary commit on main) never come back;
//  - review 10's hex rule misses what `git describe` prints: a session's tag
//    `v1-1-g<abbrev of the person's commit>` comes back and is what the person's `git checkout`
//    of that name takes (git reads a ref before a describe name);
//  - an empty SHA-256 repository (IndexHashSize guesses SHA-1): the session's first commit never
//    comes back (its objects are "not an id of this repository's hash"), and a SHA-1 pack the
//    session copies in is indexed as SHA-1 and written to the person's objects/pack: their
//    `git fsck` fails, every command prints "wrong index v2 file size", `git gc` fails.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <thread>

#include "tests/escape/escape_support.h"
#include "tests/escape/git_attack_support.h"

namespace ptybox::testing {
namespace {

using git_attack::HostGit;
using git_attack::kIdentity;
using git_attack::Line;
using git_attack::MakeRepository;

namespace fs = std::filesystem;

// NewRefNameClash(name, snapshot.refs, mine): `snapshot.refs` is what the host had at the launch
// (plus what copy-backs wrote). The person goes on working while the session runs: they make a
// branch `fix`, and their `git fetch` brings refs/remotes/origin/topic (origin was configured at
// the launch). The session's tags `fix` and `origin/topic` come back, and git reads refs/tags/N
// first: the person's `git reset --hard fix` or `git rebase origin/topic` takes the session's
// commit, with only "refname is ambiguous" on stderr.
TEST(GitReview7AttackTest, ANewTagNeverShadowsARefThePersonMadeDuringTheSession) {
  git_attack::GitWriteSession git;
  auto& [daemon, ws, client, id] = git;
  ASSERT_NO_FATAL_FAILURE(MakeRepository(ws));
  ASSERT_EQ(HostGit(ws, {"remote", "add", "origin", "https://example.com/repo.git"}).exit_code, 0);
  ASSERT_NO_FATAL_FAILURE(git.OpenSession());
  Observed first = RunInSession(client, id, "workspace-write", "launch", "echo launched");
  ASSERT_TRUE(first.Says("launched")) << first.Show();
  // The person, meanwhile: a branch of their own, and a fetch.
  ASSERT_EQ(HostGit(ws, {"branch", "fix"}).exit_code, 0);
  ASSERT_EQ(HostGit(ws, {"update-ref", "refs/remotes/origin/topic", "HEAD"}).exit_code, 0);
  const std::string mine = HostGit(ws, {"rev-parse", "refs/heads/fix"}).out;
  ASSERT_FALSE(mine.empty());
  const std::string work = std::string(kIdentity) +
                           "git checkout -q -b agent && echo agent > a.txt && "
                           "git commit -qam agent && git checkout -q main && "
                           "git tag fix agent && git tag origin/topic agent && echo tagged";
  Observed did = RunInSession(client, id, "workspace-write", "tag-new-names", work);
  std::cout << "  observed " << did.Show() << "\n";
  ASSERT_TRUE(did.Says("tagged")) << did.Show();
  const auto fix = HostGit(ws, {"rev-parse", "fix"});
  std::cout << "  host rev-parse fix: " << fix.out << fix.err;
  EXPECT_EQ(fix.out, mine) << "the person's branch `fix` (made during the session) resolves to "
                              "the session's tag\n"
                           << daemon.Log();
  const auto topic = HostGit(ws, {"rev-parse", "origin/topic"});
  std::cout << "  host rev-parse origin/topic: " << topic.out << topic.err;
  EXPECT_EQ(topic.out, mine) << "the person's `origin/topic` (fetched during the session) "
                                "resolves to the session's tag\n"
                             << daemon.Log();
}

// The host with a linked worktree `.escape/wt` on branch `side` (id `wt`), the main worktree on
// main; then `work` in a session; then the branch each worktree's HEAD names on the host.
struct WorktreeHeads {
  std::string main_head;
  std::string linked_head;
};

WorktreeHeads RunWithLinkedWorktree(const std::string& work, const std::string& name) {
  WorktreeHeads heads;
  Daemon daemon(Daemon::Options{.extra_args = {}, .env = {"PTYBOX_GIT_WRITE=1"}});
  const fs::path ws = daemon.workspace();
  MakeRepository(ws);
  EXPECT_EQ(HostGit(ws, {"worktree", "add", "-q", "-b", "side", ".escape/wt"}).exit_code, 0);
  EXPECT_TRUE(fs::exists(ws / ".git" / "worktrees" / "wt" / "HEAD"));
  RpcClient client(daemon.socket());
  const std::string id = OpenSession(client, "workspace-write");
  EXPECT_FALSE(id.empty()) << daemon.Log();
  if (id.empty()) return heads;
  Observed did = RunInSession(client, id, "workspace-write", name, std::string(kIdentity) + work);
  std::cout << "  observed " << did.Show() << "\n";
  EXPECT_TRUE(did.Says("pointed")) << did.Show();
  heads.main_head = Line(HostGit(ws, {"symbolic-ref", "HEAD"}).out);
  heads.linked_head = Line(HostGit(ws / ".escape" / "wt", {"symbolic-ref", "HEAD"}).out);
  std::cout << "  host HEADs: main worktree " << heads.main_head << ", linked " << heads.linked_head
            << "\n";
  if (heads.main_head == heads.linked_head) {
    // What it costs the person: their commit in the main worktree, then the linked one's
    // `git status` shows that commit undone, staged.
    std::ofstream(ws / "a.txt", std::ios::app) << "the person's work\n";
    HostGit(ws, {"commit", "-q", "-a", "-m", "mine"});
    std::cout << "  linked worktree's status after the person's commit: "
              << HostGit(ws / ".escape" / "wt", {"status", "--porcelain"}).out << "\n";
  }
  std::cout << daemon.Log();
  return heads;
}

// CopyBackWorktrees copies a linked worktree's HEAD on the main HEAD's rule (a commit, or
// `ref: refs/heads/...`): it never asks whether another worktree has that branch checked out,
// which git refuses ("is already checked out at"; `git worktree add` and `git checkout` alike).
// The session points worktrees/wt/HEAD at main (as `git checkout --ignore-other-worktrees main`
// does); on the host both worktrees then stand on main: the person's commit in the main
// worktree moves the branch under the linked one, whose index and files still hold the old
// commit, and its next `git commit -a` reverts the person's work.
TEST(GitReview7AttackTest, ALinkedWorktreeNeverComesBackOnTheMainWorktreesBranch) {
  const WorktreeHeads heads = RunWithLinkedWorktree(
      "printf 'ref: refs/heads/main\\n' > .git/worktrees/wt/HEAD && "
      "cat .git/worktrees/wt/HEAD && echo pointed",
      "worktree-head-main");
  EXPECT_EQ(heads.linked_head, "refs/heads/side")
      << "the linked worktree's HEAD came back naming " << heads.linked_head
      << ", the branch the main worktree has checked out";
}

// The same from the other side: the main HEAD comes back naming the branch the linked worktree
// has checked out (`git checkout --ignore-other-worktrees side` in the session).
TEST(GitReview7AttackTest, TheMainHeadNeverComesBackOnALinkedWorktreesBranch) {
  const WorktreeHeads heads = RunWithLinkedWorktree(
      "git checkout -q --ignore-other-worktrees side 2>&1 || "
      "git symbolic-ref HEAD refs/heads/side; cat .git/HEAD && echo pointed",
      "main-head-side");
  EXPECT_EQ(heads.main_head, "refs/heads/main")
      << "the main HEAD came back naming " << heads.main_head
      << ", the branch the linked worktree has checked out";
}

// NewRefNameClash refuses a new branch or tag whose short name is 4-64 hex digits (review 10:
// git tries a name as a ref before it tries it as an abbreviated id). git also reads
// `<tag>-<n>-g<abbrev>`, what `git describe` prints (and what builds stamp as a version), as the
// commit <abbrev>, but only when no ref has that name: the session's tag
// `v1-1-g<the person's abbreviated commit>` comes back, and the person's `git checkout
// v1-1-g...` or `git reset --hard v1-1-g...` (copied from a build's version or from `git
// describe`) takes the session's commit.
TEST(GitReview7AttackTest, ASessionsTagNeverTakesTheDescribeNameOfThePersonsCommit) {
  git_attack::GitWriteSession git;
  auto& [daemon, ws, client, id] = git;
  ASSERT_NO_FATAL_FAILURE(MakeRepository(ws));
  ASSERT_EQ(HostGit(ws, {"tag", "-a", "-m", "one", "v1"}).exit_code, 0);
  std::ofstream(ws / "a.txt", std::ios::app) << "two\n";
  ASSERT_EQ(HostGit(ws, {"commit", "-q", "-a", "-m", "second"}).exit_code, 0);
  const std::string full = HostGit(ws, {"rev-parse", "HEAD"}).out;
  const std::string described = Line(HostGit(ws, {"describe"}).out);
  std::cout << "  host git describe: " << described << "\n";
  ASSERT_NE(described.find("-g"), std::string::npos);
  ASSERT_NO_FATAL_FAILURE(git.OpenSession());
  const std::string work = std::string(kIdentity) +
                           "git checkout -q -b agent && echo agent > a.txt && "
                           "git commit -qam agent && git checkout -q main && git tag " +
                           described + " agent && echo tagged";
  Observed did = RunInSession(client, id, "workspace-write", "tag-describe", work);
  std::cout << "  observed " << did.Show() << "\n";
  ASSERT_TRUE(did.Says("tagged")) << did.Show();
  const auto resolved = HostGit(ws, {"rev-parse", described});
  std::cout << "  host rev-parse " << described << ": " << resolved.out << resolved.err;
  EXPECT_EQ(resolved.out, full) << "the person's `" << described
                                << "` resolves to the session's tag of that name\n"
                                << daemon.Log();
}

// An empty SHA-256 repository (`git init --object-format=sha256`, no commit yet): review 10
// read that IndexHashSize then guesses SHA-1's 20 bytes. The session's first commit there
// must come back as it does in an empty SHA-1 repository, and the person's repository must stay
// whole (`git fsck`).
TEST(GitReview7AttackTest, AnEmptySha256RepositoryTakesTheSessionsFirstCommit) {
  Daemon daemon(Daemon::Options{.extra_args = {}, .env = {"PTYBOX_GIT_WRITE=1"}});
  const fs::path ws = daemon.workspace();
  ASSERT_EQ(HostGit(ws, {"init", "-q", "--object-format=sha256", "-b", "main"}).exit_code, 0);
  std::ofstream(ws / ".gitignore") << ".escape/\n";
  fs::create_directories(ws / ".escape");
  RpcClient client(daemon.socket());
  const std::string id = OpenSession(client, "workspace-write");
  ASSERT_FALSE(id.empty()) << daemon.Log();
  const std::string work = std::string(kIdentity) +
                           "echo agent > a.txt && git add a.txt .gitignore && "
                           "git commit -qm agent && git rev-parse HEAD && echo committed";
  Observed did = RunInSession(client, id, "workspace-write", "sha256-first", work);
  std::cout << "  observed " << did.Show() << "\n";
  ASSERT_TRUE(did.Says("committed")) << did.Show();
  const auto log = HostGit(ws, {"log", "-1", "--format=%s", "main"});
  std::cout << "  host main: " << log.out << log.err;
  const auto status = HostGit(ws, {"status", "--porcelain"});
  std::cout << "  host status: " << status.out << status.err;
  const auto fsck = HostGit(ws, {"fsck"});
  std::cout << "  host fsck: exit " << fsck.exit_code << " " << fsck.out << fsck.err;
  std::cout << daemon.Log();
  EXPECT_EQ(log.out, "agent\n") << "the session's first commit did not come back";
  EXPECT_EQ(fsck.exit_code, 0) << fsck.err;
  EXPECT_EQ(status.exit_code, 0) << status.err;
}

// The same empty SHA-256 repository: IndexHashSize guesses 20 bytes, so a pack the session
// makes with SHA-1 ids (in a SHA-1 repository of its own under /tmp, then copied into its
// objects/pack) is indexed by the host's `git index-pack --object-format=sha1` and written into
// the person's SHA-256 objects/pack. The person's git must never meet a SHA-1 pack there.
TEST(GitReview7AttackTest, AnEmptySha256RepositoryNeverTakesASha1Pack) {
  Daemon daemon(Daemon::Options{.extra_args = {}, .env = {"PTYBOX_GIT_WRITE=1"}});
  const fs::path ws = daemon.workspace();
  ASSERT_EQ(HostGit(ws, {"init", "-q", "--object-format=sha256", "-b", "main"}).exit_code, 0);
  std::ofstream(ws / ".gitignore") << ".escape/\n";
  fs::create_directories(ws / ".escape");
  RpcClient client(daemon.socket());
  const std::string id = OpenSession(client, "workspace-write");
  ASSERT_FALSE(id.empty()) << daemon.Log();
  const std::string work =
      std::string(kIdentity) +
      "d=$(mktemp -d) && git init -q --object-format=sha1 $d && echo x > $d/x && "
      "git -C $d add x && git -C $d commit -qm one && git -C $d repack -q -a -d && "
      "cp $d/.git/objects/pack/*.pack .git/objects/pack/ && ls .git/objects/pack && echo packed";
  Observed did = RunInSession(client, id, "workspace-write", "sha1-pack", work);
  std::cout << "  observed " << did.Show() << "\n";
  ASSERT_TRUE(did.Says("packed")) << did.Show();
  std::error_code ec;
  size_t packs = 0;
  for (const auto& e : fs::directory_iterator(ws / ".git" / "objects" / "pack", ec)) {
    std::cout << "  host objects/pack: " << e.path().filename().string() << "\n";
    ++packs;
  }
  const auto count = HostGit(ws, {"count-objects", "-v"});
  std::cout << "  host count-objects: exit " << count.exit_code << " " << count.out << count.err;
  const auto fsck = HostGit(ws, {"fsck"});
  std::cout << "  host fsck: exit " << fsck.exit_code << " " << fsck.out << fsck.err;
  std::cout << daemon.Log();
  EXPECT_EQ(packs, 0u) << "a SHA-1 pack was written into the person's SHA-256 repository";
  EXPECT_EQ(fsck.exit_code, 0) << fsck.err;
  EXPECT_TRUE(count.err.empty()) << count.err;
  // The person's own commit, then their `git gc` (which their commits run with --auto).
  std::ofstream(ws / "mine.txt") << "mine\n";
  ASSERT_EQ(HostGit(ws, {"add", "mine.txt"}).exit_code, 0);
  HostGit(ws, {"commit", "-q", "-m", "mine"});
  const auto gc = HostGit(ws, {"gc", "-q"});
  std::cout << "  host git gc: exit " << gc.exit_code << "\n";
  EXPECT_EQ(gc.exit_code, 0) << "the person's `git gc` fails: " << gc.err;
}

// CheckTip: `if (timed_out && left < kGitTipChecksPerCopyBack) return kLater` — a check cut
// short by the copy-back's budget is retried whole by the next copy-back, and only a check that
// had the full 30 s is refused and remembered. But the budget (tip_checks_until) is set at the
// start of CopyBackPrivateGit, before the objects are copied and the refs read, so `left` is
// always below 30 s: a slow tip is never remembered. Every copy-back (each send's, then the
// close's) spends its 30 s on it again, each foreground send is answered 30 s late, and every
// ref sorted after it waits "for the next copy-back" for ever: here the session's own commit on
// main never reaches the host, not even at the close.
TEST(GitReview7AttackTest, ASlowTipIsRememberedAndNeverStarvesTheRefsAfterIt) {
  // At info the daemon logs each copy-back's runs of the host's git checking tips.
  git_attack::GitWriteSession git({"PTYBOX_LOG=info"});
  auto& [daemon, ws, client, id] = git;
  ASSERT_NO_FATAL_FAILURE(MakeRepository(ws));
  // A slow history on a branch `a-slow`, which sorts before `main`.
  std::ofstream(ws / ".escape" / "slow.sh")
      << git_attack::SlowHistoryScript("git branch a-slow $p");
  ASSERT_NO_FATAL_FAILURE(git.OpenSession());
  const std::string start = std::string(kIdentity) +
                            "(bash .escape/slow.sh > .escape/slow.out 2>&1; touch .escape/made) "
                            ">/dev/null 2>&1 & echo started";
  Observed did = RunInSession(client, id, "workspace-write", "slow-branch", start);
  ASSERT_TRUE(did.Says("started")) << did.Show();
  ASSERT_TRUE(git_attack::AwaitMade(ws, std::chrono::seconds(300))) << daemon.Log();
  std::cout << "  the session's script said: " << git_attack::Slurp(ws / ".escape" / "slow.out")
            << "\n";
  // The session's ordinary work: a commit on main. Its copy-back meets a-slow first.
  Observed commit =
      RunInSession(client, id, "workspace-write", "commit",
                   std::string(kIdentity) +
                       "echo agent >> a.txt && git commit -qam agent && git rev-parse HEAD");
  std::cout << "  observed " << commit.Show() << "\n";
  const std::string agent = Line(HostGit(ws, {"rev-parse", "HEAD"}).out);
  std::cout << "  host main after the commit's send: " << agent << "\n";
  // Later sends, each answered after its copy-back. A check of a-slow cut short by the commit's
  // copy-back's time (a busy machine) is run once more, whole, by the next; after that a-slow's
  // refusal is remembered and no copy-back runs the host's git on it again.
  const size_t before = daemon.Log().size();
  for (int i = 0; i < 3; ++i) {
    Observed again = RunInSession(client, id, "workspace-write", "again", "echo again");
    EXPECT_TRUE(again.Says("again")) << again.Show();
  }
  const std::string later = daemon.Log().substr(before);
  size_t checking = 0;  // later copy-backs that ran the host's git on a tip
  std::istringstream lines(later);
  for (std::string line; std::getline(lines, line);) {
    const size_t at = line.find(" tips checked by the host's git");
    if (at == std::string::npos) continue;
    const size_t from = line.rfind(' ', at - 1) + 1;
    if (line.substr(from, at - from) != "0") ++checking;
  }
  std::cout << "  later copy-backs that checked a tip: " << checking << "\n";
  const Json closed =
      client.Call("terminal_close", Json{{"sessionId", id}}, std::chrono::seconds(600));
  EXPECT_TRUE(closed.contains("result")) << closed.dump();
  const auto main_now = HostGit(ws, {"log", "-1", "--format=%s", "main"});
  std::cout << "  host main's last commit after the close: " << main_now.out;
  EXPECT_LE(checking, 1u) << "a tip already refused (timed out) is checked again at every "
                             "copy-back\n"
                          << later;
  EXPECT_EQ(main_now.out, "agent\n")
      << "the session's commit on main never came back: a slow tip sorted before it spends "
         "every copy-back's time\n"
      << daemon.Log();
}

}  // namespace
}  // namespace ptybox::testing
