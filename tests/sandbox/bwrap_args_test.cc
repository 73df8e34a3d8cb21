// BuildBwrapArgv as a pure function: exact argv per mode, the ordering constraints the mount
// stack relies on, and CollectProtectedPaths against a real directory tree.
#include "sandbox/bwrap_args.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>

#include "sandbox/session_home.h"
#include "tests/support/temp_dir.h"

namespace ptybox::sandbox {
namespace {

using policy::Mode;
using Argv = std::vector<std::string>;

BwrapInvocation Invocation() {
  return {"/usr/bin/bwrap", 7, "/usr/libexec/ptybox-init", {"--control-fd", "3"}};
}

SandboxSpec Spec(Mode mode) {
  SandboxSpec spec;
  spec.mode = mode;
  spec.workspace_root = "/home/u/proj";
  spec.cwd = "/home/u/proj/src";
  return spec;
}

// Index of the first occurrence of the consecutive elements `needle` in `argv`, or npos.
size_t Find(const Argv& argv, const Argv& needle, size_t from = 0) {
  for (size_t i = from; i + needle.size() <= argv.size(); ++i) {
    if (std::equal(needle.begin(), needle.end(), argv.begin() + static_cast<long>(i))) return i;
  }
  return std::string::npos;
}

// The bwrap options before "--" (the init binary and its arguments follow).
Argv Options(const Argv& argv) {
  auto end = std::find(argv.begin(), argv.end(), "--");
  return Argv(argv.begin(), end);
}

TEST(BwrapArgsTest, ReadOnlyExactArgv) {
  // clang-format off
  const Argv expected = {
      "/usr/bin/bwrap",
      "--unshare-all", "--unshare-user", "--die-with-parent", "--new-session",
      "--ro-bind", "/", "/",
      "--dev", "/dev",
      "--proc", "/proc",
      "--tmpfs", "/tmp",
      // Walls 1 and 2: kernel knobs read-only, /sys reduced, /run empty.
      "--ro-bind-try", "/proc/sys", "/proc/sys",
      "--ro-bind-try", "/proc/sysrq-trigger", "/proc/sysrq-trigger",
      "--ro-bind-try", "/proc/irq", "/proc/irq",
      "--ro-bind-try", "/proc/bus", "/proc/bus",
      "--ro-bind-try", "/proc/fs", "/proc/fs",
      "--tmpfs", "/sys",
      "--ro-bind-try", "/sys/devices/system/cpu", "/sys/devices/system/cpu",
      "--ro-bind-try", "/sys/devices/system/node", "/sys/devices/system/node",
      "--remount-ro", "/sys",
      "--tmpfs", "/run",
      "--ro-bind", "/home/u/proj", "/home/u/proj",
      "--ro-bind", "/usr/libexec/ptybox-init", "/usr/libexec/ptybox-init",
      "--as-pid-1",
      "--cap-drop", "ALL",
      "--clearenv",
      "--seccomp", "7",
      "--chdir", "/home/u/proj/src",
      "--", "/usr/libexec/ptybox-init", "--control-fd", "3"};
  // clang-format on
  EXPECT_EQ(BuildBwrapArgv(Spec(Mode::kReadOnly), Invocation()), expected);
}

TEST(BwrapArgsTest, WorkspaceWriteExactArgv) {
  SandboxSpec spec = Spec(Mode::kWorkspaceWrite);
  spec.writable_roots = {"/var/cache/build", "/tmp/scratch"};
  spec.read_only_paths = {"/home/u/proj/.git", "/home/u/proj/.ptybox.yaml"};
  // clang-format off
  const Argv expected = {
      "/usr/bin/bwrap",
      "--unshare-all", "--unshare-user", "--die-with-parent", "--new-session",
      "--ro-bind", "/", "/",
      "--dev", "/dev",
      "--proc", "/proc",
      "--tmpfs", "/tmp",
      // Walls 1 and 2: kernel knobs read-only, /sys reduced, /run empty.
      "--ro-bind-try", "/proc/sys", "/proc/sys",
      "--ro-bind-try", "/proc/sysrq-trigger", "/proc/sysrq-trigger",
      "--ro-bind-try", "/proc/irq", "/proc/irq",
      "--ro-bind-try", "/proc/bus", "/proc/bus",
      "--ro-bind-try", "/proc/fs", "/proc/fs",
      "--tmpfs", "/sys",
      "--ro-bind-try", "/sys/devices/system/cpu", "/sys/devices/system/cpu",
      "--ro-bind-try", "/sys/devices/system/node", "/sys/devices/system/node",
      "--remount-ro", "/sys",
      "--tmpfs", "/run",
      "--bind", "/home/u/proj", "/home/u/proj",
      "--bind", "/var/cache/build", "/var/cache/build",
      "--bind", "/tmp/scratch", "/tmp/scratch",
      "--ro-bind", "/home/u/proj/.git", "/home/u/proj/.git",
      "--ro-bind", "/home/u/proj/.ptybox.yaml", "/home/u/proj/.ptybox.yaml",
      "--ro-bind", "/usr/libexec/ptybox-init", "/usr/libexec/ptybox-init",
      "--as-pid-1",
      "--cap-drop", "ALL",
      "--clearenv",
      "--seccomp", "7",
      "--chdir", "/home/u/proj/src",
      "--", "/usr/libexec/ptybox-init", "--control-fd", "3"};
  // clang-format on
  EXPECT_EQ(BuildBwrapArgv(spec, Invocation()), expected);
}

// Walls 2 and 3 (docs/security.md): the daemon socket and the hidden paths come after every
// bind (so they cover paths inside the roots) and before the init binary.
TEST(BwrapArgsTest, HiddenPathsAndSocketExactArgv) {
  SandboxSpec spec = Spec(Mode::kWorkspaceWrite);
  spec.run_dirs = {"/run", "/var/run"};
  spec.read_only_paths = {"/home/u/proj/.git"};
  spec.daemon_socket = "/srv/ptybox/run/ptybox.sock";
  spec.hidden = {{"/home/u/.ssh", true},
                 {"/home/u/.netrc", false},
                 {"/home/u/proj/.env", false},
                 // Holds the workspace: the operator granted the workspace, so it stays.
                 {"/home/u", true}};
  // clang-format off
  const Argv expected = {
      "--tmpfs", "/run",
      "--tmpfs", "/var/run",
      "--bind", "/home/u/proj", "/home/u/proj",
      "--ro-bind", "/home/u/proj/.git", "/home/u/proj/.git",
      "--tmpfs", "/srv/ptybox/run", "--remount-ro", "/srv/ptybox/run",
      "--tmpfs", "/home/u/.ssh", "--remount-ro", "/home/u/.ssh",
      "--ro-bind", "/dev/null", "/home/u/.netrc",
      "--ro-bind", "/dev/null", "/home/u/proj/.env",
      "--ro-bind", "/usr/libexec/ptybox-init", "/usr/libexec/ptybox-init",
      "--as-pid-1"};
  // clang-format on
  const Argv argv = BuildBwrapArgv(spec, Invocation());
  const size_t from = Find(argv, {"--tmpfs", "/run"});
  ASSERT_NE(from, std::string::npos);
  EXPECT_EQ(Argv(argv.begin() + static_cast<long>(from),
                 argv.begin() + static_cast<long>(from + expected.size())),
            expected);
}

// A path inside a directory that becomes an empty read-only tmpfs (the socket's directory, a
// hidden directory) gets no cover of its own: it is out of reach already, and bwrap cannot
// create a mount point in a read-only tmpfs (an audit log beside the socket made every spawn
// fail with "Can't create file at /run/ptybox/audit.log: Read-only file system").
TEST(BwrapArgsTest, NothingInsideAnEmptiedDirectoryGetsACoverOfItsOwn) {
  for (Mode mode : {Mode::kReadOnly, Mode::kWorkspaceWrite}) {
    SCOPED_TRACE(ToString(mode));
    SandboxSpec spec = Spec(mode);
    spec.daemon_socket = "/srv/ptybox/ptybox.sock";
    spec.hidden = {{"/srv/ptybox/audit.jsonl", false},
                   {"/srv/ptybox/sessions", true},
                   {"/home/u/.ssh", true},
                   {"/home/u/.ssh/id_ed25519", false},
                   {"/home/u/.netrc", false}};
    const Argv argv = BuildBwrapArgv(spec, Invocation());
    EXPECT_NE(Find(argv, {"--tmpfs", "/srv/ptybox", "--remount-ro", "/srv/ptybox"}),
              std::string::npos);
    EXPECT_NE(Find(argv, {"--tmpfs", "/home/u/.ssh", "--remount-ro", "/home/u/.ssh"}),
              std::string::npos);
    EXPECT_NE(Find(argv, {"--ro-bind", "/dev/null", "/home/u/.netrc"}), std::string::npos);
    for (const char* inside :
         {"/srv/ptybox/audit.jsonl", "/srv/ptybox/sessions", "/home/u/.ssh/id_ed25519"}) {
      EXPECT_EQ(std::count(argv.begin(), argv.end(), std::string(inside)), 0) << inside;
    }
  }
}

TEST(BwrapArgsTest, SocketDirectoryHiddenOnlyWhenNothingGrantedIsInIt) {
  const auto hidden_as = [](const std::filesystem::path& socket, Mode mode) {
    SandboxSpec spec = Spec(mode);
    spec.writable_roots = {"/var/cache/build"};
    spec.daemon_socket = socket;
    const Argv argv = BuildBwrapArgv(spec, Invocation());
    if (Find(argv, {"--ro-bind", "/dev/null", socket.string()}) != std::string::npos) {
      return std::string("file");
    }
    const std::string dir = socket.parent_path().string();
    if (Find(argv, {"--tmpfs", dir, "--remount-ro", dir}) != std::string::npos) {
      return std::string("directory");
    }
    return std::string("nothing");
  };
  for (Mode mode : {Mode::kReadOnly, Mode::kWorkspaceWrite}) {
    SCOPED_TRACE(ToString(mode));
    EXPECT_EQ(hidden_as("/run/ptybox/ptybox.sock", mode), "directory");
    EXPECT_EQ(hidden_as("/srv/ptybox/ptybox.sock", mode), "directory");
    // Inside the workspace or a writable root, or beside the workspace: the file alone.
    EXPECT_EQ(hidden_as("/home/u/proj/ptybox.sock", mode), "file");
    EXPECT_EQ(hidden_as("/home/u/proj/sub/ptybox.sock", mode), "file");
    EXPECT_EQ(hidden_as("/var/cache/build/ptybox.sock", mode), "file");
    EXPECT_EQ(hidden_as("/home/u/ptybox.sock", mode), "file");
    // System directories the shell needs: the file alone.
    for (const char* socket : {"/ptybox.sock", "/tmp/ptybox.sock", "/run/ptybox.sock",
                               "/etc/ptybox.sock", "/var/lib/ptybox.sock", "/usr/lib/x/p.sock"}) {
      EXPECT_EQ(hidden_as(socket, mode), "file") << socket;
    }
    // Holding the init binary: the file alone.
    EXPECT_EQ(hidden_as("/usr/libexec/ptybox.sock", mode), "file");
  }
  SandboxSpec none = Spec(Mode::kReadOnly);
  const Argv argv = BuildBwrapArgv(none, Invocation());
  EXPECT_EQ(Find(argv, {"--ro-bind", "/dev/null"}), std::string::npos);
}

TEST(BwrapArgsTest, NetworkIsSharedOnlyWhenAllowed) {
  for (Mode mode : {Mode::kReadOnly, Mode::kWorkspaceWrite}) {
    SandboxSpec spec = Spec(mode);
    Argv denied = BuildBwrapArgv(spec, Invocation());
    EXPECT_EQ(std::count(denied.begin(), denied.end(), "--share-net"), 0) << ToString(mode);

    spec.network_allowed = true;
    Argv allowed = BuildBwrapArgv(spec, Invocation());
    // Right after --unshare-all, which it partly undoes; the user namespace stays.
    EXPECT_NE(Find(allowed, {"--unshare-all", "--share-net", "--unshare-user"}), std::string::npos)
        << ToString(mode);
    EXPECT_EQ(allowed.size(), denied.size() + 1);
  }
}

TEST(BwrapArgsTest, OrderingConstraintsHoldInBothModes) {
  for (Mode mode : {Mode::kReadOnly, Mode::kWorkspaceWrite}) {
    SandboxSpec spec = Spec(mode);
    spec.writable_roots = {"/tmp/extra"};
    spec.read_only_paths = {"/home/u/proj/.git"};
    const Argv argv = BuildBwrapArgv(spec, Invocation());
    const Argv options = Options(argv);
    SCOPED_TRACE(ToString(mode));

    const size_t root = Find(options, {"--ro-bind", "/", "/"});
    const size_t dev = Find(options, {"--dev", "/dev"});
    const size_t proc = Find(options, {"--proc", "/proc"});
    const size_t tmp = Find(options, {"--tmpfs", "/tmp"});
    const size_t init = Find(options, {"--ro-bind", "/usr/libexec/ptybox-init"});
    ASSERT_NE(root, std::string::npos);
    ASSERT_NE(init, std::string::npos);
    // The host root is the first mount; everything else lands on top of it.
    for (size_t i = 0; i < root; ++i) {
      EXPECT_TRUE(options[i].find("bind") == std::string::npos && options[i] != "--tmpfs" &&
                  options[i] != "--dev" && options[i] != "--proc")
          << options[i] << " before the root bind";
    }
    EXPECT_LT(root, dev);
    EXPECT_LT(dev, proc);
    EXPECT_LT(proc, tmp);
    // The workspace and extra roots come after the tmpfs, so /tmp paths stay visible.
    const char* ws_flag = mode == Mode::kWorkspaceWrite ? "--bind" : "--ro-bind";
    const size_t ws = Find(options, {ws_flag, "/home/u/proj", "/home/u/proj"});
    const size_t extra = Find(options, {ws_flag, "/tmp/extra", "/tmp/extra"});
    EXPECT_LT(tmp, ws);
    EXPECT_LT(tmp, extra);
    // The init binary is the last mount.
    for (size_t i = init + 3; i < options.size(); ++i) {
      EXPECT_TRUE(options[i].find("bind") == std::string::npos && options[i] != "--tmpfs")
          << options[i] << " after the init binary";
    }
    // Read-only mode has no writable bind at all.
    if (mode == Mode::kReadOnly) {
      EXPECT_EQ(std::count(options.begin(), options.end(), "--bind"), 0);
    } else {
      const size_t protected_git = Find(options, {"--ro-bind", "/home/u/proj/.git"});
      EXPECT_LT(ws, protected_git);
      EXPECT_LT(extra, protected_git);
    }
    // The environment never travels on the command line.
    for (const auto& arg : options) {
      EXPECT_NE(arg, "--setenv");
      EXPECT_NE(arg, "--unsetenv");
    }
    EXPECT_NE(Find(options, {"--cap-drop", "ALL"}), std::string::npos);
    EXPECT_NE(Find(options, {"--seccomp", "7"}), std::string::npos);
    EXPECT_NE(Find(options, {"--chdir", "/home/u/proj/src"}), std::string::npos);
    EXPECT_EQ(argv[options.size() + 1], "/usr/libexec/ptybox-init");
  }
}

TEST(BwrapArgsTest, WorkspaceWriteProtectsAfterEveryWritableBind) {
  SandboxSpec spec = Spec(Mode::kWorkspaceWrite);
  spec.writable_roots = {"/a", "/b", "/c"};
  spec.read_only_paths = {"/a/.git", "/b/.git", "/home/u/proj/.ptybox.yaml"};
  const Argv options = Options(BuildBwrapArgv(spec, Invocation()));
  size_t last_bind = 0;
  size_t first_protected = options.size();
  for (size_t i = 0; i < options.size(); ++i) {
    if (options[i] == "--bind") last_bind = i;
    if (options[i] == "--ro-bind" && options[i + 1] != "/" &&
        std::find(spec.read_only_paths.begin(), spec.read_only_paths.end(), options[i + 1]) !=
            spec.read_only_paths.end()) {
      first_protected = std::min(first_protected, i);
    }
  }
  EXPECT_LT(last_bind, first_protected);
  EXPECT_EQ(std::count(options.begin(), options.end(), "--bind"), 4);
}

TEST(BwrapArgsTest, PrivateHomeIsATmpfsAfterTheBinds) {
  for (Mode mode : {Mode::kReadOnly, Mode::kWorkspaceWrite}) {
    SandboxSpec spec = Spec(mode);
    spec.hidden = {{"/home/u/.ssh", true}};
    const Argv without = Options(BuildBwrapArgv(spec, Invocation()));
    EXPECT_EQ(Find(without, {"--tmpfs", kSessionHome}), std::string::npos);
    ASSERT_TRUE(SessionHomeMountable(spec));
    spec.session_home = kSessionHome;
    const Argv argv = Options(BuildBwrapArgv(spec, Invocation()));
    const size_t home = Find(argv, {"--perms", "0700", "--tmpfs", kSessionHome});
    ASSERT_NE(home, std::string::npos);
    // After /run is emptied (its mount point is made there), the workspace and the covers.
    EXPECT_LT(Find(argv, {"--tmpfs", "/run"}), home);
    EXPECT_LT(Find(argv, {mode == Mode::kReadOnly ? "--ro-bind" : "--bind", "/home/u/proj",
                          "/home/u/proj"}),
              home);
    EXPECT_LT(Find(argv, {"--tmpfs", "/home/u/.ssh"}), home);
  }
  // Not when /run is not the sandbox's own empty tmpfs: the mount point would be a host path.
  SandboxSpec spec = Spec(Mode::kWorkspaceWrite);
  spec.run_dirs.clear();
  EXPECT_FALSE(SessionHomeMountable(spec));
}

// An ordinary user's home that holds the workspace is one empty tmpfs made before the binds
// (they put the workspace and a starting directory outside it back), read-only after the last
// mount; a hidden path in the home outside every granted path gets no cover of its own.
TEST(BwrapArgsTest, AVeiledHomeIsATmpfsBeforeTheBindsAndReadOnlyAfterTheLast) {
  for (Mode mode : {Mode::kReadOnly, Mode::kWorkspaceWrite}) {
    SandboxSpec spec = Spec(mode);
    spec.cwd = "/home/u/start";
    spec.veiled_homes = {"/home/u"};
    spec.hidden = {{"/home/u/.ssh", true}, {"/home/u/proj/.env", false}};
    const Argv argv = Options(BuildBwrapArgv(spec, Invocation()));
    const size_t veil = Find(argv, {"--tmpfs", "/home/u"});
    ASSERT_NE(veil, std::string::npos);
    const size_t start = Find(argv, {"--ro-bind", "/home/u/start", "/home/u/start"});
    const size_t root = Find(
        argv, {mode == Mode::kReadOnly ? "--ro-bind" : "--bind", "/home/u/proj", "/home/u/proj"});
    const size_t init = Find(argv, {"--ro-bind", "/usr/libexec/ptybox-init"});
    const size_t sealed = Find(argv, {"--remount-ro", "/home/u"});
    EXPECT_LT(Find(argv, {"--tmpfs", "/run"}), veil);
    EXPECT_LT(veil, start);
    EXPECT_LT(start, root);
    EXPECT_LT(root, init);
    EXPECT_LT(init, sealed);
    ASSERT_NE(sealed, std::string::npos);
    EXPECT_EQ(Find(argv, {"--tmpfs", "/home/u/.ssh"}), std::string::npos);
    EXPECT_NE(Find(argv, {"--ro-bind", "/dev/null", "/home/u/proj/.env"}), std::string::npos);
    // A starting directory inside the workspace comes with it.
    spec.cwd = "/home/u/proj/src";
    EXPECT_EQ(Find(Options(BuildBwrapArgv(spec, Invocation())), {"--ro-bind", "/home/u/proj/src"}),
              std::string::npos);
  }
}

TEST(BwrapArgsTest, PrivateHomeVariablesPointIntoItWithoutOverridingChoices) {
  std::vector<std::string> env = {"PATH=/usr/bin", "HOME=/root", "XDG_CONFIG_HOME=/etc/xdg"};
  PointEnvironmentAtHome(env, kSessionHome);
  auto value = [&](std::string_view name) -> std::string {
    for (const std::string& entry : env) {
      if (entry.starts_with(std::string(name) + "=")) return entry.substr(name.size() + 1);
    }
    return "(unset)";
  };
  EXPECT_EQ(value("HOME"), "/run/ptybox-home");
  EXPECT_EQ(value("XDG_CONFIG_HOME"), "/etc/xdg");  // set by the policy or client: it stands
  EXPECT_EQ(value("XDG_CACHE_HOME"), "/run/ptybox-home/.cache");
  EXPECT_EQ(value("npm_config_cache"), "/run/ptybox-home/.npm");
  EXPECT_EQ(value("PIP_CACHE_DIR"), "/run/ptybox-home/.cache/pip");
  EXPECT_EQ(value("CARGO_HOME"), "/run/ptybox-home/.cargo");
  EXPECT_EQ(value("GOPATH"), "/run/ptybox-home/go");
  EXPECT_EQ(value("APT_CONFIG"), "/run/ptybox-home/.config/ptybox/apt.conf");
  EXPECT_EQ(value("PATH"), "/usr/bin");
  // ptybox-init writes apt's configuration where APT_CONFIG points, unless the environment
  // named another file (that choice stands, and nothing is written).
  EXPECT_EQ(SessionAptConfigPath({"PATH=/usr/bin"}, kSessionHome),
            "/run/ptybox-home/.config/ptybox/apt.conf");
  EXPECT_EQ(SessionAptConfigPath({"APT_CONFIG=/etc/my-apt.conf"}, kSessionHome), "");
  EXPECT_EQ(SessionAptConfigPath({"PATH=/usr/bin"}, ""), "");
  EXPECT_EQ(std::count_if(env.begin(), env.end(),
                          [](const std::string& e) { return e.starts_with("HOME="); }),
            1);
}

TEST(BwrapArgsTest, PathsWithSpacesAndNewlinesStayWholeArguments) {
  SandboxSpec spec = Spec(Mode::kWorkspaceWrite);
  spec.workspace_root = "/home/u/my project\nwith newline";
  spec.cwd = "/home/u/my project\nwith newline/sub dir";
  spec.read_only_paths = {"/home/u/my project\nwith newline/.git"};
  BwrapInvocation invocation = Invocation();
  invocation.init_binary = "/opt/pty box/ptybox-init";
  invocation.init_args = {"arg with space", "--"};
  const Argv argv = BuildBwrapArgv(spec, invocation);
  EXPECT_NE(Find(argv, {"--bind", "/home/u/my project\nwith newline",
                        "/home/u/my project\nwith newline"}),
            std::string::npos);
  EXPECT_NE(Find(argv, {"--chdir", "/home/u/my project\nwith newline/sub dir"}), std::string::npos);
  EXPECT_NE(Find(argv, {"--ro-bind", "/opt/pty box/ptybox-init", "/opt/pty box/ptybox-init"}),
            std::string::npos);
  const Argv tail = {"--", "/opt/pty box/ptybox-init", "arg with space", "--"};
  EXPECT_TRUE(std::equal(tail.rbegin(), tail.rend(), argv.rbegin()));
}

class ProtectedPathsTest : public ::testing::Test {
 protected:
  void Touch(const std::filesystem::path& path) { std::ofstream(path) << "x"; }
  ::ptybox::testing::TempDir tmp_;
  std::filesystem::path dir_ = tmp_.path();
};

TEST_F(ProtectedPathsTest, ExistingGitDirsAndCandidatesCanonicalAndDeduplicated) {
  namespace fs = std::filesystem;
  const fs::path repo = dir_ / "repo";
  const fs::path worktree = dir_ / "worktree";
  const fs::path plain = dir_ / "plain";
  fs::create_directories(repo / ".git");
  fs::create_directories(worktree);
  Touch(worktree / ".git");  // a linked worktree's .git is a file
  fs::create_directories(plain);
  Touch(repo / ".ptybox.yaml");
  fs::create_directory_symlink(repo, dir_ / "repo-link");

  const fs::path linked = dir_ / "linked";
  fs::create_directories(linked);
  fs::create_directory_symlink("/tmp", linked / ".git");  // a link is never followed

  const auto paths = CollectProtectedPaths({dir_ / "repo-link", worktree, plain, repo, linked},
                                           {repo / ".ptybox.yaml", dir_ / "repo/./.ptybox.yaml",
                                            plain / "missing.yaml", dir_ / "repo-link/.git"});
  // Roots' .git lexically (the launcher opens each again beneath its root, without links);
  // candidates with their directory resolved, never the file itself; no duplicates.
  const std::vector<fs::path> expected = {dir_ / "repo-link/.git", worktree / ".git", repo / ".git",
                                          repo / ".ptybox.yaml"};
  EXPECT_EQ(paths, expected);
}

TEST_F(ProtectedPathsTest, NothingExistsNothingProtected) {
  EXPECT_TRUE(CollectProtectedPaths({dir_}, {dir_ / "nope.yaml"}).empty());
  EXPECT_TRUE(CollectProtectedPaths({}, {}).empty());
}

}  // namespace
}  // namespace ptybox::sandbox
