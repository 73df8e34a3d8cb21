// Sixty-third outside review of "Git for agents" (docs/security.md), on 0db5c09, the fifty-sixth
// of the feature. Time-boxed (25 minutes).
//
// The link look of 0db5c09 (`protect_followed` in CollectSubmoduleDirs,
// sandbox/repository_walk.cc) keeps where a link in a protected `.git` leads by the link's text
// made lexically normal (`leads`), then `keep` adds its weakly_canonical form. Both are wrong
// when the text holds `..` after a component that is itself a link: the kernel resolves the link
// first and `..` climbs from where it leads; lexically_normal drops the link and its `..`
// together, so the directory kept is another one than git reads.
//
// Finding 1 (goal 3, and goal 2): a loose ref linked through `<link>/..`. The person's
// `repo/.git/refs/heads/shared -> ../../../../cur/../refstore/shared` where `ws/cur` is a link to
// `ws/deep/v2` (a "current release" link, as many setups keep): git reads
// `ws/deep/refstore/shared`; the launch keeps `ws/refstore` (there, empty, as a decoy) and
// nothing of `ws/deep`. The session, without git, writes another commit id in
// `deep/refstore/shared` (or points `cur` elsewhere: the link itself is the session's) and the
// person's branch `shared` moved behind their back: no copy-back, no CAS, no reflog line.
// ALooseRefLinkedThroughDotDotAfterALinkIsKept.
//
// Finding 2 (goal 3, and goal 2): a loose ref that is a hard link. The look finds symbolic links
// only; a loose ref hard-linked with a file of the workspace (`ln ws/refstore/shared
// repo/.git/refs/heads/shared`: the same inode under two names, one of them outside every
// `.git`) is written in place by the session through its workspace name (`printf > file`
// truncates and writes the shared inode; the read-only bind of `.git` covers names, not inodes).
// The person's branch moves behind their back. ALooseRefHardLinkedIntoTheWorkspaceIsKept.
//
// Finding 3 (goal 1): a hook that is a hard link. The same, for code: the person's
// `repo/.git/hooks/pre-commit` hard-linked with the team's `ws/tools/pre-commit` (a hook kept in
// the tree and installed by `ln`, so that edits to it take effect): the session writes its own
// command into `tools/pre-commit` in place and the person's next `git commit` runs it on the
// host. AHookHardLinkedIntoTheWorkspaceIsKept.
//
// Finding 4 (goal 1): a link to a file whose directory is the writable root. The person's
// `repo/.git/config -> ws/repo.config` (a config kept next to the repositories, as git-new-workdir
// or a dotfiles setup links it): `keep` is asked for the link's directory, the root itself, and
// a root is never made read-only (or moved), so the file stays the session's to write: its
// `core.fsmonitor` runs on the person's next `git status`. AConfigLinkedIntoTheRootDirectoryIsKept.

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

TEST(GitReview51AttackTest, ALooseRefLinkedThroughDotDotAfterALinkIsKept) {
  git_attack::GitWriteSession git({"PTYBOX_LOG=info"});
  auto& [daemon, ws, client, id] = git;
  const fs::path repo = ws / "repo";
  ASSERT_NO_FATAL_FAILURE(TwoCommits(repo));
  const std::string first = Line(HostGit(repo, {"rev-parse", "main~1"}).out);
  const std::string second = Line(HostGit(repo, {"rev-parse", "main"}).out);
  ASSERT_EQ(first.size(), 40u) << first;
  // ws/cur -> deep/v2; the branch's file in ws/deep/refstore; ws/refstore a decoy (empty).
  fs::create_directories(ws / "deep" / "v2");
  fs::create_directories(ws / "deep" / "refstore");
  fs::create_directories(ws / "refstore");
  fs::create_directory_symlink("deep/v2", ws / "cur");
  std::ofstream(ws / "deep" / "refstore" / "shared") << second << "\n";
  fs::create_symlink("../../../../cur/../refstore/shared",
                     repo / ".git" / "refs" / "heads" / "shared");
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
                                  " > deep/refstore/shared && echo moved-ok; git -C repo "
                                  "rev-parse shared");
  std::cout << "  observed: " << did.Show() << "\n";
  const std::string now = Line(HostGit(repo, {"rev-parse", "shared"}).out);
  std::cout << "  the person's `git rev-parse shared` in repo: " << now << " (was " << second
            << ")\n";
  EXPECT_FALSE(did.Says("moved-ok"))
      << "the session wrote the file a loose ref of a protected repository links to (through "
         "`cur/..`)\n";
  EXPECT_EQ(now, second) << "the person's branch `shared` moved behind their back, by a write "
                            "that is no copy-back's\n";
}

TEST(GitReview51AttackTest, ALooseRefHardLinkedIntoTheWorkspaceIsKept) {
  git_attack::GitWriteSession git({"PTYBOX_LOG=info"});
  auto& [daemon, ws, client, id] = git;
  const fs::path repo = ws / "repo";
  ASSERT_NO_FATAL_FAILURE(TwoCommits(repo));
  const std::string first = Line(HostGit(repo, {"rev-parse", "main~1"}).out);
  const std::string second = Line(HostGit(repo, {"rev-parse", "main"}).out);
  ASSERT_EQ(first.size(), 40u) << first;
  fs::create_directories(ws / "refstore");
  std::ofstream(ws / "refstore" / "shared") << second << "\n";
  fs::create_hard_link(ws / "refstore" / "shared", repo / ".git" / "refs" / "heads" / "shared");
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
      << "the session wrote, by its workspace name, the inode of a protected repository's loose "
         "ref\n";
  EXPECT_EQ(now, second) << "the person's branch `shared` moved behind their back, by a write "
                            "that is no copy-back's\n";
}

TEST(GitReview51AttackTest, AHookHardLinkedIntoTheWorkspaceIsKept) {
  git_attack::GitWriteSession git({"PTYBOX_LOG=info"});
  auto& [daemon, ws, client, id] = git;
  const fs::path repo = ws / "repo";
  ASSERT_NO_FATAL_FAILURE(TwoCommits(repo));
  TempDir elsewhere;
  const fs::path marker = elsewhere.path() / "hook-ran";
  fs::create_directories(ws / "tools");
  std::ofstream(ws / "tools" / "pre-commit") << "#!/bin/sh\nexit 0\n";
  fs::permissions(ws / "tools" / "pre-commit", fs::perms::owner_all | fs::perms::group_read |
                                                   fs::perms::group_exec | fs::perms::others_read |
                                                   fs::perms::others_exec);
  fs::create_directories(repo / ".git" / "hooks");
  fs::create_hard_link(ws / "tools" / "pre-commit", repo / ".git" / "hooks" / "pre-commit");

  // The launch may refuse the layout instead, naming the link (nothing of it is then the
  // session's to change).
  if (std::optional<std::string> refused = git.OpenOrRefusal()) {
    std::cout << "  refused: " << *refused << "\n";
    EXPECT_NE(refused->find("link"), std::string::npos) << *refused;
    return;
  }
  Observed did = RunInSession(client, id, "workspace-write", "rewrite-hook",
                              "printf '#!/bin/sh\\ntouch " + marker.string() +
                                  "\\n' > tools/pre-commit && echo rewritten-ok");
  std::cout << "  observed: " << did.Show() << "\n";
  std::ofstream(repo / "a.txt") << "three\n";
  const sandbox::testing::RunResult commit = HostGit(repo, {"commit", "-q", "-am", "third"});
  std::cout << "  the person's `git commit`: exit " << commit.exit_code
            << "; the session's hook ran: " << fs::exists(marker) << "\n";
  EXPECT_FALSE(did.Says("rewritten-ok"))
      << "the session wrote, by its workspace name, the inode of a protected repository's hook\n";
  EXPECT_FALSE(fs::exists(marker)) << "the person's git commit ran the session's hook\n";
}

TEST(GitReview51AttackTest, AConfigLinkedIntoTheRootDirectoryIsKept) {
  git_attack::GitWriteSession git({"PTYBOX_LOG=info"});
  auto& [daemon, ws, client, id] = git;
  const fs::path repo = ws / "repo";
  ASSERT_NO_FATAL_FAILURE(TwoCommits(repo));
  TempDir elsewhere;
  const fs::path marker = elsewhere.path() / "fsmonitor-ran";
  fs::rename(repo / ".git" / "config", ws / "repo.config");
  fs::create_symlink(ws / "repo.config", repo / ".git" / "config");
  ASSERT_EQ(HostGit(repo, {"status", "--short"}).exit_code, 0);

  // The launch may refuse the layout instead, naming the link (nothing of it is then the
  // session's to change).
  if (std::optional<std::string> refused = git.OpenOrRefusal()) {
    std::cout << "  refused: " << *refused << "\n";
    EXPECT_NE(refused->find("link"), std::string::npos) << *refused;
    return;
  }
  Observed did = RunInSession(client, id, "workspace-write", "config-fsmonitor",
                              "printf '[core]\\n\\tfsmonitor = \"touch " + marker.string() +
                                  "; false\"\\n' >> repo.config && echo config-ok");
  std::cout << "  observed: " << did.Show() << "\n";
  const sandbox::testing::RunResult status = HostGit(repo, {"status", "--short"});
  std::cout << "  the person's `git status`: exit " << status.exit_code
            << "; the session's fsmonitor ran: " << fs::exists(marker) << "\n";
  EXPECT_FALSE(did.Says("config-ok"))
      << "the session wrote the file a protected repository's config links to\n";
  EXPECT_FALSE(fs::exists(marker)) << "the person's git status ran the session's fsmonitor\n";
}

}  // namespace
}  // namespace ptybox::testing
