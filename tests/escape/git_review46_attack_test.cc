// Fifty-third outside review of "Git for agents" (docs/security.md), on 76dc18f, the
// forty-sixth of the feature. Time-boxed (25 minutes). Both findings are about review 52's fix:
// the daemon looks for the person's git in /proc (sandbox/persons_git.cc, PersonsGitRunsIn).
//
// Finding 1 (the feature off in ordinary use, and the session's work held back; no wall broken):
// PersonsGitRunsIn counts a process by its subcommand alone, and a long-lived git whose
// subcommand is in kGitSwitchesHead/kGitMovesHead but that moves nothing counts as a switch under
// way for as long as it lives. `git stash list` (and `git stash show -p`) run the pager: the
// `git stash` process (comm `git`, cwd the worktree's top) waits for it, minutes or hours while
// the person reads it in a terminal left open. Meanwhile every launch retries eight times and
// keeps .git read-only ("the person's git ... is at work"), and HoldOf holds HEAD's branch.
// (The uncommitted denylist seen in the work tree during this review, kGitLeavesHead, makes it
// wider: `git reflog`, `git branch` (both paged), `git worktree list`, `git gui`, `git difftool`
// would be waited for too.) The test fails on 76dc18f and on that work tree alike.
// APersonsStashListInAPagerLeavesGitForAgentsOn.
//
// Finding 2 (goal 3, an ordinary race with the person's git): PersonsGitRunsIn knows the
// person's git only by its comm being exactly `git`. The comm is the basename of the path git was
// executed by: a git run through a link of another name (`~/bin/g -> /usr/bin/git`), by its dashed
// name (`git-commit` in git's exec-path, as hooks and scripts find it on PATH), or through a
// renamed wrapper binary is not seen at all. Review 52's race is back for that person: while their
// `g commit`'s pre-commit hook runs (no lock held), the session's copy-back moves main and the
// person's commit fails ("cannot lock ref 'HEAD'").
// APersonsCommitThroughALinkNamedGStillLands.

#include <fcntl.h>
#include <gtest/gtest.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "tests/escape/escape_support.h"
#include "tests/escape/git_attack_support.h"

extern char** environ;

namespace ptybox::testing {
namespace {

using git_attack::HostGit;
using git_attack::kIdentity;
using git_attack::Line;

namespace fs = std::filesystem;

constexpr fs::perms kRx = fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                          fs::perms::others_read | fs::perms::others_exec;

// A program of the person's (`argv`, run in `cwd` with `more_env`) whose waiting script `name`
// (written to a private directory, given to the program by `wire`) touches "waiting" and waits
// until released, at most a minute.
class PersonsGitWaiting {
 public:
  // `program`: argv[0]; `args` after it. `as_pager`: the script is the pager (GIT_PAGER, the
  // output a terminal), else the pre-commit hook (core.hooksPath).
  PersonsGitWaiting(const std::string& program, std::vector<std::string> args, bool as_pager,
                    const fs::path& ws) {
    char dir[] = "/tmp/ptybox-r53-XXXXXX";
    if (::mkdtemp(dir) == nullptr) return;
    dir_ = dir;
    fs::create_directories(dir_ / "hooks");
    const fs::path script = dir_ / "hooks" / (as_pager ? "pager" : "pre-commit");
    std::ofstream(script) << "#!/bin/sh\n"
                          << "touch '" << (dir_ / "waiting").string() << "'\n"
                          << "i=0; while [ ! -e '" << (dir_ / "go").string()
                          << "' ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done\n"
                          << (as_pager ? "cat >/dev/null\n" : "") << "exit 0\n";
    fs::permissions(dir_, kRx);
    fs::permissions(dir_ / "hooks", kRx);
    fs::permissions(script, kRx);
    std::vector<std::string> argv_s = {program,
                                       "-C",
                                       ws.string(),
                                       "-c",
                                       "core.hooksPath=" + (dir_ / "hooks").string(),
                                       "-c",
                                       "user.name=host",
                                       "-c",
                                       "user.email=host@example.com"};
    argv_s.insert(argv_s.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (std::string& a : argv_s) argv.push_back(a.data());
    argv.push_back(nullptr);
    std::vector<std::string> env_s;
    for (char** e = environ; *e != nullptr; ++e) env_s.emplace_back(*e);
    env_s.push_back("GIT_PAGER=" + script.string());
    std::vector<char*> env;
    for (std::string& e : env_s) env.push_back(e.data());
    env.push_back(nullptr);
    const std::string out = (dir_ / "out").string();
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    if (as_pager) {
      // git runs its pager only when its output is a terminal.
      master_ = ::posix_openpt(O_RDWR | O_NOCTTY);
      if (master_ < 0 || ::grantpt(master_) != 0 || ::unlockpt(master_) != 0) return;
      posix_spawn_file_actions_addopen(&actions, 1, ::ptsname(master_), O_RDWR | O_NOCTTY, 0);
      posix_spawn_file_actions_addopen(&actions, 2, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                       0644);
    } else {
      posix_spawn_file_actions_addopen(&actions, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                       0644);
      posix_spawn_file_actions_adddup2(&actions, 1, 2);
    }
    if (::posix_spawn(&pid_, argv[0], &actions, nullptr, argv.data(), env.data()) != 0) pid_ = -1;
    posix_spawn_file_actions_destroy(&actions);
  }
  ~PersonsGitWaiting() {
    Finish();
    if (master_ >= 0) ::close(master_);
    if (!dir_.empty()) fs::remove_all(dir_);
  }
  // Whether the script runs (waits up to a minute), the person's git waiting for it.
  bool Waiting() {
    for (int i = 0; i < 600 && pid_ > 0; ++i) {
      if (fs::exists(dir_ / "waiting")) return true;
      if (master_ >= 0) {  // keep the terminal's buffer from filling
        char buf[4096];
        ::fcntl(master_, F_SETFL, O_NONBLOCK);
        while (::read(master_, buf, sizeof buf) > 0) {
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  }
  // Lets the script end; git's exit status (-1 when it did not run).
  int Finish() {
    if (pid_ <= 0) return status_;
    std::ofstream(dir_ / "go") << "";
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    status_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return status_;
  }
  std::string Said() const { return git_attack::Slurp(dir_ / "out"); }

 private:
  fs::path dir_;
  int master_ = -1;
  pid_t pid_ = -1;
  int status_ = -1;
};

// Finding 1: the person reads their stash list in the pager; a session opened meanwhile must
// still commit, and its commit come back.
TEST(GitReview46AttackTest, APersonsStashListInAPagerLeavesGitForAgentsOn) {
  git_attack::GitWriteSession git({"PTYBOX_LOG=info"});
  auto& [daemon, ws, client, id] = git;
  ASSERT_NO_FATAL_FAILURE(git_attack::MakeRepository(ws));
  std::ofstream(ws / "a.txt") << "the person's stashed work\n";
  ASSERT_EQ(HostGit(ws, {"stash", "-q"}).exit_code, 0);
  PersonsGitWaiting person("/usr/bin/git", {"stash", "list"}, true, ws);
  ASSERT_TRUE(person.Waiting()) << person.Said();
  ASSERT_NO_FATAL_FAILURE(git.OpenSession());
  Observed committed = RunInSession(client, id, "workspace-write", "commit",
                                    std::string(kIdentity) +
                                        "echo agent > b.txt && git add b.txt && "
                                        "git commit -qm agent && echo committed-ok");
  std::cout << "  " << committed.Show() << "\n";
  Observed settle = RunInSession(client, id, "workspace-write", "settle", "echo settle-$((40+2))");
  const std::string subject = Line(HostGit(ws, {"log", "-1", "--format=%s", "main"}).out);
  const int status = person.Finish();
  std::cout << "  the person's `git stash list` (in its pager during the session) exited " << status
            << "; the host's main after the session's sends: \"" << subject << "\"\n";
  EXPECT_TRUE(committed.Says("committed-ok"))
      << "a session opened while the person read `git stash list` in the pager got a read-only "
         ".git: the waiting `git stash` process was taken for a switch under way\n"
      << git_attack::LogTail(daemon.Log());
  EXPECT_EQ(subject, "agent") << "the session's commit did not come back while the person's "
                                 "`git stash list` sat in its pager";
}

// Finding 2: the person runs git through a link named `g`; their commit is under way (its
// pre-commit hook running) while the session commits on main and its send settles. The person's
// commit must still land.
TEST(GitReview46AttackTest, APersonsCommitThroughALinkNamedGStillLands) {
  git_attack::GitWriteSession git({"PTYBOX_LOG=info"});
  auto& [daemon, ws, client, id] = git;
  ASSERT_NO_FATAL_FAILURE(git_attack::MakeRepository(ws));
  std::ofstream(ws / "b.txt") << "the person's staged work\n";
  ASSERT_EQ(HostGit(ws, {"add", "b.txt"}).exit_code, 0);
  ASSERT_NO_FATAL_FAILURE(git.OpenSession());
  char bin[] = "/tmp/ptybox-r53-bin-XXXXXX";
  ASSERT_NE(::mkdtemp(bin), nullptr);
  struct Removed {
    fs::path dir;
    ~Removed() { fs::remove_all(dir); }
  } removed{bin};
  fs::permissions(bin, kRx);
  fs::create_symlink("/usr/bin/git", fs::path(bin) / "g");
  const std::string before = Line(HostGit(ws, {"rev-parse", "main"}).out);
  PersonsGitWaiting person((fs::path(bin) / "g").string(), {"commit", "-m", "the person's message"},
                           false, ws);
  ASSERT_TRUE(person.Waiting()) << person.Said();
  Observed committed = RunInSession(client, id, "workspace-write", "commit",
                                    std::string(kIdentity) +
                                        "echo agent >> a.txt && git add a.txt && "
                                        "git commit --no-verify -qm agent && echo committed-ok");
  std::cout << "  " << committed.Show() << "\n";
  Observed settle = RunInSession(client, id, "workspace-write", "settle", "echo settle-$((40+2))");
  const std::string during = Line(HostGit(ws, {"log", "-1", "--format=%s", "main"}).out);
  const int status = person.Finish();
  const std::string subject = Line(HostGit(ws, {"log", "-1", "--format=%s", "main"}).out);
  std::cout << "  main was " << before << "; after the session's sends \"" << during
            << "\"; the person's `g commit` exited " << status << " (" << Line(person.Said())
            << "); main now \"" << subject << "\"\n";
  EXPECT_EQ(status, 0) << "the session's copy-back moved main while the person's commit (git run "
                          "through a link named `g`, comm `g`, not seen in /proc) was under way "
                          "(its pre-commit hook running), and the person's commit failed\n"
                       << person.Said() << git_attack::LogTail(daemon.Log());
  EXPECT_EQ(subject, "the person's message") << "the person's commit did not land on their branch";
}

}  // namespace
}  // namespace ptybox::testing
