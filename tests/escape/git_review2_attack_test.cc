// Second outside review of "Git for agents" (docs/security.md), now on by default: what a
// workspace-write session writes in its private git directory that the copy-back hands to the
// host's git. Each test fails while its hole is open:
//  - a gitlink entry in the session's index, naming a repository the session made inside the
//    workspace: the person's `git status` in their own repository then runs `git status` in the
//    session's repository, whose config (core.fsmonitor) is a command;
//  - a `refs/replace/<id>` ref: the host's git reads, shows and checks out the session's object
//    in place of the host's own under the host's id (checked objects, forged content);
//  - an index whose cache-tree (`TREE` extension) names another tree than its entries: the
//    person's `git commit` records the session's tree, not what `git diff --cached` showed;
//  - an index entry marked skip-worktree: the host's `git status` hides the session's change to
//    a tracked file and `git restore .` does not discard it;
//  - loose objects that inflate 1000-fold: the last copy-back, which terminal_close, `ptybox run`
//    and the daemon's shutdown wait for, is unbounded work;
//  - a 16 KiB pack whose delta makes a 1 GiB object: the host's index-pack, root's, holds it all
//    in memory, without bound, and the object is copied back.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>
#include <vector>

#include "tests/escape/escape_support.h"
#include "tests/escape/git_attack_support.h"
#include "tests/sandbox/process_runner.h"
#include "tests/support/files.h"

namespace ptybox::testing {
namespace {

using git_attack::HostGit;
using git_attack::kIdentity;
using git_attack::MakeRepository;
using git_attack::Slurp;

namespace fs = std::filesystem;
using sandbox::testing::RunProcess;
using sandbox::testing::RunResult;

// The session makes a repository `sub` in the workspace (after the launch's walk: it is the
// session's own, unprotected), sets its core.fsmonitor to a command, and stages it in the host
// repository's index as a gitlink (`git add sub`). The index passes SafeIndex (mode 160000, an
// ordinary path) and comes back. The person then runs `git status` in their own repository:
// git runs `git status` inside every gitlink with a `.git`, which reads the session's config and
// runs its command as the person.
TEST(GitReview2AttackTest, AGitlinkInTheIndexNeverRunsASessionRepositoryAtHostStatus) {
  git_attack::GitWriteSession git;
  auto& [daemon, ws, client, id] = git;
  ASSERT_NO_FATAL_FAILURE(MakeRepository(ws));
  TempDir host;
  ASSERT_EQ(::chmod(host.path().c_str(), 0777), 0);
  const fs::path marker = host.path() / "ran";
  ASSERT_NO_FATAL_FAILURE(git.OpenSession());
  const std::string work =
      std::string(kIdentity) +
      "git init -q sub && echo x > sub/x && git -C sub add x && git -C sub commit -qm s && "
      "git add sub 2>/dev/null && git -C sub config core.fsmonitor 'touch " +
      marker.string() + "; false' && git ls-files -s sub | cut -c1-6; echo staged=$?";
  Observed did = RunInSession(client, id, "workspace-write", "gitlink-index", work);
  std::cout << "  observed " << did.Show() << "\n";
  RunResult staged = HostGit(ws, {"ls-files", "-s"});
  std::cout << "  host ls-files -s: " << staged.out << "\n";
  fs::remove(marker);
  // The person looks at what the agent did, in their own repository.
  RunResult status = HostGit(ws, {"status", "--short"});
  std::cout << "  host status: " << status.exit_code << " " << status.out << status.err << "\n";
  RunResult diff = HostGit(ws, {"diff", "--cached", "--stat"});
  std::cout << "  host diff --cached: " << diff.out << diff.err << "\n";
  EXPECT_FALSE(fs::exists(marker))
      << "the host's `git status` in its own repository ran a command the session wrote in the "
         "config of a repository it made and staged as a gitlink\n"
      << daemon.Log();
}

// The same repository committed instead of only staged: the commit that adds the gitlink would
// reach the person's index at their next checkout (`git reset --hard`, `checkout main`), and their
// `git status` would run the session's command. The ref that names it never moves on the host;
// the person's checkout of it runs nothing. The control: the same session's plain commit comes
// back.
TEST(GitReview2AttackTest, ACommitAddingAGitlinkNeverMovesAHostRef) {
  git_attack::GitWriteSession git;
  auto& [daemon, ws, client, id] = git;
  ASSERT_NO_FATAL_FAILURE(MakeRepository(ws));
  TempDir host;
  ASSERT_EQ(::chmod(host.path().c_str(), 0777), 0);
  const fs::path marker = host.path() / "ran";
  ASSERT_NO_FATAL_FAILURE(git.OpenSession());
  const std::string work =
      std::string(kIdentity) +
      "git checkout -qb plain && echo p > p.txt && git add p.txt && git commit -qm plain && "
      "git checkout -q main && "
      "git init -q sub && echo x > sub/x && git -C sub add x && git -C sub commit -qm s && "
      "git add sub 2>/dev/null && git commit -qm with-sub && git -C sub config core.fsmonitor "
      "'touch " +
      marker.string() + "; false' && git rm -q --cached sub && echo committed";
  Observed did = RunInSession(client, id, "workspace-write", "gitlink-commit", work);
  std::cout << "  observed " << did.Show() << "\n";
  ASSERT_TRUE(did.Says("committed")) << did.Show();
  EXPECT_EQ(HostGit(ws, {"log", "-1", "--format=%s", "plain"}).out, "plain\n") << daemon.Log();
  EXPECT_EQ(HostGit(ws, {"log", "-1", "--format=%s", "main"}).out, "first\n")
      << "the commit adding a gitlink moved the host's main\n"
      << daemon.Log();
  // The person checks out what their main is, and looks.
  HostGit(ws, {"reset", "-q", "--hard", "main"});
  fs::remove(marker);
  HostGit(ws, {"status", "--short"});
  EXPECT_FALSE(fs::exists(marker)) << "the host's git ran the session's command";
  EXPECT_NE(daemon.Log().find("adds the gitlink"), std::string::npos) << daemon.Log();
}

// The session writes `refs/replace/<id of the host's a.txt blob>` naming its own blob `EVIL`
// (a well-formed ref to a well-formed object whose contents match its name: every check of the
// copy-back passes). The host's git then substitutes it wherever it reads that id: `cat-file`,
// `show`, `diff`, and the checkout that writes the person's worktree.
TEST(GitReview2AttackTest, AReplaceRefNeverSubstitutesTheHostsObjects) {
  git_attack::GitWriteSession git;
  auto& [daemon, ws, client, id] = git;
  ASSERT_NO_FATAL_FAILURE(MakeRepository(ws));
  const std::string blob = HostGit(ws, {"rev-parse", "HEAD:a.txt"}).out.substr(0, 40);
  const std::string head = HostGit(ws, {"rev-parse", "HEAD"}).out.substr(0, 40);
  ASSERT_NO_FATAL_FAILURE(git.OpenSession());
  const std::string work =
      std::string(kIdentity) +
      "E=$(printf 'EVIL\\n' | git hash-object -w --stdin) && git replace HEAD:a.txt $E && "
      "F=$(printf 'tree %s\\nauthor host <host@example.com> 0 +0000\\ncommitter host "
      "<host@example.com> 0 +0000\\n\\nFORGED\\n' $(git rev-parse 'HEAD^{tree}') | "
      "git hash-object -t commit -w --stdin) && git replace HEAD $F && "
      "git for-each-ref refs/replace | wc -l; echo replaced=$?";
  Observed did = RunInSession(client, id, "workspace-write", "replace-ref", work);
  std::cout << "  observed " << did.Show() << "\n";
  std::cout << "  host refs: " << HostGit(ws, {"for-each-ref"}).out << "\n";
  RunResult cat = HostGit(ws, {"cat-file", "blob", blob});
  std::cout << "  host cat-file " << blob << ": " << cat.out << cat.err << "\n";
  EXPECT_EQ(cat.out, "one\n") << "the host's git reads the session's blob under the host's id";
  RunResult log = HostGit(ws, {"log", "-1", "--format=%H %s", head});
  std::cout << "  host log " << head << ": " << log.out << "\n";
  EXPECT_EQ(log.out, head + " first\n")
      << "the host's git shows the session's commit under the host's commit id";
  // The person discards the agent's changes to a.txt: git writes the object it reads.
  fs::remove(ws / "a.txt");
  RunResult checkout = HostGit(ws, {"checkout", "--", "a.txt"});
  std::cout << "  host checkout: " << checkout.exit_code << checkout.err << "\n";
  EXPECT_EQ(Slurp(ws / "a.txt"), "one\n")
      << "the host's checkout wrote the session's content for the host's own blob\n"
      << daemon.Log();
}

// The session stages a harmless change (what the person reviews: `git diff --cached` reads the
// index's entries), then rewrites the index's cache-tree extension (`TREE`, which SafeIndex does
// not look at) so that its root names a tree the session wrote with other contents. git trusts a
// valid cache-tree whose object exists: the person's `git commit` records the session's tree,
// not what the index lists and the diff showed.
TEST(GitReview2AttackTest, TheHostsCommitRecordsWhatItsIndexLists) {
  git_attack::GitWriteSession git;
  auto& [daemon, ws, client, id] = git;
  ASSERT_NO_FATAL_FAILURE(MakeRepository(ws));
  std::ofstream(ws / ".escape" / "tree.py")
      << "import hashlib,sys\n"
         "good,evil=bytes.fromhex(sys.argv[1]),bytes.fromhex(sys.argv[2])\n"
         "d=open('.git/index','rb').read()[:-20]\n"
         "t=d.index(b'TREE')\n"
         "nl=d.index(b'\\n',t+8)\n"
         "assert d[nl+1:nl+21]==good\n"
         "d=d[:nl+1]+evil+d[nl+21:]\n"
         "open('.git/index','wb').write(d+hashlib.sha1(d).digest())\n";
  ASSERT_NO_FATAL_FAILURE(git.OpenSession());
  const std::string work =
      "echo EVIL > a.txt && git add a.txt && EVIL=$(git write-tree) && "
      "echo benign > a.txt && git add a.txt && GOOD=$(git write-tree) && "
      "python3 .escape/tree.py $GOOD $EVIL && git diff --cached --stat | tail -1; echo tree=$?";
  Observed did = RunInSession(client, id, "workspace-write", "cache-tree", work);
  std::cout << "  observed " << did.Show() << "\n";
  RunResult diff = HostGit(ws, {"diff", "--cached"});
  std::cout << "  host diff --cached:\n" << diff.out << "\n";
  RunResult listed = HostGit(ws, {"cat-file", "blob", ":a.txt"});
  std::cout << "  host index's a.txt: " << listed.out << "\n";
  // The person reviewed the staged change and commits it.
  RunResult commit = HostGit(ws, {"commit", "-qm", "reviewed"});
  std::cout << "  host commit: " << commit.exit_code << " " << commit.err << "\n";
  RunResult committed = HostGit(ws, {"cat-file", "blob", "HEAD:a.txt"});
  std::cout << "  host HEAD:a.txt: " << committed.out << committed.err << "\n";
  EXPECT_EQ(committed.out, listed.out)
      << "the host's commit recorded a tree the session chose, not what its index lists\n"
      << daemon.Log();
}

// The session changes a tracked file and marks it skip-worktree in its index (an extended flag
// SafeIndex does not look at; no sparse checkout is needed). The index comes back: the host's
// `git status` and `git diff` no longer show the change, and the person's `git restore .`
// (or `checkout -- .`, `stash`) discards everything but it: the session's edit stays, unseen.
TEST(GitReview2AttackTest, TheHostsGitStillSeesAndDiscardsEveryChangeTheSessionMade) {
  git_attack::GitWriteSession git;
  ASSERT_NO_FATAL_FAILURE(git.Open());
  auto& [daemon, ws, client, id] = git;
  const std::string work =
      "echo BACKDOOR >> a.txt && git update-index --skip-worktree a.txt && "
      "git status --porcelain | wc -l; echo hidden=$?";
  Observed did = RunInSession(client, id, "workspace-write", "skip-worktree", work);
  std::cout << "  observed " << did.Show() << "\n";
  RunResult status = HostGit(ws, {"status", "--porcelain"});
  std::cout << "  host status: [" << status.out << "]\n";
  EXPECT_EQ(status.out, " M a.txt\n")
      << "the host's `git status` does not show the session's change to a tracked file";
  // The person discards the agent's changes.
  RunResult restore = HostGit(ws, {"restore", "."});
  std::cout << "  host restore: " << restore.exit_code << " " << restore.err << "\n";
  EXPECT_EQ(Slurp(ws / "a.txt"), "one\n")
      << "the host's `git restore .` left the session's change in place\n"
      << daemon.Log();
}

// Loose objects that inflate far (zlib's ratio is about 1000:1) cost the session 1 MiB each and
// the copy-back a full inflate and hash of 1 GiB each, only to be refused at the end (their
// names are not their hashes), and again at every copy-back since they stay. 32 of them, left by
// a background job after the last send: `terminal_close` (and `ptybox run`'s exit, and the
// daemon's shutdown, which wait for the same last copy-back) is answered only after ~32 GiB of
// inflating and hashing. Nothing bounds the work of one copy-back.
TEST(GitReview2AttackTest, InflatingObjectsDoNotHoldTheCloseForLong) {
  git_attack::GitWriteSession git;
  auto& [daemon, ws, client, id] = git;
  ASSERT_NO_FATAL_FAILURE(MakeRepository(ws));
  std::ofstream(ws / ".escape" / "bomb.py")
      << "import os,zlib\n"
         "c=zlib.compressobj(9)\n"
         "out=[c.compress(b'blob 1073741824\\0')]\n"
         "z=bytes(1<<20)\n"
         "for i in range(1024): out.append(c.compress(z))\n"
         "out.append(c.flush())\n"
         "data=b''.join(out)\n"
         "os.makedirs('.git/objects/ab',exist_ok=True)\n"
         "for i in range(32): open('.git/objects/ab/%038x'%i,'wb').write(data)\n"
         "print(len(data))\n";
  ASSERT_NO_FATAL_FAILURE(git.OpenSession());
  const std::string work =
      "(python3 .escape/bomb.py > .escape/bomb.out 2>&1; touch .escape/made) >/dev/null 2>&1 & "
      "echo started";
  Observed did = RunInSession(client, id, "workspace-write", "inflate-bombs", work);
  ASSERT_TRUE(did.Says("started")) << did.Show();
  ASSERT_TRUE(git_attack::AwaitMade(ws, std::chrono::seconds(120))) << daemon.Log();
  std::cout << "  each object file: " << Slurp(ws / ".escape" / "bomb.out") << " bytes\n";
  const auto [closed, seconds] = git_attack::TimedClose(client, id, std::chrono::seconds(900));
  EXPECT_TRUE(closed.contains("result")) << closed.dump();
  // A close without git work is answered in well under a second; 10 s is ten times that and
  // more. Here (2 shared cores) the close took 120 s: 32 MiB of the session's objects.
  EXPECT_LT(seconds, 10) << "the session's objects held its close for " << seconds << " s\n"
                         << daemon.Log();
}

// A pack of 16 KiB: a 16 MiB blob of zeros and a delta against it whose result is 1 GiB (128
// copy instructions of 8 MiB: 256 bytes). The copy-back hands it to the host's `git index-pack`,
// run as the daemon's user (root here) with no memory bound: it holds the whole 1 GiB result in
// memory (1.07 GB resident, measured with `time -v`), and the ratio has no limit (16 GiB from the
// same 16 KiB, one such object per index-pack thread, one index-pack per session copying back).
// The pack is then accepted and its 1 GiB object written into the host's repository, where the
// person's git meets it again. git's own pack-objects never deltifies an object past
// core.bigFileThreshold (512 MiB): no honest pack has this shape.
TEST(GitReview2AttackTest, APackWhoseDeltaInflatesAThousandfoldIsNotIndexedUnbounded) {
  Daemon daemon(Daemon::Options{.extra_args = {}, .env = {"PTYBOX_GIT_WRITE=1"}});
  const fs::path ws = daemon.workspace();
  MakeRepository(ws);
  std::ofstream(ws / ".escape" / "delta.py")
      << "import zlib,hashlib,struct\n"
         "base=bytes(16<<20)\n"
         "def hdr(t,size):\n"
         "  b=[];c=(t<<4)|(size&15);size>>=4\n"
         "  while size: b.append(c|0x80);c=size&0x7f;size>>=7\n"
         "  b.append(c);return bytes(b)\n"
         "def varint(n):\n"
         "  b=[]\n"
         "  while True:\n"
         "    c=n&0x7f;n>>=7\n"
         "    if n: b.append(c|0x80)\n"
         "    else: b.append(c);return bytes(b)\n"
         "bid=hashlib.sha1(b'blob %d\\0'%len(base)+base).digest()\n"
         "delta=varint(len(base))+varint(1<<30)+bytes([0xC0,0x80])*128\n"
         "p=b'PACK'+struct.pack('>II',2,2)\n"
         "p+=hdr(3,len(base))+zlib.compress(base,9)\n"
         "p+=hdr(7,len(delta))+bid+zlib.compress(delta,9)\n"
         "h=hashlib.sha1(p).digest();p+=h\n"
         "open('.git/objects/pack/pack-'+h.hex()+'.pack','wb').write(p)\n"
         "print(len(p))\n";
  RpcClient client(daemon.socket());
  const std::string id = OpenSession(client, "workspace-write");
  ASSERT_FALSE(id.empty()) << daemon.Log();
  const auto start = std::chrono::steady_clock::now();
  Observed did = RunInSession(client, id, "workspace-write", "delta-bomb",
                              "python3 .escape/delta.py; echo made=$?");
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                      std::chrono::steady_clock::now() - start)
                      .count();
  std::cout << "  observed " << did.Show() << " in " << ms << " ms\n";
  RunResult packs = RunProcess({"/bin/sh", "-c", "ls -l " + (ws / ".git/objects/pack").string()});
  std::cout << "  host packs:\n" << packs.out << "\n";
  EXPECT_EQ(packs.out.find(".pack"), std::string::npos)
      << "a 16 KiB pack holding a 1 GiB object was indexed without bound and copied back\n"
      << daemon.Log();
}

}  // namespace
}  // namespace ptybox::testing
