// A workspace below a directory the session cannot search (a root user's clone in /root, mode
// 0700): a root daemon's session runs as an unprivileged id, so that directory is veiled, an
// empty tmpfs holding only the path down to the workspace. The session works in its workspace
// and sees nothing else of the veiled directory. As an ordinary user the daemon can search its
// own 0700 directory: the session then works the same, and nothing is veiled.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "tests/escape/escape_support.h"
#include "tests/sandbox/process_runner.h"

namespace ptybox::testing {
namespace {

namespace fs = std::filesystem;
using sandbox::testing::RunProcess;
using sandbox::testing::RunResult;

class VeilTest : public ::testing::TestWithParam<std::string> {};

TEST_P(VeilTest, AWorkspaceBelowAnUnsearchableDirectoryWorksAndHidesItsSiblings) {
  const std::string& mode = GetParam();
  TempDir home;  // stands for /root: mode 0700, a secret beside the project
  ::chmod(home.path().c_str(), 0700);
  std::ofstream(home.path() / "secret-sibling") << "secret\n";
  const fs::path project = home.path() / "project";
  fs::create_directories(project);
  std::ofstream(project / "tracked.txt") << "tracked\n";

  const std::string script = "cat tracked.txt; ls -A " + Quote(home.path()) +
                             " | tr '\\n' ' '; echo; "
                             "cat " +
                             Quote(home.path() / "secret-sibling") +
                             " 2>&1 | head -c 200; echo; "
                             "touch made 2>&1; echo touch=$?";
  RunResult run = RunProcess({PtyboxBinary().string(), "run", "--workspace", project.string(),
                              "--mode", mode, "--", "/bin/sh", "-c", script});
  std::cout << "  observed [" << mode << "] " << run.Describe() << "\n";
  ASSERT_EQ(run.exit_code, 0) << run.Describe();
  EXPECT_NE(run.out.find("tracked"), std::string::npos) << run.Describe();
  if (::geteuid() == 0) {
    // Veiled: only the path down to the workspace, and the secret is not there.
    EXPECT_NE(run.out.find("project \n"), std::string::npos) << run.Describe();
    EXPECT_EQ(run.out.find("secret-sibling "), std::string::npos) << run.Describe();
    EXPECT_EQ(run.out.find("secret\n"), std::string::npos) << run.Describe();
  }
  if (mode == "workspace-write") {
    EXPECT_NE(run.out.find("touch=0"), std::string::npos) << run.Describe();
    struct stat st {};
    ASSERT_EQ(::stat((project / "made").c_str(), &st), 0) << run.Describe();
    EXPECT_EQ(st.st_uid, ::geteuid()) << "owned on the host like the workspace";
  } else {
    EXPECT_EQ(run.out.find("touch=0"), std::string::npos) << run.Describe();
    EXPECT_FALSE(fs::exists(project / "made"));
  }
}

INSTANTIATE_TEST_SUITE_P(Modes, VeilTest, ::testing::Values("read-only", "workspace-write"),
                         ModeTestName);

}  // namespace
}  // namespace ptybox::testing
