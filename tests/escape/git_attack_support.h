// What the outside reviews' attacks on "Git for agents" share (tests/escape/git_review*_test.cc):
// the host's git as the person runs it, the repository every attack starts from, and the
// identity a session's commit needs.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tests/sandbox/process_runner.h"

namespace ptybox::testing::git_attack {

// The host's git in `repo`, as the person who owns it runs it (a submodule from a local path
// allowed, as the submodule attacks add them).
inline sandbox::testing::RunResult HostGit(const std::filesystem::path& repo,
                                           std::vector<std::string> args) {
  std::vector<std::string> argv = {"/usr/bin/git",
                                   "-C",
                                   repo.string(),
                                   "-c",
                                   "user.name=host",
                                   "-c",
                                   "user.email=host@example.com",
                                   "-c",
                                   "protocol.file.allow=always"};
  argv.insert(argv.end(), args.begin(), args.end());
  return sandbox::testing::RunProcess(argv);
}

// A repository with one commit (a.txt, a .gitignore that ignores .escape/, where the attacks
// keep their scripts).
inline void MakeRepository(const std::filesystem::path& ws) {
  ASSERT_EQ(HostGit(ws, {"init", "-q", "-b", "main"}).exit_code, 0);
  std::ofstream(ws / "a.txt") << "one\n";
  std::ofstream(ws / ".gitignore") << ".escape/\n";
  ASSERT_EQ(HostGit(ws, {"add", "a.txt", ".gitignore"}).exit_code, 0);
  ASSERT_EQ(HostGit(ws, {"commit", "-q", "-m", "first"}).exit_code, 0);
  std::filesystem::create_directories(ws / ".escape");
}

inline std::string Slurp(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

inline constexpr const char* kIdentity =
    "export GIT_AUTHOR_NAME=agent GIT_AUTHOR_EMAIL=agent@example.com "
    "GIT_COMMITTER_NAME=agent GIT_COMMITTER_EMAIL=agent@example.com; ";

}  // namespace ptybox::testing::git_attack
