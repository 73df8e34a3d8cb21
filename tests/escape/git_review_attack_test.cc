// Review attacks on "Git for agents" (docs/security.md): what a workspace-write session writes in
// its private git directory that the copy-back hands to the host's git. Each test fails while the
// hole is open: a crafted index whose entry is `.git/hooks/pre-commit` (the host's
// `git restore .` writes the hook, its next `git commit` runs it), and a pack whose session-made
// .idx names an object the host already has (the host's git then reads the session's content
// under the host's id; after the host's `git gc` the original is gone).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
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

// The session stages `xgit/hooks/pre-commit`, then renames the entry in its index's bytes to
// `.git/hooks/pre-commit` (checksum fixed): git reads such an index without complaint.
TEST(GitReviewAttackTest, AnIndexEntryUnderDotGitNeverBecomesAHostHook) {
  git_attack::GitWriteSession git;
  auto& [daemon, ws, client, id] = git;
  ASSERT_NO_FATAL_FAILURE(MakeRepository(ws));
  TempDir host;
  ASSERT_EQ(::chmod(host.path().c_str(), 0777), 0);
  const fs::path marker = host.path() / "ran";
  std::ofstream(ws / ".escape" / "index.py")
      << "import hashlib\n"
         "d=open('.git/index','rb').read()[:-20]\n"
         "d=d.replace(b'xgit/hooks/pre-commit', b'.git/hooks/pre-commit')\n"
         "open('.git/index','wb').write(d+hashlib.sha1(d).digest())\n";
  ASSERT_NO_FATAL_FAILURE(git.OpenSession());
  const std::string work = std::string(kIdentity) +
                           "mkdir -p xgit/hooks && printf '#!/bin/sh\\ntouch " + marker.string() +
                           "\\n' > xgit/hooks/pre-commit && chmod +x xgit/hooks/pre-commit && "
                           "git add xgit/hooks/pre-commit && rm -rf xgit && "
                           "python3 .escape/index.py && git ls-files | tr '\\n' ' '; echo done=$?";
  Observed did = RunInSession(client, id, "workspace-write", "craft-index", work);
  std::cout << "  observed " << did.Show() << "\n";
  RunResult files = HostGit(ws, {"ls-files"});
  std::cout << "  host ls-files: " << files.out << "\n";
  // The person discards the agent's changes, then commits.
  RunResult restore = HostGit(ws, {"restore", "."});
  std::cout << "  host restore: " << restore.exit_code << " " << restore.err << "\n";
  std::ofstream(ws / "a.txt") << "two\n";
  RunResult commit = HostGit(ws, {"commit", "-qam", "host"});
  std::cout << "  host commit: " << commit.exit_code << " " << commit.err << "\n";
  EXPECT_FALSE(fs::exists(ws / ".git" / "hooks" / "pre-commit"))
      << "the host's git wrote a hook from the session's index";
  EXPECT_FALSE(fs::exists(marker)) << "the host's git ran a hook the session wrote";
  std::cout << daemon.Log() << "\n";
}

// The session packs a forged commit and rewrites its .idx to name the host's HEAD commit.
TEST(GitReviewAttackTest, APackNeverReplacesAnObjectTheHostHas) {
  git_attack::GitWriteSession git;
  auto& [daemon, ws, client, id] = git;
  ASSERT_NO_FATAL_FAILURE(MakeRepository(ws));
  const std::string head = HostGit(ws, {"rev-parse", "HEAD"}).out.substr(0, 40);
  std::ofstream(ws / ".escape" / "forge.py")
      << "import hashlib,os,sys,struct\n"
         "f,h,p=sys.argv[1],sys.argv[2],sys.argv[3]\n"
         "d='.git/objects/pack/'\n"
         "i=open(d+'tmp-'+p+'.idx','rb').read()[:-20]\n"
         "i=bytearray(i.replace(bytes.fromhex(f),bytes.fromhex(h)))\n"
         "for b in range(256): i[8+4*b:12+4*b]=struct.pack('>I',int(b>=bytes.fromhex(h)[0]))\n"
         "i=bytes(i)\n"
         "open(d+'pack-'+p+'.idx','wb').write(i+hashlib.sha1(i).digest())\n"
         "os.rename(d+'tmp-'+p+'.pack',d+'pack-'+p+'.pack')\n"
         "os.unlink(d+'tmp-'+p+'.idx')\n";
  ASSERT_NO_FATAL_FAILURE(git.OpenSession());
  const std::string work =
      "H=$(git rev-parse HEAD); T=$(git rev-parse 'HEAD^{tree}'); "
      "F=$(printf 'tree %s\\nauthor evil <e@x> 0 +0000\\ncommitter evil <e@x> 0 +0000\\n\\n"
      "FORGED by the session\\n' $T | git hash-object -t commit -w --stdin); "
      "P=$(echo $F | git pack-objects -q .git/objects/pack/tmp); "
      "python3 .escape/forge.py $F $H $P; ls .git/objects/pack | tr '\\n' ' '; echo forged=$?";
  Observed did = RunInSession(client, id, "workspace-write", "forge-pack", work);
  std::cout << "  observed " << did.Show() << "\n";
  RunResult log = HostGit(ws, {"log", "-1", "--format=%s", head});
  std::cout << "  host log of " << head << ": " << log.out << log.err << "\n";
  EXPECT_EQ(log.out, "first\n") << "the host's git reads the session's content for its own id";
  RunResult gc = HostGit(ws, {"gc", "-q", "--prune=now"});
  RunResult after = HostGit(ws, {"log", "-1", "--format=%s", head});
  RunResult fsck = HostGit(ws, {"fsck"});
  std::cout << "  after host gc: log " << after.out << after.err << "  fsck " << fsck.exit_code
            << " " << fsck.out << fsck.err << "\n";
  EXPECT_EQ(fsck.exit_code, 0) << "the host's repository is corrupt after its own gc";
  // The control: a pack of the session's own new objects still comes back (no .rev needed).
  const std::string own = std::string(kIdentity) +
                          "rm -f .git/objects/pack/pack-*; echo n > n.txt && git add n.txt && "
                          "git commit -qm packed && git repack -q -d -l && "
                          "git count-objects -v | grep -c 'in-pack: [1-9]'";
  Observed packed = RunInSession(client, id, "workspace-write", "own-pack", own);
  std::cout << "  observed " << packed.Show() << "\n";
  EXPECT_EQ(HostGit(ws, {"log", "-1", "--format=%s", "main"}).out, "packed\n") << daemon.Log();
  RunResult fsck2 = HostGit(ws, {"fsck"});
  EXPECT_EQ(fsck2.exit_code, 0) << fsck2.Describe();
}

// A sparse file costs the session nothing; the copy-back writes every byte of it into the host.
TEST(GitReviewAttackTest, ASparseObjectDoesNotFillTheHostsDisk) {
  git_attack::GitWriteSession git;
  ASSERT_NO_FATAL_FAILURE(git.Open());
  auto& [daemon, ws, client, id] = git;
  const std::string work =
      "mkdir -p .git/objects/ab && truncate -s 1G .git/objects/ab/"
      "cdefcdefcdefcdefcdefcdefcdefcdefcdefcd && du -k .git/objects/ab; echo sparse=$?";
  const auto start = std::chrono::steady_clock::now();
  Observed did = RunInSession(client, id, "workspace-write", "sparse-object", work);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                      std::chrono::steady_clock::now() - start)
                      .count();
  std::cout << "  observed " << did.Show() << " in " << ms << " ms\n";
  const fs::path copied = ws / ".git/objects/ab/cdefcdefcdefcdefcdefcdefcdefcdefcdefcd";
  struct stat st {};
  const bool there = ::stat(copied.c_str(), &st) == 0;
  std::cout << "  host: " << (there ? std::to_string(st.st_blocks * 512 / 1024) : "absent")
            << " KiB allocated\n";
  EXPECT_TRUE(!there || st.st_blocks * 512 < (1 << 20)) << "1 GiB written into the host's .git";
}

// A packed-refs the copy-back refuses (here: hard-linked) must not read as every packed ref
// deleted: the host's refs stay.
TEST(GitReviewAttackTest, ARefusedPackedRefsDeletesNoHostRef) {
  git_attack::GitWriteSession git;
  auto& [daemon, ws, client, id] = git;
  ASSERT_NO_FATAL_FAILURE(MakeRepository(ws));
  ASSERT_EQ(HostGit(ws, {"tag", "v1"}).exit_code, 0);
  ASSERT_EQ(HostGit(ws, {"branch", "keep"}).exit_code, 0);
  ASSERT_EQ(HostGit(ws, {"pack-refs", "--all"}).exit_code, 0);
  ASSERT_NO_FATAL_FAILURE(git.OpenSession());
  Observed did = RunInSession(client, id, "workspace-write", "hardlink-packed-refs",
                              "ln .git/packed-refs .git/packed-refs-2; echo linked=$?");
  std::cout << "  observed " << did.Show() << "\n";
  EXPECT_EQ(HostGit(ws, {"tag"}).out, "v1\n") << daemon.Log();
  EXPECT_EQ(HostGit(ws, {"rev-parse", "--verify", "-q", "keep"}).exit_code, 0) << daemon.Log();
}

}  // namespace
}  // namespace ptybox::testing
