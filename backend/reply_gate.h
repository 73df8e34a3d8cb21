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
  kHold,   // the asking group is still in the foreground but nobody of it reads yet
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
};

// In order:
// 1. the foreground group unknown: drop (the terminal is going);
// 2. another group than the one that was in the foreground when the query was decoded: drop
//    (the asking program has left the foreground: `printf '\e[6n'` has exited and the shell
//    took the terminal back, or the next job runs);
// 3. the shell's own main task waits on the terminal: drop. That is its line editor at the
//    prompt (or its `read` builtin, which cannot be told apart): the reply would become part
//    of the next command line;
// 4. some other task waits on the terminal: write;
// 5. the group has no process left: drop;
// 6. otherwise hold: the asker may still read it. Time alone never ends a hold, so a program
//    that works a long while before it reads still gets its answer.
[[nodiscard]] ReplyAction DecideReply(const ReplyFacts& facts);

// Held replies are looked at on a timer this many times (ReplyRetryDelay apart, about 3 s in
// all: a program reads its answer well within that); after that only at the readiness
// inspections (every send's pre-write look, and its looks until it settles) and when another
// answer is owed.
inline constexpr int kTimedReplyLooks = 38;
// At most one inspection per this interval for answers of one session (the flood bound).
inline constexpr std::chrono::milliseconds kAnswerLookInterval{50};

// The wait before timed look number `looks` (0.25, 0.5, 1 ... 64 ms, then 100 ms): a program
// caught between writing its query and reading the answer is waiting a moment later.
[[nodiscard]] std::chrono::microseconds ReplyRetryDelay(int looks);

}  // namespace ptybox::backend
