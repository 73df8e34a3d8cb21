// Fifty-fifth outside review of "Git for agents" (docs/security.md), on c943b2b, the
// forty-eighth of the feature. Time-boxed (25 minutes).
//
// Finding 1 (goal 3, an ordinary race with the person's git): the /proc look at the person's
// git (PersonsGitRunsIn, review 52-54's fixes) only ever holds the branch the host's HEAD names
// *now* (HoldOf, HostWorktreeRefusal). The person's `git switch other` (or `checkout other`)
// reads `other`'s tip, writes the working tree and the index for it (holding index.lock, running
// smudge filters: git-lfs, a slow disk, a large tree), and only then points HEAD at `other`
// without looking at its value again. While it runs the host's HEAD still names `main`, so
// nothing holds `other`: the session's move of `other` (here `git branch -f other <commit>`, as
// an agent's commit on a branch the person then switches to to look at) comes back in between.
// The person's switch ends on the session's commit with the old tip's index: their `git status`
// shows the session's commit undone and staged, and their next commit reverts it.
// ThePersonsSwitchToABranchNeverEndsWithItsOldIndexUnderTheSessionsTip.

#include <fcntl.h>
#include <gtest/gtest.h>
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

namespace ptybox::testing {
namespace {

using git_attack::HostGit;
using git_attack::kIdentity;
using git_attack::Line;

namespace fs = std::filesystem;

TEST(GitReview47AttackTest, ThePersonsSwitchToABranchNeverEndsWithItsOldIndexUnderTheSessionsTip) {
  git_attack::GitWriteSession git({"PTYBOX_LOG=info"});
  auto& [daemon, ws, client, id] = git;
  ASSERT_NO_FATAL_FAILURE(git_attack::MakeRepository(ws));
  // The person's branch `other`, with one file their smudge filter writes (git-lfs's way).
  ASSERT_EQ(HostGit(ws, {"switch", "-q", "-c", "other"}).exit_code, 0);
  std::ofstream(ws / "slow.bin") << "large file\n";
  ASSERT_EQ(HostGit(ws, {"add", "slow.bin"}).exit_code, 0);
  ASSERT_EQ(HostGit(ws, {"commit", "-q", "-m", "other's"}).exit_code, 0);
  ASSERT_EQ(HostGit(ws, {"switch", "-q", "main"}).exit_code, 0);
  fs::create_directories(ws / ".git" / "info");
  std::ofstream(ws / ".git" / "info" / "attributes") << "slow.bin filter=block\n";
  const std::string other_before = Line(HostGit(ws, {"rev-parse", "other"}).out);

  char dir[] = "/tmp/ptybox-r55-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  struct Removed {
    fs::path dir;
    ~Removed() { fs::remove_all(dir); }
  } removed{dir};
  const fs::path filter = fs::path(dir) / "smudge.sh";
  const fs::path waiting = fs::path(dir) / "waiting";
  const fs::path go = fs::path(dir) / "go";
  std::ofstream(filter) << "#!/bin/sh\n"
                        << "touch '" << waiting.string() << "'\n"
                        << "i=0; while [ ! -e '" << go.string()
                        << "' ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done\n"
                        << "exec cat\n";
  const fs::perms rx = fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                       fs::perms::others_read | fs::perms::others_exec;
  fs::permissions(dir, rx);
  fs::permissions(filter, rx);

  ASSERT_NO_FATAL_FAILURE(git.OpenSession());

  // The person's `git switch other`, its smudge filter under way (index.lock held, HEAD on main).
  const std::string out = (fs::path(dir) / "out").string();
  const pid_t person = ::fork();
  ASSERT_GE(person, 0);
  if (person == 0) {
    const std::string filter_config = "filter.block.smudge=" + filter.string();
    const int fd = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    ::execl("/usr/bin/git", "git", "-C", ws.c_str(), "-c", filter_config.c_str(), "switch", "other",
            static_cast<char*>(nullptr));
    ::_exit(127);
  }
  bool under_way = false;
  for (int i = 0; i < 600 && !under_way; ++i) {
    under_way = fs::exists(waiting);
    if (!under_way) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  auto finish = [&] {
    std::ofstream(go) << "";
    int status = 0;
    ::waitpid(person, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  };
  if (!under_way) finish();
  ASSERT_TRUE(under_way) << git_attack::Slurp(out);

  // The session's commit on `other` (plumbing: the shared working tree is left alone).
  Observed moved = RunInSession(
      client, id, "workspace-write", "move",
      std::string(kIdentity) +
          "export GIT_INDEX_FILE=.escape/idx && git read-tree other && echo agent > s.txt && "
          "git update-index --add s.txt && t=$(git write-tree) && rm s.txt && "
          "unset GIT_INDEX_FILE && c=$(git commit-tree $t -p other -m agent) && "
          "git branch -f other $c && echo moved-ok");
  std::cout << "  " << moved.Show() << "\n";
  Observed settle = RunInSession(client, id, "workspace-write", "settle", "echo settle-$((40+2))");
  const std::string other_during = Line(HostGit(ws, {"log", "-1", "--format=%s", "other"}).out);
  const int status = finish();
  const std::string head = Line(HostGit(ws, {"symbolic-ref", "HEAD"}).out);
  const std::string other_after = Line(HostGit(ws, {"log", "-1", "--format=%s", "other"}).out);
  const std::string staged = HostGit(ws, {"diff", "--cached", "--name-status"}).out;
  std::cout << "  other was " << other_before << " (\"other's\"); during the person's switch: \""
            << other_during << "\"; the switch exited " << status << " ("
            << Line(git_attack::Slurp(out)) << "); HEAD now " << head << " at \"" << other_after
            << "\"; staged against it: [" << staged << "]\n";
  EXPECT_TRUE(moved.Says("moved-ok"));
  EXPECT_EQ(status, 0) << git_attack::Slurp(out);
  EXPECT_EQ(head, "refs/heads/other");
  EXPECT_EQ(staged, "")
      << "the session's move of `other` came back while the person's `git switch other` ran "
         "(HEAD still on main, nothing held `other`): the switch ended on the session's commit "
         "with the old tip's index, the session's commit shown undone and staged\n"
      << git_attack::LogTail(daemon.Log());
}

}  // namespace
}  // namespace ptybox::testing
