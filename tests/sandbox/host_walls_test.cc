// Host facts behind the walls: which hidden paths a root daemon's session id could reach at all
// (bwrap, running as that id, must be able to cover every one it is given).
#include "sandbox/host_walls.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "tests/support/temp_dir.h"

namespace ptybox::sandbox {
namespace {

namespace fs = std::filesystem;

TEST(HostWallsTest, APathBelowADirectoryStrangersCannotSearchIsOutOfReach) {
  ::ptybox::testing::TempDir dir;
  const fs::path closed = dir.path() / "closed";
  const fs::path open = dir.path() / "open";
  fs::create_directories(closed / "inner");
  fs::create_directories(open / "inner");
  std::ofstream(closed / "inner" / "secret") << "x";
  std::ofstream(open / "inner" / "secret") << "x";
  ::chmod(dir.path().c_str(), 0755);
  ::chmod(closed.c_str(), 0700);
  ::chmod(open.c_str(), 0755);
  ::chmod((open / "inner").c_str(), 0711);

  EXPECT_FALSE(ReachableByStranger(closed / "inner" / "secret", {}));
  EXPECT_TRUE(ReachableByStranger(open / "inner" / "secret", {}));
  // The closed directory itself can be covered: only the directories above it count.
  EXPECT_TRUE(ReachableByStranger(closed, {}));
  // Inside a root the session owns what the root's owner owns (idmapped): reachable.
  EXPECT_TRUE(ReachableByStranger(closed / "inner" / "secret", {closed}));
  EXPECT_TRUE(ReachableByStranger(closed / "inner" / "secret", {dir.path()}));
  // A root below a directory strangers cannot search is reached all the same (bound, veiled):
  // what lies in it needs its cover (a writable root in a 0700 mkdtemp directory, issue of
  // AuditRedirectTest).
  EXPECT_TRUE(ReachableByStranger(closed / "inner" / "secret", {closed / "inner"}));
}

// An ordinary user's home is covered entry by entry except the granted paths and the
// directories leading down to them; links are never covered (the cover would land on the target).
TEST(HostWallsTest, AHomeIsHiddenExceptTheGrantedPathsAndTheWayDownToThem) {
  ::ptybox::testing::TempDir dir;
  const fs::path home = dir.path();
  fs::create_directories(home / ".ssh");
  fs::create_directories(home / "src" / "project" / "sub");
  fs::create_directories(home / "src" / "other");
  fs::create_directories(home / "build");
  std::ofstream(home / ".bashrc") << "x";
  std::ofstream(home / "src" / "notes") << "x";
  fs::create_symlink(home / "src" / "project", home / "link-to-project");
  const std::vector<fs::path> granted = {home / "src" / "project", home / "build", ""};
  std::vector<HiddenPath> hidden = HideHomeExceptGranted(home, granted);
  std::sort(hidden.begin(), hidden.end(),
            [](const HiddenPath& a, const HiddenPath& b) { return a.path < b.path; });
  const std::vector<HiddenPath> want = {{home / ".bashrc", false},
                                        {home / ".ssh", true},
                                        {home / "src" / "notes", false},
                                        {home / "src" / "other", true}};
  EXPECT_EQ(hidden, want);
  // A home inside a granted path is granted whole.
  EXPECT_TRUE(HideHomeExceptGranted(home / "src" / "project", {home / "src"}).empty());
}

}  // namespace
}  // namespace ptybox::sandbox
