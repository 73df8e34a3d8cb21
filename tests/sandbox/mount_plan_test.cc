// The pure parts of the descriptor-composed mounts: which roots get a bind of their own, which
// mounts are composed onto them and in what order, the argv that binds only those roots, and
// the bounded walk that finds nested repositories (against a real directory tree with links).
#include "sandbox/mount_plan.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "sandbox/bwrap_args.h"
#include "sandbox/path_open.h"
#include "sandbox/repository_walk.h"
#include "tests/support/temp_dir.h"

namespace ptybox::sandbox {
namespace {

namespace fs = std::filesystem;
using Kind = NestedMount::Kind;

TEST(RootsToBindTest, RootsInsideAnotherRootAreNotBoundAgain) {
  // Inside the workspace, listed twice, inside another extra root: reached through the parent.
  EXPECT_EQ(RootsToBind("/w", {"/w/build", "/w/private/", "/o", "/o/x", "/o", "/w"}),
            (std::vector<fs::path>{"/w", "/o"}));
  // An operator root outside the workspace is still bound; a prefix of a name is not a parent.
  EXPECT_EQ(RootsToBind("/w", {"/wx", "/cache"}), (std::vector<fs::path>{"/w", "/wx", "/cache"}));
  // A workspace inside an extra root is reached through that root's bind.
  EXPECT_EQ(RootsToBind("/home/u/p", {"/home/u"}), (std::vector<fs::path>{"/home/u"}));
  EXPECT_EQ(RootsToBind("/w", {}), (std::vector<fs::path>{"/w"}));
}

TEST(MountPlanTest, ProtectedCoversAndPinsShallowFirst) {
  const std::vector<fs::path> roots = {"/w", "/o"};
  const std::vector<NestedMount> plan = PlanNestedMounts(
      policy::Mode::kWorkspaceWrite, roots, {"/w/.git", "/w/vendor/lib/.git", "/elsewhere/.git"},
      {{"/w/config/.env", false}, {"/o/a/b/keys", true}, {"/etc/secret", false}},
      {"/w", "/o", "/w"});
  // No pin on vendor (above no hidden path), nothing outside the roots.
  const std::vector<NestedMount> expected = {
      {0, ".git", Kind::kProtected},
      {0, "config", Kind::kPin},
      {1, "a", Kind::kPin},
      {0, "config/.env", Kind::kCoverFile},
      {0, "vendor/lib/.git", Kind::kProtected},
      {1, "a/b", Kind::kPin},
      {1, "a/b/keys", Kind::kCoverDir},
  };
  ASSERT_EQ(plan.size(), expected.size());
  // Depth order: every entry comes after the entries of smaller depth.
  for (size_t i = 1; i < plan.size(); ++i) {
    EXPECT_LE(std::distance(plan[i - 1].relative.begin(), plan[i - 1].relative.end()),
              std::distance(plan[i].relative.begin(), plan[i].relative.end()));
  }
  for (const NestedMount& m : expected) {
    EXPECT_NE(std::find(plan.begin(), plan.end(), m), plan.end())
        << m.root << " " << m.relative << " " << static_cast<int>(m.kind);
  }
}

// Submodule directories (sandbox/repository_walk.h, gitlink_dirs) are pinned with every
// directory above them; one without a .git is also protected as a whole (the stronger kind on
// its place). Nothing in read-only mode, nothing outside the roots.
TEST(MountPlanTest, SubmoduleDirectoriesArePinnedWithTheirParents) {
  const std::vector<NestedMount> plan = PlanNestedMounts(
      policy::Mode::kWorkspaceWrite, {"/w"}, {"/w/libs/empty", "/w/libs/full/.git"}, {}, {"/w"},
      {"/w/libs/empty", "/w/libs/full", "/elsewhere/sub"});
  EXPECT_EQ(plan, (std::vector<NestedMount>{{0, "libs", Kind::kPin},
                                            {0, "libs/empty", Kind::kProtected},
                                            {0, "libs/full", Kind::kPin},
                                            {0, "libs/full/.git", Kind::kProtected}}));
  EXPECT_TRUE(
      PlanNestedMounts(policy::Mode::kReadOnly, {"/w"}, {}, {}, {"/w"}, {"/w/libs/x"}).empty());
}

TEST(MountPlanTest, ReadOnlyModeCoversWithoutPinsOrProtectedPaths) {
  const std::vector<NestedMount> plan = PlanNestedMounts(
      policy::Mode::kReadOnly, {"/w"}, {"/w/.git"}, {{"/w/a/b/.env", false}}, {"/w"});
  EXPECT_EQ(plan, (std::vector<NestedMount>{{0, "a/b/.env", Kind::kCoverFile}}));
}

TEST(MountPlanTest, NothingBeneathACoveredDirectoryAndGrantedDirectoriesStay) {
  const std::vector<NestedMount> plan =
      PlanNestedMounts(policy::Mode::kWorkspaceWrite, {"/w"}, {"/w/secret/.git", "/w/config"},
                       {{"/w/secret", true},
                        {"/w/secret/inner/.env", false},
                        {"/w/config", false},
                        {"/w/held", true}},
                       {"/w", "/w/held/root"});
  // The cover wins over a protected path on the same place; /w/held holds a granted root.
  EXPECT_EQ(plan, (std::vector<NestedMount>{{0, "config", Kind::kCoverFile},
                                            {0, "secret", Kind::kCoverDir}}));
}

TEST(MountPlanTest, HoldingRootIsStrict) {
  fs::path relative;
  EXPECT_EQ(HoldingRoot({"/w", "/o"}, "/o/x/y", relative), 1);
  EXPECT_EQ(relative, "x/y");
  EXPECT_EQ(HoldingRoot({"/w"}, "/w", relative), -1);
  EXPECT_EQ(HoldingRoot({"/w"}, "/wx/y", relative), -1);
}

TEST(StagedArgvTest, OnlyTheBoundRootsAreBound) {
  for (policy::Mode mode : {policy::Mode::kWorkspaceWrite, policy::Mode::kReadOnly}) {
    SandboxSpec spec;
    spec.mode = mode;
    spec.workspace_root = "/w";
    spec.writable_roots = {"/w/sub", "/o"};
    spec.bound_roots = {"/w", "/o"};
    spec.cwd = "/w";
    spec.run_dirs = {"/run"};
    spec.bind_sources = {{"/w", "/run/ptybox-stage/0"}, {"/o", "/run/ptybox-stage/1"}};
    BwrapInvocation invocation{"/usr/bin/bwrap", 4, "/opt/ptybox-init", {}};
    const std::vector<std::string> argv = BuildBwrapArgv(spec, invocation);
    const std::string bind = mode == policy::Mode::kWorkspaceWrite ? "--bind" : "--ro-bind";
    for (size_t i = 0; i + 2 < argv.size(); ++i) {
      // /w/sub is never a destination: it is reached through /w.
      EXPECT_NE(argv[i + 2], "/w/sub");
    }
    auto has = [&](const std::string& src, const std::string& dest) {
      for (size_t i = 0; i + 2 < argv.size(); ++i) {
        if (argv[i] == bind && argv[i + 1] == src && argv[i + 2] == dest) return true;
      }
      return false;
    };
    EXPECT_TRUE(has("/run/ptybox-stage/0", "/w"));
    EXPECT_TRUE(has("/run/ptybox-stage/1", "/o"));
  }
}

class RepositoryWalkTest : public ::testing::Test {
 protected:
  ::ptybox::testing::TempDir tmp_;
  fs::path dir_ = tmp_.path();
};

TEST_F(RepositoryWalkTest, FindsNestedRepositoriesWithoutFollowingLinks) {
  fs::create_directories(dir_ / "ws" / ".git" / "hooks");
  fs::create_directories(dir_ / "ws" / ".git" / "inner" / ".git");  // inside .git: not walked
  fs::create_directories(dir_ / "ws" / "vendor" / "lib" / ".git");
  fs::create_directories(dir_ / "ws" / "sub");
  std::ofstream(dir_ / "ws" / "sub" / ".git") << "gitdir: ../.git/modules/sub\n";
  fs::create_directories(dir_ / "elsewhere" / "repo" / ".git");
  fs::create_directory_symlink(dir_ / "elsewhere", dir_ / "ws" / "link");
  fs::create_directory_symlink(dir_ / "elsewhere" / "repo" / ".git", dir_ / "ws" / "linked");
  fs::create_directories(dir_ / "ws" / "linked2");
  fs::create_directory_symlink(dir_ / "elsewhere" / "repo" / ".git",
                               dir_ / "ws" / "linked2" / ".git");
  Result<OpenedPath> root = OpenRootNoFollow(dir_ / "ws");
  ASSERT_TRUE(root) << root.error().message;
  RepositoryWalk walk = WalkRepositories(*root, ::geteuid());
  std::sort(walk.git_paths.begin(), walk.git_paths.end());
  EXPECT_EQ(walk.git_paths, (std::vector<fs::path>{dir_ / "ws" / ".git", dir_ / "ws/sub/.git",
                                                   dir_ / "ws/vendor/lib/.git"}));
  EXPECT_FALSE(walk.incomplete);
}

TEST_F(RepositoryWalkTest, HasNoDepthBound) {
  fs::path deep = dir_ / "ws";
  for (int i = 0; i < 40; ++i) deep /= "d";
  fs::create_directories(deep / ".git");
  Result<OpenedPath> root = OpenRootNoFollow(dir_ / "ws");
  ASSERT_TRUE(root);
  RepositoryWalk walk = WalkRepositories(*root, ::geteuid());
  EXPECT_EQ(walk.git_paths, (std::vector<fs::path>{deep / ".git"}));
  EXPECT_FALSE(walk.incomplete);
}

TEST_F(RepositoryWalkTest, PastItsEntryBudgetItIsIncompleteAndSaysWhatToDo) {
  for (int i = 0; i < 20; ++i) fs::create_directories(dir_ / "ws" / ("d" + std::to_string(i)));
  Result<OpenedPath> root = OpenRootNoFollow(dir_ / "ws");
  ASSERT_TRUE(root);
  RepositoryWalk few = WalkRepositories(*root, ::geteuid(), 5);
  ASSERT_TRUE(few.incomplete);
  EXPECT_NE(few.incomplete->find("more than 5 entries"), std::string::npos) << *few.incomplete;
  EXPECT_NE(few.incomplete->find((dir_ / "ws").string()), std::string::npos);
  EXPECT_NE(few.incomplete->find("read-only"), std::string::npos);
  EXPECT_FALSE(WalkRepositories(*root, ::geteuid(), 20).incomplete);
}

TEST_F(RepositoryWalkTest, APathDeeperThanTheKernelResolvesIsIncomplete) {
  // Built by descriptor, one level at a time: no path names it whole.
  fs::create_directories(dir_ / "ws");
  int fd = ::open((dir_ / "ws").c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  const std::string name(200, 'n');
  for (int i = 0; i < 25; ++i) {  // 25 * 201 bytes > PATH_MAX
    ASSERT_EQ(::mkdirat(fd, name.c_str(), 0755), 0);
    const int next = ::openat(fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    ::close(fd);
    ASSERT_GE(next, 0);
    fd = next;
  }
  ::close(fd);
  Result<OpenedPath> root = OpenRootNoFollow(dir_ / "ws");
  ASSERT_TRUE(root);
  RepositoryWalk walk = WalkRepositories(*root, ::geteuid());
  ASSERT_TRUE(walk.incomplete);
  EXPECT_NE(walk.incomplete->find("deeper than the kernel resolves"), std::string::npos)
      << *walk.incomplete;
  // TempDir removes it by path; shorten it from the top first.
  fs::path top = dir_ / "ws" / name;
  for (int i = 0; i < 12; ++i) top /= name;
  std::error_code ec;
  fs::rename(top, dir_ / "rest", ec);
}

TEST_F(RepositoryWalkTest, AnUnreadableDirectoryOfTheSessionsOwnerIsIncompleteOfAnotherNot) {
  if (::geteuid() == 0) GTEST_SKIP() << "root reads every directory; this is an ordinary user's";
  fs::create_directories(dir_ / "ws" / "closed" / "repo" / ".git");
  fs::permissions(dir_ / "ws" / "closed", fs::perms::none);
  Result<OpenedPath> root = OpenRootNoFollow(dir_ / "ws");
  ASSERT_TRUE(root);
  RepositoryWalk own = WalkRepositories(*root, ::geteuid());
  ASSERT_TRUE(own.incomplete);
  EXPECT_NE(own.incomplete->find("chmod u+rx"), std::string::npos) << *own.incomplete;
  // Another owner's, neither readable nor searchable: the session cannot reach into it, so the
  // walk goes on without it.
  RepositoryWalk other = WalkRepositories(*root, ::geteuid() + 1);
  EXPECT_FALSE(other.incomplete);
  // Another owner's that others may search without reading (0711): the session enters it by
  // name, so the walk is incomplete.
  fs::permissions(dir_ / "ws" / "closed",
                  fs::perms::owner_exec | fs::perms::group_exec | fs::perms::others_exec);
  RepositoryWalk searchable = WalkRepositories(*root, ::geteuid() + 1);
  ASSERT_TRUE(searchable.incomplete);
  EXPECT_NE(searchable.incomplete->find("can be entered"), std::string::npos)
      << *searchable.incomplete;
  fs::permissions(dir_ / "ws" / "closed", fs::perms::owner_all);
}

// A session's many gitfiles naming one directory of many links: each git directory is looked at
// once per launch, all repositories together, and the entries looked at are bounded: 300
// repositories each re-reading 8,000 links (and judging each against every repository) held
// every later launch of the workspace for minutes (outside review 62).
TEST_F(RepositoryWalkTest, GitDirectoriesAreLookedAtOncePerLaunchAndBounded) {
  const fs::path ws = dir_ / "ws";
  fs::create_directories(ws / "L" / "logs");
  for (int i = 0; i < 1000; ++i) {
    fs::create_directory_symlink("/", ws / "L" / ("l" + std::to_string(i)));
    fs::create_directory_symlink("/", ws / "L" / "logs" / ("l" + std::to_string(i)));
  }
  for (int r = 0; r < 300; ++r) {
    const fs::path repo = ws / ("r" + std::to_string(r));
    fs::create_directories(repo);
    std::ofstream(repo / ".git") << "gitdir: " << (ws / "L").string() << "\n";
  }
  SandboxSpec sandbox;
  sandbox.mode = policy::Mode::kWorkspaceWrite;
  sandbox.workspace_root = ws;
  // The entries looked at bounded to 10,000 here (kGitLookMaxEntries by default).
  const LaunchRepositories shared = RepositoriesOfLaunch(sandbox, 50'000, nullptr, 10'000);
  EXPECT_FALSE(shared.incomplete) << *shared.incomplete;  // one listing of L, links outside
  EXPECT_EQ(shared.git_paths.size(), 300U);
  // Each repository's own directory of links: 300 listings of 40 entries pass the bound.
  for (int r = 0; r < 300; ++r) {
    const fs::path own = ws / ("d" + std::to_string(r));
    fs::create_directories(own);
    for (int i = 0; i < 40; ++i) {
      fs::create_directory_symlink("/", own / ("l" + std::to_string(i)));
    }
    std::ofstream(ws / ("r" + std::to_string(r)) / ".git") << "gitdir: " << own.string() << "\n";
  }
  const LaunchRepositories many = RepositoriesOfLaunch(sandbox, 50'000, nullptr, 10'000);
  ASSERT_TRUE(many.incomplete);
  EXPECT_NE(many.incomplete->find("more entries than a launch looks at"), std::string::npos)
      << *many.incomplete;
}

// A root daemon's copy-back reads a repository's objects, borrowed ones included, as root: a
// session's own repository borrowing from a directory its user may not read (another owner's
// private repository) made the daemon tell it which objects that one holds (outside review 62).
// Such a launch is refused; one borrowing from a directory the owner may read goes ahead.
TEST_F(RepositoryWalkTest, ARootLaunchRefusesObjectsBorrowedFromWhatTheOwnerMayNotRead) {
  if (::geteuid() != 0) GTEST_SKIP() << "the owner's access is judged for a root daemon";
  const fs::path ws = dir_ / "ws";
  fs::create_directories(ws / "probe" / ".git" / "objects" / "info");
  fs::create_directories(dir_ / "private" / "objects");
  fs::permissions(dir_ / "private", fs::perms::owner_all);
  std::ofstream(ws / "probe" / ".git" / "objects" / "info" / "alternates")
      << (dir_ / "private" / "objects").string() << "\n";
  ASSERT_EQ(::chown(ws.c_str(), 65534, 65534), 0);  // the workspace's owner: nobody
  SandboxSpec sandbox;
  sandbox.mode = policy::Mode::kWorkspaceWrite;
  sandbox.workspace_root = ws;
  const LaunchRepositories refused = RepositoriesOfLaunch(sandbox);
  ASSERT_TRUE(refused.incomplete) << "a launch lent the daemon's reading of a private directory";
  EXPECT_NE(refused.incomplete->find("may not read"), std::string::npos) << *refused.incomplete;
  // Readable by everyone, up to the root.
  for (const fs::path& dir : {dir_, dir_ / "private", dir_ / "private" / "objects"}) {
    fs::permissions(dir, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                             fs::perms::others_read | fs::perms::others_exec);
  }
  const LaunchRepositories readable = RepositoriesOfLaunch(sandbox);
  EXPECT_FALSE(readable.incomplete) << *readable.incomplete;
}

// A repository (a session's own, perhaps) whose alternates or links name a plain directory of
// the workspace: refused with a message, never silently made read-only in every later session
// (outside review 64). An object directory (with pack/ or info/) is protected.
TEST_F(RepositoryWalkTest, APlainDirectoryALinkOrAnAlternateNamesIsRefusedNotMadeReadOnly) {
  const fs::path ws = dir_ / "ws";
  fs::create_directories(ws / "src");
  fs::create_directories(ws / "evil" / ".git" / "objects" / "info");
  std::ofstream(ws / "evil" / ".git" / "objects" / "info" / "alternates")
      << (ws / "src").string() << "\n";
  SandboxSpec sandbox;
  sandbox.mode = policy::Mode::kWorkspaceWrite;
  sandbox.workspace_root = ws;
  const LaunchRepositories alternate = RepositoriesOfLaunch(sandbox);
  ASSERT_TRUE(alternate.incomplete);
  EXPECT_NE(alternate.incomplete->find("no object directory"), std::string::npos)
      << *alternate.incomplete;
  fs::create_directories(ws / "src" / "pack");  // now it is one: protected
  const LaunchRepositories objects = RepositoriesOfLaunch(sandbox);
  EXPECT_FALSE(objects.incomplete) << *objects.incomplete;
  EXPECT_NE(std::find(objects.submodule_dirs.begin(), objects.submodule_dirs.end(), ws / "src"),
            objects.submodule_dirs.end());
  fs::remove(ws / "evil" / ".git" / "objects" / "info" / "alternates");
  fs::create_directory_symlink("../../src", ws / "evil" / ".git" / "x");
  const LaunchRepositories linked = RepositoriesOfLaunch(sandbox);
  ASSERT_TRUE(linked.incomplete);
  EXPECT_NE(linked.incomplete->find("a link's target"), std::string::npos) << *linked.incomplete;
}

// For a root daemon, a gitfile naming a git directory the workspace's owner may not read is
// refused before anything there is read, and the refusal says nothing of what is there
// (outside review 64: counted through the look's bound, its alternates named).
TEST_F(RepositoryWalkTest, ARootLaunchFollowsNoGitfileIntoWhatTheOwnerMayNotRead) {
  if (::geteuid() != 0) GTEST_SKIP() << "the owner's access is judged for a root daemon";
  const fs::path ws = dir_ / "ws";
  fs::create_directories(ws / "peek");
  fs::create_directories(dir_ / "private" / ".git" / "objects" / "info");
  std::ofstream(dir_ / "private" / ".git" / "objects" / "info" / "alternates")
      << "/secret-upstream/objects\n";
  fs::permissions(dir_ / "private", fs::perms::owner_all);
  std::ofstream(ws / "peek" / ".git") << "gitdir: " << (dir_ / "private" / ".git").string() << "\n";
  ASSERT_EQ(::chown(ws.c_str(), 65534, 65534), 0);
  for (const fs::path& dir : {dir_}) {
    fs::permissions(dir, fs::perms::owner_all | fs::perms::others_read | fs::perms::others_exec);
  }
  SandboxSpec sandbox;
  sandbox.mode = policy::Mode::kWorkspaceWrite;
  sandbox.workspace_root = ws;
  const LaunchRepositories launched = RepositoriesOfLaunch(sandbox);
  ASSERT_TRUE(launched.incomplete);
  EXPECT_NE(launched.incomplete->find("may not read"), std::string::npos) << *launched.incomplete;
  EXPECT_EQ(launched.incomplete->find("secret-upstream"), std::string::npos)
      << *launched.incomplete;
}

// Ordinary layouts with links and hard links that git itself makes (outside review 65): a
// submodule cloned from a local path has its packs hard-linked (`modules/<name>/objects`), and
// `repo`-tool checkouts (or git-new-workdir on a bare repository) link a `.git`'s entries into a
// bare repository of the workspace, which is kept whole. A hard-linked hook is still refused.
TEST_F(RepositoryWalkTest, LinksAndHardLinksGitMakesAreKeptNotRefused) {
  const fs::path ws = dir_ / "ws";
  const fs::path pack = ws / "super" / ".git" / "modules" / "lib" / "objects" / "pack";
  fs::create_directories(pack);
  fs::create_directories(ws / "super" / ".git" / "modules" / "lib" / "hooks");
  std::ofstream(dir_ / "source.pack") << "PACK";
  fs::create_hard_link(dir_ / "source.pack", pack / "pack-1.pack");
  // A bare repository and a `.git` whose entries link into it.
  for (const char* sub : {"objects", "refs", "hooks"})
    fs::create_directories(ws / "proj.git" / sub);
  std::ofstream(ws / "proj.git" / "HEAD") << "ref: refs/heads/main\n";
  std::ofstream(ws / "proj.git" / "config") << "[core]\n";
  fs::create_directories(ws / "wd" / ".git");
  fs::create_symlink(ws / "proj.git" / "config", ws / "wd" / ".git" / "config");
  fs::create_directory_symlink(ws / "proj.git" / "objects", ws / "wd" / ".git" / "objects");
  fs::create_directory_symlink(ws / "proj.git" / "refs", ws / "wd" / ".git" / "refs");
  SandboxSpec sandbox;
  sandbox.mode = policy::Mode::kWorkspaceWrite;
  sandbox.workspace_root = ws;
  const LaunchRepositories launched = RepositoriesOfLaunch(sandbox);
  EXPECT_FALSE(launched.incomplete) << *launched.incomplete;
  EXPECT_NE(
      std::find(launched.submodule_dirs.begin(), launched.submodule_dirs.end(), ws / "proj.git"),
      launched.submodule_dirs.end());
  std::ofstream(dir_ / "hook") << "#!/bin/sh\n";
  fs::create_hard_link(dir_ / "hook",
                       ws / "super" / ".git" / "modules" / "lib" / "hooks" / "pre-commit");
  const LaunchRepositories hook = RepositoriesOfLaunch(sandbox);
  ASSERT_TRUE(hook.incomplete);
  EXPECT_NE(hook.incomplete->find("hard link"), std::string::npos) << *hook.incomplete;
}

TEST_F(RepositoryWalkTest, ARepositoryRecreatedAtTheSamePathIsAnotherOne) {
  // A host that re-clones (or `mv .git` and `git init`) while a pooled shell waits: the path
  // is the same, the object its launch protected is not.
  fs::create_directories(dir_ / "ws" / "vendor" / "lib" / ".git");
  SandboxSpec sandbox;
  sandbox.mode = policy::Mode::kWorkspaceWrite;
  sandbox.workspace_root = dir_ / "ws";
  const LaunchRepositories launched = RepositoriesOfLaunch(sandbox);
  ASSERT_EQ(launched.git_ids.size(), 1U);
  EXPECT_TRUE(SameRepositories(launched, RepositoriesOfLaunch(sandbox)));
  fs::rename(dir_ / "ws" / "vendor" / "lib" / ".git", dir_ / "old-git");
  fs::create_directories(dir_ / "ws" / "vendor" / "lib" / ".git");
  const LaunchRepositories now = RepositoriesOfLaunch(sandbox);
  EXPECT_EQ(now.git_paths, launched.git_paths);
  EXPECT_FALSE(SameRepositories(launched, now));
}

TEST_F(RepositoryWalkTest, ALaunchOfTheRootsSumsTheirEntriesAndComparesOnlyCompleteWalks) {
  fs::create_directories(dir_ / "ws" / "a" / ".git");
  fs::create_directories(dir_ / "extra" / "b" / ".git");
  SandboxSpec sandbox;
  sandbox.mode = policy::Mode::kWorkspaceWrite;
  sandbox.workspace_root = dir_ / "ws";
  sandbox.writable_roots = {dir_ / "extra"};
  const LaunchRepositories all = RepositoriesOfLaunch(sandbox);
  EXPECT_TRUE(all.walked);
  EXPECT_FALSE(all.incomplete);
  EXPECT_EQ(all.git_paths, (std::vector<fs::path>{dir_ / "extra/b/.git", dir_ / "ws/a/.git"}));
  EXPECT_TRUE(SameRepositories(all, RepositoriesOfLaunch(sandbox)));
  const LaunchRepositories small = RepositoriesOfLaunch(sandbox, 3);
  EXPECT_TRUE(small.incomplete);
  EXPECT_FALSE(SameRepositories(all, small));
  EXPECT_FALSE(SameRepositories(all, LaunchRepositories{}));  // never walked
  sandbox.mode = policy::Mode::kReadOnly;
  const LaunchRepositories none = RepositoriesOfLaunch(sandbox);
  EXPECT_TRUE(none.walked);
  EXPECT_TRUE(none.git_paths.empty());
}

// The check after a launch composed its mounts: every repository the second walk finds must be
// a mount point of the session (composed read-only), unless it was born during the launch. A
// repository the first walk missed (renamed into a directory it had read) or one moved between
// the walk and the composition is not one and refuses the launch.
TEST_F(RepositoryWalkTest, TheCheckAfterALaunchRefusesARepositoryTheSessionDoesNotProtect) {
  fs::create_directories(dir_ / "ws" / "a");
  fs::create_directories(dir_ / "ws" / "z" / "lib" / ".git");
  SandboxSpec sandbox;
  sandbox.mode = policy::Mode::kWorkspaceWrite;
  sandbox.workspace_root = dir_ / "ws";
  // The launch's walk starts right after the repository was made: it is older than the launch.
  // Read from the fine clock: a birth time can be later than CLOCK_REALTIME_COARSE read after
  // it (fine-grained timestamps, Linux 6.13+), which made a repository made within the last
  // tick count as the session's own.
  struct timespec started {};
  ASSERT_EQ(::clock_gettime(CLOCK_REALTIME, &started), 0);
  struct statx born {};
  ASSERT_EQ(::statx(AT_FDCWD, (dir_ / "ws/z/lib/.git").c_str(), 0, STATX_BTIME, &born), 0);
  if ((born.stx_mask & STATX_BTIME) == 0) GTEST_SKIP() << "this filesystem keeps no birth time";
  const std::vector<fs::path> protecting = {"/", dir_ / "ws", dir_ / "ws/z/lib/.git"};
  EXPECT_EQ(UnprotectedRepository(RepositoriesOfLaunch(sandbox), protecting, started),
            std::nullopt);
  // Not a mount point of the session: missed, or moved before it was composed.
  std::optional<std::string> why =
      UnprotectedRepository(RepositoriesOfLaunch(sandbox), {"/", dir_ / "ws"}, started);
  ASSERT_TRUE(why);
  EXPECT_NE(why->find((dir_ / "ws/z/lib/.git").string() + " is not protected"), std::string::npos)
      << *why;
  fs::rename(dir_ / "ws" / "z" / "lib", dir_ / "ws" / "a" / "lib");
  EXPECT_TRUE(UnprotectedRepository(RepositoriesOfLaunch(sandbox), protecting, started));
  // Born during the launch: the session's own, as after the launch.
  fs::remove_all(dir_ / "ws" / "a" / "lib");
  fs::create_directories(dir_ / "ws" / "new" / ".git");
  EXPECT_EQ(UnprotectedRepository(RepositoriesOfLaunch(sandbox), protecting, started),
            std::nullopt);
  // A second walk that could not search everything refuses with its own reason.
  EXPECT_TRUE(UnprotectedRepository(RepositoriesOfLaunch(sandbox, 2), protecting, started));
}

// A hidden directory that holds a repository (`hide: [secret]` over secret/repo/.git): the
// launch covers the directory and composes nothing beneath it, and the check does not ask the
// repository to be a mount point once the cover is one. Not while the cover is not in place,
// and never for a directory that is only pinned or a root.
TEST_F(RepositoryWalkTest, ARepositoryBeneathACoveredDirectoryNeedsNoMountOfItsOwn) {
  fs::create_directories(dir_ / "ws" / "secret" / "repo" / ".git");
  fs::create_directories(dir_ / "ws" / "open" / "repo" / ".git");
  SandboxSpec sandbox;
  sandbox.mode = policy::Mode::kWorkspaceWrite;
  sandbox.workspace_root = dir_ / "ws";
  sandbox.cwd = dir_ / "ws";
  sandbox.hidden = {{dir_ / "ws" / "secret", true}, {dir_ / "ws" / "open" / ".env", false}};
  const std::vector<fs::path> covered = CoveredDirectories(sandbox, "/usr/lib/ptybox/ptybox-init");
  EXPECT_EQ(covered, (std::vector<fs::path>{dir_ / "ws" / "secret"}))
      << "a hidden file is no covered directory, and `open` is only pinned";
  struct timespec later {};
  ASSERT_EQ(::clock_gettime(CLOCK_REALTIME, &later), 0);
  later.tv_sec += 3600;  // both repositories are older than the launch
  const LaunchRepositories walk = RepositoriesOfLaunch(sandbox);
  ASSERT_EQ(walk.git_paths.size(), 2u);
  std::vector<fs::path> mounts = {"/", dir_ / "ws", dir_ / "ws" / "open",
                                  dir_ / "ws" / "open" / "repo" / ".git", dir_ / "ws" / "secret"};
  std::sort(mounts.begin(), mounts.end());
  EXPECT_EQ(UnprotectedRepository(walk, mounts, later, covered), std::nullopt);
  // Without the rule (the check before): refused, although the repository is not in the session.
  EXPECT_TRUE(UnprotectedRepository(walk, mounts, later));
  // The cover is not a mount point of the session: the repository would be writable there.
  std::vector<fs::path> uncovered = mounts;
  std::erase(uncovered, dir_ / "ws" / "secret");
  std::optional<std::string> why = UnprotectedRepository(walk, uncovered, later, covered);
  ASSERT_TRUE(why);
  EXPECT_NE(why->find("secret/repo/.git is not protected"), std::string::npos) << *why;
  // A pinned directory (a mount point, but the real one) does not excuse what it holds.
  std::vector<fs::path> pinned_only = mounts;
  std::erase(pinned_only, dir_ / "ws" / "open" / "repo" / ".git");
  why = UnprotectedRepository(walk, pinned_only, later, covered);
  ASSERT_TRUE(why);
  EXPECT_NE(why->find("open/repo/.git is not protected"), std::string::npos) << *why;
  // A hidden directory holding the starting directory (or a root, or ptybox-init) is not covered.
  sandbox.cwd = dir_ / "ws" / "secret" / "repo";
  EXPECT_TRUE(CoveredDirectories(sandbox, "/usr/lib/ptybox/ptybox-init").empty());
  sandbox.cwd = dir_ / "ws";
  EXPECT_TRUE(CoveredDirectories(sandbox, dir_ / "ws" / "secret" / "ptybox-init").empty());
  sandbox.mode = policy::Mode::kReadOnly;  // covered in read-only too (nothing is checked there)
  EXPECT_EQ(CoveredDirectories(sandbox, "/usr/lib/ptybox/ptybox-init").size(), 1u);
}

// The whole check, against this process's own mount namespace (where no .git is a mount
// point): a tree without repositories holds; an older repository refuses; no process refuses.
TEST_F(RepositoryWalkTest, TheCheckAfterALaunchWalksWatchedAndReadsTheSessionsMounts) {
  fs::create_directories(dir_ / "ws" / "a" / "b");
  SandboxSpec sandbox;
  sandbox.mode = policy::Mode::kWorkspaceWrite;
  sandbox.workspace_root = dir_ / "ws";
  struct timespec started {};
  ASSERT_EQ(::clock_gettime(CLOCK_REALTIME, &started), 0);
  EXPECT_EQ(CheckRepositoriesAfterLaunch(sandbox, {}, ::getpid(), started), std::nullopt);
  EXPECT_TRUE(CheckRepositoriesAfterLaunch(sandbox, {}, 0, started));
  fs::create_directories(dir_ / "ws" / "a" / "b" / ".git");
  // A launch that began after the repository was born (an hour from now): it is older.
  const struct timespec later = {started.tv_sec + 3600, 0};
  std::optional<std::string> why = CheckRepositoriesAfterLaunch(sandbox, {}, ::getpid(), later);
  ASSERT_TRUE(why);
  EXPECT_NE(why->find("is not protected"), std::string::npos) << *why;
  EXPECT_TRUE(CheckRepositoriesAfterLaunch(sandbox, {}, ::getpid(), later, 1));  // over budget
  // Born during the launch: the session's own. A launch that began a second before the
  // repository: birth times come from the kernel's coarse clock (up to a tick behind a fine
  // read), so one made right after `started` may carry an earlier stamp, which refuses (the safe
  // side) and is not what this line checks.
  const struct timespec before = {started.tv_sec - 1, started.tv_nsec};
  EXPECT_EQ(CheckRepositoriesAfterLaunch(sandbox, {}, ::getpid(), before), std::nullopt);
}

// The session's mount points as its mountinfo names them, escapes decoded.
TEST_F(RepositoryWalkTest, SessionMountPointsReadsMountinfo) {
  Result<std::vector<fs::path>> own = SessionMountPoints(::getpid());
  ASSERT_TRUE(own) << own.error().message;
  EXPECT_TRUE(std::binary_search(own->begin(), own->end(), fs::path("/")));
  EXPECT_TRUE(std::binary_search(own->begin(), own->end(), fs::path("/proc")));
  EXPECT_FALSE(SessionMountPoints(0));
}

}  // namespace
}  // namespace ptybox::sandbox
