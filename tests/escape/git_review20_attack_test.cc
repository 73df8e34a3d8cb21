// Twentieth outside review of "Git for agents" (docs/security.md; review 27 of the project), on
// 6975330. Each test asserts a goal and fails while the hole is open:
//  (a) The copy-back's work grows with the product of the session's new refs and the host's
//      packed-refs (goal 4). Every ref it writes is compared and swapped by UpdateHostRef, whose
//      `unchanged` check (HostRef) reads the host's whole packed-refs (up to 64 MiB) and parses
//      it into a std::map whenever the ref has no loose file on the host, which is always so for
//      a new ref: once before the write and once more under the ref's lock (WriteLikeGit). A new
//      branch naming a commit one of the host's branches names already (the person's HEAD) needs
//      no tip check, so neither kRefsCheckedPerCopyBack (64) nor the 30 s of tip checks bounds
//      how many one copy-back writes: up to kGitMaxRefs (100,000). A session's one `git
//      update-ref --stdin` of N such branches in a repository whose packed-refs holds P refs
//      makes one copy-back read and parse about 2 * N * P packed-refs lines. Here N = 3,000 and
//      P = 4,000 (a 260 KB packed-refs) made one copy-back read 1,489 MiB (6,005 reads of
//      it) and took 7-18 s here; the session's own limits allow N = 100,000, and a repository
//      with 20,000 release tags (the size git_attack::WriteManyPackedTags models) makes that about
//      4,000,000,000 lines parsed, some 20-40 minutes at this rate, during which the copy-back
//      holds the send, `terminal_close`, `ptybox run`'s exit and the daemon's shutdown; deleting
//      them (each deletion reads packed-refs three times) and making them again does it anew at
//      every send.
//  (b) The daemon's memory grows with every value the session gives the person's tags (goal 4).
//      A tag the person had when the session started is never moved on the host; the copy-back
//      remembers each refusal in GitSnapshot::kept_refs ("name\nvalue", once per value the
//      session holds) and nothing bounds that set: `logged` stops at 1,024 lines, kept_refs
//      never. Any well-formed hex id is a value (no object is looked up before the refusal). A
//      session that rewrites its private packed-refs before each send, every launch tag at a new
//      id, adds one entry per launch tag at each copy-back, for as long as the session lives:
//      20,000 tags and 24 sends raised the daemon's resident memory by 88-100 MiB here (the same
//      24 sends giving the tags one value each time: 3 MiB); with kGitMaxRefs tags it is about
//      18 MiB per send, per session at once, and the daemon never gives it back until the
//      session closes.
//  (c) A refused loose object is judged once only while its modification time stays: the key
//      that remembers it (FileKey) holds the file's mtime, and CopyObjectFile copies the whole
//      file into the host's `objects/<xx>/<name>.lock` (written and fsync'd) before its content
//      is checked (LooseObjectMatchesName runs on the copy). A session that keeps junk loose
//      objects (random bytes, up to kGitObjectFileMax = 4 GiB each, up to
//      kLooseObjectsPerCopyBack = 4,096 per copy-back) and `touch`es them before each send makes
//      every copy-back read and write all of them again into the host's `.git`, fsync included:
//      128 MiB made once cost the daemon 128 MiB of writes to the person's disk per send, for a
//      `touch` (goal 4: work copying back unbounded by anything but the session's disk, repeated
//      at no cost to the session; goal 2's spirit too: the person's disk and `.git` take it).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
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

// The session's script: `count` new branches `topic-<n>` on HEAD (the host's main), in one `git
// update-ref --stdin`, without reflogs (so that nothing but the refs themselves is copied back).
std::string ManyBranchesScript(int count) {
  return "python3 -c \"\nfor i in range(" + std::to_string(count) +
         "): print('create refs/heads/topic-%05d HEAD' % i)\n\" | git -c "
         "core.logAllRefUpdates=false "
         "update-ref --stdin && echo made-$(git for-each-ref refs/heads/ | wc -l)";
}

// (a) New branches on the person's HEAD, in a repository whose refs are packed.
TEST(GitReview20AttackTest, NewBranchesCostTheCopyBackWorkBoundedByWhatTheyAre) {
  git_attack::GitWriteSession git;
  auto& [daemon, ws, client, id] = git;
  ASSERT_NO_FATAL_FAILURE(git_attack::MakeRepository(ws));
  constexpr int kPackedTags = 4'000;
  ASSERT_NO_FATAL_FAILURE(git_attack::WriteManyPackedTags(ws, kPackedTags));
  const uintmax_t packed_size = fs::file_size(ws / ".git" / "packed-refs");
  ASSERT_NO_FATAL_FAILURE(git.OpenSession());
  // A first ordinary send, so that what every copy-back costs is there before.
  Observed first = RunInSession(client, id, "workspace-write", "first", "echo first-$((40 + 2))");
  ASSERT_TRUE(first.Says("first-42")) << first.Show();
  const int64_t read_before = git_attack::BytesRead(daemon.pid());
  ASSERT_GE(read_before, 0) << "cannot read /proc/" << daemon.pid() << "/io";
  constexpr int kBranches = 3'000;
  const auto start = std::chrono::steady_clock::now();
  Observed made =
      RunInSession(client, id, "workspace-write", "branches", ManyBranchesScript(kBranches));
  ASSERT_TRUE(made.Says("made-" + std::to_string(kBranches + 1))) << made.Show();
  // The copy-back may outlast the send's answer: the next send waits for it.
  Observed again = RunInSession(client, id, "workspace-write", "again", "echo again-$((40 + 2))");
  ASSERT_TRUE(again.Says("again-42")) << again.Show();
  const int64_t read_after = git_attack::BytesRead(daemon.pid());
  const auto seconds =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - start)
          .count();
  char last[32];
  std::snprintf(last, sizeof last, "refs/heads/topic-%05d", kBranches - 1);
  const bool came_back = fs::exists(ws / ".git" / last);
  const int64_t read = read_after - read_before;
  std::cout << "  " << kBranches << " new branches on HEAD beside " << kPackedTags
            << " packed tags (packed-refs " << packed_size << " bytes): the daemon read "
            << (read >> 20) << " MiB (" << read / static_cast<int64_t>(packed_size)
            << " times the packed-refs) across the copy-back; " << last
            << (came_back ? " came back" : " did not come back") << "; the two sends took "
            << seconds << " s\n";
  if (!came_back) std::cout << daemon.Log().substr(0, 4000) << "\n";
  // What writing N refs needs to read: the session's refs, the host's refs once or a few
  // times. Not N times the host's packed-refs.
  constexpr int64_t kBound = 256ll << 20;
  EXPECT_LT(read, kBound) << "one copy-back of " << kBranches << " new refs read the host's "
                          << packed_size << "-byte packed-refs about "
                          << read / static_cast<int64_t>(packed_size) << " times (" << (read >> 20)
                          << " MiB): its work grows with new refs times packed "
                          << "refs, unbounded by any per-copy-back limit";
  // The person's git still works.
  EXPECT_EQ(git_attack::HostGit(ws, {"status", "--porcelain"}).exit_code, 0);
}

// The session's script: its private packed-refs, every tag `refs/tags/release-NNNNN` the host
// packed (git_attack::WriteManyPackedTags) at a new id of round `argv[1]` (well-formed hex ids
// no object has: nothing looks them up before the refusal).
constexpr const char* kMoveTagsScript = R"PY(import sys
r = int(sys.argv[1])
count = int(sys.argv[2])
with open('.git/packed-refs', 'w') as f:
    f.write('# pack-refs with: peeled fully-peeled sorted \n')
    for i in range(count):
        f.write('%08x%032x refs/tags/release-%05d\n' % (r, i, i))
print('moved', count, 'tags in round', r)
)PY";

// (b) The person's tags, moved by the session to new ids before every send.
TEST(GitReview20AttackTest, MovingThePersonsTagsAgainAndAgainCostsTheDaemonBoundedMemory) {
  git_attack::GitWriteSession git;
  auto& [daemon, ws, client, id] = git;
  ASSERT_NO_FATAL_FAILURE(git_attack::MakeRepository(ws));
  constexpr int kTags = 20'000;
  ASSERT_NO_FATAL_FAILURE(git_attack::WriteManyPackedTags(ws, kTags));
  const std::string packed_before = git_attack::Slurp(ws / ".git" / "packed-refs");
  WriteFile(ws / ".escape" / "tags.py", kMoveTagsScript);
  ASSERT_NO_FATAL_FAILURE(git.OpenSession());
  // Two rounds first, so that what every copy-back costs (and the first report) is there before.
  for (int round = 1; round <= 2; ++round) {
    Observed moved = RunInSession(
        client, id, "workspace-write", "tags-" + std::to_string(round),
        "python3 .escape/tags.py " + std::to_string(round) + " " + std::to_string(kTags));
    ASSERT_TRUE(moved.Says("moved")) << moved.Show();
  }
  Observed settle = RunInSession(client, id, "workspace-write", "settle", "echo settle-$((40+2))");
  ASSERT_TRUE(settle.Says("settle-42")) << settle.Show();
  const long rss_before = ProcStatusKib(daemon.pid(), "VmRSS");
  constexpr int kRounds = 24;
  for (int round = 3; round < 3 + kRounds; ++round) {
    Observed moved = RunInSession(
        client, id, "workspace-write", "tags-" + std::to_string(round),
        "python3 .escape/tags.py " + std::to_string(round) + " " + std::to_string(kTags));
    ASSERT_TRUE(moved.Says("moved")) << moved.Show();
  }
  Observed last = RunInSession(client, id, "workspace-write", "last", "echo last-$((40+2))");
  ASSERT_TRUE(last.Says("last-42")) << last.Show();
  const long rss_after = ProcStatusKib(daemon.pid(), "VmRSS");
  std::cout << "  " << kRounds << " sends, each after the session gave the person's " << kTags
            << " tags new ids: the daemon's resident memory went from " << rss_before / 1024
            << " MiB to " << rss_after / 1024 << " MiB (+" << (rss_after - rss_before) / 1024
            << " MiB); the host's packed-refs "
            << (git_attack::Slurp(ws / ".git" / "packed-refs") == packed_before ? "unchanged"
                                                                                : "CHANGED")
            << "\n";
  // Refusing the same kind of move again costs nothing new: what the daemon keeps per session
  // does not grow with how many values the session tried (88-100 MiB over these sends before;
  // 0-13 MiB after, as glibc's arenas happen to keep what each copy-back freed). Under
  // AddressSanitizer freed memory stays in its quarantine (256 MiB), so RSS is not this measure.
#if !defined(__SANITIZE_ADDRESS__)
  constexpr long kBoundKib = 32 * 1024;
  EXPECT_LT(rss_after - rss_before, kBoundKib)
      << "the daemon's memory grew by " << (rss_after - rss_before) / 1024 << " MiB over "
      << kRounds << " sends refusing the same " << kTags << " tag moves (GitSnapshot::kept_refs "
      << "keeps one entry per tag and value, unbounded)";
#endif
  // The person's tags stayed theirs.
  EXPECT_EQ(git_attack::Slurp(ws / ".git" / "packed-refs"), packed_before);
}

// (c) Junk loose objects, refused once, touched before each send.
TEST(GitReview20AttackTest, ARefusedObjectIsNotCopiedIntoTheHostsGitAgainForATouch) {
  git_attack::GitWriteSession git;
  auto& [daemon, ws, client, id] = git;
  ASSERT_NO_FATAL_FAILURE(git.Open());
  // Four files of 32 MiB of random bytes under well-formed loose object names: each is copied,
  // found no zlib stream, and refused (and remembered as judged).
  Observed made = RunInSession(
      client, id, "workspace-write", "junk-objects",
      "mkdir -p .git/objects/ab && for i in 0 1 2 3; do head -c 33554432 /dev/urandom > "
      ".git/objects/ab/$(printf '%038d' $i); done && echo made-$(ls .git/objects/ab | wc -l)");
  ASSERT_TRUE(made.Says("made-4")) << made.Show();
  constexpr int64_t kJunkBytes = 4ll << 25;
  // Two plain sends: the files were judged, nothing is copied again.
  const int64_t written_plain =
      git_attack::DaemonWritesOver(git, 2, git_attack::PlainSend, "plain-42");
  ASSERT_GE(written_plain, 0) << "cannot read /proc/" << daemon.pid() << "/io";
  // Four sends, each after a `touch` of the same files.
  constexpr int kTouches = 4;
  const int64_t written_touched = git_attack::DaemonWritesOver(
      git, kTouches, [](int) { return "touch .git/objects/ab/* && echo touched-$((40+2))"; },
      "touched-42");
  std::cout << "  " << (kJunkBytes >> 20) << " MiB of refused loose objects: the daemon wrote "
            << (written_plain >> 20) << " MiB over 2 plain sends, " << (written_touched >> 20)
            << " MiB over " << kTouches << " sends each after a `touch` of them; the host's "
            << "objects/ab: " << (fs::exists(ws / ".git" / "objects" / "ab") ? "present" : "absent")
            << "\n";
  // Refused once, refused for good: a new modification time of the same junk is not a reason to
  // copy it into the person's .git again.
  EXPECT_LT(written_touched, kJunkBytes)
      << "each send after a `touch` copied the session's " << (kJunkBytes >> 20)
      << " MiB of refused objects into the host's .git again (" << (written_touched >> 20)
      << " MiB written over " << kTouches << " sends)";
}

}  // namespace
}  // namespace ptybox::testing
