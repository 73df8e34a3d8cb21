// Git for agents (docs/security.md, "Git for agents"), from inside real sessions in every mode:
// in workspace-write an agent commits, branches, tags, stashes, merges and rebases in a plain
// clone, and the host's git sees the result once the send is answered; what it plants in the
// .git it sees (core.fsmonitor, a hook, a commondir redirect, a submodule config, links in
// refs/, logs/ and objects/ to a host file outside) never reaches the host's .git: the host's
// `git status` and `git commit` run nothing and the link target is unchanged. danger-full-access
// is the control (the planted fsmonitor runs there); read-only keeps .git read-only.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <thread>
#include <vector>

#include "tests/escape/escape_support.h"
#include "tests/sandbox/process_runner.h"
#include "tests/support/files.h"

namespace ptybox::testing {
namespace {

namespace fs = std::filesystem;
using sandbox::testing::RunProcess;
using sandbox::testing::RunResult;

constexpr const char* kGit = "/usr/bin/git";

class GitWriteTest : public ::testing::TestWithParam<std::string> {
 protected:
  [[nodiscard]] const std::string& Mode() const { return GetParam(); }
  [[nodiscard]] bool Writable() const { return Mode() == "workspace-write"; }

  // The host's git in `repo`, as the person who owns it runs it (a clean environment).
  static RunResult HostGit(const fs::path& repo, std::vector<std::string> args) {
    std::vector<std::string> argv = {
        kGit, "-C", repo.string(), "-c", "user.name=host", "-c", "user.email=host@example.com"};
    argv.insert(argv.end(), args.begin(), args.end());
    return RunProcess(argv);
  }
  static void MakeRepository(const fs::path& ws) {
    ASSERT_EQ(HostGit(ws, {"init", "-q", "-b", "main"}).exit_code, 0);
    std::ofstream(ws / "a.txt") << "one\n";
    std::ofstream(ws / ".gitignore") << ".escape/\n";
    ASSERT_EQ(HostGit(ws, {"add", "a.txt", ".gitignore"}).exit_code, 0);
    RunResult first = HostGit(ws, {"commit", "-q", "-m", "first"});
    ASSERT_EQ(first.exit_code, 0) << first.Describe();
  }
};

constexpr const char* kIdentity =
    "export GIT_AUTHOR_NAME=agent GIT_AUTHOR_EMAIL=agent@example.com "
    "GIT_COMMITTER_NAME=agent GIT_COMMITTER_EMAIL=agent@example.com; ";

TEST_P(GitWriteTest, AnAgentCommitsAndTheHostSeesItAfterTheSend) {
  Daemon daemon(Daemon::Options{.extra_args = {}, .env = {"PTYBOX_GIT_WRITE=1"}});
  const fs::path ws = daemon.workspace();
  MakeRepository(ws);
  const std::string head_before = HostGit(ws, {"rev-parse", "HEAD"}).out;
  RpcClient client(daemon.socket());
  const std::string id = OpenSession(client, Mode());
  ASSERT_FALSE(id.empty()) << daemon.Log();
  const std::string work =
      std::string(kIdentity) +
      "echo two > b.txt && git add b.txt && git commit -qm second && echo commit=ok; "
      "git checkout -qb feature && echo three > c.txt && git add c.txt && "
      "git commit -qm third && git tag v1 && echo branch=ok; "
      "git checkout -q main && git merge -q --no-edit feature && echo merge=ok; "
      "git checkout -qb topic HEAD~2 && echo four > d.txt && git add d.txt && "
      "git commit -qm fourth && git rebase -q main && echo rebase=ok; "
      "echo changed >> a.txt && git stash -q && git stash list | grep -c stash@ && "
      "echo stash=ok; git checkout -q main; git status --porcelain | wc -l";
  Observed did = RunInSession(client, id, Mode(), "git-work", work);
  std::cout << "  observed [" << Mode() << "] " << did.Show() << "\n";
  // The send was answered: its copy-back is done. What the host's git sees now:
  RunResult log = HostGit(ws, {"log", "--format=%s", "main"});
  RunResult tags = HostGit(ws, {"tag"});
  RunResult topic = HostGit(ws, {"log", "--format=%s", "-1", "topic"});
  RunResult stash = HostGit(ws, {"stash", "list"});
  RunResult status = HostGit(ws, {"status", "--porcelain"});
  RunResult fsck = HostGit(ws, {"fsck", "--no-progress", "--no-dangling"});
  std::cout << "  observed [" << Mode() << "] host log " << log.out << " tags " << tags.out
            << " status [" << status.out << "] fsck [" << fsck.out << fsck.err << "]\n";
  if (Mode() == "read-only") {
    EXPECT_FALSE(did.Says("commit=ok")) << did.Show();
    EXPECT_EQ(HostGit(ws, {"rev-parse", "HEAD"}).out, head_before);
    return;
  }
  for (const char* step : {"commit=ok", "branch=ok", "merge=ok", "rebase=ok", "stash=ok"}) {
    EXPECT_TRUE(did.Says(step)) << step << ": " << did.Show();
  }
  EXPECT_EQ(log.out, "third\nsecond\nfirst\n") << log.Describe();
  EXPECT_EQ(tags.out, "v1\n");
  EXPECT_EQ(topic.out, "fourth\n");
  // The stash is there as refs/stash, and its list (a reflog: the session's lines are appended
  // to the host's logs of the refs the copy-back moved).
  EXPECT_EQ(HostGit(ws, {"stash", "show", "--name-only", "refs/stash"}).out, "a.txt\n");
  EXPECT_EQ(HostGit(ws, {"stash", "list", "--format=%gd"}).out, "stash@{0}\n");
  EXPECT_NE(HostGit(ws, {"reflog", "show", "--format=%gs", "topic"}).out.find("rebase"),
            std::string::npos);
  EXPECT_EQ(HostGit(ws, {"rev-parse", "--abbrev-ref", "HEAD"}).out, "main\n");
  EXPECT_EQ(status.out, "") << status.Describe();
  EXPECT_EQ(fsck.exit_code, 0) << fsck.Describe();
  // The person's git goes on working there (what the daemon wrote is theirs).
  std::ofstream(ws / "e.txt") << "host\n";
  EXPECT_EQ(HostGit(ws, {"add", "e.txt"}).exit_code, 0);
  RunResult commit = HostGit(ws, {"commit", "-q", "-m", "host"});
  EXPECT_EQ(commit.exit_code, 0) << commit.Describe();
}

TEST_P(GitWriteTest, WhatASessionPlantsInItsGitNeverRunsOrWritesOnTheHost) {
  Daemon daemon(Daemon::Options{.extra_args = {}, .env = {"PTYBOX_GIT_WRITE=1"}});
  const fs::path ws = daemon.workspace();
  MakeRepository(ws);
  TempDir host;
  const fs::path marker = host.path() / "ran";
  const fs::path target = host.path() / "target.txt";
  std::ofstream(target) << "untouched\n";
  ASSERT_EQ(::chmod(host.path().c_str(), 0755), 0);
  const std::string touch = "touch " + marker.string();
  RpcClient client(daemon.socket());
  const std::string id = OpenSession(client, Mode());
  ASSERT_FALSE(id.empty()) << daemon.Log();
  const std::string plant =
      "printf '[core]\\n\\tfsmonitor = " + touch +
      "\\n' >> .git/config 2>/dev/null; "
      "echo config=$?; "
      "git config core.hooksPath /tmp 2>/dev/null; echo gitconfig=$?; "
      "printf '#!/bin/sh\\n" +
      touch +
      "\\n' > .git/hooks/post-commit 2>/dev/null; "
      "echo hook=$?; chmod +x .git/hooks/post-commit 2>/dev/null; "
      // (not in the control: a commondir redirect breaks the host's git before its fsmonitor)
      + std::string(Mode() == "danger-full-access"
                        ? ""
                        : "echo /tmp/evil > .git/commondir 2>/dev/null; echo commondir=$?; ") +
      "mkdir -p .git/modules/sub 2>/dev/null; printf '[core]\\n\\tfsmonitor = " + touch +
      "\\n' > .git/modules/sub/config 2>/dev/null; echo modules=$?; "
      "ln -s " +
      target.string() +
      " .git/refs/heads/evil 2>/dev/null; echo refslink=$?; "
      "mkdir -p .git/logs/refs/heads; rm -f .git/logs/HEAD .git/logs/refs/heads/main; "
      "ln -s " +
      target.string() +
      " .git/logs/HEAD 2>/dev/null; echo logslink=$?; "
      "ln -s " +
      target.string() +
      " .git/logs/refs/heads/main 2>/dev/null; "
      "ln -s " +
      host.path().string() + " .git/objects/ab 2>/dev/null; echo objectslink=$?";
  Observed planted = RunInSession(client, id, Mode(), "plant-git", plant);
  std::cout << "  observed [" << Mode() << "] " << planted.Show() << "\n";
  if (Mode() != "danger-full-access") {
    // Code and configuration stay the host's, read-only, in both confined modes.
    EXPECT_FALSE(planted.Says("config=0")) << planted.Show();
    EXPECT_FALSE(planted.Says("gitconfig=0")) << planted.Show();
    EXPECT_FALSE(planted.Says("hook=0")) << planted.Show();
  }
  if (Writable()) {
    // The private directory's own files are the session's: links may be made there, and
    // are never followed or copied by the copy-back that ran before the send was answered.
    EXPECT_TRUE(planted.Says("refslink=0")) << planted.Show();
    EXPECT_TRUE(planted.Says("logslink=0")) << planted.Show();
  }
  // The host's git there, as the person runs it after the session.
  std::ofstream(ws / "host.txt") << "host\n";
  RunResult status = HostGit(ws, {"status"});
  RunResult add = HostGit(ws, {"add", "host.txt"});
  RunResult commit = HostGit(ws, {"commit", "-q", "-m", "host"});
  RunResult branch = HostGit(ws, {"branch", "-q", "another"});
  std::cout << "  observed [" << Mode() << "] host git status " << status.exit_code << ", commit "
            << commit.exit_code << " " << commit.err << "\n";
  if (Mode() == "danger-full-access") {
    // The control: without the protection the planted fsmonitor runs on the host, and the
    // host's commit appends its reflog line through the planted link.
    EXPECT_TRUE(fs::exists(marker)) << status.Describe();
    EXPECT_NE(ReadFile(target), "untouched\n");
    return;
  }
  EXPECT_EQ(ReadFile(target), "untouched\n");
  EXPECT_FALSE(fs::exists(marker)) << "the host's git ran what the session planted";
  EXPECT_EQ(commit.exit_code, 0) << commit.Describe();
  for (const char* name : {"refs/heads/evil", "logs/HEAD", "objects/ab", "commondir", "modules",
                           "hooks/post-commit"}) {
    struct stat st {};
    const bool there = ::lstat((ws / ".git" / name).c_str(), &st) == 0;
    EXPECT_TRUE(!there || !S_ISLNK(st.st_mode)) << name << " is a link on the host";
    // The host's own commit writes logs/HEAD, and objects/ab when one of its object ids starts
    // with ab (1 in 256 per object: the test flaked so): there, only a link is the session's.
    if (std::string(name) != "logs/HEAD" && std::string(name) != "objects/ab") {
      EXPECT_FALSE(there) << name << " reached the host";
    }
  }
  EXPECT_EQ(ReadFile(host.path() / "target.txt"), "untouched\n");
  // Nothing was written through the objects link into the host directory it named.
  EXPECT_EQ(std::distance(fs::directory_iterator(host.path()), fs::directory_iterator()), 1)
      << "the host's directory behind the planted objects/ab link was written";
  EXPECT_TRUE(fs::is_empty(host.path()) || !fs::exists(host.path() / "ab"));
}

TEST_P(GitWriteTest, ALinkedWorktreeCannotBeAddedAndSaysSo) {
  Daemon daemon(Daemon::Options{.extra_args = {}, .env = {"PTYBOX_GIT_WRITE=1"}});
  const fs::path ws = daemon.workspace();
  MakeRepository(ws);
  RpcClient client(daemon.socket());
  const std::string id = OpenSession(client, Mode());
  ASSERT_FALSE(id.empty()) << daemon.Log();
  Observed added = RunInSession(client, id, Mode(), "worktree-add",
                                "git worktree add -q ../wt-side 2>&1 | tail -1; "
                                "git worktree add -q wt-inside 2>&1 | tail -1; echo done");
  std::cout << "  observed [" << Mode() << "] " << added.Show() << "\n";
  if (Mode() == "danger-full-access") return;
  // worktrees/ is the host's, read-only: no worktree metadata is ever made (nor copied back).
  EXPECT_FALSE(fs::exists(ws / ".git" / "worktrees"));
  EXPECT_FALSE(fs::exists(ws / "wt-inside" / ".git"));
}

// `git config user.email x` (the repository's config) fails in a confined session and says to use
// --global, which writes the session's own home and works; the daemon's default (no private git
// directory) and PTYBOX_GIT_WRITE=1 alike. danger-full-access, the control: the repository's
// config is writable and nothing is added.
TEST_P(GitWriteTest, RepositoryConfigSaysToUseGlobal) {
  for (const bool private_git : {false, true}) {
    Daemon daemon(Daemon::Options{
        .extra_args = {}, .env = {private_git ? "PTYBOX_GIT_WRITE=1" : "PTYBOX_GIT_WRITE=0"}});
    const fs::path ws = daemon.workspace();
    MakeRepository(ws);
    RpcClient client(daemon.socket());
    const std::string id = OpenSession(client, Mode());
    ASSERT_FALSE(id.empty()) << daemon.Log();
    Observed local =
        RunInSession(client, id, Mode(), "config-local", "git config user.email agent@example.com");
    Observed global =
        RunInSession(client, id, Mode(), "config-global",
                     "git config --global user.email agent@example.com && git config user.email");
    std::cout << "  observed [" << Mode() << "] " << local.Show() << "\n  " << global.Show()
              << "\n";
    if (Mode() == "danger-full-access") {
      EXPECT_EQ(local.exit, 0) << local.Show();
      EXPECT_FALSE(local.Says("ptybox:")) << local.Show();
      continue;
    }
    // git's own status, kept: 255 when it cannot take the lock (all of .git read-only), 4 when it
    // cannot rename over the read-only config (a private git directory).
    EXPECT_TRUE(local.exit == 255 || local.exit == 4) << local.Show();
    EXPECT_TRUE(local.Says("use git config --global")) << local.Show();
    EXPECT_EQ(global.exit, 0) << global.Show();
    EXPECT_TRUE(global.Says("agent@example.com")) << global.Show();
    EXPECT_EQ(HostGit(ws, {"config", "--local", "user.email"}).out, "")
        << "the host's config changed";
  }
}

// A linked worktree the person made inside the workspace (`git worktree add wt -b feature`): the
// agent commits in its checkout, and the host's git sees the commit on `feature`, the worktree's
// HEAD and index agree (`status` clean), the main worktree is untouched; the worktree's own
// `gitdir`/`commondir` stay the host's (read-only), and no new worktree can be added.
TEST_P(GitWriteTest, AnAgentCommitsInALinkedWorktree) {
  Daemon daemon(Daemon::Options{.extra_args = {}, .env = {"PTYBOX_GIT_WRITE=1"}});
  const fs::path ws = daemon.workspace();
  MakeRepository(ws);
  std::ofstream(ws / ".gitignore", std::ios::app) << "wt/\n";
  ASSERT_EQ(HostGit(ws, {"worktree", "add", "-q", "wt", "-b", "feature"}).exit_code, 0);
  const std::string gitdir = ReadFile(ws / ".git" / "worktrees" / "wt" / "gitdir");
  RpcClient client(daemon.socket());
  const std::string id = OpenSession(client, Mode());
  ASSERT_FALSE(id.empty()) << daemon.Log();
  const std::string work =
      std::string(kIdentity) +
      "cd wt && echo w > w.txt && git add w.txt && git commit -qm in-worktree && echo wt=ok; "
      "echo /tmp/evil > ../.git/worktrees/wt/gitdir || echo gitdir=refused; "
      "echo ../../x > ../.git/worktrees/wt/commondir || echo commondir=refused; "
      "git worktree add -q ../wt2 2>&1 | tail -1; cd ..";
  Observed did = RunInSession(client, id, Mode(), "worktree-commit", work);
  std::cout << "  observed [" << Mode() << "] " << did.Show() << "\n";
  RunResult log = HostGit(ws / "wt", {"log", "--format=%s", "-1"});
  RunResult status = HostGit(ws / "wt", {"status", "--porcelain"});
  EXPECT_EQ(HostGit(ws, {"log", "--format=%s", "-1", "main"}).out, "first\n");
  if (Mode() == "read-only") {
    EXPECT_FALSE(did.Says("wt=ok")) << did.Show();
    EXPECT_EQ(log.out, "first\n");
    return;
  }
  EXPECT_TRUE(did.Says("wt=ok")) << did.Show();
  if (Mode() == "danger-full-access") {
    // The control: the session rewrote the host's own worktree files (the worktree is broken).
    EXPECT_FALSE(did.Says("gitdir=refused")) << did.Show();
    EXPECT_EQ(ReadFile(ws / ".git" / "worktrees" / "wt" / "commondir"), "../../x\n");
    return;
  }
  EXPECT_EQ(log.out, "in-worktree\n") << log.Describe() << daemon.Log();
  EXPECT_EQ(HostGit(ws, {"log", "--format=%s", "-1", "feature"}).out, "in-worktree\n");
  EXPECT_EQ(status.out, "") << status.Describe();
  EXPECT_EQ(HostGit(ws, {"fsck", "--no-progress", "--no-dangling"}).exit_code, 0);
  EXPECT_TRUE(did.Says("gitdir=refused")) << did.Show();
  EXPECT_TRUE(did.Says("commondir=refused")) << did.Show();
  EXPECT_EQ(ReadFile(ws / ".git" / "worktrees" / "wt" / "gitdir"), gitdir);
  EXPECT_EQ(ReadFile(ws / ".git" / "worktrees" / "wt" / "commondir"), "../..\n");
  EXPECT_FALSE(fs::exists(ws / ".git" / "worktrees" / "wt2"));
  EXPECT_FALSE(fs::exists(ws / "wt2" / ".git"));
}

// What a session commits after its last send (a background job here) reaches the host's .git
// with the session's last copy-back, and `terminal_close` is answered only once that is done: the
// person who runs `git log` after the close sees the commit.
TEST(GitWriteCloseTest, TheLastCommitIsInTheHostsGitWhenTheCloseIsAnswered) {
  Daemon daemon(Daemon::Options{.extra_args = {}, .env = {"PTYBOX_GIT_WRITE=1"}});
  const fs::path ws = daemon.workspace();
  ASSERT_EQ(RunProcess({kGit, "-C", ws.string(), "init", "-q", "-b", "main"}).exit_code, 0);
  ASSERT_EQ(RunProcess({kGit, "-C", ws.string(), "-c", "user.name=h", "-c", "user.email=h@x",
                        "commit", "-q", "--allow-empty", "-m", "first"})
                .exit_code,
            0);
  RpcClient client(daemon.socket());
  const std::string id = OpenSession(client, "workspace-write");
  ASSERT_FALSE(id.empty()) << daemon.Log();
  // The job commits after the send was answered, then leaves a file the test waits for.
  const std::string work = std::string(kIdentity) +
                           "(sleep 1; git commit -q --allow-empty -m after-the-send && "
                           "touch committed) >/dev/null 2>&1 & echo started";
  Observed did = RunInSession(client, id, "workspace-write", "background-commit", work);
  ASSERT_TRUE(did.Says("started")) << did.Show();
  const auto guard = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!fs::exists(ws / "committed") && std::chrono::steady_clock::now() < guard) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_TRUE(fs::exists(ws / "committed")) << daemon.Log();
  EXPECT_EQ(RunProcess({kGit, "-C", ws.string(), "log", "--format=%s", "main"}).out, "first\n")
      << "copied back before any send or close";
  ASSERT_TRUE(client.Call("terminal_close", Json{{"sessionId", id}}).contains("result"));
  RunResult log = RunProcess({kGit, "-C", ws.string(), "log", "--format=%s", "main"});
  EXPECT_EQ(log.out, "after-the-send\nfirst\n") << log.Describe() << daemon.Log();
}

// A daemon started with PTYBOX_GIT_WRITE=0 (Git for agents turned off; on without the variable)
// composes no private git directory; every .git of a writable root is read-only in the session.
TEST(GitWriteOffTest, WithGitWriteZeroEveryGitStaysReadOnly) {
  Daemon daemon(Daemon::Options{.extra_args = {}, .env = {"PTYBOX_GIT_WRITE=0"}});
  const fs::path ws = daemon.workspace();
  ASSERT_EQ(RunProcess({kGit, "-C", ws.string(), "init", "-q", "-b", "main"}).exit_code, 0);
  RpcClient client(daemon.socket());
  const std::string id = OpenSession(client, "workspace-write");
  ASSERT_FALSE(id.empty()) << daemon.Log();
  Observed did = RunInSession(client, id, "workspace-write", "commit-off",
                              std::string(kIdentity) + "git commit -q --allow-empty -m off");
  EXPECT_EQ(did.exit, 128) << did.Show();
  EXPECT_TRUE(did.Says("index.lock': Read-only file system")) << did.Show();
  EXPECT_NE(RunProcess({kGit, "-C", ws.string(), "rev-parse", "HEAD"}).exit_code, 0)
      << "a commit reached the host";
}

// Figures for docs/security.md ("Git for agents", cost): how long a workspace-write open takes
// with no repository, one, and 100 nested ones, and a send that commits against one that does
// not. Printed only: nothing here depends on timing.
TEST(GitWriteCostTest, OpenAndCopyBackFigures) {
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  for (const int repositories : {0, 1, 100}) {
    Daemon daemon(Daemon::Options{.extra_args = {}, .env = {"PTYBOX_GIT_WRITE=1"}});
    const fs::path ws = daemon.workspace();
    for (int i = 0; i < repositories; ++i) {
      const fs::path repo = i == 0 ? ws : ws / "vendor" / ("lib" + std::to_string(i));
      fs::create_directories(repo);
      ASSERT_EQ(RunProcess({kGit, "init", "-q", repo.string()}).exit_code, 0);
    }
    RpcClient client(daemon.socket());
    std::vector<double> opens;
    for (int round = 0; round < 5; ++round) {
      const auto started = std::chrono::steady_clock::now();
      const std::string id = OpenSession(client, "workspace-write");
      opens.push_back(
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started)
              .count());
      ASSERT_FALSE(id.empty()) << daemon.Log();
      if (repositories == 1 && round == 0) {
        std::vector<double> plain, commits;
        for (int i = 0; i < 5; ++i) {
          auto t0 = std::chrono::steady_clock::now();
          RunInSession(client, id, "workspace-write", "plain",
                       "echo " + std::to_string(i) + " > f");
          auto t1 = std::chrono::steady_clock::now();
          RunInSession(
              client, id, "workspace-write", "commit",
              std::string(kIdentity) + "git add f && git commit -qm c" + std::to_string(i));
          auto t2 = std::chrono::steady_clock::now();
          plain.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
          commits.push_back(std::chrono::duration<double, std::milli>(t2 - t1).count());
        }
        std::cout << "  measured: a send that writes a file " << median(plain)
                  << " ms, one that commits (git and its copy-back) " << median(commits)
                  << " ms (medians of 5)\n";
        EXPECT_EQ(RunProcess({kGit, "-C", ws.string(), "rev-list", "--count", "HEAD"}).out, "5\n");
      }
      client.Call("terminal_close", Json{{"sessionId", id}});
    }
    std::cout << "  measured: workspace-write open with " << repositories
              << " repositories: median " << median(opens) << " ms of 5\n";
  }
}

INSTANTIATE_TEST_SUITE_P(Modes, GitWriteTest,
                         ::testing::Values("read-only", "workspace-write", "danger-full-access"),
                         ModeTestName);

}  // namespace
}  // namespace ptybox::testing
