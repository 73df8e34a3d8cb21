// The person's own git, run in the background on the host with one of its steps waiting until
// the test releases it: `git commit` in its editor or its pre-commit hook (no lock held), or a
// listing in its pager. What the Git for agents reviews 51 to 53 raced the session against.
#pragma once

#include <fcntl.h>
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

#include "tests/escape/git_attack_support.h"

extern char** environ;

namespace ptybox::testing::git_attack {

class PersonsGitWaiting {
 public:
  // Which step of git's waits: the editor (GIT_EDITOR; it then writes "the person's message"),
  // the pre-commit hook (core.hooksPath, the person's own), or the pager (GIT_PAGER, git's
  // output then a terminal).
  enum class Step { kEditor, kPreCommitHook, kPager };

  // `program` (argv[0], git or a link to it) `-C ws` with `args`, as the person, its identity set.
  PersonsGitWaiting(Step step, const std::string& program, std::vector<std::string> args,
                    const std::filesystem::path& ws) {
    namespace fs = std::filesystem;
    char dir[] = "/tmp/ptybox-persons-git-XXXXXX";
    if (::mkdtemp(dir) == nullptr) return;
    dir_ = dir;
    fs::create_directories(dir_ / "hooks");
    const fs::path script =
        dir_ / (step == Step::kPreCommitHook ? fs::path("hooks") / "pre-commit" : "waiting.sh");
    std::ofstream(script) << "#!/bin/sh\n"
                          << "touch '" << (dir_ / "waiting").string() << "'\n"
                          << "i=0; while [ ! -e '" << (dir_ / "go").string()
                          << "' ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done\n"
                          << (step == Step::kEditor  ? "echo 'the person'\\''s message' > \"$1\"\n"
                              : step == Step::kPager ? "cat >/dev/null\n"
                                                     : "")
                          << "exit 0\n";
    const fs::perms rx = fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                         fs::perms::others_read | fs::perms::others_exec;
    fs::permissions(dir_, rx);
    fs::permissions(dir_ / "hooks", rx);
    fs::permissions(script, rx);
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
    if (step == Step::kEditor) env_s.push_back("GIT_EDITOR=" + script.string());
    if (step == Step::kPager) env_s.push_back("GIT_PAGER=" + script.string());
    std::vector<char*> env;
    for (std::string& e : env_s) env.push_back(e.data());
    env.push_back(nullptr);
    const std::string out = (dir_ / "out").string();
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    if (step == Step::kPager) {
      // git runs its pager only when its output is a terminal.
      master_ = ::posix_openpt(O_RDWR | O_NOCTTY);
      if (master_ < 0 || ::grantpt(master_) != 0 || ::unlockpt(master_) != 0) {
        posix_spawn_file_actions_destroy(&actions);
        return;
      }
      posix_spawn_file_actions_addopen(&actions, 1, ::ptsname(master_), O_RDWR | O_NOCTTY, 0);
      posix_spawn_file_actions_addopen(&actions, 2, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                       0644);
    } else {
      posix_spawn_file_actions_addopen(&actions, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                       0644);
      posix_spawn_file_actions_adddup2(&actions, 1, 2);
    }
    if (::posix_spawnp(&pid_, argv[0], &actions, nullptr, argv.data(), env.data()) != 0) {
      pid_ = -1;
    }
    posix_spawn_file_actions_destroy(&actions);
  }
  PersonsGitWaiting(const PersonsGitWaiting&) = delete;
  PersonsGitWaiting& operator=(const PersonsGitWaiting&) = delete;
  ~PersonsGitWaiting() {
    Finish();
    if (master_ >= 0) ::close(master_);
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }
  // Whether the step waits now (waits up to a minute for it), the person's git under way.
  bool Waiting() {
    for (int i = 0; i < 600 && pid_ > 0; ++i) {
      if (std::filesystem::exists(dir_ / "waiting")) return true;
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
  // Lets the step end; git's exit status (-1 when it did not run).
  int Finish() {
    if (pid_ <= 0) return status_;
    std::ofstream(dir_ / "go") << "";
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    status_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return status_;
  }
  std::string Said() const { return Slurp(dir_ / "out"); }

 private:
  std::filesystem::path dir_;
  int master_ = -1;
  pid_t pid_ = -1;
  int status_ = -1;
};

// The person's `git commit` (`program` with `args` after `commit`) under way, waiting at `step`
// with no lock held, while the session commits on main and sends once more (copy-backs); `staged`:
// b.txt staged before the session opens. The person's commit must exit 0 and land on main;
// `under_way` says how it was under way, in the failure.
inline void PersonsCommitDuringACopyBack(PersonsGitWaiting::Step step, const std::string& program,
                                         const std::vector<std::string>& args, bool staged,
                                         const std::string& under_way) {
  GitWriteSession git({"PTYBOX_LOG=info"});
  auto& [daemon, ws, client, id] = git;
  ASSERT_NO_FATAL_FAILURE(MakeRepository(ws));
  if (staged) {
    std::ofstream(ws / "b.txt") << "the person's staged work\n";
    ASSERT_EQ(HostGit(ws, {"add", "b.txt"}).exit_code, 0);
  }
  ASSERT_NO_FATAL_FAILURE(git.OpenSession());
  auto main_subject = [&] { return Line(HostGit(ws, {"log", "-1", "--format=%s", "main"}).out); };
  const std::string before = Line(HostGit(ws, {"rev-parse", "main"}).out);
  std::vector<std::string> commit = {"commit"};
  commit.insert(commit.end(), args.begin(), args.end());
  PersonsGitWaiting person(step, program, commit, ws);
  ASSERT_TRUE(person.Waiting()) << person.Said();
  Observed committed = RunInSession(client, id, "workspace-write", "commit",
                                    std::string(kIdentity) +
                                        "echo agent >> a.txt && git add a.txt && "
                                        "git commit --no-verify -qm agent && echo committed-ok");
  std::cout << "  " << committed.Show() << "\n";
  Observed settle = RunInSession(client, id, "workspace-write", "settle", "echo settle-$((40+2))");
  const std::string during = main_subject();
  const int status = person.Finish();
  const std::string subject = main_subject();
  std::cout << "  main was " << before << "; after the session's sends \"" << during
            << "\"; the person's commit exited " << status << " (" << Line(person.Said())
            << "); main now \"" << subject << "\"\n";
  EXPECT_EQ(status, 0) << "the session's copy-back moved main while the person's commit was "
                          "under way ("
                       << under_way << "), and the person's commit failed\n"
                       << person.Said() << LogTail(daemon.Log());
  EXPECT_EQ(subject, "the person's message") << "the person's commit did not land on their branch";
}

}  // namespace ptybox::testing::git_attack
