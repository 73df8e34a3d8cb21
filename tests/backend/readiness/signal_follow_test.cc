// SignalFollow against a fake session: every ordering of a signal sent by pid against the shell
// forking the next job of the line, the job taking the terminal, and its leader exec'ing its
// program, including the receiver running (and exec'ing) before the sender looks again
// (docs/readiness.md, "Cancellation").
#include "backend/readiness/signal_follow.h"

#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <optional>
#include <vector>

namespace ptybox::backend {
namespace {

using Limit = TerminalHandle::SignalFollowLimit;
using Millis = SignalFollow::Millis;

constexpr pid_t kShell = 100;
constexpr pid_t kJob = 200;
constexpr pid_t kNextJob = 300;

// The session's processes as the follow sees them. A signal reaches the image its group's leader
// runs when it is delivered: the shell's image (a forked child's copy of the shell's handler
// takes it, and it is lost once the child execs) or the job's program.
class FakeSession final : public SignalFollowProbe {
 public:
  struct Group {
    LeaderImage image = LeaderImage::kShell;
    bool gone = false;
    int taken_by_shell_handler = 0;
    int reached_program = 0;
  };

  std::optional<pid_t> ForegroundGroup() override {
    if (closing) return std::nullopt;
    return foreground;
  }
  LeaderImage ImageOf(pid_t pgid) override {
    ++image_reads;
    auto it = groups.find(pgid);
    if (it == groups.end() || it->second.gone) return LeaderImage::kUnknown;
    return it->second.image;
  }
  bool Deliver(pid_t pgid) override {
    Group& g = groups[pgid];
    if (g.gone) return false;
    delivered.push_back(pgid);
    if (g.image == LeaderImage::kOther) {
      ++g.reached_program;
    } else {
      ++g.taken_by_shell_handler;
    }
    // The receiver was woken by the signal and may run before the sender looks again.
    if (after_delivery) std::exchange(after_delivery, nullptr)();
    return true;
  }

  // Bash forks the job (its leader runs the shell's image) and it takes the terminal.
  void JobTakesTheTerminal(pid_t pgid, LeaderImage image = LeaderImage::kShell) {
    groups[pgid].image = image;
    foreground = pgid;
  }
  void Exec(pid_t pgid) { groups[pgid].image = LeaderImage::kOther; }
  // The job ended and the shell took the terminal back.
  void JobEnds(pid_t pgid) {
    groups[pgid].gone = true;
    foreground = kShell;
  }

  pid_t foreground = kShell;
  bool closing = false;
  std::map<pid_t, Group> groups{{kShell, Group{}}};
  std::vector<pid_t> delivered;
  std::function<void()> after_delivery;
  int image_reads = 0;
};

// The first signal, as LocalTerminal::SignalForeground sends it: the image read, then the kill.
void SendFirst(FakeSession& session, SignalFollow& follow, pid_t pgid) {
  const LeaderImage before = pgid == kShell ? LeaderImage::kShell : session.ImageOf(pgid);
  ASSERT_TRUE(session.Deliver(pgid));
  follow.Delivered(pgid, before);
}

// Looks until the follow is over or `max` looks; returns how many it took.
int LookUntilOver(SignalFollow& follow, int max = 10000) {
  for (int look = 1; look <= max; ++look) {
    if (!follow.Look()) return look;
  }
  return -1;
}

TEST(SignalFollowTest, AJobThatRunsItsProgramIsReachedOnceAndNotFollowed) {
  FakeSession session;
  session.JobTakesTheTerminal(kJob, LeaderImage::kOther);
  SignalFollow follow(session, kShell, Limit::kUntilEnded);
  SendFirst(session, follow, kJob);
  EXPECT_FALSE(follow.following()) << "a typed key would have reached it the same way";
  EXPECT_EQ(session.groups[kJob].reached_program, 1);
  EXPECT_EQ(session.delivered, std::vector<pid_t>{kJob});
  EXPECT_EQ(follow.result().pgid, kJob);
  EXPECT_FALSE(follow.Look());
}

// The CI failure: the signal went to the job while its leader still ran the shell's image; the
// woken leader ran first, its copy of bash's handler took the signal, and it exec'd `sleep`
// before the daemon looked at it again. The look after the signal sees the program and sends
// again, now to it.
TEST(SignalFollowTest, ALeaderThatExecsRightAfterTheSignalStillGetsItInItsProgram) {
  FakeSession session;
  session.JobTakesTheTerminal(kJob);
  session.after_delivery = [&] { session.Exec(kJob); };
  SignalFollow follow(session, kShell, Limit::kUntilEnded);
  SendFirst(session, follow, kJob);
  EXPECT_EQ(session.groups[kJob].taken_by_shell_handler, 1);
  EXPECT_EQ(session.groups[kJob].reached_program, 1) << "sleep must get the signal";
  EXPECT_FALSE(follow.following());
}

// The same race one step later: the signal went to the shell, and the job that took the
// terminal afterwards exec'd right after the follow's signal reached its shell image.
TEST(SignalFollowTest, AJobThatTookTheTerminalAndExecsRightAfterTheFollowsSignalGetsItAgain) {
  FakeSession session;
  SignalFollow follow(session, kShell, Limit::kUntilEnded);
  SendFirst(session, follow, kShell);
  ASSERT_TRUE(follow.following());
  ASSERT_TRUE(follow.Look()) << "the shell still holds the terminal";
  session.JobTakesTheTerminal(kJob);
  session.after_delivery = [&] { session.Exec(kJob); };
  EXPECT_FALSE(follow.Look());
  EXPECT_EQ(session.groups[kJob].reached_program, 1);
  EXPECT_EQ(session.delivered, (std::vector<pid_t>{kShell, kJob, kJob}));
}

// Every point where the job can be when the signal reaches the shell (before the fork, forked
// but still in the shell's group, in its own group without the terminal, holding the terminal
// before or after exec), and every point the exec can come later: the program gets the signal.
TEST(SignalFollowTest, EveryOrderingOfForkTakeoverAndExecEndsWithTheProgramSignaled) {
  for (int takeover_after = 0; takeover_after < 4; ++takeover_after) {
    for (int exec_after = 0; exec_after < 4; ++exec_after) {
      for (bool exec_when_woken : {false, true}) {
        SCOPED_TRACE(::testing::Message()
                     << "takeover after " << takeover_after << " looks, exec " << exec_after
                     << " looks later, exec when woken " << exec_when_woken);
        FakeSession session;
        SignalFollow follow(session, kShell, Limit::kUntilEnded);
        SendFirst(session, follow, kShell);
        int look = 0;
        bool exec_done = false;
        for (; look < 100; ++look) {
          if (look == takeover_after) {
            session.JobTakesTheTerminal(kJob);
            if (exec_when_woken) session.after_delivery = [&] { session.Exec(kJob); };
          }
          if (look == takeover_after + exec_after && !exec_done) {
            session.Exec(kJob);
            exec_done = true;
          }
          if (!follow.Look()) break;
        }
        EXPECT_LT(look, 100) << "the follow never ended";
        EXPECT_GE(session.groups[kJob].reached_program, 1);
        EXPECT_LE(session.groups[kJob].reached_program, 2) << "no stream of signals";
      }
    }
  }
}

// A signal goes only to the verified foreground group: a job that left the terminal between the
// kill and the look after it (it ended, the shell took the terminal back) is not sent to again.
TEST(SignalFollowTest, TheSecondSignalGoesOnlyToAGroupStillInTheForeground) {
  FakeSession session;
  session.JobTakesTheTerminal(kJob);
  session.after_delivery = [&] {
    session.Exec(kJob);
    session.foreground = kShell;
  };
  SignalFollow follow(session, kShell, Limit::kUntilEnded);
  SendFirst(session, follow, kJob);
  EXPECT_EQ(session.delivered, std::vector<pid_t>{kJob});
  EXPECT_FALSE(follow.Look()) << "the shell holds the terminal: the job is over";
  EXPECT_EQ(session.delivered, std::vector<pid_t>{kJob});
}

TEST(SignalFollowTest, AJobStillInTheShellsImageIsWatchedAndSignaledOnceItExecs) {
  FakeSession session;
  session.JobTakesTheTerminal(kJob);
  SignalFollow follow(session, kShell, Limit::kUntilEnded);
  SendFirst(session, follow, kJob);
  ASSERT_TRUE(follow.following());
  for (int look = 0; look < 5; ++look) ASSERT_TRUE(follow.Look());
  EXPECT_EQ(session.delivered.size(), 1u) << "nothing is sent while it has not exec'd";
  session.Exec(kJob);
  EXPECT_FALSE(follow.Look());
  EXPECT_EQ(session.groups[kJob].reached_program, 1);
}

TEST(SignalFollowTest, AnUnreadableLeaderIsWatchedNotTakenForAProgram) {
  FakeSession session;
  session.JobTakesTheTerminal(kJob);
  // Its /proc entry cannot be read after the signal (the fake forgets it): unknown.
  session.after_delivery = [&] { session.groups.erase(kJob); };
  SignalFollow follow(session, kShell, Limit::kUntilEnded);
  SendFirst(session, follow, kJob);
  EXPECT_TRUE(follow.following()) << "unknown after the signal: it may have been the shell's";
  session.groups[kJob].image = LeaderImage::kOther;
  EXPECT_FALSE(follow.Look());
  EXPECT_EQ(session.groups[kJob].reached_program, 1);
}

TEST(SignalFollowTest, TheFollowEndsWhenTheJobEndsAndTheShellHoldsTheTerminal) {
  FakeSession session;
  session.JobTakesTheTerminal(kJob);
  SignalFollow follow(session, kShell, Limit::kUntilEnded);
  SendFirst(session, follow, kJob);
  ASSERT_TRUE(follow.Look());
  session.JobEnds(kJob);
  EXPECT_FALSE(follow.Look());
  EXPECT_EQ(session.delivered.size(), 1u);
}

TEST(SignalFollowTest, AGroupGoneBeforeItsSignalIsNotTheEndOfTheLine) {
  FakeSession session;
  SignalFollow follow(session, kShell, Limit::kUntilEnded);
  SendFirst(session, follow, kShell);
  // A job ended on its own; the terminal still names its group until the shell takes it back.
  session.JobTakesTheTerminal(kJob, LeaderImage::kOther);
  session.groups[kJob].gone = true;
  ASSERT_TRUE(follow.Look());
  EXPECT_EQ(follow.result().pgid, kShell) << "what was sent stands";
  session.JobTakesTheTerminal(kNextJob, LeaderImage::kOther);
  EXPECT_FALSE(follow.Look());
  EXPECT_EQ(session.groups[kNextJob].reached_program, 1);
  EXPECT_EQ(follow.result().pgid, kNextJob);
}

TEST(SignalFollowTest, TheTerminalGoingEndsTheFollow) {
  FakeSession session;
  SignalFollow follow(session, kShell, Limit::kUntilEnded);
  SendFirst(session, follow, kShell);
  session.closing = true;
  EXPECT_FALSE(follow.Look());
  EXPECT_FALSE(follow.following());
}

TEST(SignalFollowTest, AFixedLookEndsAfterItsFastLooks) {
  FakeSession session;
  SignalFollow follow(session, kShell, Limit::kFixedLook);
  SendFirst(session, follow, kShell);
  Millis spent{0};
  int looks = 0;
  while (std::optional<Millis> next = follow.Look()) {
    spent += *next;
    ++looks;
  }
  EXPECT_EQ(looks, SignalFollow::kFastLooks);
  EXPECT_EQ(spent, SignalFollow::kFastLook * SignalFollow::kFastLooks);  // 300 ms
  EXPECT_EQ(follow.result().pgid, kShell);
}

// A canceled send's follow has no time limit of its own: a job that takes the terminal and execs
// long after the signal (a loaded machine) is still signaled; the send's settlement ends it.
TEST(SignalFollowTest, UntilEndedHasNoTimeLimitOfItsOwn) {
  FakeSession session;
  SignalFollow follow(session, kShell, Limit::kUntilEnded);
  SendFirst(session, follow, kShell);
  Millis spent{0};
  for (int look = 0; look < 4000; ++look) {
    std::optional<Millis> next = follow.Look();
    ASSERT_TRUE(next);
    spent += *next;
  }
  EXPECT_GT(spent, std::chrono::seconds(90));
  EXPECT_EQ(*follow.Look(), SignalFollow::kSlowLook);
  session.JobTakesTheTerminal(kJob);
  ASSERT_TRUE(follow.Look());
  session.Exec(kJob);
  EXPECT_FALSE(follow.Look());
  EXPECT_EQ(session.groups[kJob].reached_program, 1);
  EXPECT_EQ(LookUntilOver(follow), 1);
}

}  // namespace
}  // namespace ptybox::backend
