// Twenty-first outside review of "Git for agents" (docs/security.md; review 28 of the project), on
// 7426273. Each test asserts a goal and fails while the hole is open:
//  (a) A refused loose object is judged again, and copied whole into the host's `.git` again
//      (written and fsync'd as `objects/<xx>/<name>.lock`), after a plain `mv` (goal 4; goal 2's
//      spirit: the person's disk takes it). Review 27 found a `touch` did it; its fix keys a
//      judged file by name, device, inode and size (FileKey), and the name is the session's to
//      change at no cost: a rename within objects/<xx>/ keeps the inode and the size, writes no
//      data, and makes a new key. A session that keeps junk loose objects (random bytes, up to
//      kGitObjectFileMax = 4 GiB each, up to kLooseObjectsPerCopyBack = 4,096 per copy-back) and
//      renames them to other well-formed names before each send makes every copy-back read and
//      write all of them again into the host's `.git`: here 64 MiB made once cost the daemon
//      64 MiB of durable writes per send, for a rename.
//  (b) The same for the session's packs (goal 4): a pack is judged once by FileKey too
//      (IndexSessionPack), and a `mv` of `pack-<id>.pack` to another `pack-<id'>.pack` makes
//      every copy-back copy the whole file into the daemon's scratch directory and run the host's
//      `git index-pack` on it again (up to kPacksPerCopyBack = 16 packs of up to 4 GiB each per
//      copy-back).
//  (c) Every copy-back reads the whole reflog of every ref it wrote, up to 16 MiB each, whatever
//      it takes from it (goal 4). CopyBackReflog reads `logs/<ref>` of the session's copy whole
//      (ReadFile, 16 MiB) for each of up to kRefsWrittenPerCopyBack = 1,024 refs a copy-back
//      writes, only to skip the lines it took before and look at 32 more. Nothing refuses a
//      sparse file there (Sparse() guards objects and packs only), so the session's 1,024 logs of
//      16 MiB cost it no disk (`truncate -s`), and moving its 1,024 branches between two commits
//      the host's branches name already costs no tip check: each send makes the daemon read
//      16 GiB. Here 128 branches made each of two sends' copy-backs read 2 GiB (4 GiB in all).
//  Fix direction for (a) and (b): judge a session file by what it is, not by where it stands: key
//  it by device, inode and size (a rename keeps all three; git never rewrites an object or a pack
//  in place), so a renamed file stays judged. For (c): read a reflog from the offset the copy-back
//  took to (bounded), refuse sparse logs, and bound the bytes of logs one copy-back reads.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>

#include "tests/escape/escape_support.h"
#include "tests/escape/git_attack_support.h"
#include "tests/support/files.h"

namespace ptybox::testing {
namespace {

namespace fs = std::filesystem;

// The session's script: every file of `dir` renamed to a well-formed name of round `round`
// (`prefix`, then the file's index and the round in hex, padded to `digits`, then `suffix`), in
// the same directory (the inode and the size stay, no data is written), in a subshell (the
// session's shell stays where it was).
std::string RenameScript(const std::string& dir, const std::string& prefix, int digits,
                         const std::string& suffix, int round) {
  return "(cd " + dir + " && i=0 && for f in " + prefix + "*" + suffix + "; do mv \"$f\" " +
         prefix + "$(printf '%0" + std::to_string(digits - 4) + "x%04x' $i " +
         std::to_string(round) + ")" + suffix + "; i=$((i+1)); done && echo renamed-$(ls | wc -l))";
}

// (a) Junk loose objects, refused once, renamed before each send.
TEST(GitReview21AttackTest, ARefusedObjectIsNotCopiedIntoTheHostsGitAgainForARename) {
  git_attack::GitWriteSession git;
  auto& [daemon, ws, client, id] = git;
  ASSERT_NO_FATAL_FAILURE(git.Open());
  // Four files of 16 MiB of random bytes under well-formed loose object names: each is copied,
  // found no zlib stream, and refused (and remembered as judged).
  Observed made = RunInSession(
      client, id, "workspace-write", "junk-objects",
      "mkdir -p .git/objects/ab && for i in 0 1 2 3; do head -c 16777216 /dev/urandom > "
      ".git/objects/ab/$(printf '%034x%04x' $i 0); done && echo made-$(ls .git/objects/ab | wc "
      "-l)");
  ASSERT_TRUE(made.Says("made-4")) << made.Show();
  constexpr int64_t kJunkBytes = 4ll << 24;
  // Two plain sends: the files were judged, nothing is copied again (what review 27 fixed).
  const int64_t written_plain =
      git_attack::DaemonWritesOver(git, 2, git_attack::PlainSend, "plain-42");
  ASSERT_GE(written_plain, 0) << "cannot read /proc/" << daemon.pid() << "/io";
  // Three sends, each after a rename of the same files to other object names.
  constexpr int kRenames = 3;
  const int64_t written_renamed = git_attack::DaemonWritesOver(
      git, kRenames, [](int round) { return RenameScript(".git/objects/ab", "", 38, "", round); },
      "renamed-4");
  std::cout << "  " << (kJunkBytes >> 20) << " MiB of refused loose objects: the daemon wrote "
            << (written_plain >> 20) << " MiB over 2 plain sends, " << (written_renamed >> 20)
            << " MiB over " << kRenames << " sends each after a `mv` of them to other names; "
            << "the host's objects/ab: "
            << (fs::exists(ws / ".git" / "objects" / "ab") ? "present" : "absent") << "\n";
  // Refused once, refused for good: a new name for the same junk is not a reason to copy it into
  // the person's .git again.
  EXPECT_LT(written_renamed, kJunkBytes)
      << "each send after a `mv` copied the session's " << (kJunkBytes >> 20)
      << " MiB of refused objects into the host's .git again (" << (written_renamed >> 20)
      << " MiB written over " << kRenames << " sends): FileKey holds the name, which the session "
      << "changes at no cost";
  // Nothing of the junk stands in the person's .git.
  EXPECT_EQ(git_attack::HostGit(ws, {"fsck", "--no-dangling"}).exit_code, 0);
}

// (b) A junk pack, refused once, renamed before each send.
TEST(GitReview21AttackTest, ARefusedPackIsNotCopiedAndIndexedAgainForARename) {
  git_attack::GitWriteSession git;
  auto& [daemon, ws, client, id] = git;
  ASSERT_NO_FATAL_FAILURE(git.Open());
  // Two files of 16 MiB of random bytes under well-formed pack names: each is copied into the
  // daemon's scratch directory, given to `git index-pack`, refused (and remembered as judged).
  Observed made =
      RunInSession(client, id, "workspace-write", "junk-packs",
                   "mkdir -p .git/objects/pack && for i in 0 1; do head -c 16777216 /dev/urandom > "
                   ".git/objects/pack/pack-$(printf '%036x%04x' $i 0).pack; done && echo made-$(ls "
                   ".git/objects/pack | wc -l)");
  ASSERT_TRUE(made.Says("made-2")) << made.Show();
  constexpr int64_t kJunkBytes = 2ll << 24;
  const int64_t written_plain =
      git_attack::DaemonWritesOver(git, 2, git_attack::PlainSend, "plain-42");
  ASSERT_GE(written_plain, 0) << "cannot read /proc/" << daemon.pid() << "/io";
  constexpr int kRenames = 3;
  const int64_t written_renamed = git_attack::DaemonWritesOver(
      git, kRenames,
      [](int round) { return RenameScript(".git/objects/pack", "pack-", 40, ".pack", round); },
      "renamed-2");
  std::cout << "  " << (kJunkBytes >> 20) << " MiB of refused packs: the daemon wrote "
            << (written_plain >> 20) << " MiB over 2 plain sends, " << (written_renamed >> 20)
            << " MiB over " << kRenames << " sends each after a `mv` of them to other pack names\n";
  EXPECT_LT(written_renamed, kJunkBytes)
      << "each send after a `mv` copied the session's " << (kJunkBytes >> 20)
      << " MiB of refused packs into the daemon's scratch directory again, for `git index-pack` ("
      << (written_renamed >> 20) << " MiB written over " << kRenames << " sends)";
  EXPECT_EQ(git_attack::HostGit(ws, {"fsck", "--no-dangling"}).exit_code, 0);
}

// (c) The session's own branches, moved between two commits the host has, each with a sparse
// reflog of nearly 16 MiB.
TEST(GitReview21AttackTest, ReflogsOfMovedBranchesCostTheCopyBackWorkBoundedByWhatItTakes) {
  git_attack::GitWriteSession git;
  auto& [daemon, ws, client, id] = git;
  ASSERT_NO_FATAL_FAILURE(git.Open());
  // A commit of the session's on its branch `side`: once it came back, both it and main's tip
  // are commits the host's branches name (no tip check for a branch moved onto either).
  Observed side = RunInSession(client, id, "workspace-write", "side",
                               std::string(git_attack::kIdentity) +
                                   "git branch side $(git commit-tree HEAD^{tree} -p HEAD -m side) "
                                   "&& echo side-$((40+2))");
  ASSERT_TRUE(side.Says("side-42")) << side.Show();
  Observed settle = RunInSession(client, id, "workspace-write", "settle", "echo settle-$((40+2))");
  ASSERT_TRUE(settle.Says("settle-42")) << settle.Show();
  ASSERT_EQ(git_attack::HostGit(ws, {"rev-parse", "--verify", "-q", "refs/heads/side"}).exit_code,
            0)
      << daemon.Log();
  constexpr int kBranches = 128;
  constexpr int64_t kLogBytes = 16'777'000;  // under ReadFile's 16 MiB, sparse
  // Round r: every branch t-NNN at main's tip (odd r) or side's (even r), each log made sparse
  // of kLogBytes first (git appends one line to it).
  auto round = [&](int r) {
    return "for i in $(seq -w 1 " + std::to_string(kBranches) +
           "); do mkdir -p .git/logs/refs/heads && truncate -s " + std::to_string(kLogBytes) +
           " .git/logs/refs/heads/t-$i; echo \"update refs/heads/t-$i " +
           (r % 2 == 1 ? "main" : "side") + "\"; done | git update-ref --stdin && echo moved-" +
           std::to_string(r) + "-$(git for-each-ref refs/heads/t-* | wc -l)";
  };
  Observed first = RunInSession(client, id, "workspace-write", "round-1", round(1));
  ASSERT_TRUE(first.Says("moved-1-" + std::to_string(kBranches))) << first.Show();
  Observed after_first =
      RunInSession(client, id, "workspace-write", "after", "echo after-$((40+2))");
  ASSERT_TRUE(after_first.Says("after-42")) << after_first.Show();
  char last[32];
  std::snprintf(last, sizeof last, "refs/heads/t-%03d", kBranches);
  ASSERT_EQ(git_attack::HostGit(ws, {"rev-parse", "--verify", "-q", last}).exit_code, 0)
      << daemon.Log().substr(0, 4000);
  const int64_t read_before = git_attack::BytesRead(daemon.pid());
  ASSERT_GE(read_before, 0) << "cannot read /proc/" << daemon.pid() << "/io";
  constexpr int kRounds = 2;
  for (int r = 2; r < 2 + kRounds; ++r) {
    Observed moved =
        RunInSession(client, id, "workspace-write", "round-" + std::to_string(r), round(r));
    ASSERT_TRUE(moved.Says("moved-" + std::to_string(r) + "-" + std::to_string(kBranches)))
        << moved.Show();
  }
  Observed last_send = RunInSession(client, id, "workspace-write", "last", "echo last-$((40+2))");
  ASSERT_TRUE(last_send.Says("last-42")) << last_send.Show();
  const int64_t read = git_attack::BytesRead(daemon.pid()) - read_before;
  const std::string at = git_attack::Line(git_attack::HostGit(ws, {"rev-parse", last}).out);
  // The last round (3) put every branch at main's tip.
  const std::string main_tip = git_attack::Line(git_attack::HostGit(ws, {"rev-parse", "main"}).out);
  const bool came_back = at == main_tip;
  std::cout << "  " << kRounds << " sends, each moving " << kBranches << " branches of the "
            << "session's with sparse " << (kLogBytes >> 20) << " MiB reflogs: the daemon read "
            << (read >> 20) << " MiB; " << last << (came_back ? " came back" : " did not come back")
            << "\n";
  if (!came_back) std::cout << daemon.Log().substr(0, 4000) << "\n";
  // What copying back a few log lines per ref needs to read: those lines (and what the session's
  // refs and the host's are), not the session's whole logs again at every send.
  constexpr int64_t kBound = 256ll << 20;
  EXPECT_LT(read, kBound) << kRounds << " copy-backs of " << kBranches << " moved branches read "
                          << (read >> 20) << " MiB of the session's (sparse) reflogs: "
                          << "CopyBackReflog reads each moved ref's whole log, up to 16 MiB, "
                          << "for up to 1,024 refs per copy-back";
  EXPECT_EQ(git_attack::HostGit(ws, {"status", "--porcelain"}).exit_code, 0);
}

}  // namespace
}  // namespace ptybox::testing
