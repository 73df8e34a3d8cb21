// Twelfth outside review of "Git for agents" (docs/security.md; review 19 of the project),
// attacked from a workspace-write session. Each test failed while its hole was open (root
// daemon and ptybox-ci); closed in ParseIndex (sandbox/git_private.cc):
//  (a) The index copy-back (ParseIndex/IndexForHost in sandbox/git_private.cc) checks each
//      entry's path and mode, git's order (path, then stage), and that no path is also a
//      directory of another, but not that a path has either one entry at stage 0 or entries at
//      stages 1-3 (a conflict), never both. An index holding `a.txt` at stage 0 and at stage 2
//      (git never writes one) comes back to the host. There the person's `git commit` fails
//      ("Committing is not possible because you have unmerged files"), and the fix git names,
//      `git add a.txt`, exits 0 and leaves both entries: every commit keeps failing until the
//      person runs `git reset` (dropping what they had staged) or `git rm --cached`.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>

#include "tests/escape/escape_support.h"
#include "tests/escape/git_attack_support.h"

namespace ptybox::testing {
namespace {

using git_attack::HostGit;
using git_attack::MakeRepository;

namespace fs = std::filesystem;

// Writes .git/index anew: the entries `git ls-files -s` lists, plus `a.txt` again at stage 2
// (the same blob): a stage-0 entry and a conflict entry for one path.
constexpr char kStageZeroAndTwoIndex[] = R"(cat > .escape/stages.py <<'PY'
import hashlib, struct, subprocess
entries = []
for line in subprocess.check_output(['git', 'ls-files', '-s']).decode().splitlines():
    meta, path = line.split('\t', 1)
    mode, oid, stage = meta.split()
    entries.append((path, int(mode, 8), oid, int(stage)))
    if path == 'a.txt':
        entries.append((path, int(mode, 8), oid, 2))
body = b'DIRC' + struct.pack('>II', 2, len(entries))
for path, mode, oid, stage in entries:
    p = path.encode()
    e = b'\0' * 24 + struct.pack('>I', mode) + b'\0' * 12 + bytes.fromhex(oid)
    e += struct.pack('>H', len(p) | (stage << 12)) + p
    body += e + b'\0' * (8 - len(e) % 8)
open('.git/index', 'wb').write(body + hashlib.sha1(body).digest())
PY
python3 .escape/stages.py && git ls-files -s && echo written)";

// (a) The session writes an index holding `a.txt` at stage 0 and at stage 2. It must not reach
// the host: there the person's `git add a.txt; git commit` fails, and keeps failing.
TEST(GitReview12AttackTest, AnIndexWithAPathBothMergedAndInConflictNeverComesBack) {
  git_attack::GitWriteSession git;
  ASSERT_NO_FATAL_FAILURE(git.Open());
  auto& [daemon, ws, client, id] = git;
  Observed written =
      RunInSession(client, id, "workspace-write", "stage-index", kStageZeroAndTwoIndex);
  ASSERT_TRUE(written.Says("written")) << written.Show();
  const std::string staged = HostGit(ws, {"ls-files", "-s"}).out;
  std::ofstream(ws / "a.txt") << "the person's edit\n";
  const auto added = HostGit(ws, {"add", "a.txt"});
  const auto committed = HostGit(ws, {"commit", "-q", "-m", "the person's edit"});
  std::cout << "  host ls-files -s after the copy-back: [" << staged << "]; the person's add "
            << added.exit_code << ", commit " << committed.exit_code << "\n";
  EXPECT_EQ(staged.find(" 2\ta.txt"), std::string::npos)
      << "an index holding a.txt at stage 0 and at stage 2 came back to the host\n"
      << daemon.Log();
  EXPECT_EQ(committed.exit_code, 0)
      << "the person's git add; git commit fails: " << committed.err << committed.out;
}

}  // namespace
}  // namespace ptybox::testing
