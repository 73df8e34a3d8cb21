// Ninth outside review of "Git for agents" (docs/security.md; review 16 of the project),
// attacked from a workspace-write session. Each test failed while its hole was open (root daemon
// and ptybox-ci); all are closed (docs/security.md, "Git for agents"):
//  - CheckedOutOnTheHost (review 15's fix) looks at the HEADs of the host's worktrees only. git
//    also refuses to delete a branch a worktree is rebasing or bisecting (HEAD is detached then,
//    and `rebase-merge/head-name`, `rebase-apply/head-name` or `BISECT_START` names the branch:
//    "Cannot delete branch ... checked out at"). The copy-back deletes it: the person's
//    `git rebase --continue` then fails ("could not update refs/heads/agent") with their rebase
//    stuck half-done, and `git bisect reset` fails ("could not check out original HEAD").
//  - UpdateHostRef deletes a ref that is not in packed-refs without taking packed-refs.lock
//    (git's deletion always takes it): a `git pack-refs` of the person's (what `git gc` runs),
//    which holds that lock from reading the loose refs to committing packed-refs, packs a
//    branch the copy-back is deleting, and the deleted branch is back on the host for good.
//  - the other direction of the first: CheckedOutElsewhere reads only the worktrees' HEADs, so
//    the session's `git checkout --ignore-other-worktrees agent` comes back while a linked
//    worktree of the person's is rebasing agent; their finished rebase then shows in the main
//    worktree as their change undone and staged.
//  - NewRefNameClash never looks at git's pseudo-refs ($GIT_DIR/N, read before refs/N): a
//    session's tag `ORIG_HEAD` comes back; where the host has no .git/ORIG_HEAD yet, the
//    person's `git reset` can no longer write it, and their undo `git reset --hard ORIG_HEAD`
//    puts their branch on the session's commit.
//  - IndexPathRefusal refuses a link named `.gitmodules` only as written: `.gitmodules.` (what
//    NTFS reads as .gitmodules; git's verify_path and fsck refuse it) comes back, and the
//    person's next commit records a tree fsck flags and their server refuses; and
//    `.git::$INDEX_ALLOCATION/...` (NTFS's stream of .git, which git's is_ntfs_dotgit refuses)
//    comes back, after which the person's `git stash` dies with a BUG; the HFS form
//    `.git<U+200C>modules` needs no option of the session's git at all.
#include <gtest/gtest.h>
#include <unistd.h>

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
using git_attack::MakeAgentBranch;
using git_attack::MakeRepository;
using git_attack::PushToFsckingServer;
using git_attack::WriteManyPackedTags;

namespace fs = std::filesystem;

// The person rebases the agent's branch on the host to edit its commit (`git rebase -i`, the
// commit marked `edit`): HEAD is detached, `rebase-merge/head-name` names refs/heads/agent. The
// session deletes `agent` (as an agent does once it is merged). git refuses that ("Cannot
// delete branch 'agent' checked out at"); the copy-back writes it. The person's `git rebase
// --continue` then fails: the rebased commits are on a detached HEAD, the branch is gone.
TEST(GitReview9AttackTest, ABranchThePersonIsRebasingIsNeverDeleted) {
  git_attack::GitWriteSession git;
  ASSERT_NO_FATAL_FAILURE(git.Open());
  auto& [daemon, ws, client, id] = git;
  ASSERT_NO_FATAL_FAILURE(MakeAgentBranch(client, id, ws, daemon));
  ASSERT_EQ(HostGit(ws, {"checkout", "-q", "agent"}).exit_code, 0);
  ASSERT_EQ(
      HostGit(ws, {"-c", "sequence.editor=sed -i s/^pick/edit/", "rebase", "-q", "-i", "HEAD~1"})
          .exit_code,
      0);
  ASSERT_TRUE(fs::exists(ws / ".git" / "rebase-merge" / "head-name"));
  Observed gone = RunInSession(client, id, "workspace-write", "delete-agent",
                               "git branch -q -D agent && echo deleted");
  ASSERT_TRUE(gone.Says("deleted")) << gone.Show();
  const bool still =
      HostGit(ws, {"rev-parse", "--verify", "-q", "refs/heads/agent"}).exit_code == 0;
  const auto resumed = HostGit(ws, {"-c", "core.editor=true", "rebase", "--continue"});
  std::cout << "  host refs/heads/agent after the session's deletion: "
            << (still ? "present" : "absent")
            << "; the person's git rebase --continue: " << resumed.exit_code << " " << resumed.err;
  EXPECT_TRUE(still) << "the branch the person is rebasing was deleted under them\n"
                     << daemon.Log();
  EXPECT_EQ(resumed.exit_code, 0) << "the person's rebase cannot finish";
}

// The same with `git bisect`: the person bisects from `agent` (BISECT_START names it, HEAD is
// detached); the session deletes `agent`; the person's `git bisect reset` cannot go back.
TEST(GitReview9AttackTest, ABranchThePersonIsBisectingIsNeverDeleted) {
  git_attack::GitWriteSession git;
  ASSERT_NO_FATAL_FAILURE(git.Open());
  auto& [daemon, ws, client, id] = git;
  ASSERT_NO_FATAL_FAILURE(MakeAgentBranch(client, id, ws, daemon));
  ASSERT_EQ(HostGit(ws, {"checkout", "-q", "agent"}).exit_code, 0);
  ASSERT_EQ(HostGit(ws, {"bisect", "start", "agent", "main"}).exit_code, 0);
  ASSERT_EQ(Line(git_attack::Slurp(ws / ".git" / "BISECT_START")), "agent");
  ASSERT_NE(HostGit(ws, {"symbolic-ref", "-q", "HEAD"}).exit_code, 0) << "HEAD is detached";
  Observed gone = RunInSession(client, id, "workspace-write", "delete-agent",
                               "git branch -q -D agent && echo deleted");
  ASSERT_TRUE(gone.Says("deleted")) << gone.Show();
  const bool still =
      HostGit(ws, {"rev-parse", "--verify", "-q", "refs/heads/agent"}).exit_code == 0;
  const auto reset = HostGit(ws, {"bisect", "reset"});
  std::cout << "  host refs/heads/agent after the session's deletion: "
            << (still ? "present" : "absent")
            << "; the person's git bisect reset: " << reset.exit_code << " " << reset.err;
  EXPECT_TRUE(still) << "the branch the person is bisecting was deleted under them\n"
                     << daemon.Log();
  EXPECT_EQ(reset.exit_code, 0) << "the person's bisect cannot go back to their branch";
}

// The other direction of the same gap: CheckedOutElsewhere, which keeps the session's HEAD off a
// branch another worktree holds (outside review 11), reads only the worktrees' HEADs. The
// person rebases `agent` in a linked worktree (stopped to edit a commit: its HEAD is detached,
// `worktrees/<id>/rebase-merge/head-name` names agent). git's `checkout agent` refuses ("is
// already checked out at"); the session's `git checkout --ignore-other-worktrees agent` does
// not, and its HEAD comes back: the host's main worktree is on `agent`. The person finishes the
// rebase in the linked worktree; it moves `agent`, and the main worktree shows the person's
// change undone and staged (its index and files are the old commit's), ready for their next
// commit to revert it.
TEST(GitReview9AttackTest, HeadNeverComesBackOntoABranchAnotherWorktreeIsRebasing) {
  git_attack::GitWriteSession git;
  ASSERT_NO_FATAL_FAILURE(git.Open());
  auto& [daemon, ws, client, id] = git;
  ASSERT_NO_FATAL_FAILURE(MakeAgentBranch(client, id, ws, daemon));
  char dir[] = "/tmp/ptybox-review16-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  const fs::path linked = fs::path(dir) / "wt";
  ASSERT_EQ(HostGit(ws, {"worktree", "add", "-q", linked.string(), "agent"}).exit_code, 0);
  ASSERT_EQ(HostGit(linked,
                    {"-c", "sequence.editor=sed -i s/^pick/edit/", "rebase", "-q", "-i", "HEAD~1"})
                .exit_code,
            0);
  Observed moved = RunInSession(client, id, "workspace-write", "checkout-agent",
                                "git checkout -q --ignore-other-worktrees agent && echo on-agent");
  ASSERT_TRUE(moved.Says("on-agent")) << moved.Show();
  const std::string host_head = Line(git_attack::Slurp(ws / ".git" / "HEAD"));
  // The person finishes their rebase: the commit they stopped at, edited.
  std::ofstream(linked / "a.txt") << "the person's edit\n";
  const auto amended = HostGit(linked, {"commit", "-q", "-a", "--amend", "-m", "person"});
  const auto resumed = HostGit(linked, {"-c", "core.editor=true", "rebase", "--continue"});
  const std::string status = HostGit(ws, {"status", "--porcelain"}).out;
  // The session's checkout wrote agent's files into the shared worktree (as any edit of the
  // session's does); what must not happen is the main worktree's index staging them.
  const int staged = HostGit(ws, {"diff", "--cached", "--quiet"}).exit_code;
  std::cout << "  host HEAD after the send: " << host_head << "; the person's amend "
            << amended.exit_code << ", rebase --continue " << resumed.exit_code
            << "; then git status in the main worktree:\n"
            << status;
  HostGit(ws, {"worktree", "remove", "--force", linked.string()});
  fs::remove_all(dir);
  EXPECT_NE(host_head, "ref: refs/heads/agent")
      << "the session's HEAD came back onto the branch another worktree is rebasing\n"
      << daemon.Log();
  EXPECT_EQ(staged, 0) << "the main worktree shows the person's rebase undone and staged";
}

// NewRefNameClash refuses a new branch or tag whose short name git would read as another ref
// (refs/N, refs/tags/N, refs/heads/N, refs/remotes/N), but git reads a short name first as
// $GIT_DIR/N: the pseudo-refs ORIG_HEAD, FETCH_HEAD, MERGE_HEAD... The session tags its own
// commit `ORIG_HEAD` (it comes back). On the host, where no .git/ORIG_HEAD exists yet, the
// person's `git reset --hard HEAD~2` can no longer record ORIG_HEAD ("update_ref failed for ref
// 'ORIG_HEAD'", exit 0), and their undo, `git reset --hard ORIG_HEAD`, puts their branch on the
// session's commit instead of their own two.
TEST(GitReview9AttackTest, ATagNeverTakesThePlaceOfThePersonsOrigHead) {
  git_attack::GitWriteSession git;
  ASSERT_NO_FATAL_FAILURE(git.Open());
  auto& [daemon, ws, client, id] = git;
  Observed tagged =
      RunInSession(client, id, "workspace-write", "tag-orig-head",
                   std::string(kIdentity) +
                       "git checkout -q -b side && echo agent > a.txt && git commit -qam agent && "
                       "git tag ORIG_HEAD && git checkout -q main && git branch -q -D side && "
                       "echo tagged");
  ASSERT_TRUE(tagged.Says("tagged")) << tagged.Show();
  const bool came_back =
      HostGit(ws, {"rev-parse", "--verify", "-q", "refs/tags/ORIG_HEAD"}).exit_code == 0;
  ASSERT_FALSE(fs::exists(ws / ".git" / "ORIG_HEAD"));
  // The person's own work, an accidental reset, and its undo.
  for (const char* text : {"mine1", "mine2"}) {
    std::ofstream(ws / "a.txt") << text << "\n";
    ASSERT_EQ(HostGit(ws, {"commit", "-q", "-a", "-m", text}).exit_code, 0);
  }
  const auto reset = HostGit(ws, {"reset", "-q", "--hard", "HEAD~2"});
  const auto undo = HostGit(ws, {"reset", "-q", "--hard", "ORIG_HEAD"});
  const std::string subject = Line(HostGit(ws, {"log", "-1", "--format=%s"}).out);
  std::cout << "  host refs/tags/ORIG_HEAD: " << (came_back ? "present" : "absent")
            << "; the person's git reset --hard HEAD~2: " << reset.exit_code << " " << reset.err
            << "  their git reset --hard ORIG_HEAD: " << undo.exit_code
            << "; their branch is now at: " << subject << "\n";
  EXPECT_FALSE(came_back) << "a tag named ORIG_HEAD came back\n" << daemon.Log();
  EXPECT_EQ(subject, "mine2") << "the person's undo put their branch on the session's commit";
}

// IndexPathRefusal refuses a symbolic link named `.gitmodules` (and .gitattributes, .gitignore,
// .mailmap), compared exactly in lower case. git's verify_path (core.protectNTFS, on by default
// everywhere) and fsck refuse every name NTFS reads as .gitmodules: trailing dots or spaces
// (`.gitmodules.`), the short name `gitmod~1`. The session's `git -c core.protectNTFS=false
// update-index --cacheinfo 120000,<blob>,.gitmodules.` comes back. On the host the person's
// `git stash` fails ("invalid path"), their `git reset --hard` cannot write it, and their next
// commit records a tree `git fsck` flags (gitmodulesSymlink) and a server with
// receive.fsckObjects refuses: only rewriting their commits mends it.
TEST(GitReview9AttackTest, AnIndexEntryNeverLinksAnNtfsGitmodules) {
  git_attack::GitWriteSession git;
  ASSERT_NO_FATAL_FAILURE(git.Open());
  auto& [daemon, ws, client, id] = git;
  Observed staged = RunInSession(
      client, id, "workspace-write", "stage-link",
      "b=$(echo /etc/passwd | git hash-object -w --stdin) && git -c core.protectNTFS=false "
      "update-index --add --cacheinfo 120000,$b,.gitmodules. && echo staged");
  ASSERT_TRUE(staged.Says("staged")) << staged.Show();
  const std::string entry = HostGit(ws, {"ls-files", "-s", ".gitmodules."}).out;
  std::cout << "  host index entry: " << entry;
  // The person's own work: a file of theirs, committed, then pushed to their server.
  std::ofstream(ws / "b.txt") << "the person's work\n";
  ASSERT_EQ(HostGit(ws, {"add", "b.txt"}).exit_code, 0);
  const auto commit = HostGit(ws, {"commit", "-q", "-m", "mine"});
  const auto fsck = HostGit(ws, {"fsck"});
  const auto push = PushToFsckingServer(ws);
  std::cout << "  the person's commit " << commit.exit_code
            << "; git fsck: " << fsck.err.substr(0, 200)
            << "  their push to a server with receive.fsckObjects: " << push.exit_code << " "
            << push.err.substr(0, 200);
  EXPECT_EQ(entry, "") << "a symbolic link named `.gitmodules.` came back in the index\n"
                       << daemon.Log();
  EXPECT_EQ(fsck.err.find("gitmodulesSymlink"), std::string::npos)
      << "the person's commit records a tree fsck refuses";
  EXPECT_EQ(push.exit_code, 0) << "the person's push is refused by their server";
}

// The HFS form of the same, with the session's git as it is (core.protectHFS is off on Linux):
// `.git<U+200C>modules`, which HFS+ reads as .gitmodules and fsck checks on every platform.
// `git update-index --cacheinfo 120000,<blob>,.git<U+200C>modules` needs no option; the link
// comes back, and the person's next commit is refused by a server with receive.fsckObjects.
TEST(GitReview9AttackTest, AnIndexEntryNeverLinksAnHfsGitmodules) {
  git_attack::GitWriteSession git;
  ASSERT_NO_FATAL_FAILURE(git.Open());
  auto& [daemon, ws, client, id] = git;
  Observed staged = RunInSession(
      client, id, "workspace-write", "stage-hfs-link",
      "b=$(echo /etc/passwd | git hash-object -w --stdin) && git update-index --add "
      "--cacheinfo \"120000,$b,$(printf '.git\\342\\200\\214modules')\" && echo staged");
  ASSERT_TRUE(staged.Says("staged")) << staged.Show();
  const std::string entries = HostGit(ws, {"ls-files", "-s", "-z"}).out;
  const bool came_back = entries.find("120000") != std::string::npos;
  std::ofstream(ws / "b.txt") << "the person's work\n";
  ASSERT_EQ(HostGit(ws, {"add", "b.txt"}).exit_code, 0);
  const auto commit = HostGit(ws, {"commit", "-q", "-m", "mine"});
  const auto push = PushToFsckingServer(ws);
  std::cout << "  host index holds the link: " << (came_back ? "yes" : "no")
            << "; the person's commit " << commit.exit_code
            << "; their push to a server with receive.fsckObjects: " << push.exit_code << " "
            << push.err.substr(0, 200);
  EXPECT_FALSE(came_back) << "a symbolic link HFS+ reads as .gitmodules came back in the index\n"
                          << daemon.Log();
  EXPECT_EQ(push.exit_code, 0) << "the person's push is refused by their server";
}

// The same for `.git` itself: DangerousComponent refuses `.git` with trailing dots or spaces
// and `git~1`, but git's is_ntfs_dotgit ends a component at ':' too (NTFS's alternate data
// streams: `.git::$INDEX_ALLOCATION` is the .git directory there, CVE-2019-1352). The session's
// `git -c core.protectNTFS=false update-index --cacheinfo
// 100644,<blob>,.git::$INDEX_ALLOCATION/hooks/post-checkout` comes back. On the host the
// person's next commit records it, and after that their `git stash` dies (exit 134, `BUG:
// unpack-trees.c: pos 0 doesn't point to the first entry`); `git reset --hard` cannot write it
// ("invalid path").
TEST(GitReview9AttackTest, AnIndexEntryNeverNamesTheNtfsStreamOfDotGit) {
  git_attack::GitWriteSession git;
  ASSERT_NO_FATAL_FAILURE(git.Open());
  auto& [daemon, ws, client, id] = git;
  Observed staged = RunInSession(
      client, id, "workspace-write", "stage-stream",
      "b=$(echo 'echo agent' | git hash-object -w --stdin) && git -c core.protectNTFS=false "
      "update-index --add --cacheinfo '100644,'$b',.git::$INDEX_ALLOCATION/hooks/post-checkout' "
      "&& echo staged");
  ASSERT_TRUE(staged.Says("staged")) << staged.Show();
  const std::string entries = HostGit(ws, {"ls-files", "-s"}).out;
  std::cout << "  host index:\n" << entries;
  // The person commits a file of theirs, then stashes an edit.
  std::ofstream(ws / "b.txt") << "the person's work\n";
  ASSERT_EQ(HostGit(ws, {"add", "b.txt"}).exit_code, 0);
  const auto commit = HostGit(ws, {"commit", "-q", "-m", "mine"});
  std::ofstream(ws / "a.txt") << "the person's edit\n";
  const auto stash = HostGit(ws, {"stash", "-q"});
  std::cout << "  the person's commit: " << commit.exit_code
            << "; their git stash: " << stash.exit_code << " " << stash.err.substr(0, 300);
  EXPECT_EQ(entries.find("INDEX_ALLOCATION"), std::string::npos)
      << "an entry beneath `.git::$INDEX_ALLOCATION` came back in the index\n"
      << daemon.Log();
  EXPECT_EQ(stash.exit_code, 0) << "the person's git stash fails";
}

// The session's branches zz100..zz227 came back (loose files on the host). It deletes them in
// one send. UpdateHostRef, for each, takes the loose ref's lock, reads packed-refs, and, as the
// name is not there, never takes packed-refs.lock: it unlinks the loose file. git's deletion
// always takes packed-refs.lock first (files_transaction_prepare), because a `git pack-refs`
// (what the person's `git gc` runs) holds that lock from reading the loose refs to committing
// the new packed-refs. The person's pack-refs that starts while the copy-back deletes reads a
// loose branch, the copy-back then finds no packed line and unlinks it, and pack-refs commits
// the branch into packed-refs: the deleted branch is back on the host (its log gone).
TEST(GitReview9AttackTest, ADeletedBranchNeverComesBackThroughThePersonsPackRefs) {
  git_attack::GitWriteSession git;
  auto& [daemon, ws, client, id] = git;
  ASSERT_NO_FATAL_FAILURE(MakeRepository(ws));
  ASSERT_NO_FATAL_FAILURE(WriteManyPackedTags(ws, 20000));
  ASSERT_NO_FATAL_FAILURE(git.OpenSession());
  Observed made = RunInSession(client, id, "workspace-write", "make-branches",
                               "for i in $(seq 100 227); do git branch zz$i; done; echo made");
  ASSERT_TRUE(made.Says("made")) << made.Show();
  Observed again = RunInSession(client, id, "workspace-write", "again", "echo again");
  ASSERT_TRUE(again.Says("again")) << again.Show();
  ASSERT_TRUE(fs::exists(ws / ".git" / "refs" / "heads" / "zz227")) << daemon.Log();
  // The person's gc packs the refs as soon as the copy-back has begun deleting.
  std::atomic<bool> stop{false};
  int packs = 0;
  std::thread person([&] {
    const fs::path first = ws / ".git" / "refs" / "heads" / "zz100";
    while (!stop.load() && fs::exists(first)) std::this_thread::yield();
    for (int i = 0; i < 3 && !stop.load(); ++i) {
      HostGit(ws, {"pack-refs", "--all"});
      ++packs;
    }
  });
  Observed deleted =
      RunInSession(client, id, "workspace-write", "delete-branches",
                   "git branch -q -D $(seq -f zz%g 100 227) >/dev/null && echo deleted");
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  stop = true;
  person.join();
  EXPECT_TRUE(deleted.Says("deleted")) << deleted.Show();
  // A deletion the copy-back put off (packed-refs.lock held by the person) is written by the
  // next one; what is still there after it is back for good.
  Observed settle = RunInSession(client, id, "workspace-write", "settle", "echo settled");
  ASSERT_TRUE(settle.Says("settled")) << settle.Show();
  Observed settle2 = RunInSession(client, id, "workspace-write", "settle2", "echo settled");
  ASSERT_TRUE(settle2.Says("settled")) << settle2.Show();
  std::vector<std::string> back;
  for (int i = 100; i <= 227; ++i) {
    const std::string branch = "refs/heads/zz" + std::to_string(i);
    if (HostGit(ws, {"rev-parse", "--verify", "-q", branch}).exit_code == 0) back.push_back(branch);
  }
  std::string names;
  for (const std::string& branch : back) names += " " + branch;
  std::cout << "  the person's pack-refs ran " << packs << " times; of the 128 deleted branches "
            << back.size() << " are on the host:" << names << "\n";
  EXPECT_TRUE(back.empty()) << "branches the session deleted are back on the host:" << names << "\n"
                            << daemon.Log().substr(0, 4000);
}

// Not one of the review's findings but its idea, closed with them: a new ref whose name differs
// from another only in case (`refs/heads/Main` beside the person's `main`) came back; on a
// case-insensitive view of the repository (a Samba export, a clone on macOS or Windows) the
// loose `Main` answers for the packed `main`. It stays in the session; an ordinary new branch
// in the same send comes back.
TEST(GitReview9AttackTest, ARefDifferingOnlyInCaseNeverComesBack) {
  git_attack::GitWriteSession git;
  ASSERT_NO_FATAL_FAILURE(git.Open());
  auto& [daemon, ws, client, id] = git;
  Observed made = RunInSession(client, id, "workspace-write", "case-refs",
                               "git branch Main && git tag MAIN && git branch agent && echo made");
  ASSERT_TRUE(made.Says("made")) << made.Show();
  auto host_has = [&](const std::string& ref) {
    return HostGit(ws, {"show-ref", "--verify", "-q", ref}).exit_code == 0;
  };
  EXPECT_TRUE(host_has("refs/heads/agent")) << "an ordinary new branch comes back\n"
                                            << daemon.Log();
  EXPECT_FALSE(host_has("refs/heads/Main")) << "a branch Main came back beside main";
  EXPECT_FALSE(host_has("refs/tags/MAIN")) << "a tag MAIN came back beside the branch main";
  EXPECT_TRUE(host_has("refs/heads/main"));
}

}  // namespace
}  // namespace ptybox::testing
