// Thirtieth outside review of "Git for agents" (docs/security.md; review 37 of the project),
// on f2d70ca. Each test asserts a goal and fails while the hole is open:
//  (a) review 36's fix stops holding once the session has filled `stashes_seen` (goal 3: the
//      person's history stays theirs; "the stash list wrong after drops/pops on either side").
//      stashes_seen is capped at 4,096 (kRefusedTipsRemembered) and is filled from every line
//      the copy-back appends to the host's stash log. The session writes its own stash log and
//      refs/stash (runs of 32 stash-like commits per send, each run under one 64 KiB read and
//      waited for until it has landed): after 128 runs the set is full and later stashes are never
//      remembered. The person then drops their stash@{1}, the session runs `git stash drop`: its
//      refs/stash is the stash the person dropped, which neither stashes_seen nor the host's stash
//      log holds, so the copy-back moves the host's refs/stash back to it (observed: no line is
//      appended for it, so the person's refs/stash names the stash they dropped while their
//      stash@{0} names another: review 30's and review 36's cases, reopened). Fix direction: do not
//      decide "never move back" from a bounded memory; move refs/stash only forward (to a value
//      that one of the session's taken lines names as new since the host's current top), or, once
//      the memory is full, refuse every backward move of it.
//  (b) the session's own, ordinary stash recovery never comes back (goal 3: "a line lost in
//      ordinary use"; the host's stash list disagrees with the session's for good). The session
//      stashes S1 (it comes back), drops it (the host's refs/stash goes too), then recovers it
//      the way git's own message suggests, `git stash store <the dropped id>`. S1 is in
//      stashes_seen, so the copy-back refuses it as "the session dropped a stash; the person
//      keeps it", though the host has no stash at all: the person's stash list stays empty while
//      the session's holds S1, at every later copy-back.
//      Fix direction: stashes_seen should refuse only a move back to a stash the host's stash
//      log lost after holding it while the session's log still lists it under a newer one
//      (a backward move); a stash re-stored onto an empty host stash (or on top of the host's
//      top, as a new line continuing the host's log) is a forward move and comes back.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <string>

#include "tests/escape/escape_support.h"
#include "tests/escape/git_attack_support.h"

namespace ptybox::testing {
namespace {

namespace fs = std::filesystem;

using git_attack::Head;
using git_attack::Rev;
using git_attack::StashList;

// One run of kRun stash-like commits (parents HEAD and an index commit), each with its own line
// in the session's stash log continuing the one before; the session's refs/stash then names the
// last (written as its loose file, so git adds no line of its own).
constexpr int kRun = 32;

std::string FillScript(int run) {
  return std::string(git_attack::kIdentity) +
         "set -e; h=$(git rev-parse HEAD); t=$(git rev-parse "
         "HEAD^{tree}); i=$(git commit-tree $t -p $h -m "
         "'index on main'); log=$(git rev-parse --git-path "
         "logs/refs/stash); old=$(git rev-parse refs/stash); "
         "n=0; while [ $n -lt " +
         std::to_string(kRun) +
         " ]; do n=$((n+1)); "
         "c=$(git commit-tree $t -p $h -p $i -m \"On main: "
         "fill " +
         std::to_string(run) +
         "-$n\"); printf '%s %s agent <agent@example.com> 1700000000 +0000\\tOn main: fill " +
         std::to_string(run) +
         "-%s\\n' $old $c $n >> $log; old=$c; done; "
         "echo $old > $(git rev-parse --git-path refs/stash); "
         "echo filled-$(($(wc -l < $log)+1000))";
}

// (a) The session fills stashes_seen, then review 36's attack: the person drops stash@{1}, the
// session drops stash@{0}.
TEST(GitReview30AttackTest, APersonsStashDropStandsAfterTheSessionFilledItsMemory) {
  git_attack::GitWriteSession git;
  auto& [daemon, ws, client, id] = git;
  ASSERT_NO_FATAL_FAILURE(git.Open());
  Observed first = RunInSession(client, id, "workspace-write", "first",
                                std::string(git_attack::kIdentity) +
                                    "echo s0 >> a.txt && git stash -q && echo one-$((40+2))");
  ASSERT_TRUE(first.Says("one-42")) << first.Show();
  int lines = 1;
  const fs::path host_log = ws / ".git" / "logs" / "refs" / "stash";
  auto host_lines_now = [&] {
    const std::string text = git_attack::Slurp(host_log);
    return static_cast<int>(std::count(text.begin(), text.end(), '\n'));
  };
  for (int run = 1; lines < 4200; ++run) {
    Observed fill = RunInSession(client, id, "workspace-write", "fill", FillScript(run));
    lines += kRun;
    ASSERT_TRUE(fill.Says("filled-" + std::to_string(lines + 1000))) << fill.Show();
    // Sends until every line has landed (the copy-back's tip checks are bounded per copy-back).
    for (int i = 0; i < 20 && host_lines_now() < lines; ++i) {
      Observed settle =
          RunInSession(client, id, "workspace-write", "settle", "echo settle-$((40+2))");
      ASSERT_TRUE(settle.Says("settle-42")) << settle.Show();
    }
    // Past 4,096 stashes in its memory the copy-back moves no more stashes over the host's (the
    // fix): the filling stops there, the host's list consistent.
    if (host_lines_now() < lines) {
      std::cout << "  the host's stash stopped moving at " << host_lines_now()
                << " entries (the session's " << lines << ")\n";
      ASSERT_EQ(Rev(ws, "refs/stash"), Rev(ws, "refs/stash@{0}"));
      break;
    }
  }
  const int session_lines = lines;
  lines = host_lines_now();
  const std::string list_before = StashList(ws);
  const size_t host_lines = std::count(list_before.begin(), list_before.end(), '\n');
  const std::string top = Rev(ws, "refs/stash");
  const std::string under = Rev(ws, "refs/stash@{1}");
  std::cout << "  the host's stash list has " << host_lines << " entries (the session's "
            << session_lines << "); top " << top << ", stash@{1} " << under << "\n";
  ASSERT_EQ(host_lines, static_cast<size_t>(lines))
      << "the session's stashes did not all come back\n"
      << Head(list_before, 5) << daemon.Log();
  // The person drops their stash@{1}.
  ASSERT_EQ(git_attack::HostGit(ws, {"stash", "drop", "-q", "stash@{1}"}).exit_code, 0);
  ASSERT_EQ(StashList(ws).find(under), std::string::npos);
  std::cout << "  the person dropped stash@{1} (" << under << "); their list begins:\n"
            << Head(StashList(ws), 3);
  // The session drops its top (an ordinary `git stash drop`).
  Observed drop =
      RunInSession(client, id, "workspace-write", "drop",
                   std::string(git_attack::kIdentity) +
                       "git stash drop -q && echo dropped-$(($(git stash list | wc -l)+1000))");
  ASSERT_TRUE(drop.Says("dropped-" + std::to_string(session_lines - 1 + 1000))) << drop.Show();
  for (int i = 0; i < 2; ++i) {
    Observed again = RunInSession(client, id, "workspace-write", "settle", "echo settle-$((40+2))");
    ASSERT_TRUE(again.Says("settle-42")) << again.Show();
  }
  const std::string ref = Rev(ws, "refs/stash");
  const std::string list = StashList(ws);
  std::cout << "  after the session's `git stash drop`: the host's refs/stash " << ref
            << "; the person's list begins:\n"
            << Head(list, 3);
  EXPECT_EQ(list.find(under), std::string::npos)
      << "the stash the person dropped (" << under << ") is back in their stash list\n"
      << Head(list, 3);
  EXPECT_NE(ref, under) << "the host's refs/stash moved back to the stash the person dropped";
  EXPECT_EQ(ref, Rev(ws, "refs/stash@{0}"))
      << "the host's refs/stash and stash@{0} disagree\n"
      << daemon.Log().substr(daemon.Log().size() > 3000 ? daemon.Log().size() - 3000 : 0);
}

// (b) The session stashes, drops, and recovers its stash with `git stash store`.
TEST(GitReview30AttackTest, ASessionsRecoveredStashComesBack) {
  git_attack::GitWriteSession git;
  auto& [daemon, ws, client, id] = git;
  ASSERT_NO_FATAL_FAILURE(git.Open());
  Observed one = RunInSession(client, id, "workspace-write", "one",
                              std::string(git_attack::kIdentity) +
                                  "echo s1 >> a.txt && git stash -q && echo one-$((40+2))");
  ASSERT_TRUE(one.Says("one-42")) << one.Show();
  Observed settle = RunInSession(client, id, "workspace-write", "settle", "echo settle-$((40+2))");
  ASSERT_TRUE(settle.Says("settle-42")) << settle.Show();
  const std::string s1 = Rev(ws, "refs/stash");
  ASSERT_FALSE(s1.empty()) << "the session's stash did not come back\n" << daemon.Log();
  std::cout << "  the session's stash came back: S1 " << s1 << "\n";
  Observed drop =
      RunInSession(client, id, "workspace-write", "drop",
                   std::string(git_attack::kIdentity) +
                       "git stash drop -q && echo dropped-$(($(git stash list | wc -l)+40))");
  ASSERT_TRUE(drop.Says("dropped-40")) << drop.Show();
  for (int i = 0; i < 2; ++i) {
    Observed again = RunInSession(client, id, "workspace-write", "settle", "echo settle-$((40+2))");
    ASSERT_TRUE(again.Says("settle-42")) << again.Show();
  }
  std::cout << "  after the session's drop, the host's refs/stash: '" << Rev(ws, "refs/stash")
            << "'\n";
  // The session recovers it, as git's "Dropped ... (<id>)" message suggests.
  Observed store =
      RunInSession(client, id, "workspace-write", "store",
                   std::string(git_attack::kIdentity) + "git stash store -m recovered " + s1 +
                       " && echo stored-$(($(git stash list | wc -l)+40))");
  ASSERT_TRUE(store.Says("stored-41")) << store.Show();
  for (int i = 0; i < 3; ++i) {
    Observed again = RunInSession(client, id, "workspace-write", "settle", "echo settle-$((40+2))");
    ASSERT_TRUE(again.Says("settle-42")) << again.Show();
  }
  const std::string ref = Rev(ws, "refs/stash");
  const std::string list = StashList(ws);
  std::cout << "  after the session's `git stash store`: the host's refs/stash '" << ref
            << "', the person's list:\n"
            << list;
  EXPECT_EQ(ref, s1) << "the session's recovered stash S1 never came back to the host\n"
                     << daemon.Log();
  EXPECT_NE(list.find(s1), std::string::npos) << "the host's stash list lacks the session's stash";
}

}  // namespace
}  // namespace ptybox::testing
