// Fourteenth outside review of "Git for agents" (docs/security.md; review 21 of the project),
// on the commit that held the host worktree's index.lock across a branch, HEAD and the index
// that go together. Each test failed 3 of 3 runs as root and as ptybox-ci; closed in
// sandbox/git_private.cc:
//  (a) The branch (or HEAD) was written before the index was judged: the index could still be
//      refused after the ref had moved. In a repository whose index paths take over 16 MiB
//      (kIndexPathBytesMax; some 200,000 files) the session's index is refused every time,
//      while the host's untouched index passes the check byte for byte: every commit of an
//      ordinary session moved the person's checked-out branch and left the index behind, the
//      session's commit shown undone and staged. (An index over kGitSessionIndexMax did the same
//      on HEAD's side.) Now the index is judged first (PlanIndex) and neither moves without it.
//  (b) The held index.lock spanned the daemon's runs of the host's git (`git cat-file
//      --batch-check` of every new entry, 20 s timeout): a session whose index names 400,000
//      absent objects held the person's index.lock for seconds at every send. Now every check
//      that runs git is made before the lock.
//  (c) A session's rebase that stops on a conflict came back half-way: HEAD detached and an
//      index in conflict, never the rebase's state (rebase-merge/ stays private). The person
//      was left on no branch, with unmerged paths and no rebase to abort. Now HEAD, the index
//      and a branch moving with them wait while an operation is in progress in the session
//      (OperationInProgress).
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <string>
#include <thread>

#include "tests/escape/escape_support.h"
#include "tests/escape/git_attack_support.h"
#include "tests/sandbox/process_runner.h"

namespace ptybox::testing {
namespace {

using git_attack::HostGit;
using git_attack::kIdentity;
using git_attack::Line;
using git_attack::MakeRepository;

namespace fs = std::filesystem;

// A repository as large as the feature serves: 18,000 tracked entries of some 990-byte paths
// (their files left absent from the worktree), 17.8 MB of paths in the index, over
// kIndexPathBytesMax (16 MiB) and well under kGitIndexMax (256 MiB). Committed by the person.
void MakeLargeRepository(const fs::path& ws) {
  ASSERT_NO_FATAL_FAILURE(MakeRepository(ws));
  sandbox::testing::RunResult empty = sandbox::testing::RunProcess(
      {"/bin/sh", "-c", "git -C '" + ws.string() + "' hash-object -w --stdin </dev/null"});
  ASSERT_EQ(empty.exit_code, 0) << empty.err;
  const std::string blob = Line(empty.out);
  const std::string dir = std::string(200, 'a') + "/" + std::string(200, 'b') + "/" +
                          std::string(200, 'c') + "/" + std::string(200, 'd');
  const std::string pad(180, 'p');
  const fs::path lines = ws / ".escape" / "lines";
  {
    std::ofstream out(lines);
    char number[16];
    for (int i = 0; i < 18000; ++i) {
      std::snprintf(number, sizeof number, "%05d", i);
      out << "100644 " << blob << "\t" << dir << "/f" << number << pad << "\n";
    }
  }
  sandbox::testing::RunResult added = sandbox::testing::RunProcess(
      {"/bin/sh", "-c",
       "git -C '" + ws.string() + "' update-index --index-info < '" + lines.string() + "'"});
  ASSERT_EQ(added.exit_code, 0) << added.err;
  fs::remove(lines);
  ASSERT_EQ(HostGit(ws, {"commit", "-q", "-m", "many"}).exit_code, 0);
  std::cout << "  the host's index: " << fs::file_size(ws / ".git" / "index") << " bytes\n";
}

// (a) The session commits a.txt on main, the branch the person has checked out, in a large
// repository; the person has not touched their index since the session started. Whatever comes
// back, the host's index never lags its HEAD: nothing is staged against HEAD.
TEST(GitReview14AttackTest, TheBranchNeverMovesWithoutItsIndexInALargeRepository) {
  git_attack::GitWriteSession git;
  auto& [daemon, ws, client, id] = git;
  ASSERT_NO_FATAL_FAILURE(MakeLargeRepository(ws));
  ASSERT_NO_FATAL_FAILURE(git.OpenSession());
  ASSERT_NO_FATAL_FAILURE(git_attack::CommitAgentChange(git));
  const auto [subject, staged] = git_attack::HostMainAndStaged(ws);
  EXPECT_EQ(staged, "") << "the host's main moved to the session's commit and its index stayed "
                           "behind: the commit shows undone and staged, and the person's next "
                           "commit reverts it\n"
                        << daemon.Log();
  // The person's next commit, as they would make it: it must not revert the session's.
  ASSERT_EQ(HostGit(ws, {"commit", "-q", "--allow-empty", "-m", "mine"}).exit_code, 0);
  const std::string a = HostGit(ws, {"show", "HEAD:a.txt"}).out;
  std::cout << "  a.txt in the person's next commit: [" << a << "]\n";
  if (subject == "agent") {
    EXPECT_EQ(a, "one\nagent\n") << "the person's next commit reverted the session's";
  }
}

// (a), HEAD's side: in the same large repository the session makes a branch of its own and
// commits c.txt on it. HEAD comes back to `feature`; the index must come with it, else c.txt
// shows as staged for deletion and the person's next commit on `feature` deletes it.
TEST(GitReview14AttackTest, HeadNeverMovesWithoutItsIndexInALargeRepository) {
  git_attack::GitWriteSession git;
  auto& [daemon, ws, client, id] = git;
  ASSERT_NO_FATAL_FAILURE(MakeLargeRepository(ws));
  ASSERT_NO_FATAL_FAILURE(git.OpenSession());
  Observed committed =
      RunInSession(client, id, "workspace-write", "feature",
                   std::string(kIdentity) +
                       "git checkout -q -b feature && echo c > c.txt && git add c.txt && "
                       "git commit -qm feature && echo committed");
  ASSERT_TRUE(committed.Says("committed")) << committed.Show();
  const std::string head = Line(HostGit(ws, {"rev-parse", "--abbrev-ref", "HEAD"}).out);
  const std::string staged = HostGit(ws, {"diff", "--cached", "--name-status", "HEAD"}).out;
  std::cout << "  the host's HEAD: " << head << "; staged against it: [" << staged << "]\n";
  EXPECT_EQ(staged, "") << "the host's HEAD moved to " << head
                        << " and its index stayed behind: the session's commit shows undone "
                           "and staged there\n"
                        << daemon.Log();
}

// The pid of a running `git cat-file --batch-check`, or 0.
pid_t CatFileRunning() {
  std::error_code error;
  for (const auto& entry : fs::directory_iterator("/proc", error)) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string cmdline = git_attack::Slurp(entry.path() / "cmdline");
    for (char& c : cmdline) {
      if (c == '\0') c = ' ';
    }
    if (cmdline.find("cat-file") != std::string::npos &&
        cmdline.find("--batch-check") != std::string::npos) {
      return static_cast<pid_t>(std::stol(name));
    }
  }
  return 0;
}

// (b) The session moves HEAD to a branch of its own with an index naming 400,000 objects no one
// has. The copy-back may take its time judging that index, but never while it holds the
// person's index.lock: the host's git runs (here `cat-file --batch-check`) must not happen
// under it. Seen from the host: the same index.lock (same inode, before and after) while the
// daemon's cat-file runs.
TEST(GitReview14AttackTest, ThePersonsIndexLockIsNeverHeldWhileTheDaemonRunsGit) {
  git_attack::GitWriteSession git;
  ASSERT_NO_FATAL_FAILURE(git.Open());
  auto& [daemon, ws, client, id] = git;
  const fs::path lock = ws / ".git" / "index.lock";
  std::atomic<bool> stop{false};
  int overlaps = 0;
  int person_failed = 0;
  std::chrono::steady_clock::duration longest{};
  std::thread watcher([&] {
    std::optional<ino_t> seen;
    auto since = std::chrono::steady_clock::now();
    while (!stop.load()) {
      struct stat before {};
      if (::stat(lock.c_str(), &before) != 0) {
        if (seen) longest = std::max(longest, std::chrono::steady_clock::now() - since);
        seen.reset();
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
        continue;
      }
      if (!seen || *seen != before.st_ino) {
        seen = before.st_ino;
        since = std::chrono::steady_clock::now();
      }
      const pid_t cat_file = CatFileRunning();
      struct stat after {};
      if (cat_file != 0 && ::stat(lock.c_str(), &after) == 0 && after.st_ino == before.st_ino &&
          ::kill(cat_file, 0) == 0) {
        // The person's own `git add` at that moment (the first few times).
        if (++overlaps <= 10 &&
            HostGit(ws, {"add", "a.txt"}).err.find("index.lock") != std::string::npos) {
          ++person_failed;
        }
      }
    }
  });
  Observed moved = RunInSession(client, id, "workspace-write", "many",
                                "git checkout -q -b wide && python3 -c \"import os, sys; "
                                "[sys.stdout.write('100644 %s\\td/f%06d\\n' % "
                                "(os.urandom(20).hex(), i)) for i in range(400000)]\" | "
                                "git update-index --index-info && echo staged");
  stop = true;
  watcher.join();
  ASSERT_TRUE(moved.Says("staged")) << moved.Show();
  std::cout << "  index.lock held at most "
            << std::chrono::duration_cast<std::chrono::milliseconds>(longest).count()
            << " ms; seen while the daemon's cat-file ran " << overlaps
            << " times; the person's git add then refused for index.lock " << person_failed
            << " of " << std::min(overlaps, 10) << " times; the host's HEAD: "
            << Line(HostGit(ws, {"rev-parse", "--abbrev-ref", "HEAD"}).out) << "\n";
  EXPECT_EQ(overlaps, 0) << "the copy-back held the person's index.lock while running the host's "
                            "git on the session's index\n"
                         << daemon.Log();
}

// (c) The session rebases a branch of its own onto another and stops on a conflict. Whatever
// comes back, the person is never left on a detached HEAD or an index in conflict that no
// operation of theirs can finish or abort.
TEST(GitReview14AttackTest, ASessionsStoppedRebaseNeverLeavesThePersonStrandedHalfWay) {
  git_attack::GitWriteSession git;
  ASSERT_NO_FATAL_FAILURE(git.Open());
  auto& [daemon, ws, client, id] = git;
  Observed rebased = RunInSession(
      client, id, "workspace-write", "rebase",
      std::string(kIdentity) +
          "git checkout -q -b topic && echo t > a.txt && git commit -qam t && "
          "git checkout -q main && git checkout -q -b base && echo m > a.txt && "
          "git commit -qam m && git checkout -q topic && git rebase -q base; echo rebased");
  ASSERT_TRUE(rebased.Says("rebased")) << rebased.Show();
  const bool on_branch = HostGit(ws, {"symbolic-ref", "-q", "HEAD"}).exit_code == 0;
  const std::string unmerged = HostGit(ws, {"ls-files", "-u"}).out;
  std::cout << "  the host's HEAD " << (on_branch ? "on a branch" : "detached")
            << "; unmerged entries: [" << unmerged << "]\n";
  if (!on_branch || !unmerged.empty()) {
    const auto abort = HostGit(ws, {"rebase", "--abort"});
    std::cout << "  the person's git rebase --abort: exit " << abort.exit_code << " " << abort.err;
    EXPECT_EQ(abort.exit_code, 0)
        << "the session's stopped rebase left the person's worktree detached and in conflict, "
           "with no rebase for their git to abort\n"
        << daemon.Log();
  }
}

}  // namespace
}  // namespace ptybox::testing
