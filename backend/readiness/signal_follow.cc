#include "backend/readiness/signal_follow.h"

namespace ptybox::backend {

SignalFollow::SignalFollow(SignalFollowProbe& probe, pid_t shell_pgid, Limit limit)
    : probe_(probe), shell_pgid_(shell_pgid), limit_(limit) {}

void SignalFollow::Delivered(pid_t pgid, LeaderImage before) {
  result_ = SignalResult{true, pgid};
  target_ = pgid;
  if (pgid == shell_pgid_) {
    state_ = State::kShellHeld;
    return;
  }
  if (before == LeaderImage::kOther) {
    // Exec is one-way: the program's own dispositions took it, as they would a typed key's.
    state_ = State::kReached;
    return;
  }
  Recheck(pgid);
}

void SignalFollow::Recheck(pid_t pgid) {
  // Sending wakes the receiver, which may run first: a leader that ran the shell's image just
  // before may have taken the signal in the shell's handler and exec'd its program since, all
  // before this look. Only a look after the send tells a leader still waiting to exec (watched)
  // from one whose program may never have seen the signal (sent again, now to the program).
  if (probe_.ImageOf(pgid) != LeaderImage::kOther) {
    state_ = State::kMayBeCaught;  // still the shell's image (or unknown): watch it exec
    return;
  }
  // Sent only to the verified foreground group, as every signal: a group that left the
  // foreground since is the next look's to judge.
  if (probe_.ForegroundGroup() != pgid) {
    state_ = State::kMayBeCaught;
    return;
  }
  if (probe_.Deliver(pgid)) result_ = SignalResult{true, pgid};
  state_ = State::kReached;
}

bool SignalFollow::Send(pid_t pgid) {
  const LeaderImage before = pgid == shell_pgid_ ? LeaderImage::kShell : probe_.ImageOf(pgid);
  if (!probe_.Deliver(pgid)) return false;
  Delivered(pgid, before);
  return true;
}

std::optional<SignalFollow::Millis> SignalFollow::Look() {
  if (!following()) {
    over_ = true;
    return std::nullopt;
  }
  const int look = looks_++;
  std::optional<pid_t> now = probe_.ForegroundGroup();
  if (!now) {
    over_ = true;  // the terminal is going
    return std::nullopt;
  }
  if (*now == target_) {
    // The shell still holds the terminal, or the watched job does: once its leader has exec'd,
    // the shell's handler it still had may have taken the signal; its program gets it now.
    if (state_ == State::kMayBeCaught && probe_.ImageOf(target_) == LeaderImage::kOther) {
      if (probe_.Deliver(target_)) result_ = SignalResult{true, target_};
      state_ = State::kReached;
    }
  } else if (*now == shell_pgid_) {
    state_ = State::kReached;  // the job is over: the shell holds the terminal again
  } else {
    // A job of the interrupted line took the terminal since: it gets the signal too, and is
    // watched in turn while its leader may still run the shell's image. A group that is gone
    // already (the terminal still names it until the shell takes it back) is looked at again.
    (void)Send(*now);
  }
  if (!following() || (limit_ == Limit::kFixedLook && look >= kFastLooks)) {
    over_ = true;
    return std::nullopt;
  }
  return look < kFastLooks ? kFastLook : kSlowLook;
}

}  // namespace ptybox::backend
