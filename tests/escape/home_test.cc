// The private home of a confined session (docs/sandbox.md, "The private home"): HOME is a
// tmpfs of the session's own (holding only apt's configuration, written by ptybox-init), where real
// tools keep their state (python's and node's REPL history, npm's cache), while the daemon's home
// (a scratch home in the build tree, visible inside like any host path) stays read-only and
// unchanged whatever the session tries: writing it directly, through a link planted in the private
// home, by unmounting the private home, or by leaving state for the next session.
// danger-full-access is the control: its HOME is the host's.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <set>

#include "tests/escape/escape_support.h"

namespace ptybox::testing {
namespace {

namespace fs = std::filesystem;

class HomeEscapeTest : public ::testing::TestWithParam<std::string> {
 protected:
  HomeEscapeTest()
      : home_(OutsideDir() /
              ("home-" + std::to_string(::getpid()) + "-" + Mode().substr(0, 2) + "-private")) {}
  void SetUp() override {
    // The scratch home must be visible inside (so not under /tmp): the build tree.
    if (::access(OutsideDir().c_str(), W_OK) != 0) {
      GTEST_SKIP() << OutsideDir() << " is not writable by this user: no scratch home";
    }
    fs::remove_all(home_);
    fs::create_directories(home_);
    std::ofstream(home_ / "notes.txt") << "host notes\n";
    // Writable by anyone: only the sandbox may keep the session from writing here.
    fs::permissions(home_, fs::perms::all);
    fs::permissions(home_ / "notes.txt", fs::perms::all);
    daemon_.emplace(Daemon::Options{.extra_args = {}, .env = {"HOME=" + home_.string()}});
    client_.emplace(daemon_->socket());
  }
  void TearDown() override {
    client_.reset();
    daemon_.reset();
    std::error_code ec;
    fs::remove_all(home_, ec);
  }
  [[nodiscard]] const std::string& Mode() const { return GetParam(); }
  [[nodiscard]] bool Confined() const { return Mode() != "danger-full-access"; }
  Observed Run(const std::string& session, const std::string& name, const std::string& command) {
    return RunInSession(*client_, session, Mode(), name, command);
  }
  // The names in the host's scratch home.
  [[nodiscard]] std::set<std::string> HostHomeEntries() const {
    std::set<std::string> names;
    for (const auto& entry : fs::directory_iterator(home_)) {
      names.insert(entry.path().filename().string());
    }
    return names;
  }
  [[nodiscard]] static bool Has(const std::string& program) {
    return std::system(("command -v " + program + " >/dev/null 2>&1").c_str()) == 0;
  }

  fs::path home_;
  std::optional<Daemon> daemon_;
  std::optional<RpcClient> client_;
};

TEST_P(HomeEscapeTest, ToolsKeepStateInAPrivateHomeAndTheHostHomeStaysUntouched) {
  const std::string session = OpenSession(*client_, Mode());
  ASSERT_FALSE(session.empty()) << daemon_->Log();
  Observed home = Run(session, "home", "echo $HOME");
  if (!Confined()) {
    EXPECT_EQ(home.text, home_.string()) << home.Show();  // the control: the host's home
    return;
  }
  EXPECT_EQ(home.text, "/run/ptybox-home") << home.Show();
  // Nothing but apt's configuration, ptybox-init's (sandbox/session_home.h), which APT_CONFIG
  // names.
  Observed perms = Run(session, "home-perms",
                       "stat -c %a ~; cd ~ && find . -mindepth 1 | sort; echo $APT_CONFIG");
  EXPECT_EQ(perms.text,
            "700\n./.config\n./.config/ptybox\n./.config/ptybox/apt.conf\n"
            "/run/ptybox-home/.config/ptybox/apt.conf")
      << perms.Show();
  Observed apt = Run(session, "apt-config", "apt-config dump APT::Sandbox::User");
  EXPECT_EQ(apt.text, "APT::Sandbox::User \"root\";") << apt.Show();
  Observed vars = Run(session, "home-vars", "echo $XDG_CACHE_HOME $npm_config_cache $CARGO_HOME");
  EXPECT_EQ(vars.text, "/run/ptybox-home/.cache /run/ptybox-home/.npm /run/ptybox-home/.cargo")
      << vars.Show();

  // python3's REPL writes its history at exit.
  Json r = Send(*client_, session, "python3 -q\n");
  EXPECT_EQ(r["waitReason"], "stdin_read") << r.dump();
  r = Send(*client_, session, "6*7\n");
  EXPECT_EQ(r["viewport"], "42\n>>>") << r.dump();
  r = Send(*client_, session, "exit()\n");
  EXPECT_EQ(r["exitCode"], 0) << r.dump();
  Observed history = Run(session, "python-history", "cat ~/.python_history");
  EXPECT_EQ(history.exit, 0) << history.Show();
  EXPECT_TRUE(history.Says("6*7")) << history.Show();

  if (Has("node")) {
    // node's REPL keeps its history file from the start; .exit flushes it.
    r = Send(*client_, session, "node\n");
    EXPECT_EQ(r["waitReason"], "stdin_read") << r.dump();
    r = Send(*client_, session, "40+2\n");
    EXPECT_NE(r["viewport"].get<std::string>().find("42"), std::string::npos) << r.dump();
    r = Send(*client_, session, ".exit\n");
    EXPECT_EQ(r["exitCode"], 0) << r.dump();
    Observed node = Run(session, "node-history", "cat ~/.node_repl_history");
    EXPECT_TRUE(node.Says("40+2")) << node.Show();
  }
  if (Has("npm")) {
    Observed npm = Run(session, "npm-cache",
                       "c=$(npm config get cache) && echo $c && mkdir -p $c && touch $c/probe && "
                       "ls $c/probe");
    EXPECT_EQ(npm.exit, 0) << npm.Show();
    EXPECT_EQ(npm.text, "/run/ptybox-home/.npm\n/run/ptybox-home/.npm/probe") << npm.Show();
  }

  // Nothing of it reached the host's home.
  EXPECT_EQ(HostHomeEntries(), std::set<std::string>{"notes.txt"});
  EXPECT_EQ(ReadFile(home_ / "notes.txt"), "host notes\n");
}

TEST_P(HomeEscapeTest, TheHostHomeCannotBeReachedThroughThePrivateOne) {
  if (!Confined()) GTEST_SKIP() << "the control has no private home to attack through";
  const std::string session = OpenSession(*client_, Mode());
  ASSERT_FALSE(session.empty()) << daemon_->Log();
  const std::string h = "H=" + Quote(home_) + "; ";
  // The host's home is visible, read-only, at its own path; an ordinary user's daemon hides
  // what it holds (all but the roots: docs/security.md, wall 3; here it holds none, so it is
  // one empty read-only tmpfs).
  Observed read = Run(session, "read-host-home", h + "cat $H/notes.txt");
  if (::geteuid() == 0) {
    EXPECT_EQ(read.text, "host notes") << read.Show();
  } else {
    EXPECT_TRUE(read.Says("No such file or directory")) << read.Show();
  }
  Observed write = Run(session, "write-host-home", h + "touch $H/pwned");
  EXPECT_EQ(write.exit, 1) << write.Show();
  EXPECT_TRUE(write.Says("Read-only file system") || write.Says("Permission denied"))
      << write.Show();
  Observed append = Run(session, "append-host-home", h + "echo x >> $H/notes.txt");
  EXPECT_EQ(append.exit, 1) << append.Show();
  // A link planted in the private home leads to the same read-only host directory.
  Observed link =
      Run(session, "write-through-link", h + "ln -s $H ~/host && touch ~/host/pwned-link");
  EXPECT_EQ(link.exit, 1) << link.Show();
  EXPECT_TRUE(link.Says("Read-only file system") || link.Says("Permission denied")) << link.Show();
  // /run holds the private home only (before `mount` below writes its utab there): no host
  // run-time directory came with it.
  Observed run = Run(session, "list-run", "ls -A /run");
  EXPECT_EQ(run.text, "ptybox-home") << run.Show();
  // The private home cannot be unmounted or mounted elsewhere (no capability inside).
  Observed umount = Run(session, "umount-home", "umount /run/ptybox-home");
  EXPECT_NE(umount.exit, 0) << umount.Show();
  Observed mount = Run(session, "mount-over-host-home", h + "mount --bind /run/ptybox-home $H");
  EXPECT_NE(mount.exit, 0) << mount.Show();

  // State left in one session's home is not in the next session's.
  Observed leave = Run(session, "leave-state", "echo left > ~/state && cat ~/state");
  EXPECT_EQ(leave.text, "left") << leave.Show();
  const std::string next = OpenSession(*client_, Mode());
  ASSERT_FALSE(next.empty()) << daemon_->Log();
  Observed fresh = Run(next, "next-session-home", "ls -A ~/ ~/.config");
  EXPECT_EQ(fresh.text, "/run/ptybox-home/:\n.config\n\n/run/ptybox-home/.config:\nptybox")
      << fresh.Show();

  EXPECT_EQ(HostHomeEntries(), std::set<std::string>{"notes.txt"});
  EXPECT_EQ(ReadFile(home_ / "notes.txt"), "host notes\n");
}

INSTANTIATE_TEST_SUITE_P(Modes, HomeEscapeTest,
                         ::testing::Values("read-only", "workspace-write", "danger-full-access"),
                         ModeTestName);

}  // namespace
}  // namespace ptybox::testing
