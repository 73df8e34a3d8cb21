// The pure parts of the launch path: idmap lines, the session uid range check, the argv with
// staged sources and --uid 0, the roots refused before anything is created, and the race-free
// opener against a real directory tree with links.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "sandbox/bwrap_args.h"
#include "sandbox/launcher.h"
#include "sandbox/path_open.h"
#include "sandbox/session_uid_lease.h"
#include "sandbox/user_namespace.h"
#include "tests/support/temp_dir.h"

namespace ptybox::sandbox {
namespace {

namespace fs = std::filesystem;

TEST(IdMapTest, TheRootsOwnerBecomesTheSessionUid) {
  EXPECT_EQ(IdMapLine(0, 2147418112, 1), "0 2147418112 1\n");
  const RootIdMap map = RootIdMapFor(1000, 1001, policy::SessionUid(2147418113));
  EXPECT_EQ(map.uid_map, "1000 2147418113 1\n");
  EXPECT_EQ(map.gid_map, "1001 2147418113 1\n");
  const RootIdMap root = RootIdMapFor(0, 0, policy::SessionUid(7));
  EXPECT_EQ(root.uid_map, "0 7 1\n");
}

TEST(SessionUidLeaseTest, TheWalkStartsAtTheStartAndWrapsOnce) {
  std::vector<uint64_t> tried;
  const auto refuse_all = [&](uint64_t offset) {
    tried.push_back(offset);
    return false;
  };
  EXPECT_EQ(FirstTakenOffset(4, 2, refuse_all), std::nullopt);
  EXPECT_EQ(tried, (std::vector<uint64_t>{2, 3, 0, 1}));  // every id once, then refused
  tried.clear();
  EXPECT_EQ(FirstTakenOffset(4, 9, refuse_all), std::nullopt);  // a start past the count wraps
  EXPECT_EQ(tried, (std::vector<uint64_t>{1, 2, 3, 0}));
}

TEST(SessionUidLeaseTest, TheFirstFreeIdAfterTheStartIsTaken) {
  // Ids 5 and 6 of 0..7 are leased by live sessions; a walk from 5 takes 7, not a leased one.
  const auto free_one = [](uint64_t offset) { return offset != 5 && offset != 6; };
  EXPECT_EQ(FirstTakenOffset(8, 5, free_one), std::optional<uint64_t>(7));
  EXPECT_EQ(FirstTakenOffset(8, 0, free_one), std::optional<uint64_t>(0));
  // A range of one: that id when free, nothing when leased.
  EXPECT_EQ(FirstTakenOffset(1, 3, [](uint64_t) { return true; }), std::optional<uint64_t>(0));
  EXPECT_EQ(FirstTakenOffset(1, 0, [](uint64_t) { return false; }), std::nullopt);
}

TEST(SessionUidLeaseTest, AnIdHeldByAnotherHolderIsSkippedAndReleasedOnClose) {
  if (::geteuid() != 0) GTEST_SKIP() << "the lease directory is root's";
  // A range no other test uses: its first id is leased here, so the next lease is the second,
  // and the first is free again once its holder closes it (as when a daemon dies).
  const policy::SessionUidRange range{
      policy::SessionUid(2147480000u + static_cast<uint32_t>(::getpid() % 1000) * 2), 2};
  Result<SessionUidLease> a = LeaseSessionUid(range);
  ASSERT_TRUE(a) << a.error().message;
  Result<SessionUidLease> b = LeaseSessionUid(range);
  ASSERT_TRUE(b) << b.error().message;
  EXPECT_NE(a->uid, b->uid);
  Result<SessionUidLease> c = LeaseSessionUid(range);
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().kind, ErrorKind::kSandboxUnavailable);
  EXPECT_NE(c.error().message.find("sessionIds"), std::string::npos) << c.error().message;
  const policy::SessionUid freed = a->uid;
  a->lock.Reset();
  Result<SessionUidLease> d = LeaseSessionUid(range);
  ASSERT_TRUE(d) << d.error().message;
  EXPECT_EQ(d->uid, freed);
  struct stat st {};
  ASSERT_EQ(::stat("/run/ptybox/session-ids", &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0700u);
  EXPECT_EQ(st.st_uid, 0u);
}

TEST(SessionUidRangeTest, DefaultIsFreeOnATypicalHost) {
  const std::string passwd =
      "root:x:0:0::/root:/bin/bash\nnobody:x:65534:65534::/:/usr/sbin/nologin\n"
      "u:x:1000:1000::/home/u:/bin/bash\n";
  const std::string subuid = "u:100000:65536\n";
  EXPECT_EQ(SessionUidRangeConflict(policy::SessionUidRange{}, passwd, passwd, subuid, subuid),
            std::nullopt);
}

TEST(SessionUidRangeTest, OverlapsAndReservedIdsAreNamed) {
  const std::string passwd = "u:x:1000:1000::/home/u:/bin/bash\n";
  const std::string subuid = "u:100000:65536\n";
  auto conflict = [&](uint32_t first, uint32_t count) {
    return SessionUidRangeConflict({policy::SessionUid(first), count}, passwd, "", subuid, "")
        .value_or("");
  };
  EXPECT_NE(conflict(150000, 10).find("/etc/subuid"), std::string::npos);
  EXPECT_NE(conflict(999, 2).find("/etc/passwd"), std::string::npos);
  EXPECT_NE(conflict(65530, 10).find("65534"), std::string::npos);
  EXPECT_NE(conflict(4294967290u, 10).find("4294967295"), std::string::npos);
  EXPECT_EQ(conflict(200000, 100), "");
  EXPECT_NE(SessionUidRangeConflict({policy::SessionUid(100), 5}, "", "", "", "u:102:1\n")
                .value_or("")
                .find("/etc/subgid"),
            std::string::npos);
}

TEST(StagedArgvTest, SourcesComeFromTheStageAndTheSessionIsRootOfItsNamespace) {
  SandboxSpec spec;
  spec.mode = policy::Mode::kWorkspaceWrite;
  spec.workspace_root = "/w";
  spec.writable_roots = {"/w/sub"};
  spec.read_only_paths = {"/w/.git"};
  spec.cwd = "/w";
  spec.bind_sources = {{"/w", "/run/ptybox-stage/0"},
                       {"/w/sub", "/run/ptybox-stage/1"},
                       {"/w/.git", "/run/ptybox-stage/2"},
                       {"/i/init", "/run/ptybox-stage/3"}};
  spec.uid_zero_inside = true;
  BwrapInvocation invocation{"/usr/bin/bwrap", 4, "/i/init", {"--x"}};
  const std::vector<std::string> argv = BuildBwrapArgv(spec, invocation);
  auto sequence = [&](std::vector<std::string> want) {
    return std::search(argv.begin(), argv.end(), want.begin(), want.end()) != argv.end();
  };
  EXPECT_TRUE(sequence({"--unshare-user", "--uid", "0", "--gid", "0"}));
  EXPECT_TRUE(sequence({"--bind", "/run/ptybox-stage/0", "/w", "--bind", "/run/ptybox-stage/1",
                        "/w/sub", "--ro-bind", "/run/ptybox-stage/2", "/w/.git", "--ro-bind",
                        "/run/ptybox-stage/3", "/i/init", "--as-pid-1"}));
  // The empty /run (run_dirs) already hides the staging place; without it an empty tmpfs does.
  EXPECT_TRUE(sequence({"--tmpfs", "/run"}));
  SandboxSpec no_run = spec;
  no_run.run_dirs.clear();
  const std::vector<std::string> covered = BuildBwrapArgv(no_run, invocation);
  const std::vector<std::string> tail = {"/i/init", "--tmpfs", kStageDir, "--as-pid-1"};
  EXPECT_NE(std::search(covered.begin(), covered.end(), tail.begin(), tail.end()), covered.end());
  // No host path of a root is ever a bind source.
  for (size_t i = 0; i + 2 < argv.size(); ++i) {
    if (argv[i] == "--bind" || argv[i] == "--ro-bind") {
      if (argv[i + 2] == "/") continue;  // --ro-bind / /
      EXPECT_EQ(argv[i + 1].rfind(kStageDir, 0), 0u) << argv[i + 1];
    }
  }
  spec.uid_zero_inside = false;
  const std::vector<std::string> unprivileged = BuildBwrapArgv(spec, invocation);
  EXPECT_EQ(std::count(unprivileged.begin(), unprivileged.end(), std::string("--uid")), 0);
}

TEST(SandboxRootsTest, SharedAndSystemDirectoriesAreRefused) {
  for (const char* bad : {"/", "/tmp", "/tmp/", "/var/tmp", "/dev/shm", "/proc/1", "/sys", "/run",
                          "/run/user/1000/p", "/var/run"}) {
    SandboxSpec spec;
    spec.workspace_root = bad;
    Result<void> checked = CheckSandboxRoots(spec);
    ASSERT_FALSE(checked) << bad;
    EXPECT_EQ(checked.error().kind, ErrorKind::kPolicyDenied) << bad;
    SandboxSpec extra;
    extra.workspace_root = "/home/u/p";
    extra.writable_roots = {bad};
    EXPECT_FALSE(CheckSandboxRoots(extra)) << bad;
  }
  for (const char* good : {"/tmp/project", "/var/tmp/p", "/home/u/p", "/srv"}) {
    SandboxSpec spec;
    spec.workspace_root = good;
    EXPECT_TRUE(CheckSandboxRoots(spec)) << good;
  }
}

class PathOpenTest : public ::testing::Test {
 protected:
  ::ptybox::testing::TempDir tmp_;
  fs::path dir_ = tmp_.path();
};

TEST_F(PathOpenTest, RootsWithALinkAnywhereAreRefused) {
  fs::create_directories(dir_ / "real" / "sub");
  fs::create_directory_symlink(dir_ / "real", dir_ / "link");
  ASSERT_TRUE(OpenRootNoFollow(dir_ / "real" / "sub"));
  Result<OpenedPath> through = OpenRootNoFollow(dir_ / "link" / "sub");
  ASSERT_FALSE(through);
  EXPECT_NE(through.error().message.find("symbolic link"), std::string::npos);
  EXPECT_FALSE(OpenRootNoFollow(dir_ / "link"));
  std::ofstream(dir_ / "file") << "x";
  EXPECT_FALSE(OpenRootNoFollow(dir_ / "file"));
  EXPECT_FALSE(OpenRootNoFollow(dir_ / "missing"));
}

TEST_F(PathOpenTest, ProtectedPathsAreNeverFollowedOutOfTheirRoot) {
  fs::create_directories(dir_ / "root" / "real-git");
  Result<OpenedPath> root = OpenRootNoFollow(dir_ / "root");
  ASSERT_TRUE(root);
  fs::create_directory_symlink("/tmp", dir_ / "root" / ".git");
  fs::create_directory_symlink(dir_ / "root" / "real-git", dir_ / "root" / "inside-link");
  std::ofstream(dir_ / "root" / ".ptybox.yaml") << "version: 1\n";
  for (const char* name : {".git", "inside-link", "missing", "../root/.ptybox.yaml"}) {
    Result<std::optional<OpenedPath>> opened = OpenBeneath(*root, name);
    ASSERT_TRUE(opened) << name;
    EXPECT_FALSE(opened->has_value()) << name << " would be bound";
  }
  Result<std::optional<OpenedPath>> file = OpenBeneath(*root, ".ptybox.yaml");
  ASSERT_TRUE(file && file->has_value());
  EXPECT_EQ((*file)->type, static_cast<mode_t>(S_IFREG));
  Result<std::optional<OpenedPath>> dir = OpenBeneath(*root, "real-git");
  ASSERT_TRUE(dir && dir->has_value());
  EXPECT_EQ((*dir)->type, static_cast<mode_t>(S_IFDIR));
}

}  // namespace
}  // namespace ptybox::sandbox
