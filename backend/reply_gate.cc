#include "backend/reply_gate.h"

#include <algorithm>

namespace ptybox::backend {

ReplyAction DecideReply(const ReplyFacts& facts) {
  if (!facts.foreground_pgid || *facts.foreground_pgid != facts.asked_pgid) {
    return ReplyAction::kDrop;
  }
  const auto waits = [](const TaskFacts& t) { return t.tty_wait != TtyWait::kNone; };
  const bool shell_reads = std::any_of(facts.tasks.begin(), facts.tasks.end(), [&](const auto& t) {
    return t.tid == facts.shell_pid && waits(t);
  });
  if (shell_reads) return ReplyAction::kDrop;
  if (std::any_of(facts.tasks.begin(), facts.tasks.end(), waits)) return ReplyAction::kWrite;
  if (facts.group_gone) return ReplyAction::kDrop;
  return ReplyAction::kHold;
}

std::chrono::microseconds ReplyRetryDelay(int looks) {
  if (looks >= 9) return std::chrono::milliseconds(100);
  return std::chrono::microseconds(250 << std::max(looks, 0));
}

}  // namespace ptybox::backend
