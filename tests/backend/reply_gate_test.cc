// DecideReply: every rule of backend/reply_gate.h, in order.
#include "backend/reply_gate.h"

#include <gtest/gtest.h>

namespace ptybox::backend {
namespace {

constexpr pid_t kShell = 100;
constexpr pid_t kJob = 200;

TaskFacts Task(pid_t pid, pid_t tid, TtyWait wait) {
  TaskFacts t;
  t.pid = pid;
  t.tid = tid;
  t.tty_wait = wait;
  return t;
}

ReplyFacts Facts(std::optional<pid_t> foreground, pid_t asked, std::vector<TaskFacts> tasks) {
  ReplyFacts f;
  f.foreground_pgid = foreground;
  f.asked_pgid = asked;
  f.shell_pid = kShell;
  f.tasks = std::move(tasks);
  return f;
}

TEST(ReplyGateTest, AReaderOfTheAskingGroupGetsTheReply) {
  for (TtyWait wait : {TtyWait::kRead, TtyWait::kSelect, TtyWait::kPoll, TtyWait::kEpoll}) {
    EXPECT_EQ(DecideReply(Facts(kJob, kJob, {Task(kJob, kJob, wait)})), ReplyAction::kWrite);
  }
  // Another thread of the program, or a relay outside the group (a tmux server).
  EXPECT_EQ(DecideReply(Facts(kJob, kJob,
                              {Task(kJob, kJob, TtyWait::kNone), Task(kJob, 201, TtyWait::kPoll)})),
            ReplyAction::kWrite);
  TaskFacts relay = Task(300, 300, TtyWait::kRead);
  relay.outside_group = true;
  EXPECT_EQ(DecideReply(Facts(kJob, kJob, {Task(kJob, kJob, TtyWait::kNone), relay})),
            ReplyAction::kWrite);
  // A program of the shell's own group (a command substitution) that reads, while the shell
  // waits for it.
  EXPECT_EQ(
      DecideReply(Facts(kShell, kShell,
                        {Task(kShell, kShell, TtyWait::kNone), Task(150, 150, TtyWait::kRead)})),
      ReplyAction::kWrite);
}

TEST(ReplyGateTest, TheShellsLineEditorNeverGetsAReply) {
  // `printf '\e[6n'` exited and the shell is back at its prompt, reading.
  EXPECT_EQ(DecideReply(Facts(kShell, kShell, {Task(kShell, kShell, TtyWait::kRead)})),
            ReplyAction::kDrop);
  // Even with another reader in its group: which one reads first is the kernel's choice.
  EXPECT_EQ(
      DecideReply(Facts(kShell, kShell,
                        {Task(kShell, kShell, TtyWait::kRead), Task(150, 150, TtyWait::kRead)})),
      ReplyAction::kDrop);
}

TEST(ReplyGateTest, AGroupThatLeftTheForegroundLosesItsReply) {
  // The asking job ended and the shell took the terminal back (not reading yet).
  EXPECT_EQ(DecideReply(Facts(kShell, kJob, {Task(kShell, kShell, TtyWait::kNone)})),
            ReplyAction::kDrop);
  // The next job of the command line runs and reads: it did not ask.
  EXPECT_EQ(DecideReply(Facts(300, kJob, {Task(300, 300, TtyWait::kRead)})), ReplyAction::kDrop);
  // Nothing known about the terminal.
  EXPECT_EQ(DecideReply(Facts(std::nullopt, kJob, {})), ReplyAction::kDrop);
}

TEST(ReplyGateTest, NoReaderYetIsHeldWhileTheGroupKeepsTheForeground) {
  ReplyFacts f = Facts(kJob, kJob, {Task(kJob, kJob, TtyWait::kNone)});
  EXPECT_EQ(DecideReply(f), ReplyAction::kHold);
  f.tasks.front().running = true;
  EXPECT_EQ(DecideReply(f), ReplyAction::kHold);
  // All zombies: still named by the terminal and not gone until the shell reaps them; the
  // shell then takes the terminal back (rule 2).
  EXPECT_EQ(DecideReply(Facts(kJob, kJob, {})), ReplyAction::kHold);
  // The group's last process is gone (the terminal still names it until the shell takes it
  // back): no reader will come.
  ReplyFacts gone = Facts(kJob, kJob, {});
  gone.group_gone = true;
  EXPECT_EQ(DecideReply(gone), ReplyAction::kDrop);
  // A reader, however late.
  f.tasks.front() = Task(kJob, kJob, TtyWait::kRead);
  EXPECT_EQ(DecideReply(f), ReplyAction::kWrite);
}

TEST(ReplyGateTest, LooksBackOffToATenthOfASecondAndSpanAboutThreeSeconds) {
  EXPECT_EQ(ReplyRetryDelay(0).count(), 250);
  EXPECT_EQ(ReplyRetryDelay(1).count(), 500);
  EXPECT_EQ(ReplyRetryDelay(8).count(), 64000);
  EXPECT_EQ(ReplyRetryDelay(9).count(), 100000);
  EXPECT_EQ(ReplyRetryDelay(1000).count(), 100000);
  int64_t total_us = 0;
  for (int look = 0; look < kTimedReplyLooks; ++look) total_us += ReplyRetryDelay(look).count();
  EXPECT_GE(total_us, 2500000);
  EXPECT_LE(total_us, 3500000);
}

}  // namespace
}  // namespace ptybox::backend
