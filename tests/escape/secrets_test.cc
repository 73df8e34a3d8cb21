// Wall 3 of docs/security.md: secrets hidden. The daemon's HOME points at a scratch home
// (visible read-only inside, unlike /tmp) holding fake credentials; an operator policy hides
// one more host file and the repository file hides a file of the workspace. From inside, each
// read fails or finds nothing in both confined modes; danger-full-access reads them all (the
// control). No real host secret is involved.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

#include "tests/escape/walls_support.h"

namespace ptybox::testing {
namespace {

namespace fs = std::filesystem;

class SecretsTest : public ::testing::TestWithParam<std::string> {
 protected:
  SecretsTest()
      : home_(OutsideDir() / ("home-" + std::to_string(::getpid()) + "-" + Mode().substr(0, 2))),
        operator_secret_(OutsideDir() /
                         ("op-secret-" + std::to_string(::getpid()) + "-" + Mode().substr(0, 2))) {}
  void SetUp() override {
    // The scratch home must be visible inside (so not under /tmp): the build tree.
    if (::access(OutsideDir().c_str(), W_OK) != 0) {
      GTEST_SKIP() << OutsideDir() << " is not writable by this user: no scratch home to plant";
    }
    fs::remove_all(home_);
    Plant(home_ / ".ssh" / "id_ed25519", "FAKE-SSH-KEY");
    Plant(home_ / ".npmrc", "//registry.npmjs.org/:_authToken=FAKE-NPM-TOKEN");
    Plant(home_ / ".netrc", "machine example.com login u password FAKE-NETRC");
    Plant(home_ / ".aws" / "credentials", "aws_secret_access_key = FAKE-AWS");
    Plant(home_ / ".bash_history", "export TOKEN=FAKE-HISTORY");
    Plant(home_ / "notes.txt", "not a secret");
    Plant(operator_secret_, "FAKE-OPERATOR-SECRET");
    Plant(policy_.path() / "op.yaml",
          "version: 1\nhide: [~/.ssh, ~/.npmrc, ~/.netrc, ~/.aws, ~/.bash_history, " +
              operator_secret_.string() + "]\n");
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(home_, ec);
    fs::remove(operator_secret_, ec);
  }
  static void Plant(const fs::path& path, const std::string& text) {
    fs::create_directories(path.parent_path());
    std::ofstream(path) << text << "\n";
    // Readable by anyone (a root daemon's session runs as an unprivileged id): only the
    // hiding can keep these from the session, so the test sees that wall and no other.
    fs::permissions(path, fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read |
                              fs::perms::others_read);
  }
  [[nodiscard]] const std::string& Mode() const { return GetParam(); }
  [[nodiscard]] bool Confined() const { return Mode() != "danger-full-access"; }

  fs::path home_;
  fs::path operator_secret_;
  TempDir policy_;
};

TEST_P(SecretsTest, PlantedCredentialsAreHidden) {
  Daemon daemon(Daemon::Options{.extra_args = {"--policy", (policy_.path() / "op.yaml").string()},
                                .env = {"HOME=" + home_.string()}});
  PrepareWorkspace(daemon.workspace());
  Plant(daemon.workspace() / ".env", "FAKE-WORKSPACE-SECRET");
  std::ofstream(daemon.workspace() / ".ptybox.yaml") << "version: 1\nhide: [.env]\n";
  RpcClient client(daemon.socket());
  const std::string session = OpenSession(client, Mode());
  ASSERT_FALSE(session.empty()) << daemon.Log();
  auto run = [&](const std::string& name, const std::string& command) {
    return RunInSession(client, session, Mode(), name, command);
  };
  // A confined session's HOME is its private home (docs/sandbox.md); the daemon's home is
  // still there, read-only, at its own path: H names it.
  Observed home = run("home", "echo $HOME");
  EXPECT_EQ(home.text, Confined() ? "/run/ptybox-home" : home_.string()) << home.Show();
  const std::string h = "H=" + Quote(home_) + "; ";
  // Every planted secret, read as the shell would; the FAKE- prefix marks a leak.
  Observed read =
      run("read-secrets", h +
                              "cat $H/.ssh/id_ed25519 $H/.npmrc $H/.netrc $H/.aws/credentials "
                              "$H/.bash_history " +
                              Quote(operator_secret_) + " .env 2>&1 | grep -c FAKE-");
  Observed list = run("list-secret-dirs",
                      h + "ls -A $H/.ssh 2>/dev/null | wc -l; ls -A $H/.aws 2>/dev/null | wc -l");
  Observed other = run("read-ordinary", h + "cat $H/notes.txt");
  // An ordinary user's daemon hides its whole home but the roots, this file too: here (no root
  // in the home) the home is one empty read-only tmpfs, so nothing of it exists inside.
  const bool home_hidden_whole = Confined() && ::geteuid() != 0;
  if (home_hidden_whole) {
    EXPECT_TRUE(other.Says("No such file or directory")) << other.Show();
  } else {
    EXPECT_EQ(other.text, "not a secret") << other.Show();
  }
  if (Confined()) {
    EXPECT_EQ(read.text, "0") << read.Show();
    // The directories are empty, read-only tmpfs; the files /dev/null.
    EXPECT_EQ(Words(list.text), (std::vector<std::string>{"0", "0"})) << list.Show();
    Observed write = run("write-hidden-dir", h + "touch $H/.ssh/authorized_keys");
    EXPECT_EQ(write.exit, 1) << write.Show();
    EXPECT_TRUE(
        write.Says(home_hidden_whole ? "No such file or directory" : "Read-only file system"))
        << write.Show();
    Observed kind = run("hidden-file-kind", h + "stat -c %F $H/.npmrc .env");
    EXPECT_EQ(kind.text, home_hidden_whole
                             ? "stat: cannot statx '" + (home_ / ".npmrc").string() +
                                   "': No such file or directory\ncharacter special file"
                             : "character special file\ncharacter special file")
        << kind.Show();
    if (Mode() == "workspace-write") {
      // The covered workspace file cannot be replaced to uncover it for later sessions.
      Observed rm = run("remove-hidden", "rm -f .env");
      EXPECT_EQ(rm.exit, 1) << rm.Show();
      EXPECT_TRUE(rm.Says("Device or resource busy")) << rm.Show();
    }
  } else {
    EXPECT_EQ(read.text, "7") << read.Show();
  }
  // The host files are untouched.
  EXPECT_EQ(ReadFile(home_ / ".npmrc"), "//registry.npmjs.org/:_authToken=FAKE-NPM-TOKEN\n");
  EXPECT_EQ(ReadFile(daemon.workspace() / ".env"), "FAKE-WORKSPACE-SECRET\n");
}

// A hidden directory that holds a repository (`hide: [vault]` over vault/repo/.git): the cover
// hides the repository with the rest, so a workspace-write open goes ahead (it used to be
// refused: the check after the launch asked the covered repository to be a mount point), and
// nothing of the directory is in the session. A repository outside it stays read-only.
TEST_P(SecretsTest, AHiddenDirectoryHoldingARepositoryOpensAndStaysHidden) {
  Daemon daemon;
  PrepareWorkspace(daemon.workspace());
  Plant(daemon.workspace() / "vault" / "repo" / ".git" / "config", "[core] FAKE-VAULT-CONFIG");
  Plant(daemon.workspace() / "vault" / "key.txt", "FAKE-VAULT-KEY");
  Plant(daemon.workspace() / "lib" / ".git" / "config", "[core] lib");
  std::ofstream(daemon.workspace() / ".ptybox.yaml") << "version: 1\nhide: [vault]\n";
  RpcClient client(daemon.socket());
  const std::string session = OpenSession(client, Mode());
  ASSERT_FALSE(session.empty()) << daemon.Log();
  auto run = [&](const std::string& name, const std::string& command) {
    return RunInSession(client, session, Mode(), name, command);
  };
  Observed read =
      run("read-vault", "cat vault/key.txt vault/repo/.git/config 2>&1 | grep -c FAKE-");
  Observed list = run("list-vault", "ls -A vault | wc -l");
  if (Confined()) {
    EXPECT_EQ(read.text, "0") << read.Show();
    EXPECT_EQ(list.text, "0") << list.Show();
    Observed plant = run("plant-in-vault", "mkdir -p vault/repo/.git/hooks");
    EXPECT_EQ(plant.exit, 1) << plant.Show();
    EXPECT_TRUE(plant.Says("Read-only file system")) << plant.Show();
    Observed lib = run("write-lib-git", "echo '[core] fsmonitor = x' >> lib/.git/config");
    EXPECT_EQ(lib.exit, 1) << lib.Show();
    EXPECT_TRUE(lib.Says("Read-only file system")) << lib.Show();
  } else {
    EXPECT_EQ(read.text, "2") << read.Show();
    EXPECT_EQ(list.text, "2") << list.Show();
  }
  EXPECT_EQ(ReadFile(daemon.workspace() / "vault" / "repo" / ".git" / "config"),
            "[core] FAKE-VAULT-CONFIG\n");
  EXPECT_EQ(ReadFile(daemon.workspace() / "lib" / ".git" / "config"), "[core] lib\n");
}

TEST_P(SecretsTest, DefaultListHidesCredentialsWithoutAnyPolicy) {
  Daemon daemon(Daemon::Options{.extra_args = {}, .env = {"HOME=" + home_.string()}});
  PrepareWorkspace(daemon.workspace());
  RpcClient client(daemon.socket());
  const std::string session = OpenSession(client, Mode());
  ASSERT_FALSE(session.empty()) << daemon.Log();
  Observed read = RunInSession(client, session, Mode(), "read-default-secrets",
                               "H=" + Quote(home_) +
                                   "; cat $H/.ssh/id_ed25519 $H/.npmrc $H/.netrc "
                                   "$H/.aws/credentials $H/.bash_history 2>&1 | grep -c FAKE-");
  EXPECT_EQ(read.text, Confined() ? "0" : "5") << read.Show();
  if (Confined() && fs::exists("/etc/shadow")) {
    // /dev/null bound without device access (nodev): it cannot even be opened.
    Observed shadow = RunInSession(client, session, Mode(), "read-/etc/shadow", "cat /etc/shadow");
    EXPECT_EQ(shadow.exit, 1) << shadow.Show();
    EXPECT_EQ(shadow.text, "cat: /etc/shadow: Permission denied") << shadow.Show();
  }
}

// Credentials of agents, databases, registries and cloud tools the default list names since
// the third security round; no policy file at all.
TEST_P(SecretsTest, DefaultListHidesAgentDatabaseAndRegistryCredentials) {
  const std::vector<std::string> files = {".claude/.credentials.json",
                                          ".codex/auth.json",
                                          ".pgpass",
                                          ".my.cnf",
                                          ".huggingface/token",
                                          ".cache/huggingface/token",
                                          ".m2/settings.xml",
                                          ".gradle/gradle.properties",
                                          ".yarnrc",
                                          ".config/rclone/rclone.conf",
                                          ".config/github-copilot/apps.json",
                                          ".kube/config",
                                          ".config/gh/hosts.yml",
                                          ".docker/config.json",
                                          ".git-credentials"};
  std::string paths;
  for (const std::string& file : files) {
    Plant(home_ / file, "FAKE-" + file);
    paths += " $H/" + file;
  }
  Daemon daemon(Daemon::Options{.extra_args = {}, .env = {"HOME=" + home_.string()}});
  PrepareWorkspace(daemon.workspace());
  RpcClient client(daemon.socket());
  const std::string session = OpenSession(client, Mode());
  ASSERT_FALSE(session.empty()) << daemon.Log();
  Observed read = RunInSession(client, session, Mode(), "read-agent-secrets",
                               "H=" + Quote(home_) + "; cat" + paths + " 2>&1 | grep -c FAKE-");
  EXPECT_EQ(read.text, Confined() ? "0" : std::to_string(files.size())) << read.Show();
}

// An ordinary user's daemon runs its sessions as that user: every file of the user's home
// would be readable, listed or not. The home is hidden except the roots: a file no list names
// and a project beside the granted one are unreadable, the granted root (a writable root in
// the home) reads. A root daemon's sessions run as an id that owns nothing (wall 5), so the
// rule is not needed there.
TEST_P(SecretsTest, AnOrdinaryUsersHomeIsHiddenExceptTheRoots) {
  if (::geteuid() == 0) GTEST_SKIP() << "a root daemon's sessions own nothing in any home";
  Plant(home_ / "random-secret.txt", "FAKE-UNLISTED");
  Plant(home_ / "projects" / "other" / "key.txt", "FAKE-SIBLING");
  Plant(home_ / "projects" / "granted" / "data.txt", "granted data");
  Plant(policy_.path() / "roots.yaml",
        "version: 1\nwritable: [" + (home_ / "projects" / "granted").string() + "]\n");
  Daemon daemon(
      Daemon::Options{.extra_args = {"--policy", (policy_.path() / "roots.yaml").string()},
                      .env = {"HOME=" + home_.string()}});
  PrepareWorkspace(daemon.workspace());
  RpcClient client(daemon.socket());
  const std::string session = OpenSession(client, Mode());
  ASSERT_FALSE(session.empty()) << daemon.Log();
  Observed read = RunInSession(client, session, Mode(), "read-home",
                               "H=" + Quote(home_) +
                                   "; cat $H/random-secret.txt $H/projects/other/key.txt 2>&1 | "
                                   "grep -c FAKE-; cat $H/projects/granted/data.txt");
  EXPECT_EQ(read.text, Confined() ? "0\ngranted data" : "2\ngranted data") << read.Show();

  // Created by the host while the session runs: a credential of the default list, a file beside
  // the roots, a new directory. The home is hidden by directory, so none of them shows up.
  Plant(home_ / ".netrc", "FAKE-LATE-NETRC");
  Plant(home_ / "late-secret.txt", "FAKE-LATE");
  Plant(home_ / "projects" / "late" / "key.txt", "FAKE-LATE-DIR");
  Observed late = RunInSession(
      client, session, Mode(), "read-late",
      "H=" + Quote(home_) +
          "; cat $H/.netrc $H/late-secret.txt $H/projects/late/key.txt 2>&1 | grep -c FAKE-; "
          "ls -A $H/projects | tr '\\n' ,");
  EXPECT_EQ(late.text, Confined() ? "0\ngranted," : "3\ngranted,late,other,") << late.Show();
}

INSTANTIATE_TEST_SUITE_P(Modes, SecretsTest,
                         ::testing::Values("read-only", "workspace-write", "danger-full-access"),
                         ModeTestName);

}  // namespace
}  // namespace ptybox::testing
