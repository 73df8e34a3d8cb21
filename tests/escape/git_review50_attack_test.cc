// Sixty-first outside review of "Git for agents" (docs/security.md), on aad63fe, the fifty-fourth
// of the feature. Time-boxed (25 minutes).
//
// The wall of aad63fe (`keep` in CollectSubmoduleDirs, sandbox/repository_walk.cc) looks for links
// among a protected `.git`'s top-level entries and `logs/` only (`protect_followed`). Git follows
// links deeper in the git directory just as well, and none of them is kept:
//
// Finding 1 (goal 3, and goal 2): a loose ref that is a link. The files backend of git reads a
// loose ref that is a symbolic link to a file (its target not a `refs/...` name) by following
// it (refs/files-backend.c). The person's `repo/.git/refs/heads/shared -> ws/refstore/shared`
// (a branch kept in a file shared between clones, a dotfiles-style setup) leaves the value of a
// branch of a protected repository in a plain file of the workspace: the session, without git,
// writes another commit id there and the person's branch `shared` moved behind their back (no
// copy-back, no CAS, no reflog line). ALinkedLooseRefInAProtectedGitIsKept.
//
// Finding 2 (goal 3, and goal 1 as an object store the host's git reads): `objects/pack` a link
// (packs kept on another directory: `objects` itself is a real directory, so the top-level scan
// sees nothing). The packs of a protected repository lie in a plain directory of the workspace:
// the session sets it aside (`mv packstore p2 && mkdir packstore`) and the person's `git show`
// and `git fsck` fail for every packed object (a session could as well put a pack of its own
// there, whose index names the person's object ids). ALinkedPackDirectoryInAProtectedGitIsKept.
//
// Finding 3 (goal 1): `worktrees/<id>` a link. The person's linked worktree outside the workspace
// (`git -C ws/app worktree add ~/wt`) has its git directory `ws/app/.git/worktrees/wt`; kept
// on another directory of the workspace (`worktrees/wt -> ws/wtmeta`), it is a plain directory
// the session writes: its `commondir` pointed at a copy of app's .git with a `core.fsmonitor` of
// the session's, and the person's `git status` in ~/wt runs the session's command on the host.
// The walk never sees this worktree (outside every root) and the scan of app's .git stops at its
// top level (`worktrees` is a real directory). ALinkedWorktreeDirectoryInAProtectedGitIsKept.

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <string>

#include "tests/escape/escape_support.h"
#include "tests/escape/git_attack_support.h"
#include "tests/support/temp_dir.h"

namespace ptybox::testing {
namespace {

using git_attack::HostGit;
using git_attack::Line;

namespace fs = std::filesystem;

// A repository `ws/repo` of two commits on main (a.txt "one", then "two").
void TwoCommits(const fs::path& repo) {
  fs::create_directories(repo);
  ASSERT_EQ(HostGit(repo, {"init", "-q", "-b", "main"}).exit_code, 0);
  std::ofstream(repo / "a.txt") << "one\n";
  ASSERT_EQ(HostGit(repo, {"add", "a.txt"}).exit_code, 0);
  ASSERT_EQ(HostGit(repo, {"commit", "-q", "-m", "first"}).exit_code, 0);
  std::ofstream(repo / "a.txt") << "two\n";
  ASSERT_EQ(HostGit(repo, {"commit", "-q", "-am", "second"}).exit_code, 0);
}

TEST(GitReview50AttackTest, ALinkedLooseRefInAProtectedGitIsKept) {
  git_attack::GitWriteSession git({"PTYBOX_LOG=info"});
  auto& [daemon, ws, client, id] = git;
  const fs::path repo = ws / "repo";
  ASSERT_NO_FATAL_FAILURE(TwoCommits(repo));
  const std::string first = Line(HostGit(repo, {"rev-parse", "main~1"}).out);
  const std::string second = Line(HostGit(repo, {"rev-parse", "main"}).out);
  ASSERT_EQ(first.size(), 40u) << first;
  // The person's branch `shared` kept in a file outside the .git, the loose ref a link to it.
  fs::create_directories(ws / "refstore");
  std::ofstream(ws / "refstore" / "shared") << second << "\n";
  fs::create_symlink(ws / "refstore" / "shared", repo / ".git" / "refs" / "heads" / "shared");
  ASSERT_EQ(Line(HostGit(repo, {"rev-parse", "shared"}).out), second);

  // The launch may refuse the layout instead, naming the link (nothing of it is then the
  // session's to change).
  if (std::optional<std::string> refused = git.OpenOrRefusal()) {
    std::cout << "  refused: " << *refused << "\n";
    EXPECT_NE(refused->find("link"), std::string::npos) << *refused;
    return;
  }
  Observed did = RunInSession(client, id, "workspace-write", "move-shared",
                              "printf '%s\\n' " + first +
                                  " > refstore/shared && echo moved-ok; git -C repo rev-parse "
                                  "shared");
  std::cout << "  observed: " << did.Show() << "\n";
  const std::string now = Line(HostGit(repo, {"rev-parse", "shared"}).out);
  std::cout << "  the person's `git rev-parse shared` in repo: " << now << " (was " << second
            << ")\n";
  EXPECT_FALSE(did.Says("moved-ok"))
      << "the session wrote the file a loose ref of a protected repository links to\n";
  EXPECT_EQ(now, second) << "the person's branch `shared` moved behind their back, by a write "
                            "that is no copy-back's\n";
}

TEST(GitReview50AttackTest, ALinkedPackDirectoryInAProtectedGitIsKept) {
  git_attack::GitWriteSession git({"PTYBOX_LOG=info"});
  auto& [daemon, ws, client, id] = git;
  const fs::path repo = ws / "repo";
  ASSERT_NO_FATAL_FAILURE(TwoCommits(repo));
  ASSERT_EQ(HostGit(repo, {"repack", "-q", "-a", "-d"}).exit_code, 0);
  ASSERT_EQ(HostGit(repo, {"prune-packed"}).exit_code, 0);
  // The packs kept on another directory of the workspace, objects/pack a link to it.
  fs::rename(repo / ".git" / "objects" / "pack", ws / "packstore");
  fs::create_symlink(ws / "packstore", repo / ".git" / "objects" / "pack");
  ASSERT_EQ(Line(HostGit(repo, {"show", "main:a.txt"}).out), "two");

  // The launch may refuse the layout instead, naming the link (nothing of it is then the
  // session's to change).
  if (std::optional<std::string> refused = git.OpenOrRefusal()) {
    std::cout << "  refused: " << *refused << "\n";
    EXPECT_NE(refused->find("link"), std::string::npos) << *refused;
    return;
  }
  Observed did = RunInSession(client, id, "workspace-write", "set-packs-aside",
                              "mv packstore p2 && mkdir packstore && echo aside-ok");
  std::cout << "  observed: " << did.Show() << "\n";
  const sandbox::testing::RunResult shown = HostGit(repo, {"show", "main:a.txt"});
  const sandbox::testing::RunResult fsck = HostGit(repo, {"fsck", "--no-progress"});
  std::cout << "  the person's `git show main:a.txt`: exit " << shown.exit_code << " ["
            << Line(shown.out) << "]; `git fsck` exit " << fsck.exit_code << "\n";
  EXPECT_FALSE(did.Says("aside-ok"))
      << "the session set aside the directory a protected repository's objects/pack links to\n";
  EXPECT_EQ(shown.exit_code, 0) << shown.Describe();
  EXPECT_EQ(Line(shown.out), "two");
  EXPECT_EQ(fsck.exit_code, 0) << fsck.Describe();
}

TEST(GitReview50AttackTest, ALinkedWorktreeDirectoryInAProtectedGitIsKept) {
  git_attack::GitWriteSession git({"PTYBOX_LOG=info"});
  auto& [daemon, ws, client, id] = git;
  const fs::path app = ws / "app";
  ASSERT_NO_FATAL_FAILURE(TwoCommits(app));
  TempDir elsewhere;
  const fs::path wt = elsewhere.path() / "wt";
  const fs::path marker = elsewhere.path() / "fsmonitor-ran";
  ASSERT_EQ(HostGit(app, {"worktree", "add", "-q", "-b", "feature", wt.string()}).exit_code, 0);
  // The worktree's git directory kept on another directory of the workspace.
  fs::rename(app / ".git" / "worktrees" / "wt", ws / "wtmeta");
  fs::create_symlink(ws / "wtmeta", app / ".git" / "worktrees" / "wt");
  // Git resolves the link before it reads `commondir` ("../.." would leave the repository): the
  // person names the common directory by its absolute path, as git then needs.
  std::ofstream(ws / "wtmeta" / "commondir") << (app / ".git").string() << "\n";
  sandbox::testing::RunResult before = HostGit(wt, {"status", "--short"});
  ASSERT_EQ(before.exit_code, 0) << before.Describe();

  // The launch may refuse the layout instead, naming the link (nothing of it is then the
  // session's to change).
  if (std::optional<std::string> refused = git.OpenOrRefusal()) {
    std::cout << "  refused: " << *refused << "\n";
    EXPECT_NE(refused->find("link"), std::string::npos) << *refused;
    return;
  }
  const std::string evil = (ws / "evil.git").string();
  Observed did =
      RunInSession(client, id, "workspace-write", "redirect-commondir",
                   "cp -r app/.git evil.git && printf '[core]\\n\\tfsmonitor = \"touch " +
                       marker.string() + "; false\"\\n' >> evil.git/config && echo " + evil +
                       " > wtmeta/commondir && echo redirected-ok");
  std::cout << "  observed: " << did.Show() << "\n";
  sandbox::testing::RunResult status = HostGit(wt, {"status", "--short"});
  std::cout << "  the person's `git status` in " << wt << ": exit " << status.exit_code
            << "; the session's fsmonitor ran: " << fs::exists(marker) << "\n";
  EXPECT_FALSE(did.Says("redirected-ok"))
      << "the session rewrote the commondir of a linked worktree's git directory, kept by a link "
         "in a protected .git\n";
  EXPECT_FALSE(fs::exists(marker)) << "the person's git status ran the session's fsmonitor\n";
}

}  // namespace
}  // namespace ptybox::testing
