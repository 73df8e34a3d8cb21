// When the terminal's answers to a program's queries (cursor position, device attributes) are
// written to the session's terminal: only while a reader that can be the program that asked is
// blocked on it, never when the shell's own line editor would read them as typed text.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <vector>

#include "backend/readiness/foreground_inspector.h"

namespace ptybox::backend {

enum class ReplyAction {
  kWrite,  // a task of the asking group (not the shell itself) waits on the terminal
  kHold,   // the asking group is still in the foreground but nobody of it reads yet: look again
  kDrop,   // whoever reads next did not ask
};

// What the terminal looks like now, for replies owed since their query was decoded.
struct ReplyFacts {
  std::optional<pid_t> foreground_pgid;  // TIOCGPGRP now; nullopt when it cannot be read
  pid_t asked_pgid = 0;  // the foreground group when the (first held) query was decoded
  pid_t shell_pid = 0;   // the top-level shell: its pid is its process group and its main task
  // The inspection's tasks (ForegroundInspector::Inspect): the foreground group's, and readers
  // outside it when the group sleeps elsewhere (a tmux server).
  std::vector<TaskFacts> tasks;
  bool group_gone = false;  // kill(-foreground_pgid, 0) said ESRCH: no process left in it
  int looks = 0;            // inspections already made for these replies
};

// After this many looks without a reader the replies are dropped: a program reads its answer
// right after asking (well under a millisecond); the looks, ReplyRetryDelay apart, span about
// 3 s.
inline constexpr int kMaxReplyLooks = 38;

// In order:
// 1. the foreground group unknown: drop (the terminal is going);
// 2. another group than the one that was in the foreground when the query was decoded: drop
//    (the asking program has left the foreground: `printf '\e[6n'` has exited and the shell
//    took the terminal back, or the next job runs);
// 3. the shell's own main task waits on the terminal: drop. That is its line editor at the
//    prompt (or its `read` builtin, which cannot be told apart): the reply would become part
//    of the next command line;
// 4. some other task waits on the terminal: write;
// 5. the group has no process left, or kMaxReplyLooks looks found no reader: drop;
// 6. otherwise hold and look again.
[[nodiscard]] ReplyAction DecideReply(const ReplyFacts& facts);

// The wait before look number `looks` (0.25, 0.5, 1 ... 64 ms, then 100 ms): a program caught
// between writing its query and reading the answer is waiting a moment later.
[[nodiscard]] std::chrono::microseconds ReplyRetryDelay(int looks);

}  // namespace ptybox::backend
