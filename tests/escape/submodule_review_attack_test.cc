// Fourth outside review: the submodule protection of the twelfth round (docs/security.md,
// "Submodules that are not checked out"), attacked from inside real sessions in both confined
// modes, danger-full-access as the control. Each test failed while its hole was open. Closed in
// the same round: the huge `.git`, the warm pool (both), the session's own index (`../src`, deep
// gitlinks), a `.git` link in a submodule, a submodule's git directory in the workspace, a
// repository's `.git` linked into the workspace, and the submodule named from an index outside
// the roots. Still open, their tests DISABLED_ (kept out of
// the suite until fixed; docs/security.md lists them): a root inside a repository's worktree,
// and a submodule in another branch. The holes as found:
//  - a writable root inside a repository's worktree (`--writable ~/repo/sub`): the walk only
//    finds `.git` entries inside the roots, so the index of the repository above the root is
//    never read and its submodule `sub/lib` (not checked out) is neither protected nor pinned.
//    The session runs `git init sub/lib` and sets core.fsmonitor; the person's `git status` in
//    their repository runs it, as the person;
//  - a submodule in another branch of the person's repository: only the current index is read.
//    The session makes a repository at the path a host branch has a gitlink at; the person's
//    `git checkout <branch>` keeps it (git never touches a submodule's directory when it does not
//    recurse) and their `git status` runs its core.fsmonitor;
//  - a huge `.git` file: the launch maps each gitfile (and index) and copies all of it into
//    memory, without the bound the copy-back has (kGitIndexMax); a sparse 64 GiB `.git` a
//    session made makes the copy throw std::bad_alloc on the walk's thread, which nothing
//    catches: the next workspace-write launch of that workspace, by any owner, ends the daemon;
//  - the warm pool: a shell pre-started before the host's index listed a submodule is claimed by
//    the next open; the claim's check compares the `.git` mounts only, not the submodule
//    directories a launch would now protect, so the claimed session makes a repository there
//    (with PTYBOX_GIT_WRITE=1 too, after a `git submodule deinit`, which changes no index);
//  - a gitlink `../src` a session wrote into its own repository's index (no path is judged):
//    every later workspace-write session of the workspace, any owner's, finds `src` read-only;
//  - a gitfile's `gitdir:` is followed as the daemon (root), through links: the refusal for a
//    missing gitlink directory names the submodules of an index the session cannot read;
//  - 1,000 gitlinks 100 directories deep in a session's own index: the pins exhaust
//    fs.mount-max at every later launch (30 s, then "the sandbox could not start");
//  - a checked-out submodule whose `.git` is a symbolic link: counted as walked, never protected
//    (the walk records only a directory or a regular file); the session replaces it;
//  - a submodule whose git directory (its gitfile's target) is in the workspace outside any
//    `.git`: the launch reads its index there but never protects it; the session writes its config;
//  - (beside the submodules) a host repository whose `.git` is a link to a git directory in the
//    workspace: neither is protected; the session writes its config.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/escape/escape_support.h"
#include "tests/escape/git_attack_support.h"
#include "tests/sandbox/process_runner.h"
#include "tests/support/files.h"

namespace ptybox::testing {
namespace {

namespace fs = std::filesystem;
using git_attack::HostGit;
using sandbox::testing::RunProcess;
using sandbox::testing::RunResult;

constexpr const char* kGit = "/usr/bin/git";

class SubmoduleReviewAttackTest : public ::testing::TestWithParam<std::string> {
 protected:
  [[nodiscard]] const std::string& Mode() const { return GetParam(); }
  [[nodiscard]] bool Confined() const { return Mode() != "danger-full-access"; }

  // Runs `attack` (which ends by printing planted=$?) in the session, then the person's
  // `git status` in `repository`: in a confined mode nothing was planted and the fsmonitor
  // (`marker`) never ran (`what` says what would have run); in danger-full-access, the control,
  // it ran.
  void ExpectThePersonsStatusRunsNothing(RpcClient& client, const std::string& id,
                                         const std::string& name, const std::string& attack,
                                         const fs::path& repository, const fs::path& marker,
                                         const std::string& what) {
    Observed did = RunInSession(client, id, Mode(), name, attack);
    sandbox::testing::RunResult status = HostGit(repository, {"status", "--short"});
    std::cout << "  observed [" << Mode() << "] " << did.Show()
              << ", fsmonitor ran: " << fs::exists(marker) << "\n";
    ASSERT_TRUE(did.Says("planted=")) << did.Show();
    if (Confined()) {
      EXPECT_FALSE(did.Says("planted=0")) << did.Show();
      EXPECT_FALSE(fs::exists(marker)) << "the person's git status ran the fsmonitor " << what;
    } else {
      EXPECT_TRUE(fs::exists(marker)) << status.Describe();  // the control
    }
  }
};

constexpr const char* kGitlink = "160000,1111111111111111111111111111111111111111,";

// A process that has not ended (a zombie has).
bool Alive(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  const size_t close = text.rfind(')');
  return close != std::string::npos && close + 2 < text.size() && text[close + 2] != 'Z' &&
         text[close + 2] != 'X';
}

// The person's repository is ~/repo, with a submodule `sub/lib` that is not checked out; the
// session gets `--writable ~/repo/sub` (a monorepo's package). The repository above the root is
// the person's, and their `git status` there enters `sub/lib` once it holds a .git.
TEST_P(SubmoduleReviewAttackTest, ASubmoduleOfARepositoryAboveAWritableRootIsProtected) {
  TempDir host;
  TempDir markers;
  const fs::path repo = host.path() / "repo";
  const fs::path marker = markers.path() / "fsmonitor-ran";
  fs::create_directories(repo / "sub" / "lib");  // what git leaves for a submodule not checked out
  ASSERT_EQ(HostGit(repo, {"init", "-q"}).exit_code, 0);
  std::ofstream(repo / "sub" / "a.txt") << "a\n";
  ASSERT_EQ(
      HostGit(repo, {"update-index", "--add", "--cacheinfo", std::string(kGitlink) + "sub/lib"})
          .exit_code,
      0);
  ASSERT_EQ(HostGit(repo, {"add", "sub/a.txt"}).exit_code, 0);
  RunResult committed = HostGit(repo, {"commit", "-q", "-m", "a package with a submodule"});
  ASSERT_EQ(committed.exit_code, 0) << committed.Describe();
  Daemon daemon(Daemon::Options{.extra_args = {"--writable", (repo / "sub").string()}, .env = {}});
  RpcClient client(daemon.socket());
  const std::string id = OpenSession(client, Mode());
  ASSERT_FALSE(id.empty()) << daemon.Log();
  const std::string attack = "cd " + Quote(repo / "sub") +
                             " && echo wrote > a.txt; echo root=$?; git init -q lib >/dev/null "
                             "2>&1 && git -C lib config core.fsmonitor 'touch " +
                             marker.string() + "; false' 2>/dev/null; echo planted=$?";
  Observed did = RunInSession(client, id, Mode(), "plant-in-a-submodule-above-the-root", attack);
  std::cout << "  observed [" << Mode() << "] " << did.Show() << "\n";
  ASSERT_TRUE(did.Says("planted=")) << did.Show();
  RunResult status = HostGit(repo, {"status", "--short"});
  std::cout << "  observed [" << Mode() << "] host git status exit " << status.exit_code
            << ", fsmonitor ran: " << fs::exists(marker) << "\n";
  if (Mode() == "workspace-write") {
    EXPECT_TRUE(did.Says("root=0")) << "the writable root is writable: " << did.Show();
  }
  if (Confined()) {
    EXPECT_FALSE(did.Says("planted=0")) << did.Show();
    EXPECT_FALSE(fs::exists(marker))
        << "the person's git status in the repository above the writable root ran the "
           "fsmonitor of a repository the session made in its submodule's directory";
  } else {
    EXPECT_TRUE(did.Says("planted=0")) << did.Show();
    EXPECT_TRUE(fs::exists(marker)) << status.Describe();  // the control
  }
}

// The person's repository has a branch `feature` that adds a submodule `vendor/lib`; the current
// branch has none, so the launch protects nothing there. The session makes a repository at
// vendor/lib (the path is in the history it can read: `git ls-tree -r feature`). The person checks
// out `feature` (git keeps a submodule's directory as it is when it does not recurse) and looks
// at `git status`, which enters vendor/lib.
TEST_P(SubmoduleReviewAttackTest,
       DISABLED_ASubmoduleInAnotherBranchNeverBecomesASessionsRepository) {
  Daemon daemon;
  const fs::path ws = daemon.workspace();
  TempDir markers;
  const fs::path marker = markers.path() / "fsmonitor-ran";
  ASSERT_EQ(HostGit(ws, {"init", "-q"}).exit_code, 0);
  std::ofstream(ws / "a.txt") << "a\n";
  ASSERT_EQ(HostGit(ws, {"add", "a.txt"}).exit_code, 0);
  ASSERT_EQ(HostGit(ws, {"commit", "-q", "-m", "a"}).exit_code, 0);
  ASSERT_EQ(HostGit(ws, {"checkout", "-q", "-b", "feature"}).exit_code, 0);
  ASSERT_EQ(
      HostGit(ws, {"update-index", "--add", "--cacheinfo", std::string(kGitlink) + "vendor/lib"})
          .exit_code,
      0);
  ASSERT_EQ(HostGit(ws, {"commit", "-q", "-m", "a submodule"}).exit_code, 0);
  RunResult back = HostGit(ws, {"checkout", "-q", "-"});
  ASSERT_EQ(back.exit_code, 0) << back.Describe();
  ASSERT_FALSE(fs::exists(ws / "vendor"));
  RpcClient client(daemon.socket());
  const std::string id = OpenSession(client, Mode());
  ASSERT_FALSE(id.empty()) << daemon.Log();
  const std::string attack =
      "p=$(git ls-tree -r feature | awk '$1 == \"160000\" {print $4}'); echo path=$p; "
      "mkdir -p \"$p\" 2>/dev/null && git init -q \"$p\" >/dev/null 2>&1 && git -C \"$p\" config "
      "core.fsmonitor 'touch " +
      marker.string() + "; false' 2>/dev/null; echo planted=$?";
  Observed did = RunInSession(client, id, Mode(), "plant-at-another-branchs-submodule", attack);
  std::cout << "  observed [" << Mode() << "] " << did.Show() << "\n";
  ASSERT_TRUE(did.Says("planted=")) << did.Show();
  RunResult checkout = HostGit(ws, {"checkout", "-q", "feature"});
  RunResult status = HostGit(ws, {"status", "--short"});
  std::cout << "  observed [" << Mode() << "] host checkout exit " << checkout.exit_code
            << ", status exit " << status.exit_code << ", fsmonitor ran: " << fs::exists(marker)
            << "\n";
  if (Confined()) {
    EXPECT_FALSE(did.Says("planted=0") && fs::exists(marker))
        << "the person's checkout of their own branch and git status ran the fsmonitor of a "
           "repository the session made at that branch's submodule: "
        << did.Show();
    EXPECT_FALSE(fs::exists(marker)) << checkout.Describe() << status.Describe();
  } else {
    EXPECT_TRUE(did.Says("planted=0")) << did.Show();
    EXPECT_TRUE(fs::exists(marker)) << status.Describe();  // the control
  }
}

// A session makes a sparse 64 GiB file named .git (no disk spent). At the next workspace-write
// launch of the workspace the daemon's walk records it as a gitfile and maps and copies all of
// it to read its `gitdir:` line. Whatever the session did, the daemon must still serve: the
// launch may be refused (with a message) or started, never the end of every session.
TEST_P(SubmoduleReviewAttackTest, AHugeGitfileNeverEndsTheDaemon) {
  Daemon daemon;
  const fs::path ws = daemon.workspace();
  RpcClient client(daemon.socket());
  const std::string id = OpenSession(client, Mode());
  ASSERT_FALSE(id.empty()) << daemon.Log();
  Observed did = RunInSession(client, id, Mode(), "huge-gitfile",
                              "mkdir -p big 2>/dev/null && truncate -s 64G big/.git 2>/dev/null; "
                              "echo made=$?");
  std::cout << "  observed [" << Mode() << "] " << did.Show() << "\n";
  ASSERT_TRUE(did.Says("made=")) << did.Show();
  if (Mode() == "read-only") {
    EXPECT_FALSE(did.Says("made=0")) << did.Show();
    return;
  }
  ASSERT_TRUE(did.Says("made=0")) << did.Show();
  // Another owner (a connection of its own) opens a workspace-write session in the workspace.
  RpcClient other(daemon.socket());
  Json set = other.Call("policy_set_mode", Json{{"mode", "workspace-write"}});
  ASSERT_TRUE(set.contains("result")) << set.dump();
  Json opened;
  try {
    opened = other.Call("terminal_open", Json::object(), std::chrono::seconds(120));
  } catch (const std::exception& e) {
    opened = Json{{"error", {{"message", e.what()}}}};
  }
  std::cout << "  observed [" << Mode() << "] next open: " << opened.dump().substr(0, 300) << "\n";
  // The daemon still answers, on that connection and on a new one.
  bool answers = false;
  try {
    RpcClient third(daemon.socket());
    answers = third.Call("policy_set_mode", Json{{"mode", "read-only"}}).contains("result");
  } catch (const std::exception& e) {
    std::cout << "  observed [" << Mode() << "] a new connection: " << e.what() << "\n";
  }
  const std::string log = daemon.Log();
  std::cout << "  observed [" << Mode()
            << "] daemon log ends: " << log.substr(log.size() > 300 ? log.size() - 300 : 0) << "\n";
  EXPECT_TRUE(answers) << "the daemon ended at the launch: " << log;
  EXPECT_TRUE(Alive(daemon.pid())) << log;
  if (opened.contains("error")) {
    EXPECT_NE(opened["error"]["message"].get<std::string>().find("big/.git"), std::string::npos)
        << "a refusal names the file: " << opened.dump();
  }
}

// The warm pool: a shell pre-started before the host's repository listed a submodule is claimed
// by the next open. The claim's check compares the repositories' `.git` mounts only, never the
// submodule directories the launch would now protect and pin, so the claimed session can
// `git init` the new submodule's directory and set core.fsmonitor; the person's `git status`
// runs it. (A session launched after the change, without the pool, is refused this.)
TEST_P(SubmoduleReviewAttackTest, ASubmoduleAddedBeforeAPooledShellIsClaimedIsProtectedInIt) {
  TempDir policy_dir;
  TempDir markers;
  const fs::path marker = markers.path() / "fsmonitor-ran";
  const fs::path operator_policy = policy_dir.path() / "operator.yaml";
  std::ofstream(operator_policy) << "version: 1\nlimits:\n  warmShells: 1\n";
  Daemon daemon(Daemon::Options{.extra_args = {"--policy", operator_policy.string()},
                                .env = {"PTYBOX_LOG=info"}});
  const fs::path ws = daemon.workspace();
  ASSERT_EQ(HostGit(ws, {"init", "-q"}).exit_code, 0);
  std::ofstream(ws / "a.txt") << "a\n";
  ASSERT_EQ(HostGit(ws, {"add", "a.txt"}).exit_code, 0);
  ASSERT_EQ(HostGit(ws, {"commit", "-q", "-m", "a"}).exit_code, 0);
  RpcClient client(daemon.socket());
  const std::string first = OpenSession(client, Mode());
  ASSERT_FALSE(first.empty()) << daemon.Log();
  const auto guard = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (Confined() && Count(daemon.Log(), "a pre-started shell is ready") < 1 &&
         std::chrono::steady_clock::now() < guard) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  // The pool pre-starts confined shells only: the control launches its own.
  if (Confined()) {
    ASSERT_GE(Count(daemon.Log(), "a pre-started shell is ready"), 1u) << daemon.Log();
  }
  // The person's repository now lists a submodule that is not checked out (a pull that added
  // one, `git submodule add` then `deinit`): its directory is empty.
  fs::create_directories(ws / "sub");
  ASSERT_EQ(HostGit(ws, {"update-index", "--add", "--cacheinfo", std::string(kGitlink) + "sub"})
                .exit_code,
            0);
  ASSERT_EQ(HostGit(ws, {"commit", "-q", "-m", "a submodule"}).exit_code, 0);
  Json opened = client.Call("terminal_open", Json::object());
  ASSERT_TRUE(opened.contains("result")) << opened.dump();
  const std::string id = opened["result"]["sessionId"].get<std::string>();
  const bool pooled = daemon.Log().find("served by a pre-started shell") != std::string::npos;
  const std::string attack =
      "git init -q sub >/dev/null 2>&1 && git -C sub config core.fsmonitor "
      "'touch " +
      marker.string() + "; false' 2>/dev/null; echo planted=$?";
  Observed did = RunInSession(client, id, Mode(), "plant-in-a-pooled-shell", attack);
  RunResult status = HostGit(ws, {"status", "--short"});
  std::cout << "  observed [" << Mode() << "] pooled " << pooled << ", " << did.Show()
            << ", fsmonitor ran: " << fs::exists(marker) << "\n";
  ASSERT_TRUE(did.Says("planted=")) << did.Show();
  if (Confined()) {
    EXPECT_FALSE(did.Says("planted=0")) << "pooled " << pooled << ": " << did.Show();
    EXPECT_FALSE(fs::exists(marker))
        << "the person's git status ran the fsmonitor of a repository a pooled session made in "
           "a submodule's directory listed before the open";
  } else {
    EXPECT_TRUE(fs::exists(marker)) << status.Describe();  // the control
  }
}

// One owner's session makes a repository of its own and writes its index by hand with a gitlink
// `../src` (a path the host's git never writes, and never enters from that repository). The
// launch reads every found repository's index without judging the paths, so at every later
// workspace-write launch of the workspace, by any owner, `src` (a directory of the workspace) is
// protected read-only and pinned, silently: another owner's session cannot write its own files.
TEST_P(SubmoduleReviewAttackTest, ASessionsOwnIndexNeverMakesAnotherOwnersDirectoryReadOnly) {
  Daemon daemon;
  const fs::path ws = daemon.workspace();
  fs::create_directories(ws / "src");
  std::ofstream(ws / "src" / "f") << "x\n";
  RpcClient client(daemon.socket());
  const std::string id = OpenSession(client, Mode());
  ASSERT_FALSE(id.empty()) << daemon.Log();
  const std::string attack =
      "git init -q evil >/dev/null 2>&1 && git -C evil update-index --add --cacheinfo " +
      std::string(kGitlink) +
      "xx/src 2>/dev/null && python3 -c \"import hashlib; p='evil/.git/index'; "
      "b=open(p,'rb').read()[:-20].replace(b'xx/src',b'../src'); "
      "open(p,'wb').write(b+hashlib.sha1(b).digest())\" 2>/dev/null; echo made=$?";
  Observed did = RunInSession(client, id, Mode(), "gitlink-dot-dot", attack);
  std::cout << "  observed [" << Mode() << "] " << did.Show() << "\n";
  ASSERT_TRUE(did.Says("made=")) << did.Show();
  if (Mode() == "read-only") {
    EXPECT_FALSE(did.Says("made=0")) << did.Show();
    return;
  }
  ASSERT_TRUE(did.Says("made=0")) << did.Show();
  // Another owner's workspace-write session writes a file of the workspace.
  RpcClient other(daemon.socket());
  const std::string theirs = OpenSession(other, "workspace-write");
  ASSERT_FALSE(theirs.empty()) << daemon.Log();
  Observed wrote = RunInSession(other, theirs, "workspace-write", "write-src",
                                "echo y >> src/f; echo wrote=$?; mv src src-moved; echo moved=$?");
  std::cout << "  observed [" << Mode() << "] other owner: " << wrote.Show() << "\n";
  EXPECT_TRUE(wrote.Says("wrote=0"))
      << "a gitlink `../src` in an index a session wrote made src read-only for another owner's "
         "workspace-write session: "
      << wrote.Show();
  EXPECT_TRUE(wrote.Says("moved=0")) << wrote.Show();
}

// A root daemon reads the index a gitfile names as root, following links, wherever it is: a
// session of the workspace's owner (uid 1000) writes `evil/.git` as `gitdir: <a 0700 root
// directory>`, which it cannot read itself. At the next workspace-write launch the refusal
// (the gitlink's directory is missing) names the submodules of that root-only index.
TEST_P(SubmoduleReviewAttackTest, AGitfileNeverReadsAnIndexTheSessionCannotRead) {
  if (::geteuid() != 0) {
    GTEST_SKIP() << "needs root (a root daemon reads as root; an ordinary user's daemon reads "
                    "only what its sessions can)";
  }
  constexpr uid_t kWorkspaceOwner = 1000;
  TempDir host;
  const fs::path private_repo = host.path() / "private";
  fs::create_directories(private_repo);
  ASSERT_EQ(HostGit(private_repo, {"init", "-q"}).exit_code, 0);
  ASSERT_EQ(HostGit(private_repo, {"update-index", "--add", "--cacheinfo",
                                   std::string(kGitlink) + "acme-payroll-2027"})
                .exit_code,
            0);
  ASSERT_EQ(::chmod(private_repo.c_str(), 0700), 0);
  Daemon daemon;
  const fs::path ws = daemon.workspace();
  ASSERT_EQ(::chown(ws.c_str(), kWorkspaceOwner, kWorkspaceOwner), 0);
  RpcClient client(daemon.socket());
  const std::string id = OpenSession(client, Mode());
  ASSERT_FALSE(id.empty()) << daemon.Log();
  const std::string git_dir = (private_repo / ".git").string();
  Observed did = RunInSession(client, id, Mode(), "gitfile-to-root-only",
                              "cat " + git_dir +
                                  "/index >/dev/null 2>&1; echo read=$?; mkdir -p "
                                  "evil 2>/dev/null && echo 'gitdir: " +
                                  git_dir + "' > evil/.git 2>/dev/null; echo made=$?");
  std::cout << "  observed [" << Mode() << "] " << did.Show() << "\n";
  ASSERT_TRUE(did.Says("made=")) << did.Show();
  if (!Confined()) {
    // The control: a danger-full-access session runs as the daemon's user and reads it itself.
    EXPECT_TRUE(did.Says("read=0")) << did.Show();
    return;
  }
  EXPECT_FALSE(did.Says("read=0")) << "the session reads it itself";
  if (!did.Says("made=0")) return;  // read-only: nothing written
  Json set = client.Call("policy_set_mode", Json{{"mode", "workspace-write"}});
  ASSERT_TRUE(set.contains("result")) << set.dump();
  Json opened = client.Call("terminal_open", Json::object());
  std::cout << "  observed [" << Mode() << "] next open: " << opened.dump().substr(0, 400) << "\n";
  EXPECT_EQ(opened.dump().find("acme-payroll-2027"), std::string::npos)
      << "the launch read a root-only index for the session's owner and named its submodules: "
      << opened.dump();
}

// A session's own repository lists 1,000 gitlinks (the cap), each 100 directories deep, each
// directory made: every later workspace-write launch of the workspace pins each submodule
// directory and every one above it, over 100,000 mounts, past fs.mount-max: the launch fails
// after about 30 s with "the sandbox could not start ... run ptybox doctor". Another owner's
// open must be started, or refused with a message that says what is wrong and where.
TEST_P(SubmoduleReviewAttackTest, ASessionsDeepGitlinksNeverExhaustAnotherOwnersMounts) {
  if (Mode() != "workspace-write") {
    GTEST_SKIP() << "the index is made by a workspace-write session; the others cannot write it "
                    "(read-only) or are not the wall (danger-full-access writes anything)";
  }
  Daemon daemon;
  RpcClient client(daemon.socket());
  const std::string id = OpenSession(client, Mode());
  ASSERT_FALSE(id.empty()) << daemon.Log();
  const std::string attack =
      "git init -q evil >/dev/null 2>&1 && (cd evil && python3 -c \"import os, subprocess as s; "
      "ps = ['c%d/' % i + '/'.join(['d'] * 99) for i in range(1000)]; "
      "[os.makedirs(p) for p in ps]; "
      "s.run(['git', 'update-index', '--index-info'], check=True, input=''.join("
      "'160000 1111111111111111111111111111111111111111\\t' + p + '\\n' for p in "
      "ps).encode())\"); echo made=$?";
  Observed did = RunInSession(client, id, Mode(), "deep-gitlinks", attack);
  std::cout << "  observed [" << Mode() << "] " << did.Show().substr(0, 200) << "\n";
  ASSERT_TRUE(did.Says("made=0")) << did.Show();
  RpcClient other(daemon.socket());
  Json set = other.Call("policy_set_mode", Json{{"mode", "workspace-write"}});
  ASSERT_TRUE(set.contains("result")) << set.dump();
  // The launch walks 100,000 directories before it refuses: on a busy machine that can take
  // longer than the default startup bound (seen with three suites at once), which is not what is
  // tested here.
  Json opened = other.Call("terminal_open", Json{{"timeoutMs", 240000}}, std::chrono::seconds(300));
  std::cout << "  observed [" << Mode() << "] other owner's open: " << opened.dump().substr(0, 400)
            << "\n";
  if (opened.contains("error")) {
    const std::string message = opened["error"].value("message", "");
    EXPECT_NE(message.find("submodule"), std::string::npos)
        << "the launch failed without saying why (the session's gitlinks): " << message;
    EXPECT_EQ(message.find("ptybox doctor"), std::string::npos) << message;
  }
}

// A checked-out submodule `libs/foo` in the workspace, made by `git submodule add` from a local
// source; `finish` then rearranges its `.git` on the host.
void MakeSubmodule(const fs::path& host, const fs::path& ws) {
  const fs::path source = host / "source";
  fs::create_directories(source);
  ASSERT_EQ(HostGit(source, {"init", "-q"}).exit_code, 0);
  std::ofstream(source / "lib.txt") << "lib\n";
  ASSERT_EQ(HostGit(source, {"add", "lib.txt"}).exit_code, 0);
  ASSERT_EQ(HostGit(source, {"commit", "-q", "-m", "lib"}).exit_code, 0);
  ASSERT_EQ(HostGit(ws, {"init", "-q"}).exit_code, 0);
  RunResult added = HostGit(ws, {"-c", "protocol.file.allow=always", "submodule", "add", "-q",
                                 source.string(), "libs/foo"});
  ASSERT_EQ(added.exit_code, 0) << added.Describe();
  ASSERT_EQ(HostGit(ws, {"commit", "-q", "-m", "with a submodule"}).exit_code, 0);
}

// The checked-out submodule's `.git` is a symbolic link to its git directory (as tools that
// keep git directories apart make it; git follows it). The launch counts the submodule as
// walked because something named .git is there, but the walk records only a directory or a
// regular file: nothing is protected, and the session replaces the link with a repository of
// its own, which the person's `git status` enters.
TEST_P(SubmoduleReviewAttackTest, ASubmoduleWhoseGitIsALinkNeverBecomesASessionsRepository) {
  Daemon daemon;
  const fs::path ws = daemon.workspace();
  TempDir host;
  TempDir markers;
  const fs::path marker = markers.path() / "fsmonitor-ran";
  MakeSubmodule(host.path(), ws);
  fs::remove(ws / "libs" / "foo" / ".git");
  fs::create_directory_symlink("../../.git/modules/libs/foo", ws / "libs" / "foo" / ".git");
  RunResult before = HostGit(ws, {"status", "--short"});
  ASSERT_EQ(before.exit_code, 0) << before.Describe();
  RpcClient client(daemon.socket());
  const std::string id = OpenSession(client, Mode());
  ASSERT_FALSE(id.empty()) << daemon.Log();
  const std::string attack =
      "rm libs/foo/.git 2>/dev/null; git init -q libs/foo >/dev/null 2>&1 && git -C libs/foo "
      "config core.fsmonitor 'touch " +
      marker.string() + "; false' 2>/dev/null; echo planted=$?";
  ExpectThePersonsStatusRunsNothing(client, id, "replace-a-linked-submodule-git", attack, ws,
                                    marker,
                                    "of a repository the session put in a submodule's place");
}

// The checked-out submodule's git directory lies in the workspace but outside any `.git`
// (`gitdirs/foo`, its gitfile `gitdir: ../../gitdirs/foo`, as a separate git directory is
// kept). The launch follows the gitfile to read the index there but protects only entries named
// .git: the session writes `gitdirs/foo/config`, and the person's `git status` in the
// superproject enters libs/foo and runs it.
TEST_P(SubmoduleReviewAttackTest, ASubmodulesGitDirectoryInTheWorkspaceIsProtected) {
  Daemon daemon;
  const fs::path ws = daemon.workspace();
  TempDir host;
  TempDir markers;
  const fs::path marker = markers.path() / "fsmonitor-ran";
  MakeSubmodule(host.path(), ws);
  fs::create_directories(ws / "gitdirs");
  fs::rename(ws / ".git" / "modules" / "libs" / "foo", ws / "gitdirs" / "foo");
  std::ofstream(ws / "libs" / "foo" / ".git", std::ios::trunc) << "gitdir: ../../gitdirs/foo\n";
  ASSERT_EQ(RunProcess({kGit, "config", "-f", (ws / "gitdirs" / "foo" / "config").string(),
                        "core.worktree", "../../libs/foo"})
                .exit_code,
            0);
  RunResult before = HostGit(ws, {"status", "--short"});
  ASSERT_EQ(before.exit_code, 0) << before.Describe();
  RpcClient client(daemon.socket());
  const std::string id = OpenSession(client, Mode());
  ASSERT_FALSE(id.empty()) << daemon.Log();
  const std::string attack = "git config -f gitdirs/foo/config core.fsmonitor 'touch " +
                             marker.string() + "; false' 2>/dev/null; echo planted=$?";
  ExpectThePersonsStatusRunsNothing(client, id, "write-a-submodules-git-directory", attack, ws,
                                    marker, "the session wrote in a submodule's git directory");
}

// The person's repository `proj` keeps its git directory apart, in the workspace
// (`proj/.git -> ../store/proj.git`, as tools that share git directories lay them out). The walk
// never follows a linked .git and never finds `store/proj.git` (not named .git): the session
// writes its config, and the person's `git status` in proj runs it. (Not a submodule: the
// "every repository's .git" wall itself.)
TEST_P(SubmoduleReviewAttackTest, AHostRepositoryWhoseGitIsALinkIntoTheWorkspaceIsProtected) {
  Daemon daemon;
  const fs::path ws = daemon.workspace();
  TempDir markers;
  const fs::path marker = markers.path() / "fsmonitor-ran";
  const fs::path proj = ws / "proj";
  fs::create_directories(proj);
  fs::create_directories(ws / "store");
  ASSERT_EQ(HostGit(proj, {"init", "-q"}).exit_code, 0);
  std::ofstream(proj / "p.txt") << "p\n";
  ASSERT_EQ(HostGit(proj, {"add", "p.txt"}).exit_code, 0);
  ASSERT_EQ(HostGit(proj, {"commit", "-q", "-m", "p"}).exit_code, 0);
  fs::rename(proj / ".git", ws / "store" / "proj.git");
  fs::create_directory_symlink("../store/proj.git", proj / ".git");
  RunResult before = HostGit(proj, {"status", "--short"});
  ASSERT_EQ(before.exit_code, 0) << before.Describe();
  RpcClient client(daemon.socket());
  const std::string id = OpenSession(client, Mode());
  ASSERT_FALSE(id.empty()) << daemon.Log();
  const std::string attack = "git config -f store/proj.git/config core.fsmonitor 'touch " +
                             marker.string() + "; false' 2>/dev/null; echo planted=$?";
  ExpectThePersonsStatusRunsNothing(client, id, "write-a-linked-git-directory", attack, proj,
                                    marker,
                                    "the session wrote in its repository's linked git directory");
}

// The same claim with Git for agents on (PTYBOX_GIT_WRITE=1, whose claim also requires the
// host's HEAD, refs and index unchanged): the pooled shell started while `libs/foo` was checked
// out; the person then runs `git submodule deinit libs/foo` (index and refs unchanged, the
// directory left empty). The claim still compares only the `.git` mounts, so the claimed session
// makes a repository in the now unpopulated submodule.
TEST_P(SubmoduleReviewAttackTest, ASubmoduleDeinitedBeforeAPooledShellIsClaimedIsProtectedInIt) {
  TempDir policy_dir;
  TempDir markers;
  TempDir host;
  const fs::path marker = markers.path() / "fsmonitor-ran";
  const fs::path operator_policy = policy_dir.path() / "operator.yaml";
  std::ofstream(operator_policy) << "version: 1\nlimits:\n  warmShells: 1\n";
  Daemon daemon(Daemon::Options{.extra_args = {"--policy", operator_policy.string()},
                                .env = {"PTYBOX_LOG=info", "PTYBOX_GIT_WRITE=1"}});
  const fs::path ws = daemon.workspace();
  MakeSubmodule(host.path(), ws);
  RpcClient client(daemon.socket());
  const std::string first = OpenSession(client, Mode());
  ASSERT_FALSE(first.empty()) << daemon.Log();
  const auto guard = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (Confined() && Count(daemon.Log(), "a pre-started shell is ready") < 1 &&
         std::chrono::steady_clock::now() < guard) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (Confined()) {
    ASSERT_GE(Count(daemon.Log(), "a pre-started shell is ready"), 1u) << daemon.Log();
  }
  RunResult deinit = HostGit(ws, {"submodule", "deinit", "-q", "libs/foo"});
  ASSERT_EQ(deinit.exit_code, 0) << deinit.Describe();
  ASSERT_FALSE(fs::exists(ws / "libs" / "foo" / ".git"));
  Json opened = client.Call("terminal_open", Json::object());
  ASSERT_TRUE(opened.contains("result")) << opened.dump();
  const std::string id = opened["result"]["sessionId"].get<std::string>();
  const bool pooled = daemon.Log().find("served by a pre-started shell") != std::string::npos;
  const std::string attack =
      "git init -q libs/foo >/dev/null 2>&1 && git -C libs/foo config core.fsmonitor 'touch " +
      marker.string() + "; false' 2>/dev/null; echo planted=$?";
  Observed did = RunInSession(client, id, Mode(), "plant-in-a-deinited-submodule", attack);
  RunResult status = HostGit(ws, {"status", "--short"});
  std::cout << "  observed [" << Mode() << "] pooled " << pooled << ", " << did.Show()
            << ", fsmonitor ran: " << fs::exists(marker) << "\n";
  ASSERT_TRUE(did.Says("planted=")) << did.Show();
  if (Confined()) {
    EXPECT_FALSE(did.Says("planted=0")) << "pooled " << pooled << ": " << did.Show();
    EXPECT_FALSE(fs::exists(marker)) << "the person's git status ran the fsmonitor of a "
                                        "repository a pooled session made in a submodule "
                                        "directory emptied before the open";
  } else {
    EXPECT_TRUE(fs::exists(marker)) << status.Describe();  // the control
  }
}

INSTANTIATE_TEST_SUITE_P(Modes, SubmoduleReviewAttackTest,
                         ::testing::Values("read-only", "workspace-write", "danger-full-access"),
                         ModeTestName);

}  // namespace
}  // namespace ptybox::testing
