// The pure parts of the descriptor-composed mounts: which roots get a bind of their own, which
// mounts are composed onto them and in what order, the argv that binds only those roots, and
// the bounded walk that finds nested repositories (against a real directory tree with links).
#include "sandbox/mount_plan.h"

#include <gtest/gtest.h>
#include <stdlib.h>
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
  RepositoryWalk walk = WalkRepositories(*root);
  std::sort(walk.git_paths.begin(), walk.git_paths.end());
  EXPECT_EQ(walk.git_paths, (std::vector<fs::path>{dir_ / "ws" / ".git", dir_ / "ws/sub/.git",
                                                   dir_ / "ws/vendor/lib/.git"}));
  EXPECT_FALSE(walk.truncated);
}

TEST_F(RepositoryWalkTest, StopsAtItsBoundsAndSaysSo) {
  fs::create_directories(dir_ / "ws" / "a" / "b" / "c" / ".git");
  Result<OpenedPath> root = OpenRootNoFollow(dir_ / "ws");
  ASSERT_TRUE(root);
  RepositoryWalk shallow = WalkRepositories(*root, 1000, 2);
  EXPECT_TRUE(shallow.git_paths.empty());
  EXPECT_TRUE(shallow.truncated);
  RepositoryWalk deep = WalkRepositories(*root, 1000, 8);
  EXPECT_EQ(deep.git_paths, (std::vector<fs::path>{dir_ / "ws/a/b/c/.git"}));
  for (int i = 0; i < 20; ++i) fs::create_directories(dir_ / "ws" / ("d" + std::to_string(i)));
  RepositoryWalk few = WalkRepositories(*root, 5, 8);
  EXPECT_TRUE(few.truncated);
}

}  // namespace
}  // namespace ptybox::sandbox
