// Thirty-fourth outside review of "Git for agents" (docs/security.md; review 41 of the project),
// on ab1dcf8. Each test asserts a goal and fails while the hole is open:
//  (a) a branch the session names as the directory of a branch it deleted never comes back, nor
//      do the HEAD and index that go with it, for good (goal 3: the person's HEAD and index show
//      the session's committed work as an uncommitted change in the shared worktree, and the
//      session's branch is on the host under no name). A session's `git branch feature/login`
//      comes back as the loose file .git/refs/heads/feature/login. Its later `git branch -D
//      feature/login && git checkout -b feature && git commit` is copied back as a deletion
//      (UpdateHostRef unlinks the loose file and its log, but not their now empty directories
//      refs/heads/feature/ and logs/refs/heads/feature/, as git's own deletion does with
//      try_remove_empty_parents) and a creation: refused at that copy-back ("is a directory of
//      refs already": the host's refs were read before the deletion), and at every later one
//      WriteLikeGit cannot rename over the empty directory ("refs/heads/feature is not a regular
//      file"). HostWorktreeRefusal then holds the session's HEAD and index ("they go with
//      refs/heads/feature, which holds another value on the host"), at every send and at close.
//      The host's git is not stuck (its `git branch feature` removes the empty directories and
//      succeeds), only the copy-back is. Tags likewise (`git tag -d v1/rc && git tag v1`: the
//      host never gets v1). Fix direction: after deleting a loose ref (and its
//      log), remove its parent directories up to refs/ (logs/) while empty, as git does; and
//      when a ref (or log) to be created finds an empty directory in its place, remove it
//      (by descriptor, only when empty and not a link) and write the file, as git's
//      raceproof_create_file / remove_empty_directories do.
#include <gtest/gtest.h>

#include <filesystem>
#include <iostream>
#include <string>

#include "tests/escape/escape_support.h"
#include "tests/escape/git_attack_support.h"

namespace ptybox::testing {
namespace {

using git_attack::HostGit;

// (a) A branch `feature` made after the session deleted its own `feature/login`, which had come
// back.
TEST(GitReview34AttackTest, ABranchNamedAsADeletedBranchsDirectoryComesBack) {
  git_attack::GitWriteSession git;
  auto& [daemon, ws, client, id] = git;
  ASSERT_NO_FATAL_FAILURE(git.Open());
  Observed made = RunInSession(client, id, "workspace-write", "made",
                               "git branch feature/login && echo made-$((40+2))");
  ASSERT_TRUE(made.Says("made-42")) << made.Show();
  ASSERT_NO_FATAL_FAILURE(git_attack::Settle(git, 1));
  // The control: feature/login came back.
  ASSERT_FALSE(git_attack::Rev(ws, "refs/heads/feature/login").empty())
      << git_attack::LogTail(daemon.Log());
  Observed swap = RunInSession(
      client, id, "workspace-write", "swap",
      std::string(git_attack::kIdentity) +
          "git branch -D -q feature/login && git checkout -q -b feature && echo agent >> a.txt && "
          "git commit -qam agent && echo swapped-$((40+2)) $(git rev-parse HEAD)");
  ASSERT_TRUE(swap.Says("swapped-42")) << swap.Show();
  ASSERT_NO_FATAL_FAILURE(git_attack::Settle(git, 3));
  const std::string session_tip = swap.text.substr(swap.text.find("swapped-42 ") + 11, 40);
  // The close's copy-back is the last: what it leaves stays so.
  const Json closed =
      client.Call("terminal_close", Json{{"sessionId", id}}, std::chrono::seconds(600));
  ASSERT_TRUE(closed.contains("result")) << closed.dump();
  const std::string feature = git_attack::Rev(ws, "refs/heads/feature");
  const std::string head = git_attack::Line(HostGit(ws, {"symbolic-ref", "HEAD"}).out);
  const sandbox::testing::RunResult status = HostGit(ws, {"status", "--short"});
  std::cout << "  the host's feature: [" << feature << "] (the session's " << session_tip
            << "); feature/login: [" << git_attack::Rev(ws, "refs/heads/feature/login")
            << "]\n  .git/refs/heads/feature is a directory: "
            << std::filesystem::is_directory(ws / ".git/refs/heads/feature")
            << "; .git/logs/refs/heads/feature is a directory: "
            << std::filesystem::is_directory(ws / ".git/logs/refs/heads/feature")
            << "\n  the host's HEAD: " << head << "\n  the person's `git status --short`:\n"
            << status.out;
  const std::string log = daemon.Log();
  EXPECT_EQ(feature, session_tip) << "the session's branch feature never comes back\n"
                                  << git_attack::LogTail(log);
  EXPECT_EQ(head, "refs/heads/feature") << "the session's HEAD never comes back";
  EXPECT_EQ(status.out, "") << "the person's status shows the session's committed work undone";
}

}  // namespace
}  // namespace ptybox::testing
