// Fortieth outside review of "Git for agents" (docs/security.md; review 47 of the project), on
// 903f0d8 (on by default). Time-boxed (20 minutes).
//
// Finding 1 (goal 3, an ordinary race with the person's git): the launch's preparation
// (PreparePrivateGit) copies the host's packed-refs with the state files first, reads and copies
// the index, then takes the snapshot of the refs (ReadRefs: packed-refs read again, then the loose
// refs) and then copies the loose refs in a walk of its own. The person's `git pack-refs` (which
// `git gc --auto` runs after their commits) landing between the first copy and the snapshot leaves
// the session's git with the older packed value A of a branch whose loose file (B) the pack
// removed, while the snapshot holds B. The session never touches the branch; its next copy-back
// (after any send, a plain `echo`) reads it as moved from B to A, the host holds B, the
// compare-and-swap passes, and the person's branch -- `main`, checked out, too -- is moved back:
// their commit B is off it. ThePersonsPackRefsDuringALaunchNeverMovesTheirBranchBack (a branch
// not checked out) and ...CheckedOutBranchBack (main).
//
// Held (kept as regression checks): a default session that only reads the repository with git
// leaves the person's HEAD, branch and index alone; a repository of 100,000 packed refs, where the
// snapshot stops at kGitMaxRefs but the private copy's loose walk does not, gives the session the
// host's branch and moves nothing the person then moves.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
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
using git_attack::Line;

TEST(GitReview40AttackTest, ADefaultSessionThatOnlyReadsTheRepositoryLeavesThePersonsGitAlone) {
  // No PTYBOX_GIT_WRITE of the test's own: the default (on), unless the suite's environment
  // says otherwise.
  Daemon daemon(Daemon::Options{.extra_args = {}, .env = {}});
  const std::filesystem::path ws = daemon.workspace();
  RpcClient client{daemon.socket()};
  ASSERT_NO_FATAL_FAILURE(git_attack::MakeRepository(ws));
  ASSERT_EQ(HostGit(ws, {"status", "--porcelain"}).exit_code, 0);
  const std::string index_before = git_attack::Slurp(ws / ".git" / "index");
  const std::string main_before = git_attack::Rev(ws, "main");
  const std::string head_before = git_attack::Slurp(ws / ".git" / "HEAD");
  const std::string id = OpenSession(client, "workspace-write");
  ASSERT_FALSE(id.empty()) << daemon.Log();
  for (int i = 0; i < 3; ++i) {
    Observed read = RunInSession(client, id, "workspace-write", "read",
                                 "git status --porcelain; git log -1 --format=%s; "
                                 "git diff --stat; echo read-$((40+2))");
    ASSERT_TRUE(read.Says("read-42")) << read.Show();
  }
  const std::string index_after = git_attack::Slurp(ws / ".git" / "index");
  const std::string status = HostGit(ws, {"status", "--porcelain"}).out;
  std::cout << "  the host's index " << (index_after == index_before ? "unchanged" : "REWRITTEN")
            << " (" << index_before.size() << " -> " << index_after.size() << " bytes); status: ["
            << status << "]\n";
  EXPECT_EQ(git_attack::Rev(ws, "main"), main_before) << git_attack::LogTail(daemon.Log());
  EXPECT_EQ(git_attack::Slurp(ws / ".git" / "HEAD"), head_before);
  EXPECT_EQ(status, "") << git_attack::LogTail(daemon.Log());
  EXPECT_EQ(HostGit(ws, {"diff", "--cached", "--name-status", "HEAD"}).out, "");
  git_attack::ExpectPersonsGitSucceeds(ws, {"fsck", "--no-progress"}, "the session's reads",
                                       daemon.Log());
}

}  // namespace
}  // namespace ptybox::testing

namespace ptybox::testing {
namespace {

TEST(GitReview40AttackTest, AMonorepoPastTheRefCapGetsTheHostsBranchInTheSession) {
  Daemon daemon(Daemon::Options{.extra_args = {}, .env = {}});
  const std::filesystem::path ws = daemon.workspace();
  RpcClient client{daemon.socket()};
  ASSERT_NO_FATAL_FAILURE(git_attack::MakeRepository(ws));
  // A monorepo's release tags, packed (100,000: kGitMaxRefs), and the person's later commit
  // on main, loose as git leaves it.
  ASSERT_NO_FATAL_FAILURE(git_attack::WriteManyPackedTags(ws, 100'000));
  std::ofstream(ws / "a.txt") << "two\n";
  ASSERT_EQ(HostGit(ws, {"commit", "-qam", "second"}).exit_code, 0);
  const std::string main = git_attack::Rev(ws, "main");
  const std::string id = OpenSession(client, "workspace-write");
  ASSERT_FALSE(id.empty()) << daemon.Log();
  Observed seen = RunInSession(client, id, "workspace-write", "see",
                               "echo main=$(git rev-parse -q --verify main) && "
                               "echo staged=$(git diff --cached --name-only | wc -l)");
  std::cout << "  the host's main " << main << "\n";
  EXPECT_TRUE(seen.Says("main=" + main)) << "the session's git does not see the person's main\n"
                                         << seen.Show() << "\n"
                                         << git_attack::LogTail(daemon.Log());
  EXPECT_TRUE(seen.Says("staged=0")) << seen.Show();
}

}  // namespace
}  // namespace ptybox::testing

namespace ptybox::testing {
namespace {

// Held: on 903f0d8 the launch's snapshot of the host's refs (which stopped at kGitMaxRefs
// silently for the host) and the private copy's loose refs (a walk of their own, which did not
// stop) disagreed in a repository of 100,000 packed refs: a branch packed at A and loose at B was
// A in the snapshot and B in the session's git. The person then moves it back to A; the
// copy-back's read of the session's refs stopped at the same bound, so it saw A too and nothing
// moved. (Since 9d0aeec both come from one reading.)
TEST(GitReview40AttackTest, APackedBranchPastTheRefCapIsNeverMovedByASessionThatLeftIt) {
  Daemon daemon(Daemon::Options{.extra_args = {}, .env = {}});
  const std::filesystem::path ws = daemon.workspace();
  RpcClient client{daemon.socket()};
  ASSERT_NO_FATAL_FAILURE(git_attack::MakeRepository(ws));
  const std::string a = git_attack::Rev(ws, "main");
  const std::string b =
      Line(HostGit(ws, {"commit-tree", "-p", a, "-m", "topic-work", a + "^{tree}"}).out);
  ASSERT_EQ(b.size(), a.size());
  {
    // The monorepo's packed refs: topic at A and 99,999 release tags (100,000 in all).
    std::ofstream packed(ws / ".git" / "packed-refs");
    packed << "# pack-refs with: peeled fully-peeled sorted \n";
    packed << a << " refs/heads/topic\n";
    char name[64];
    for (int i = 0; i < 99'999; ++i) {
      std::snprintf(name, sizeof name, "refs/tags/release-%05d", i);
      packed << a << " " << name << "\n";
    }
  }
  // The person's later commit on topic: loose, as git leaves it.
  ASSERT_EQ(HostGit(ws, {"update-ref", "refs/heads/topic", b}).exit_code, 0);
  const std::string id = OpenSession(client, "workspace-write");
  ASSERT_FALSE(id.empty()) << daemon.Log();
  Observed seen = RunInSession(client, id, "workspace-write", "see",
                               "echo topic=$(git rev-parse -q --verify topic)");
  // The person drops topic's last commit.
  ASSERT_EQ(HostGit(ws, {"update-ref", "refs/heads/topic", a}).exit_code, 0);
  for (int i = 0; i < 2; ++i) {
    Observed settle =
        RunInSession(client, id, "workspace-write", "settle", "echo settle-$((40+2))");
    ASSERT_TRUE(settle.Says("settle-42")) << settle.Show();
  }
  const std::string topic = git_attack::Rev(ws, "topic");
  std::cout << "  A " << a << ", B " << b
            << "; the host's topic after the session's sends: " << topic << "\n";
  EXPECT_EQ(topic, a) << "the person's `git branch -f topic A` was undone by a copy-back of a "
                         "session that never touched topic\n"
                      << git_attack::LogTail(daemon.Log());
}

}  // namespace
}  // namespace ptybox::testing

namespace ptybox::testing {
namespace {

// Finding 1 (goal 3): the launch copies the host's packed-refs (with the state files), reads the
// index, then takes the snapshot of the refs (ReadRefs) and then, in a second walk, copies the
// loose refs. The person's `git pack-refs` (git gc --auto runs it) between the first copy and the
// snapshot leaves the session with the old packed value of a branch whose loose file the pack
// removed (A) while the snapshot holds the new one (B). The session never touches the branch; its
// next copy-back reads it as moved from B to A, the host holds B, the compare-and-swap passes, and
// the person's branch loses its commit. The person's pack-refs is played by a loop doing what it
// does to the files (packed-refs replaced by a rename, the loose file removed); the loop stops
// before the session's first send and leaves the branch at B.
void PackRefsDuringLaunches(const std::string& branch) {
  Daemon daemon(Daemon::Options{.extra_args = {}, .env = {}});
  const std::filesystem::path ws = daemon.workspace();
  RpcClient client{daemon.socket()};
  ASSERT_NO_FATAL_FAILURE(git_attack::MakeRepository(ws));
  const std::string a = git_attack::Rev(ws, "main");
  const std::string b =
      Line(HostGit(ws, {"commit-tree", "-p", a, "-m", "topic-work", a + "^{tree}"}).out);
  ASSERT_EQ(b.size(), a.size());
  const std::filesystem::path git = ws / ".git";
  const std::string header = "# pack-refs with: peeled fully-peeled sorted \n";
  const std::string packed_a = header + a + " refs/heads/" + branch + "\n";
  const std::string packed_b = header + b + " refs/heads/" + branch + "\n";
  const std::filesystem::path loose = git / "refs" / "heads" / branch;
  int moved_back = 0;
  int seen_a = 0;
  constexpr int kAttempts = 80;
  for (int attempt = 0; attempt < kAttempts && moved_back == 0; ++attempt) {
    std::atomic<bool> stop{false};
    std::thread person([&] {
      while (!stop.load()) {
        WriteFileByRename(git / "packed-refs", packed_a);  // topic packed at A (an older pack)
        WriteFileByRename(loose, b + "\n");                // the person's commit: loose B
        WriteFileByRename(git / "packed-refs", packed_b);  // pack-refs: B packed...
        std::error_code ec;
        std::filesystem::remove(loose, ec);  // ...and the loose file removed
      }
    });
    const std::string id = OpenSession(client, "workspace-write");
    stop = true;
    person.join();
    ASSERT_FALSE(id.empty()) << daemon.Log();
    // Where the person's pack-refs leaves it: B, packed.
    WriteFileByRename(git / "packed-refs", packed_b);
    std::error_code ec;
    std::filesystem::remove(loose, ec);
    Observed seen = RunInSession(client, id, "workspace-write", "see",
                                 "echo topic=$(git rev-parse -q --verify " + branch + ")");
    if (seen.Says("topic=" + a)) ++seen_a;
    Observed settle =
        RunInSession(client, id, "workspace-write", "settle", "echo settle-$((40+2))");
    ASSERT_TRUE(settle.Says("settle-42")) << settle.Show();
    const std::string topic = git_attack::Rev(ws, branch);
    if (topic != b) {
      ++moved_back;
      std::cout << "  attempt " << attempt << ": the host's " << branch << " is now " << topic
                << (topic == a ? " (A: the person's commit B is off the branch)" : "") << "\n";
    }
    client.Call("terminal_close", Json{{"sessionId", id}}, std::chrono::seconds(60));
  }
  std::cout << "  launches whose session saw " << branch << " at A: " << seen_a
            << "; the person's topic moved back from B: " << moved_back << "\n";
  EXPECT_EQ(moved_back, 0) << "a session that never touched topic moved the person's branch back "
                              "to its older packed value after their pack-refs ran at its launch\n"
                           << git_attack::LogTail(daemon.Log());
}

TEST(GitReview40AttackTest, ThePersonsPackRefsDuringALaunchNeverMovesTheirBranchBack) {
  PackRefsDuringLaunches("topic");
}

// Finding 1 again, on the branch the person has checked out (main): the same roll-back.
TEST(GitReview40AttackTest, ThePersonsPackRefsDuringALaunchNeverMovesTheirCheckedOutBranchBack) {
  PackRefsDuringLaunches("main");
}

}  // namespace
}  // namespace ptybox::testing
