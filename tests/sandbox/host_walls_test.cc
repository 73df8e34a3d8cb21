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
#include <vector>

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

// An ordinary user's home is hidden by directory: veiled (an empty tmpfs the granted paths are
// bound back into) when it holds a granted path, hidden whole when it holds none, left alone
// when it lies inside one.
TEST(HostWallsTest, AHomeIsVeiledHiddenOrGrantedByDirectory) {
  const fs::path home = "/home/u";
  EXPECT_EQ(CoverOfHome(home, {home / "src" / "project", ""}), HomeCover::kVeil);
  EXPECT_EQ(CoverOfHome(home, {"/srv/work", home / "build"}), HomeCover::kVeil);
  EXPECT_EQ(CoverOfHome(home, {"/srv/work", "/tmp/x", ""}), HomeCover::kHide);
  EXPECT_EQ(CoverOfHome(home, {"/home"}), HomeCover::kGranted);
  EXPECT_EQ(CoverOfHome(home, {home}), HomeCover::kGranted);
  EXPECT_EQ(CoverOfHome(home, {"/home/u2/x"}), HomeCover::kHide);  // a sibling, not inside
}

// Each home is listed once and a pattern whose first component is not in it is never looked
// for; what is there is found and resolved exactly as before: through a link, once, a file or
// a directory, in any of the homes.
TEST(HostWallsTest, HiddenPathsAreFoundInEveryHomeThatHoldsThem) {
  ::ptybox::testing::TempDir dir;
  const fs::path base = fs::canonical(dir.path());
  const fs::path a = base / "a";
  const fs::path b = base / "b";
  const fs::path empty = base / "empty";
  fs::create_directories(a / ".ssh");
  fs::create_directories(a / ".config" / "gh");
  fs::create_directories(b / ".config");
  fs::create_directories(empty);
  std::ofstream(b / ".netrc") << "machine x";
  fs::create_directory_symlink(a / ".ssh", b / ".ssh");
  // The listing is compared without case (a casefold home finds `.Kube` for `.kube`); on this
  // case-sensitive one the stat that follows finds no `.kube`, so nothing is added.
  fs::create_directories(a / ".Kube");
  const std::vector<std::string> patterns = {"~/.ssh", "~/.netrc",         "~/.config/gh",
                                             "~/.aws", "~/.config/gcloud", (a / ".ssh").string(),
                                             "~/.kube"};
  const std::vector<HiddenPath> hidden = CollectHiddenPaths(patterns, {a, b, empty});
  const std::vector<HiddenPath> expected = {
      {a / ".ssh", true}, {b / ".netrc", false}, {a / ".config" / "gh", true}};
  EXPECT_EQ(hidden, expected);
}

// /proc/net/unix as the kernel prints it: the header, abstract and unnamed sockets, a path
// with spaces, the same path twice (a listener and its accepted connections).
TEST(HostWallsTest, UnixSocketPathsAreTheAbsolutePathsOfTheTable) {
  const std::string table =
      "Num       RefCount Protocol Flags    Type St Inode Path\n"
      "0000000000000000: 00000002 00000000 00010000 0001 01 23456 /var/lib/mysql/mysql.sock\n"
      "0000000000000000: 00000002 00000000 00010000 0001 01 23457 @/tmp/.X11-unix/X0\n"
      "0000000000000000: 00000003 00000000 00000000 0001 03 23458\n"
      "0000000000000000: 00000002 00000000 00010000 0005 01 23459 /srv/a b/c.sock\n"
      "0000000000000000: 00000003 00000000 00000000 0001 03 23460 /var/lib/mysql/mysql.sock\n"
      "0000000000000000: 00000002 00000000 00010000 0001 01 23461 relative.sock\n"
      "0000000000000000: 00000002 00000000 00010000 0002 01 23462 /dev/log";
  EXPECT_EQ(UnixSocketPaths(table, 100),
            (std::vector<fs::path>{"/var/lib/mysql/mysql.sock", "/srv/a b/c.sock", "/dev/log"}));
  EXPECT_EQ(UnixSocketPaths(table, 1), (std::vector<fs::path>{"/var/lib/mysql/mysql.sock"}));
  EXPECT_TRUE(UnixSocketPaths("", 10).empty());
  EXPECT_TRUE(UnixSocketPaths("header only", 10).empty());
  EXPECT_TRUE(UnixSocketPaths("h\n0: 1 2\n\n", 10).empty());
}

}  // namespace
}  // namespace ptybox::sandbox
