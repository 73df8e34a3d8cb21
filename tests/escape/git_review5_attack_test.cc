// Fifth outside review of "Git for agents" (docs/security.md; review 8 of the project): the
// fourteenth round's fixes to the copy-back, attacked from a workspace-write session. Each test
// fails while its hole is open (root daemon and ptybox-ci):
//  - the person's tags are never moved by a copy-back, but HEAD may name any ref: a session's
//    `git symbolic-ref HEAD refs/tags/v1` comes back, and the person's next `git commit` moves
//    their (lightweight) tag v1 onto it;
//  - only branches and tags the host had at launch are kept from deletion: the person's stash
//    (refs/stash) is theirs too, and a session's `git stash clear` deletes it on the host;
//  - ParseIndex reads an entry's extended flags for skip-worktree only: bits git does not know
//    pass, and git dies on them ("unknown index entry format"), so every later status, diff,
//    add, commit of the person's fails until they delete .git/index;
//  - a new tag may take the short name of the person's branch: refs/tags/main comes back, and
//    git resolves `main` to the tag first (rev-parse, log, diff, merge, reset --hard main), to
//    the session's commit, with only an "ambiguous" warning;
//  - a version 4 index stores each path as a prefix of the previous one plus a few bytes, and
//    ParseIndex keeps every path whole: 64,000 entries of 4 KiB paths take 4.1 MiB on disk and
//    over 500 MiB of the daemon's memory (about 125 times), so the 64 MiB bound on a session's
//    index still lets one copy-back ask for about 8 GiB.
//  - IndexPathRefusal checks only a mode's type: a regular file's entry with mode 0104777 comes
//    back, and the person's next commit (of another file) records a tree with a file mode git
//    never writes (fsck: badFilemode).
//  - ParseIndex checks git's order, not git's tree rules: an index holding both `a.txt` and
//    `a.txt/x` comes back, and the person's next commit fails ("You have both a.txt and
//    a.txt/x", "Error building trees") until they find and remove the entry.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>

#include "tests/escape/escape_support.h"
#include "tests/escape/git_attack_support.h"
#include "tests/support/files.h"

namespace ptybox::testing {
namespace {

using git_attack::HostGit;
using git_attack::kIdentity;
using git_attack::MakeRepository;
using git_attack::Slurp;

namespace fs = std::filesystem;

// CopyBackHead accepts any `ref: refs/...` value for HEAD (ValidRefValue). A session points
// HEAD at the person's tag; the host's HEAD then names refs/tags/v1, and the person's next
// commit (git updates the ref HEAD names) moves v1 to it: the rule "a tag the person had when
// the session started is never moved" is kept by the daemon and broken by the person's own git
// on the session's say-so. git status says only "On branch refs/tags/v1".
TEST(GitReview5AttackTest, AHeadNamingThePersonsTagNeverMakesTheirCommitMoveIt) {
  git_attack::GitWriteSession git;
  auto& [daemon, ws, client, id] = git;
  ASSERT_NO_FATAL_FAILURE(MakeRepository(ws));
  ASSERT_EQ(HostGit(ws, {"tag", "v1"}).exit_code, 0);
  const std::string tag_before = HostGit(ws, {"rev-parse", "v1"}).out;
  ASSERT_NO_FATAL_FAILURE(git.OpenSession());
  const std::string work =
      std::string(kIdentity) + "git symbolic-ref HEAD refs/tags/v1 && echo pointed";
  Observed did = RunInSession(client, id, "workspace-write", "head-tag", work);
  std::cout << "  observed " << did.Show() << "\n";
  ASSERT_TRUE(did.Says("pointed")) << did.Show();
  std::cout << "  host HEAD: " << Slurp(ws / ".git" / "HEAD");
  // The person, later, commits their own change.
  std::ofstream(ws / "a.txt", std::ios::app) << "mine\n";
  const auto commit = HostGit(ws, {"commit", "-q", "-a", "-m", "mine"});
  std::cout << "  the person's commit: exit " << commit.exit_code << "\n";
  EXPECT_EQ(HostGit(ws, {"rev-parse", "v1"}).out, tag_before)
      << "the person's tag v1 moved to their next commit: the host's HEAD is "
      << Slurp(ws / ".git" / "HEAD") << daemon.Log();
  EXPECT_FALSE(Slurp(ws / ".git" / "HEAD").starts_with("ref: refs/tags/"))
      << "the host's HEAD names a tag\n"
      << daemon.Log();
}

// launch_refs keeps the person's branches and tags from deletion, but not refs/stash
// (CopiedBackRef copies it back): the person stashed work before the session started; the
// session's `git stash clear` deletes the host's refs/stash, and the person's stashed work is
// reachable from no ref (`git stash list` is empty, `git stash pop` fails).
TEST(GitReview5AttackTest, ThePersonsStashNeverVanishes) {
  git_attack::GitWriteSession git;
  auto& [daemon, ws, client, id] = git;
  ASSERT_NO_FATAL_FAILURE(MakeRepository(ws));
  std::ofstream(ws / "a.txt", std::ios::app) << "the person's work in progress\n";
  ASSERT_EQ(HostGit(ws, {"stash", "-q"}).exit_code, 0);
  const std::string stash_before = HostGit(ws, {"rev-parse", "--verify", "-q", "refs/stash"}).out;
  ASSERT_FALSE(stash_before.empty());
  ASSERT_NO_FATAL_FAILURE(git.OpenSession());
  const std::string work = std::string(kIdentity) + "git stash clear && echo cleared";
  Observed did = RunInSession(client, id, "workspace-write", "stash-clear", work);
  std::cout << "  observed " << did.Show() << "\n";
  ASSERT_TRUE(did.Says("cleared")) << did.Show();
  EXPECT_EQ(HostGit(ws, {"rev-parse", "--verify", "-q", "refs/stash"}).out, stash_before)
      << "the person's stash was deleted by the session\n"
      << daemon.Log();
  EXPECT_FALSE(HostGit(ws, {"stash", "list"}).out.empty())
      << "the person's git stash list is empty\n"
      << daemon.Log();
}

// Rewrites .git/index as version 3 with extended flags `0x0001` (a bit git does not know) on
// every entry, in git's order, lengths from the flags, no extensions, checksum computed again.
constexpr const char* kExtendedFlagsScript = R"PY(import hashlib, struct
d = open('.git/index', 'rb').read()
assert d[:4] == b'DIRC'
version, count = struct.unpack('>II', d[4:12])
at, out = 12, []
for _ in range(count):
    flags = struct.unpack('>H', d[at + 60:at + 62])[0]
    name = at + 62 + (2 if flags & 0x4000 else 0)
    nul = d.index(b'\0', name)
    path = d[name:nul]
    e = d[at:at + 60] + struct.pack('>HH', (len(path) & 0xfff) | 0x4000, 0x0001) + path
    e += b'\0' * (((64 + len(path) + 8) & ~7) - len(e))
    out.append(e)
    at += (nul - at + 8) & ~7
body = b'DIRC' + struct.pack('>II', 3, count) + b''.join(out)
open('.git/index', 'wb').write(body + hashlib.sha1(body).digest())
)PY";

// git's create_from_disk dies on an extended flag bit outside CE_EXTENDED_FLAGS (skip-worktree,
// intent-to-add); ParseIndex takes any. A session's index with bit 0x0001 set comes back, and
// the person's git cannot read their index any more: status, diff, add, commit all exit 128.
TEST(GitReview5AttackTest, AnIndexWithExtendedFlagsGitDoesNotKnowNeverBreaksThePersonsGit) {
  git_attack::GitWriteSession git;
  auto& [daemon, ws, client, id] = git;
  ASSERT_NO_FATAL_FAILURE(MakeRepository(ws));
  std::ofstream(ws / ".escape" / "ext.py") << kExtendedFlagsScript;
  ASSERT_EQ(HostGit(ws, {"status", "--porcelain"}).exit_code, 0);
  ASSERT_NO_FATAL_FAILURE(git.OpenSession());
  const std::string work = "python3 .escape/ext.py && echo rewritten";
  Observed did = RunInSession(client, id, "workspace-write", "ext-flags", work);
  std::cout << "  observed " << did.Show() << "\n";
  ASSERT_TRUE(did.Says("rewritten")) << did.Show();
  const auto status = HostGit(ws, {"status", "--porcelain"});
  EXPECT_EQ(status.exit_code, 0) << "the person's git status fails: " << status.err << "\n"
                                 << daemon.Log();
  std::ofstream(ws / "a.txt", std::ios::app) << "mine\n";
  EXPECT_EQ(HostGit(ws, {"commit", "-q", "-a", "-m", "mine"}).exit_code, 0)
      << "the person's git commit fails\n"
      << daemon.Log();
}

// The copy-back brings back any new tag. A session's `git tag main <its commit>` makes
// refs/tags/main, which git's revision lookup (refs/tags/%s before refs/heads/%s) takes for the
// person's `main`: their `git reset --hard main`, `git merge main`, `git diff main` use the
// session's commit, and `git push origin main` fails ("matches more than one").
TEST(GitReview5AttackTest, ASessionsTagNeverTakesTheNameOfThePersonsBranch) {
  git_attack::GitWriteSession git;
  auto& [daemon, ws, client, id] = git;
  ASSERT_NO_FATAL_FAILURE(MakeRepository(ws));
  const std::string main_before = HostGit(ws, {"rev-parse", "refs/heads/main"}).out;
  ASSERT_NO_FATAL_FAILURE(git.OpenSession());
  const std::string work = std::string(kIdentity) +
                           "git checkout -q -b agent && echo agent > a.txt && "
                           "git commit -qam agent && git tag main && git checkout -q main && "
                           "echo tagged";
  Observed did = RunInSession(client, id, "workspace-write", "tag-main", work);
  std::cout << "  observed " << did.Show() << "\n";
  ASSERT_TRUE(did.Says("tagged")) << did.Show();
  const auto resolved = HostGit(ws, {"rev-parse", "main"});
  std::cout << "  host rev-parse main: " << resolved.out << resolved.err;
  EXPECT_EQ(resolved.out, main_before) << "the person's `main` resolves to the session's tag\n"
                                       << daemon.Log();
}

// ParseIndex expands every version 4 path (the previous path's prefix plus the entry's bytes)
// into a std::string of its own (built by operator+, so with about twice its length reserved)
// and keeps them all in a vector: the index's size on disk bounds the entry count, not the
// memory. The session writes 64,000 entries whose paths are 4,096 bytes long (the most
// IndexPathRefusal allows), each after the first stripping 3 bytes of the previous path and
// adding 3: a 4.1 MiB index, every entry valid and in git's order. Measured: the daemon's peak
// grows by about 530 MiB (a 15 MiB index of the same kind: 1,876 MiB). At the 64 MiB bound
// (kGitSessionIndexMax) that is about 8 GiB for one copy-back of one session (multiplication,
// not run: the machine is shared); the next copy-back parses it twice (as the session's index
// and as the one the host has), and every later launch's GitlinksOfIndex once more.
TEST(GitReview5AttackTest, APrefixCompressedIndexNeverCostsTheDaemonMoreThanItsSize) {
  Daemon daemon(Daemon::Options{.extra_args = {}, .env = {"PTYBOX_GIT_WRITE=1"}});
  const fs::path ws = daemon.workspace();
  MakeRepository(ws);
  std::ofstream(ws / ".escape" / "v4.py") << R"PY(import hashlib, struct
L, N = 4096, 64000
alpha = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz'
def tail(i):
    return (alpha[i // 3844] + alpha[i // 62 % 62] + alpha[i % 62]).encode()
fixed = bytearray(60)
fixed[24:28] = struct.pack('>I', 0o100644)
fixed[40:60] = hashlib.sha1(b'blob 0\0').digest()
head = bytes(fixed) + struct.pack('>H', 0xFFF)
out = [head + b'\x00' + b'a' * (L - 3) + tail(0) + b'\0']
out += [head + b'\x03' + tail(i) + b'\0' for i in range(1, N)]
body = b'DIRC' + struct.pack('>II', 4, N) + b''.join(out)
open('.git/index', 'wb').write(body + hashlib.sha1(body).digest())
print('index of', len(body) >> 10, 'KiB')
)PY";
  RpcClient client(daemon.socket());
  const std::string id = OpenSession(client, "workspace-write");
  ASSERT_FALSE(id.empty()) << daemon.Log();
  // The control: a copy-back of an ordinary index first, so that what any copy-back costs (the
  // threads' arenas, the host git it runs) is in the figure before.
  Observed warm = RunInSession(client, id, "workspace-write", "small-index",
                               "echo x > warm.txt && git add warm.txt && echo warm");
  ASSERT_TRUE(warm.Says("warm")) << warm.Show();
  const long rss_before = ProcStatusKib(daemon.pid(), "VmRSS");
  Observed did = RunInSession(client, id, "workspace-write", "v4-index", "python3 .escape/v4.py");
  std::cout << "  observed " << did.Show() << "\n";
  ASSERT_TRUE(did.Says("KiB")) << did.Show();
  const long peak = ProcStatusKib(daemon.pid(), "VmHWM");
  std::cout << "  daemon RSS before " << rss_before / 1024 << " MiB, peak " << peak / 1024
            << " MiB; host index "
            << (fs::exists(ws / ".git" / "index") ? fs::file_size(ws / ".git" / "index") >> 10 : 0)
            << " KiB\n";
  // Under ASan every allocation carries redzones and freed memory waits in its quarantine: the
  // same copy-back peaks at about three times as much (103 MiB where 37 MiB without). The bound
  // still tells the 125-fold expansion (1,876 MiB for 15 MiB) from the bounded one.
#if defined(__SANITIZE_ADDRESS__)
  constexpr long kBoundKib = 256 * 1024;
#else
  constexpr long kBoundKib = 64 * 1024;
#endif
  EXPECT_LT(peak - rss_before, kBoundKib)
      << "a 4 MiB session index raised the daemon's peak memory by " << (peak - rss_before) / 1024
      << " MiB\n"
      << daemon.Log();
}

// Sets the mode of the entry `a.txt` in .git/index (versions 2 and 3) to 0104777 (setuid, all
// permissions), keeping the rest; extensions dropped, checksum computed again.
constexpr const char* kModeScript = R"PY(import hashlib, struct
d = bytearray(open('.git/index', 'rb').read())
version, count = struct.unpack('>II', d[4:12])
at = 12
for _ in range(count):
    flags = struct.unpack('>H', d[at + 60:at + 62])[0]
    name = at + 62 + (2 if flags & 0x4000 else 0)
    nul = d.index(b'\0', name)
    if d[name:nul] == b'a.txt':
        d[at + 24:at + 28] = struct.pack('>I', 0o104777)
    at += (nul - at + 8) & ~7
body = bytes(d[:at])
open('.git/index', 'wb').write(body + hashlib.sha1(body).digest())
)PY";

// IndexPathRefusal refuses a mode by its type only (regular file, link, gitlink): 0104777 is a
// "regular file". git keeps the index's mode as it is and writes it into the tree of the next
// commit; `git ls-tree` shows 100755, the tree object holds 104777, and fsck reports
// badFilemode (an error under fsck.badFilemode=error or a server that makes it one). The
// person's own commit of another file carries it.
TEST(GitReview5AttackTest, AnIndexModeGitNeverWritesNeverReachesThePersonsNextCommit) {
  git_attack::GitWriteSession git;
  auto& [daemon, ws, client, id] = git;
  ASSERT_NO_FATAL_FAILURE(MakeRepository(ws));
  std::ofstream(ws / ".escape" / "mode.py") << kModeScript;
  ASSERT_NO_FATAL_FAILURE(git.OpenSession());
  Observed did = RunInSession(client, id, "workspace-write", "index-mode",
                              "python3 .escape/mode.py && echo moded");
  std::cout << "  observed " << did.Show() << "\n";
  ASSERT_TRUE(did.Says("moded")) << did.Show();
  std::cout << "  host index: " << HostGit(ws, {"ls-files", "-s"}).out;
  std::ofstream(ws / "c.txt") << "the person's file\n";
  ASSERT_EQ(HostGit(ws, {"add", "c.txt"}).exit_code, 0);
  ASSERT_EQ(HostGit(ws, {"commit", "-q", "-m", "mine"}).exit_code, 0);
  const auto fsck = HostGit(ws, {"-c", "fsck.badFilemode=error", "fsck"});
  EXPECT_EQ(fsck.exit_code, 0) << "the person's commit holds a bad file mode: " << fsck.out
                               << fsck.err << daemon.Log();
}

// Adds an entry `a.txt/x` (a.txt's blob) right after `a.txt` in .git/index (versions 2 and 3):
// still in git's order; extensions dropped, checksum computed again.
constexpr const char* kFileAndDirectoryScript = R"PY(import hashlib, struct
d = open('.git/index', 'rb').read()
version, count = struct.unpack('>II', d[4:12])
at, out = 12, []
for _ in range(count):
    flags = struct.unpack('>H', d[at + 60:at + 62])[0]
    name = at + 62 + (2 if flags & 0x4000 else 0)
    nul = d.index(b'\0', name)
    size = (nul - at + 8) & ~7
    out.append(d[at:at + size])
    if d[name:nul] == b'a.txt':
        e = d[at:at + 60] + struct.pack('>H', 7) + b'a.txt/x'
        out.append(e + b'\0' * (((62 + 7 + 8) & ~7) - len(e)))
    at += size
body = d[:8] + struct.pack('>I', len(out)) + b''.join(out)
open('.git/index', 'wb').write(body + hashlib.sha1(body).digest())
)PY";

// git reads an index whatever paths it holds, and builds the next commit's trees from it: a
// file `a.txt` and an entry beneath it (`a.txt/x`) cannot both be in a tree, so every commit
// fails (verify_cache: "You have both a.txt and a.txt/x"). The session writes such an index
// (in git's order, every path allowed); the person's commit of a file of their own fails.
TEST(GitReview5AttackTest, AnIndexGitCannotBuildATreeFromNeverBlocksThePersonsCommit) {
  git_attack::GitWriteSession git;
  auto& [daemon, ws, client, id] = git;
  ASSERT_NO_FATAL_FAILURE(MakeRepository(ws));
  std::ofstream(ws / ".escape" / "df.py") << kFileAndDirectoryScript;
  ASSERT_NO_FATAL_FAILURE(git.OpenSession());
  Observed did = RunInSession(client, id, "workspace-write", "index-df",
                              "python3 .escape/df.py && echo added");
  std::cout << "  observed " << did.Show() << "\n";
  ASSERT_TRUE(did.Says("added")) << did.Show();
  std::ofstream(ws / "c.txt") << "the person's file\n";
  ASSERT_EQ(HostGit(ws, {"add", "c.txt"}).exit_code, 0);
  const auto commit = HostGit(ws, {"commit", "-q", "-m", "mine"});
  EXPECT_EQ(commit.exit_code, 0) << "the person's commit fails: " << commit.out << commit.err
                                 << daemon.Log();
}

}  // namespace
}  // namespace ptybox::testing
