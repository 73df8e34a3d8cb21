// Twenty-second outside review of "Git for agents" (docs/security.md; review 29 of the project), on
// 0e221cd. Each test asserts a goal and fails while the hole is open:
//  (a) A refused session pack is copied into the daemon's scratch directory and indexed by the
//      host's `git index-pack` again at every send after a one-byte append (goal 4). Review 28's
//      fix keys a judged file by device, inode and size (FileKey) so that a `mv` keeps it judged;
//      the size is the session's to change at no cost: `printf x >> pack-<id>.pack` writes one
//      byte, keeps the file dense (Sparse() passes) and makes a new key. Two junk packs of 16 MiB
//      appended to before each send made every copy-back copy all 32 MiB again (up to
//      kPacksPerCopyBack = 16 packs and kPackBytesPerCopyBack = 1 GiB past a first pack of up to
//      4 GiB, per send).
//  (b) The same for loose objects, on the read side (goal 4): a junk loose object that is a valid
//      zlib stream with a valid header (`blob <n>`) under a name its content does not hash to is
//      inflated whole by `first` (the check on the session's own file) before it is refused; a
//      one-byte append makes a new FileKey, and it is inflated whole again at the next send (up to
//      kGitInflateBudget = 1 GiB per copy-back, for one byte written per file per send).
//  (c) A branch the session deletes and makes again between two copy-backs (`git branch -D topic
//      && git checkout -b topic`, then commits) comes back without a line of its new log (goal 3:
//      the person's reflog no longer says how their branch came to hold what it holds;
//      `topic@{0}` is not the branch, `git reset --hard topic@{1}` goes elsewhere than the value
//      before). `reflog_taken` is forgotten only when the copy-back deletes the ref; the host's
//      ref was only moved, so CopyBackReflog reads the session's new log from the byte it stopped
//      at in the old one: a new log no longer than that appends nothing (here, the same number of
//      lines of git's fixed shape), a longer one is taken for rewritten (refused for good) unless
//      a newline happens to stand there, and then its first lines are skipped. The line count of
//      the rounds before 0e221cd skipped the same lines.
//  Fix direction for (a) and (b): judge a session file by what cannot change without the session
//  paying for it: its device and inode alone (a file git made is never rewritten in place; one the
//  session rewrites in place stays refused, which harms only the session), or keep, per session,
//  the bytes judged and refuse (or leave for good) files past a per-session budget; and count what
//  a refusal cost against the session, not against each copy-back. For (c): remember with the bytes
//  taken the log file they were taken from (device and inode: git makes a new file for a new log);
//  another file starts over from its first line (each line checked as now).
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <iostream>
#include <string>

#include "tests/escape/escape_support.h"
#include "tests/escape/git_attack_support.h"

namespace ptybox::testing {
namespace {

namespace fs = std::filesystem;

// The session's script: one byte appended to every file of `dir` whose name ends with `suffix`
// (the inode stays, the size grows by one, the file stays dense), in a subshell.
std::string AppendScript(const std::string& dir, const std::string& suffix) {
  return "(cd " + dir + " && n=0 && for f in *" + suffix +
         "; do printf x >> \"$f\"; n=$((n+1)); done && echo appended-$n)";
}

// (a) Junk packs, refused once, each given one more byte before each send.
TEST(GitReview22AttackTest, ARefusedPackIsNotCopiedAndIndexedAgainForAOneByteAppend) {
  git_attack::GitWriteSession git;
  auto& [daemon, ws, client, id] = git;
  ASSERT_NO_FATAL_FAILURE(git.Open());
  Observed made =
      RunInSession(client, id, "workspace-write", "junk-packs",
                   "mkdir -p .git/objects/pack && for i in 0 1; do head -c 16777216 /dev/urandom > "
                   ".git/objects/pack/pack-$(printf '%036x%04x' $i 0).pack; done && echo made-$(ls "
                   ".git/objects/pack | wc -l)");
  ASSERT_TRUE(made.Says("made-2")) << made.Show();
  constexpr int64_t kJunkBytes = 2ll << 24;
  // Two plain sends: the packs were judged, nothing is copied again (reviews 27 and 28's fixes).
  const int64_t written_plain =
      git_attack::DaemonWritesOver(git, 2, git_attack::PlainSend, "plain-42");
  ASSERT_GE(written_plain, 0) << "cannot read /proc/" << daemon.pid() << "/io";
  constexpr int kAppends = 3;
  const int64_t written_appended = git_attack::DaemonWritesOver(
      git, kAppends, [](int) { return AppendScript(".git/objects/pack", ".pack"); }, "appended-2");
  std::cout << "  " << (kJunkBytes >> 20) << " MiB of refused packs: the daemon wrote "
            << (written_plain >> 20) << " MiB over 2 plain sends, " << (written_appended >> 20)
            << " MiB over " << kAppends << " sends each after a one-byte append to each pack\n";
  // Refused once, refused for good: one more byte is not a reason to copy and index it again.
  EXPECT_LT(written_appended, kJunkBytes)
      << "each send after a one-byte append copied the session's " << (kJunkBytes >> 20)
      << " MiB of refused packs into the daemon's scratch directory again, for `git index-pack` ("
      << (written_appended >> 20) << " MiB written over " << kAppends
      << " sends): FileKey holds the size, which the session changes for one byte";
  EXPECT_EQ(git_attack::HostGit(ws, {"fsck", "--no-dangling"}).exit_code, 0);
  EXPECT_FALSE(fs::exists(ws / ".git" / "objects" / "pack" /
                          "pack-0000000000000000000000000000000000000000.pack"));
}

// (b) Junk loose objects that inflate whole before they are found wrong, each given one more byte
// before each send.
TEST(GitReview22AttackTest, ARefusedObjectIsNotInflatedAgainForAOneByteAppend) {
  git_attack::GitWriteSession git;
  auto& [daemon, ws, client, id] = git;
  ASSERT_NO_FATAL_FAILURE(git.Open());
  // Four zlib streams (stored, level 0) of `blob 16777216\0` and random bytes, each under a name
  // its content does not hash to: a full inflate finds that, nothing before it.
  Observed made = RunInSession(client, id, "workspace-write", "junk-objects",
                               "mkdir -p .git/objects/ab && python3 -c \"\n"
                               "import os, zlib\n"
                               "for i in range(4):\n"
                               "    body = os.urandom(16777216)\n"
                               "    data = zlib.compress(b'blob %d\\0' % len(body) + body, 0)\n"
                               "    open('.git/objects/ab/%034x%04x' % (i, 0), 'wb').write(data)\n"
                               "\" && echo made-$(ls .git/objects/ab | wc -l)");
  ASSERT_TRUE(made.Says("made-4")) << made.Show();
  constexpr int64_t kJunkBytes = 4ll << 24;
  const int64_t read_before_plain = git_attack::BytesRead(daemon.pid());
  ASSERT_GE(read_before_plain, 0) << "cannot read /proc/" << daemon.pid() << "/io";
  // The first send's copy-back judges them (it reads them once); the two after it must not.
  Observed first = RunInSession(client, id, "workspace-write", "first", "echo first-$((40+2))");
  ASSERT_TRUE(first.Says("first-42")) << first.Show();
  const int64_t read_after_first = git_attack::BytesRead(daemon.pid());
  (void)git_attack::DaemonWritesOver(git, 2, git_attack::PlainSend, "plain-42");
  const int64_t read_after_plain = git_attack::BytesRead(daemon.pid());
  constexpr int kAppends = 3;
  (void)git_attack::DaemonWritesOver(
      git, kAppends, [](int) { return AppendScript(".git/objects/ab", ""); }, "appended-4");
  const int64_t read_after_appends = git_attack::BytesRead(daemon.pid());
  const int64_t read_first = read_after_first - read_before_plain;
  const int64_t read_plain = read_after_plain - read_after_first;
  const int64_t read_appended = read_after_appends - read_after_plain;
  std::cout << "  " << (kJunkBytes >> 20) << " MiB of refused loose objects (valid zlib, wrong "
            << "name): the daemon read " << (read_first >> 20)
            << " MiB on the first plain send (judged on the making send), " << (read_plain >> 20)
            << " MiB over 3 plain sends, " << (read_appended >> 20) << " MiB over " << kAppends
            << " sends each after a one-byte append to each (and a settle)\n";
  // The judgement holds: it is not made again, whole, for one byte more.
  EXPECT_LT(read_appended, kJunkBytes)
      << "each send after a one-byte append inflated the session's " << (kJunkBytes >> 20)
      << " MiB of refused objects again (" << (read_appended >> 20) << " MiB read over " << kAppends
      << " sends): FileKey holds the size, which the session changes for one byte";
  // None of the junk stands in the person's .git (the copy-back may have made the directory).
  size_t junk_on_host = 0;
  if (fs::exists(ws / ".git" / "objects" / "ab")) {
    for (const auto& entry : fs::directory_iterator(ws / ".git" / "objects" / "ab")) {
      std::cout << "  on the host: " << entry.path().filename() << "\n";
      ++junk_on_host;
    }
  }
  EXPECT_EQ(junk_on_host, 0u);
  EXPECT_EQ(git_attack::HostGit(ws, {"fsck", "--no-dangling"}).exit_code, 0);
}

// (c) The session's ordinary `git branch -D topic && git checkout -b topic`, then commits: the
// branch comes back, its log lines never do.
TEST(GitReview22AttackTest, ARecreatedBranchsLogComesBackWithIt) {
  git_attack::GitWriteSession git;
  auto& [daemon, ws, client, id] = git;
  ASSERT_NO_FATAL_FAILURE(git.Open());
  auto commits = [](const std::string& tag) {
    return "for i in 1 2 3; do echo " + tag + "$i >> a.txt && git commit -qam " + tag + "$i; done";
  };
  Observed first =
      RunInSession(client, id, "workspace-write", "topic",
                   std::string(git_attack::kIdentity) + "git checkout -q -b topic && " +
                       commits("one") + " && git checkout -q main && echo made-$((40+2))");
  ASSERT_TRUE(first.Says("made-42")) << first.Show();
  Observed settle = RunInSession(client, id, "workspace-write", "settle", "echo settle-$((40+2))");
  ASSERT_TRUE(settle.Says("settle-42")) << settle.Show();
  ASSERT_EQ(git_attack::HostGit(ws, {"rev-parse", "--verify", "-q", "refs/heads/topic"}).exit_code,
            0)
      << daemon.Log();
  const std::string lines_before = git_attack::HostGit(ws, {"reflog", "show", "topic"}).out;
  // The same again, from scratch: the branch deleted (its log with it) and made anew.
  Observed again =
      RunInSession(client, id, "workspace-write", "again",
                   std::string(git_attack::kIdentity) +
                       "git branch -q -D topic && git checkout -q -b topic && " + commits("two") +
                       " && git checkout -q main && echo again-$((40+2))");
  ASSERT_TRUE(again.Says("again-42")) << again.Show();
  Observed settle2 = RunInSession(client, id, "workspace-write", "settle", "echo settle-$((40+2))");
  ASSERT_TRUE(settle2.Says("settle-42")) << settle2.Show();
  const std::string tip = git_attack::Line(git_attack::HostGit(ws, {"rev-parse", "topic"}).out);
  const std::string subject =
      git_attack::Line(git_attack::HostGit(ws, {"log", "-1", "--format=%s", "topic"}).out);
  const std::string newest = git_attack::Line(
      git_attack::HostGit(ws, {"log", "-g", "-1", "--format=%H", "refs/heads/topic"}).out);
  const std::string lines_after = git_attack::HostGit(ws, {"reflog", "show", "topic"}).out;
  std::cout << "  the host's topic: " << tip << " (\"" << subject << "\"); its reflog's newest "
            << "entry: " << newest << "\n  the host's reflog of topic before:\n"
            << lines_before << "  after:\n"
            << lines_after;
  ASSERT_EQ(subject, "two3") << "the recreated branch did not come back\n" << daemon.Log();
  // The log says how the branch came to hold what it holds: `topic@{0}` is the branch, and
  // `topic@{1}` the value before (what `git reset --hard topic@{1}` undoes to).
  EXPECT_EQ(newest, tip) << "the host's topic moved to the session's new commits, and none of the "
                            "session's new log lines came back: CopyBackReflog reads on from "
                            "the byte it stopped at in the session's old log, and the new log "
                            "is no longer than that";
}

}  // namespace
}  // namespace ptybox::testing
