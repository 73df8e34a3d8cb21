// The descriptor-composed mounts (docs/security.md, "Race-free binds", "Protected paths",
// "Wall 3"), attacked from inside real sessions in both confined modes with
// danger-full-access as the control:
// - one identity: a directory of another owner listed as `writable:` is not theirs to borrow
//   (root daemon: its 0600 file stays unreadable, nothing is created as that owner);
// - hidden paths are pinned: renaming a hidden file's parent (to plant a decoy) fails, and
//   another owner's new session still does not read the secret;
// - nested repositories: a planted core.fsmonitor or hook in vendor/lib/.git is refused, so the
//   host's `git -C vendor/lib status` runs nothing, at any depth; a tree the walk cannot search
//   whole refuses a workspace-write session instead.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "tests/escape/escape_support.h"
#include "tests/escape/git_attack_support.h"
#include "tests/sandbox/process_runner.h"
#include "tests/support/error_kind.h"
#include "tests/support/files.h"

namespace ptybox::testing {
namespace {

namespace fs = std::filesystem;
using git_attack::HostGit;
using sandbox::testing::RunProcess;
using sandbox::testing::RunResult;

class MountWallsTest : public ::testing::TestWithParam<std::string> {
 protected:
  [[nodiscard]] const std::string& Mode() const { return GetParam(); }
  [[nodiscard]] bool Confined() const { return Mode() != "danger-full-access"; }
};

constexpr const char* kGit = "/usr/bin/git";

TEST_P(MountWallsTest, AnotherOwnersDirectoryListedAsWritableIsNotBorrowed) {
  if (::geteuid() != 0) {
    GTEST_SKIP() << "needs root to give directories other owners (the identity borrow is a root "
                    "daemon's: an ordinary user's daemon has only its own id to hand out)";
  }
  constexpr uid_t kWorkspaceOwner = 1000;
  constexpr uid_t kOther = 1001;
  Daemon daemon;
  const fs::path ws = daemon.workspace();
  fs::create_directories(ws / "private");
  fs::create_directories(ws / "build");
  std::ofstream(ws / "private" / "secret") << "FAKE-PRIVATE-SECRET\n";
  ASSERT_EQ(::chown((ws / "private" / "secret").c_str(), kOther, kOther), 0);
  ASSERT_EQ(::chmod((ws / "private" / "secret").c_str(), 0600), 0);
  ASSERT_EQ(::chown((ws / "private").c_str(), kOther, kOther), 0);
  ASSERT_EQ(::chmod((ws / "private").c_str(), 0700), 0);
  ASSERT_EQ(::chmod((ws / "build").c_str(), 0755), 0);  // root's
  std::ofstream(ws / ".ptybox.yaml") << "version: 1\nwritable: [build, private]\n";
  ASSERT_EQ(::chown(ws.c_str(), kWorkspaceOwner, kWorkspaceOwner), 0);
  ASSERT_EQ(::chown((ws / ".ptybox.yaml").c_str(), kWorkspaceOwner, kWorkspaceOwner), 0);

  RpcClient client(daemon.socket());
  const std::string id = OpenSession(client, Mode());
  ASSERT_FALSE(id.empty()) << daemon.Log();
  Observed read = RunInSession(client, id, Mode(), "read-private",
                               "cat private/secret 2>&1 | head -c 200; echo; echo read-done");
  Observed write = RunInSession(client, id, Mode(), "write-as-other",
                                "touch private/made build/made 2>&1 | head -c 300; "
                                "id -u; echo write-done");
  std::cout << "  observed [" << Mode() << "] " << read.Show() << "\n  observed [" << Mode() << "] "
            << write.Show() << "\n";
  EXPECT_TRUE(read.Says("read-done")) << read.Show();
  EXPECT_TRUE(write.Says("write-done")) << write.Show();
  struct stat st {};
  const bool made_private = ::lstat((ws / "private" / "made").c_str(), &st) == 0;
  const bool made_build = ::lstat((ws / "build" / "made").c_str(), &st) == 0;
  if (Confined()) {
    EXPECT_FALSE(read.Says("FAKE-PRIVATE-SECRET")) << read.Show();
    if (made_private) {
      EXPECT_NE(st.st_uid, kOther) << "a file created as the other owner";
    }
    EXPECT_FALSE(made_private) << "the session wrote another owner's 0700 directory";
    EXPECT_FALSE(made_build) << "the session wrote a root-owned directory of the workspace";
  } else {
    // The control: host root reads and writes everything.
    EXPECT_TRUE(read.Says("FAKE-PRIVATE-SECRET")) << read.Show();
    EXPECT_TRUE(made_private && made_build);
  }
  // The policy still reports the nested roots as writable: they are, through the workspace.
  if (Mode() == "workspace-write") {
    Json resolved = client.Call("policy_resolve", Json::object());
    EXPECT_NE(resolved.dump().find("private"), std::string::npos) << resolved.dump();
  }
}

TEST_P(MountWallsTest, RenamingAHiddenPathsParentDoesNotUncoverIt) {
  Daemon daemon;
  const fs::path ws = daemon.workspace();
  fs::create_directories(ws / "config");
  std::ofstream(ws / "config" / ".env") << "FAKE-DECOY-SECRET\n";
  ::chmod((ws / "config" / ".env").c_str(), 0644);
  fs::create_directories(ws / "config" / "keys");
  std::ofstream(ws / "config" / "keys" / "id") << "FAKE-DECOY-SECRET\n";
  std::ofstream(ws / ".ptybox.yaml") << "version: 1\nhide: [config/.env, config/keys]\n";

  // Owner A renames the parent away and plants a decoy where the secret was.
  RpcClient a(daemon.socket());
  const std::string session_a = OpenSession(a, Mode());
  ASSERT_FALSE(session_a.empty()) << daemon.Log();
  Observed rename = RunInSession(a, session_a, Mode(), "rename-parent",
                                 "mv config config2 2>&1; echo mv=$?; "
                                 "mv config/.env moved 2>&1; echo mvfile=$?; "
                                 "mkdir -p config; echo decoy > config/.env; cat config/.env");
  std::cout << "  observed [" << Mode() << "] " << rename.Show() << "\n";
  const bool renamed = fs::exists(ws / "config2");
  if (Confined()) {
    EXPECT_FALSE(rename.Says("mv=0")) << rename.Show();
    EXPECT_FALSE(rename.Says("mvfile=0")) << rename.Show();
    EXPECT_FALSE(renamed) << "a confined session renamed the parent of a hidden path";
    EXPECT_FALSE(fs::exists(ws / "moved")) << "a confined session moved a hidden path";
    EXPECT_FALSE(rename.Says("FAKE-DECOY-SECRET")) << rename.Show();
    // The covers composed inside the workspace are carried into the sandbox read-only: the
    // directory is empty and cannot be written, in either mode.
    Observed cover = RunInSession(a, session_a, Mode(), "dir-cover",
                                  "ls -A config/keys | wc -l; touch config/keys/x 2>&1; "
                                  "echo touch=$?");
    EXPECT_TRUE(cover.Says("Read-only file system")) << cover.Show();
    EXPECT_FALSE(cover.Says("touch=0")) << cover.Show();
    EXPECT_EQ(cover.text.rfind("0\n", 0), 0u) << cover.Show();
    if (Mode() == "workspace-write") {
      // The pins cost nothing else: the directory is writable as before.
      Observed work = RunInSession(a, session_a, Mode(), "work-in-pinned",
                                   "touch config/other && echo touched");
      EXPECT_TRUE(work.Says("touched")) << work.Show();
    }
  } else {
    EXPECT_TRUE(rename.Says("mv=0")) << rename.Show();  // the control: nothing pins it
    EXPECT_TRUE(renamed);
  }
  a.Call("terminal_close", Json{{"sessionId", session_a}});

  // Owner B's new session: neither the old name nor the new one shows the secret.
  RpcClient b(daemon.socket());
  const std::string session_b = OpenSession(b, Mode());
  ASSERT_FALSE(session_b.empty()) << daemon.Log();
  Observed read =
      RunInSession(b, session_b, Mode(), "read-after-rename",
                   "cat config2/.env config/.env moved config/keys/id config2/keys/id 2>&1 | "
                   "head -c 400; echo; "
                   "echo read-done");
  std::cout << "  observed [" << Mode() << "] " << read.Show() << "\n";
  EXPECT_TRUE(read.Says("read-done")) << read.Show();
  if (Confined()) {
    EXPECT_FALSE(read.Says("FAKE-DECOY-SECRET")) << read.Show();
  }
}

TEST_P(MountWallsTest, NestedRepositoriesAreProtectedLikeTheRootOne) {
  Daemon daemon;
  const fs::path ws = daemon.workspace();
  TempDir host;
  const fs::path marker = host.path() / "fsmonitor-ran";
  const fs::path hook_marker = host.path() / "hook-ran";
  // Twelve levels down: deeper than the walk once went (it has no depth bound now).
  const std::string lib = "vendor/a/b/c/d/e/f/g/h/i/j/lib";
  fs::create_directories(ws / lib);
  RunResult init = RunProcess({kGit, "init", "-q", (ws / lib).string()});
  ASSERT_EQ(init.exit_code, 0) << init.Describe();
  // A submodule-style gitfile: the file itself is protected too.
  fs::create_directories(ws / "sub");
  std::ofstream(ws / "sub" / ".git") << "gitdir: ../" + lib + "/.git\n";

  RpcClient client(daemon.socket());
  const std::string id = OpenSession(client, Mode());
  ASSERT_FALSE(id.empty()) << daemon.Log();
  const std::string plant =
      "printf '[core]\\n\\tfsmonitor = touch " + marker.string() + "\\n' >> " + lib +
      "/.git/config 2>/dev/null; echo config=$?; "
      "printf '#!/bin/sh\\ntouch " +
      hook_marker.string() + "\\n' > " + lib +
      "/.git/hooks/pre-commit 2>/dev/null; echo hook=$?; " + "chmod +x " + lib +
      "/.git/hooks/pre-commit 2>/dev/null; "
      "echo 'gitdir: /tmp/evil' > sub/.git 2>/dev/null; echo gitfile=$?";
  Observed planted = RunInSession(client, id, Mode(), "plant-nested-git", plant);
  std::cout << "  observed [" << Mode() << "] " << planted.Show() << "\n";
  if (Confined()) {
    EXPECT_FALSE(planted.Says("config=0")) << planted.Show();
    EXPECT_FALSE(planted.Says("hook=0")) << planted.Show();
    EXPECT_FALSE(planted.Says("gitfile=0")) << planted.Show();
    EXPECT_EQ(ReadFile(ws / "sub" / ".git"), "gitdir: ../" + lib + "/.git\n");
  } else {
    EXPECT_TRUE(planted.Says("config=0")) << planted.Show();
  }
  // The host's git in the nested repository, as an operator would run it.
  RunResult status = RunProcess({kGit, "-C", (ws / lib).string(), "status"});
  RunResult commit = RunProcess({kGit, "-C", (ws / lib).string(), "-c", "user.name=t", "-c",
                                 "user.email=t@e", "commit", "-q", "--allow-empty", "-m", "x"});
  std::cout << "  observed [" << Mode() << "] host git status exit " << status.exit_code
            << ", commit exit " << commit.exit_code << "\n";
  if (Confined()) {
    EXPECT_FALSE(fs::exists(marker)) << "the host's git status ran the session's fsmonitor";
    EXPECT_FALSE(fs::exists(hook_marker)) << "the host's git commit ran the session's hook";
  } else {
    EXPECT_TRUE(fs::exists(marker)) << status.Describe();  // the control
  }
}

// A checked-out submodule moved aside (or its parent) leaves its path free for a repository the
// session makes: the person's `git status` in the superproject enters every gitlink directory
// with a .git, and would run that one's configuration. Each submodule directory and every
// directory above it is pinned, so the renames fail.
TEST_P(MountWallsTest, ACheckedOutSubmoduleCannotBeMovedAsideForASessionsOwn) {
  Daemon daemon;
  const fs::path ws = daemon.workspace();
  TempDir host;
  const fs::path marker = host.path() / "fsmonitor-ran";
  const fs::path source = host.path() / "source";
  fs::create_directories(source);
  ASSERT_EQ(HostGit(source, {"init", "-q"}).exit_code, 0);
  std::ofstream(source / "lib.txt") << "lib\n";
  ASSERT_EQ(HostGit(source, {"add", "lib.txt"}).exit_code, 0);
  ASSERT_EQ(HostGit(source, {"commit", "-q", "-m", "lib"}).exit_code, 0);
  ASSERT_EQ(HostGit(ws, {"init", "-q"}).exit_code, 0);
  RunResult added = HostGit(ws, {"submodule", "add", "-q", source.string(), "libs/foo"});
  ASSERT_EQ(added.exit_code, 0) << added.Describe();
  ASSERT_EQ(HostGit(ws, {"commit", "-q", "-m", "with a submodule"}).exit_code, 0);
  ASSERT_TRUE(fs::is_regular_file(ws / "libs" / "foo" / ".git"));  // a gitfile
  RpcClient client(daemon.socket());
  const std::string id = OpenSession(client, Mode());
  ASSERT_FALSE(id.empty()) << daemon.Log();
  const std::string attack =
      "mv libs/foo libs/aside 2>/dev/null; echo foo=$?; mv libs libs-aside 2>/dev/null; "
      "echo libs=$?; mkdir -p libs/foo 2>/dev/null; git init -q libs/foo >/dev/null 2>&1 && "
      "git -C libs/foo config core.fsmonitor 'touch " +
      marker.string() + "; false' 2>/dev/null; echo planted=$?";
  Observed did = RunInSession(client, id, Mode(), "move-submodule-aside", attack);
  std::cout << "  observed [" << Mode() << "] " << did.Show() << "\n";
  ASSERT_TRUE(did.Says("planted=")) << did.Show();
  RunResult status = HostGit(ws, {"status", "--short"});
  std::cout << "  observed [" << Mode() << "] host git status exit " << status.exit_code << "\n";
  if (Confined()) {
    EXPECT_FALSE(did.Says("foo=0")) << did.Show();
    EXPECT_FALSE(did.Says("libs=0")) << did.Show();
    EXPECT_FALSE(did.Says("planted=0")) << did.Show();
    EXPECT_FALSE(fs::exists(marker)) << "the host's git status ran the session's fsmonitor";
  } else {
    EXPECT_TRUE(did.Says("planted=0")) << did.Show();
    EXPECT_TRUE(fs::exists(marker)) << status.Describe();  // the control
  }
}

// A repository that borrows objects (`git clone --shared`, `--reference`: its
// objects/info/alternates names another object directory) takes them as its own: the person's
// `git checkout` writes their content. One inside the workspace, set aside and made anew by the
// session (`mv upstream u2`, a forged object at the same id), had the person's protected
// repository check out the session's bytes (outside review 58). The borrowed directory inside a
// repository's .git is pinned with the directories above it; a bare mirror's is protected too.
TEST_P(MountWallsTest, AnObjectDirectoryARepositoryBorrowsCannotBeReplaced) {
  Daemon daemon;
  const fs::path ws = daemon.workspace();
  ASSERT_EQ(HostGit(ws, {"init", "-q", "upstream"}).exit_code, 0);
  std::ofstream(ws / "upstream" / "f") << "hello\n";
  ASSERT_EQ(HostGit(ws / "upstream", {"add", "f"}).exit_code, 0);
  ASSERT_EQ(HostGit(ws / "upstream", {"commit", "-q", "-m", "f"}).exit_code, 0);
  ASSERT_EQ(HostGit(ws, {"clone", "-q", "--shared", "upstream", "down"}).exit_code, 0);
  ASSERT_EQ(HostGit(ws, {"clone", "-q", "--bare", "upstream", "mirror.git"}).exit_code, 0);
  ASSERT_EQ(HostGit(ws, {"clone", "-q", "--reference", (ws / "mirror.git").string(),
                         (ws / "upstream").string(), "down2"})
                .exit_code,
            0);
  // An alternate's own alternates, which git follows too: the mirror (a bare repository, which
  // the walk does not protect as a repository) borrows from nested.git.
  ASSERT_EQ(HostGit(ws, {"init", "-q", "--bare", "nested.git"}).exit_code, 0);
  fs::create_directories(ws / "mirror.git" / "objects" / "info");
  std::ofstream(ws / "mirror.git" / "objects" / "info" / "alternates")
      << (ws / "nested.git" / "objects").string() << "\n";
  RpcClient client(daemon.socket());
  const std::string id = OpenSession(client, Mode());
  ASSERT_FALSE(id.empty()) << daemon.Log();
  const std::string attack =
      "mv upstream u2 2>/dev/null; echo upstream=$?; "
      "mv mirror.git m2 2>/dev/null; echo mirror=$?; "
      "touch mirror.git/objects/planted 2>/dev/null; echo planted=$?; "
      "mv nested.git n2 2>/dev/null; echo nested=$?; echo attack-done";
  Observed did = RunInSession(client, id, Mode(), "replace-borrowed-objects", attack);
  std::cout << "  observed [" << Mode() << "] " << did.Show() << "\n";
  ASSERT_TRUE(did.Says("attack-done")) << did.Show();
  if (Confined()) {
    EXPECT_FALSE(did.Says("upstream=0")) << did.Show();
    EXPECT_FALSE(did.Says("mirror=0")) << did.Show();
    EXPECT_FALSE(did.Says("planted=0")) << did.Show();
    EXPECT_FALSE(did.Says("nested=0")) << did.Show();
    EXPECT_EQ(HostGit(ws / "down", {"fsck", "--no-progress"}).exit_code, 0);
    EXPECT_EQ(HostGit(ws / "down2", {"fsck", "--no-progress"}).exit_code, 0);
  } else {
    EXPECT_TRUE(did.Says("upstream=0")) << did.Show();  // the control: nothing pins it
  }
}

// A linked worktree's git directory lies in its main repository's .git, and git follows its
// `commondir` there for config and objects: the main repository set aside (`mv app app.x`) and
// made anew with a config of the session's had the person's `git status` in the worktree run the
// session's fsmonitor (outside review 60). Its worktree is pinned.
TEST_P(MountWallsTest, ALinkedWorktreesMainRepositoryCannotBeMovedAside) {
  Daemon daemon;
  const fs::path ws = daemon.workspace();
  TempDir host;
  const fs::path marker = host.path() / "fsmonitor-ran";
  ASSERT_EQ(HostGit(ws, {"init", "-q", "app"}).exit_code, 0);
  std::ofstream(ws / "app" / "f") << "hello\n";
  ASSERT_EQ(HostGit(ws / "app", {"add", "f"}).exit_code, 0);
  ASSERT_EQ(HostGit(ws / "app", {"commit", "-q", "-m", "f"}).exit_code, 0);
  ASSERT_EQ(
      HostGit(ws / "app", {"worktree", "add", "-q", "-b", "feature", "../app-feature"}).exit_code,
      0);
  RpcClient client(daemon.socket());
  const std::string id = OpenSession(client, Mode());
  ASSERT_FALSE(id.empty()) << daemon.Log();
  const std::string attack =
      "mv app app.x 2>/dev/null; echo moved=$?; "
      "if [ ! -d app/.git ]; then mkdir -p app/.git/worktrees/app-feature app/.git/objects "
      "app/.git/refs/heads && cp app.x/.git/worktrees/app-feature/HEAD "
      "app.x/.git/worktrees/app-feature/commondir app.x/.git/worktrees/app-feature/gitdir "
      "app/.git/worktrees/app-feature/ && echo 'ref: refs/heads/main' > app/.git/HEAD && "
      "printf '[core]\\n\\tfsmonitor = \"touch " +
      marker.string() + "; false\"\\n' > app/.git/config; fi; echo attack-done";
  Observed did = RunInSession(client, id, Mode(), "move-main-repository-aside", attack);
  std::cout << "  observed [" << Mode() << "] " << did.Show() << "\n";
  ASSERT_TRUE(did.Says("attack-done")) << did.Show();
  RunResult status = HostGit(ws / "app-feature", {"status", "--short"});
  if (Confined()) {
    EXPECT_FALSE(did.Says("moved=0")) << did.Show();
    EXPECT_FALSE(fs::exists(marker)) << "the person's git status ran the session's fsmonitor";
  } else {
    EXPECT_TRUE(did.Says("moved=0")) << did.Show();  // the control
    EXPECT_TRUE(fs::exists(marker)) << status.Describe();
  }
}

// Links in a .git (git's contrib `git-new-workdir` links config, objects and refs to another
// repository's .git): the linked repository set aside and made anew, and the person's git in the
// protected repository ran what the session wrote (outside review 60). The linked repository is
// pinned (a linked directory outside every .git would be protected and pinned).
TEST_P(MountWallsTest, WhatALinkInAProtectedGitLeadsToCannotBeReplaced) {
  Daemon daemon;
  const fs::path ws = daemon.workspace();
  ASSERT_EQ(HostGit(ws, {"init", "-q", "orig"}).exit_code, 0);
  std::ofstream(ws / "orig" / "f") << "hello\n";
  ASSERT_EQ(HostGit(ws / "orig", {"add", "f"}).exit_code, 0);
  ASSERT_EQ(HostGit(ws / "orig", {"commit", "-q", "-m", "f"}).exit_code, 0);
  // git-new-workdir's layout.
  fs::create_directories(ws / "wd" / ".git");
  for (const char* entry : {"config", "objects", "refs", "hooks", "info"}) {
    fs::create_symlink(ws / "orig" / ".git" / entry, ws / "wd" / ".git" / entry);
  }
  fs::copy_file(ws / "orig" / ".git" / "HEAD", ws / "wd" / ".git" / "HEAD");
  RpcClient client(daemon.socket());
  const std::string id = OpenSession(client, Mode());
  ASSERT_FALSE(id.empty()) << daemon.Log();
  const std::string attack = "mv orig orig.x 2>/dev/null; echo orig=$?; echo attack-done";
  Observed did = RunInSession(client, id, Mode(), "replace-what-links-lead-to", attack);
  std::cout << "  observed [" << Mode() << "] " << did.Show() << "\n";
  ASSERT_TRUE(did.Says("attack-done")) << did.Show();
  if (Confined()) {
    EXPECT_FALSE(did.Says("orig=0")) << did.Show();
    EXPECT_EQ(HostGit(ws / "wd", {"fsck", "--no-progress"}).exit_code, 0);
  } else {
    EXPECT_TRUE(did.Says("orig=0")) << did.Show();  // the control
  }
}

// A repository of a writable root whose index lists submodules (gitlinks) that are not checked
// out: the host's `git status` enters each one's directory when it holds a .git. A session that
// made one there (`git init sub`, or in a directory put in place of a renamed parent) would have
// the person's git run its core.fsmonitor. Each such directory is protected as a whole, and the
// directories above it are pinned.
TEST_P(MountWallsTest, AnUnpopulatedSubmoduleNeverBecomesASessionsRepository) {
  Daemon daemon;
  const fs::path ws = daemon.workspace();
  TempDir host;
  const fs::path marker = host.path() / "fsmonitor-ran";
  ASSERT_EQ(HostGit(ws, {"init", "-q"}).exit_code, 0);
  std::ofstream(ws / "a.txt") << "a\n";
  for (const char* path : {"sub", "deep/er/mod"}) {
    ASSERT_EQ(HostGit(ws, {"update-index", "--add", "--cacheinfo",
                           std::string("160000,1111111111111111111111111111111111111111,") + path})
                  .exit_code,
              0);
    fs::create_directories(ws / path);  // what git leaves for a submodule not checked out
  }
  ASSERT_EQ(HostGit(ws, {"add", "a.txt"}).exit_code, 0);
  RunResult committed = HostGit(ws, {"commit", "-q", "-m", "with submodules"});
  ASSERT_EQ(committed.exit_code, 0) << committed.Describe();
  RpcClient client(daemon.socket());
  const std::string id = OpenSession(client, Mode());
  ASSERT_FALSE(id.empty()) << daemon.Log();
  const std::string plant = "git config core.fsmonitor 'touch " + marker.string() + "; false'";
  const std::string attack =
      "git init -q sub >/dev/null 2>&1 && git -C sub " + plant.substr(4) +
      " 2>/dev/null; echo sub=$?; mv deep/er deep/aside 2>/dev/null; echo er=$?; "
      "mv deep deep-aside 2>/dev/null; echo deep=$?; mkdir -p deep/er/mod 2>/dev/null; "
      "git init -q deep/er/mod >/dev/null 2>&1 && git -C deep/er/mod " +
      plant.substr(4) + " 2>/dev/null; echo mod=$?";
  Observed did = RunInSession(client, id, Mode(), "plant-submodule-repository", attack);
  std::cout << "  observed [" << Mode() << "] " << did.Show() << "\n";
  ASSERT_TRUE(did.Says("mod=")) << did.Show();
  RunResult status = HostGit(ws, {"status", "--short"});
  std::cout << "  observed [" << Mode() << "] host git status exit " << status.exit_code << "\n";
  if (Confined()) {
    for (const char* step : {"sub=0", "er=0", "deep=0", "mod=0"}) {
      EXPECT_FALSE(did.Says(step)) << step << ": " << did.Show();
    }
    EXPECT_FALSE(fs::exists(marker))
        << "the host's git status ran the fsmonitor of a repository the session made in the "
           "directory of a submodule that was not checked out";
  } else {
    EXPECT_TRUE(did.Says("sub=0")) << did.Show();
    EXPECT_TRUE(fs::exists(marker)) << status.Describe();  // the control
  }
}

// A submodule whose directory is missing cannot be protected (nothing to cover, and the session
// could make it): a workspace-write session is refused with the submodule named and the fixes.
TEST_P(MountWallsTest, ASubmoduleWithoutItsDirectoryRefusesAWritableSession) {
  Daemon daemon;
  const fs::path ws = daemon.workspace();
  ASSERT_EQ(RunProcess({kGit, "init", "-q", ws.string()}).exit_code, 0);
  ASSERT_EQ(RunProcess({kGit, "-C", ws.string(), "update-index", "--add", "--cacheinfo",
                        "160000,1111111111111111111111111111111111111111,libs/gone"})
                .exit_code,
            0);
  RpcClient client(daemon.socket());
  Json set = client.Call("policy_set_mode", Json{{"mode", Mode()}});
  ASSERT_TRUE(set.contains("result")) << set.dump();
  Json opened = client.Call("terminal_open", Json::object());
  std::cout << "  observed [" << Mode() << "] " << opened.dump().substr(0, 600) << "\n";
  if (Mode() == "workspace-write") {
    ASSERT_TRUE(opened.contains("error")) << opened.dump();
    const std::string message = opened["error"]["message"].get<std::string>();
    EXPECT_NE(message.find("submodule `libs/gone`"), std::string::npos) << message;
    EXPECT_NE(message.find("submodule update --init"), std::string::npos) << message;
    EXPECT_NE(message.find(" rm --cached -- libs/gone"), std::string::npos) << message;
    // The repository lies in the workspace: a session may have made it, and removing it is
    // a fix as well (a session's gitlink must not block later opens without a way out).
    EXPECT_NE(message.find("if a session made this repository"), std::string::npos) << message;
  } else {
    EXPECT_TRUE(opened.contains("result")) << opened.dump();
  }
  // The fix the message names: the directory made, the session opens.
  fs::create_directories(ws / "libs" / "gone");
  Json again = client.Call("terminal_open", Json::object());
  EXPECT_TRUE(again.contains("result")) << again.dump();
  if (Mode() != "workspace-write") return;
  // A sparse checkout removes the directory of a submodule outside its cone: the refusal names
  // the command that brings it back in.
  fs::remove_all(ws / "libs");
  fs::create_directories(ws / ".git" / "info");
  std::ofstream(ws / ".git" / "info" / "sparse-checkout") << "/*\n!/libs/\n";
  Json sparse = client.Call("terminal_open", Json::object());
  ASSERT_TRUE(sparse.contains("error")) << sparse.dump();
  EXPECT_NE(sparse["error"]["message"].get<std::string>().find("sparse-checkout add -- libs/gone"),
            std::string::npos)
      << sparse.dump();
}

// The workspace is a directory of a repository (`repo/sub`): the repository's own .git lies
// outside the writable roots, but its index lists a submodule inside the workspace, and the
// host's git run in the repository enters it. Its directory is protected as a whole (no session
// makes a repository there), and once it is missing the launch is refused, as for a submodule of
// a repository inside the workspace. With `git_is_link`, the repository keeps its .git elsewhere
// through a link (`.git -> ../repo.gitdir`), which git's discovery follows (outside review 64).
// The session moves the submodule's directory aside or makes a repository there; what it said,
// and the host's `git status` in the repository, run after it.
struct AroundAttack {
  Observed did;
  RunResult status;
};
AroundAttack PlantInTheSubmoduleAround(Daemon& daemon, RpcClient& client, const std::string& mode,
                                       const fs::path& marker, const fs::path& scratch,
                                       bool git_is_link) {
  const fs::path ws = daemon.workspace();
  const fs::path repo = ws.parent_path();
  if (git_is_link) {
    const fs::path gitdir = scratch / "repo.gitdir";
    EXPECT_EQ(HostGit(repo, {"init", "-q", "--separate-git-dir", gitdir.string()}).exit_code, 0);
    fs::remove(repo / ".git");  // the gitfile --separate-git-dir wrote: a link instead
    fs::create_directory_symlink(gitdir, repo / ".git");
  } else {
    EXPECT_EQ(HostGit(repo, {"init", "-q"}).exit_code, 0);
  }
  std::ofstream(repo / "a.txt") << "a\n";
  EXPECT_EQ(HostGit(repo, {"update-index", "--add", "--cacheinfo",
                           "160000,1111111111111111111111111111111111111111,sub/libs/mod"})
                .exit_code,
            0);
  fs::create_directories(ws / "libs" / "mod");  // what git leaves for a submodule not checked out
  EXPECT_EQ(HostGit(repo, {"add", "a.txt"}).exit_code, 0);
  RunResult committed = HostGit(repo, {"commit", "-q", "-m", "with a submodule"});
  EXPECT_EQ(committed.exit_code, 0) << committed.Describe();
  const std::string id = OpenSession(client, mode);
  EXPECT_FALSE(id.empty()) << daemon.Log();
  // Moved aside and made anew, or planted where it is.
  const std::string attack =
      "mv libs libs-aside 2>/dev/null; echo libs=$?; mkdir -p libs/mod 2>/dev/null; git init -q "
      "libs/mod >/dev/null 2>&1 && git -C libs/mod config core.fsmonitor 'touch " +
      marker.string() + "; false' 2>/dev/null; echo mod=$?";
  Observed did = RunInSession(client, id, mode, "plant-enclosing-submodule", attack);
  std::cout << "  observed [" << mode << "] " << did.Show() << "\n";
  RunResult status = HostGit(repo, {"status", "--short"});
  std::cout << "  observed [" << mode << "] host git status exit " << status.exit_code << "\n";
  return {did, status};
}

TEST_P(MountWallsTest, ASubmoduleOfARepositoryAroundWhoseGitIsALinkIsProtected) {
  Daemon daemon(Daemon::Options{.extra_args = {}, .env = {}, .workspace_below = "sub"});
  RpcClient client(daemon.socket());
  TempDir host;
  const fs::path marker = host.path() / "fsmonitor-ran";
  const auto [did, status] =
      PlantInTheSubmoduleAround(daemon, client, Mode(), marker, host.path(), true);
  ASSERT_TRUE(did.Says("mod=")) << did.Show();
  if (Confined()) {
    EXPECT_FALSE(did.Says("libs=0")) << did.Show();
    EXPECT_FALSE(did.Says("mod=0")) << did.Show();
    EXPECT_FALSE(fs::exists(marker)) << "the host's git status ran the session's fsmonitor";
  } else {
    EXPECT_TRUE(did.Says("mod=0")) << did.Show();
    EXPECT_TRUE(fs::exists(marker)) << status.Describe();  // the control
  }
}

TEST_P(MountWallsTest, ASubmoduleOfTheRepositoryAroundTheWorkspaceNeverBecomesASessions) {
  Daemon daemon(Daemon::Options{.extra_args = {}, .env = {}, .workspace_below = "sub"});
  const fs::path ws = daemon.workspace();
  RpcClient client(daemon.socket());
  TempDir host;
  const fs::path marker = host.path() / "fsmonitor-ran";
  const auto [did, status] =
      PlantInTheSubmoduleAround(daemon, client, Mode(), marker, host.path(), false);
  ASSERT_TRUE(did.Says("mod=")) << did.Show();
  if (Confined()) {
    for (const char* step : {"libs=0", "mod=0"}) {
      EXPECT_FALSE(did.Says(step)) << step << ": " << did.Show();
    }
    EXPECT_FALSE(fs::exists(marker))
        << "the host's git status ran the fsmonitor of a repository the session made in a "
           "submodule directory of the repository around the workspace";
  } else {
    EXPECT_TRUE(did.Says("mod=0")) << did.Show();
    EXPECT_TRUE(fs::exists(marker)) << status.Describe();  // the control
    return;
  }
  // Without its directory the submodule cannot be protected: a writable session is refused.
  fs::remove_all(ws / "libs");
  Json set = client.Call("policy_set_mode", Json{{"mode", Mode()}});
  ASSERT_TRUE(set.contains("result")) << set.dump();
  Json opened = client.Call("terminal_open", Json::object());
  std::cout << "  observed [" << Mode() << "] " << opened.dump().substr(0, 600) << "\n";
  if (Mode() != "workspace-write") {
    EXPECT_TRUE(opened.contains("result")) << opened.dump();
    return;
  }
  ASSERT_TRUE(opened.contains("error")) << opened.dump();
  const std::string message = opened["error"]["message"].get<std::string>();
  EXPECT_NE(message.find("submodule"), std::string::npos) << message;
  EXPECT_NE(message.find("submodule update --init"), std::string::npos) << message;
}

TEST_P(MountWallsTest, ATreeTheWalkCannotSearchWholeRefusesAWritableSession) {
  // Fail closed: a directory nested deeper than the kernel resolves a path cannot be searched
  // for repositories by descriptor-relative paths, so a workspace-write session is refused
  // with the reason and a fix (a repository down there would otherwise be writable).
  Daemon daemon;
  const fs::path ws = daemon.workspace();
  const std::string name(200, 'n');
  int fd = ::open(ws.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  for (int i = 0; i < 22; ++i) {  // 22 * 201 bytes > PATH_MAX, built by descriptor
    ASSERT_EQ(::mkdirat(fd, name.c_str(), 0755), 0);
    const int next = ::openat(fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    ::close(fd);
    ASSERT_GE(next, 0);
    fd = next;
  }
  ASSERT_EQ(::mkdirat(fd, ".git", 0755), 0);
  ::close(fd);
  RpcClient client(daemon.socket());
  Json set = client.Call("policy_set_mode", Json{{"mode", Mode()}});
  ASSERT_TRUE(set.contains("result")) << set.dump();
  Json opened = client.Call("terminal_open", Json::object());
  std::cout << "  observed [" << Mode() << "] " << opened.dump().substr(0, 400) << "\n";
  if (Mode() == "workspace-write") {
    ASSERT_TRUE(opened.contains("error")) << opened.dump();
    const std::string message = opened["error"]["message"].get<std::string>();
    EXPECT_ERROR_KIND(opened, ErrorKind::kPolicyDenied);
    EXPECT_NE(message.find("deeper than the kernel resolves"), std::string::npos) << message;
    EXPECT_NE(message.find("read-only"), std::string::npos) << message;
  } else {
    // Nothing in a read-only or unconfined session depends on the walk.
    EXPECT_TRUE(opened.contains("result")) << opened.dump();
  }
  // Shortened from the top so the directory can be removed by path.
  fs::path top = ws / name;
  for (int i = 0; i < 10; ++i) top /= name;
  std::error_code ec;
  fs::rename(top, ws / "rest", ec);
}

TEST_P(MountWallsTest, AnInitBinaryInsideTheWorkspaceIsComposedReadOnly) {
  // A ptybox-init built inside the workspace: bwrap binds nothing inside a root, the launcher
  // composes the checked binary read-only onto it; the session can neither write it nor stop
  // starting.
  TempDir ws;
  fs::permissions(ws.path(), fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                                 fs::perms::others_read | fs::perms::others_exec);
  fs::create_directories(ws.path() / "bin");
  const fs::path init = ws.path() / "bin" / "ptybox-init";
  fs::copy_file(InitBinary(), init);
  fs::permissions(ws.path() / "bin", fs::perms::owner_all | fs::perms::group_read |
                                         fs::perms::group_exec | fs::perms::others_read |
                                         fs::perms::others_exec);
  const auto size = fs::file_size(init);
  RunResult run =
      RunProcess({"/usr/bin/env", "PTYBOX_INIT=" + init.string(), PtyboxBinary().string(), "run",
                  "--workspace", ws.path().string(), "--mode", Mode(), "--", "/bin/sh", "-c",
                  "echo x >> bin/ptybox-init 2>/dev/null; echo rc=$?; "
                  "mv bin/ptybox-init bin/moved 2>/dev/null; echo mv=$?; echo ran"});
  std::cout << "  observed [" << Mode() << "] init inside the workspace: exit " << run.exit_code
            << ", " << run.out;
  EXPECT_NE(run.out.find("ran"), std::string::npos) << run.Describe();
  if (Confined()) {
    EXPECT_EQ(run.out.find("rc=0"), std::string::npos) << run.Describe();
    EXPECT_EQ(run.out.find("mv=0"), std::string::npos) << run.Describe();
    ASSERT_TRUE(fs::exists(init)) << "the session moved ptybox-init";
    EXPECT_EQ(fs::file_size(init), size) << "the session wrote ptybox-init";
  } else {
    // The control: nothing is mounted there (the running binary is busy, but its name moves).
    EXPECT_NE(run.out.find("mv=0"), std::string::npos) << run.Describe();
  }
}

INSTANTIATE_TEST_SUITE_P(Modes, MountWallsTest,
                         ::testing::Values("read-only", "workspace-write", "danger-full-access"),
                         ModeTestName);

}  // namespace
}  // namespace ptybox::testing
