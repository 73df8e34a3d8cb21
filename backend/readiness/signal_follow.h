// Follows a signal sent to the terminal's foreground group (SIGINT, SIGQUIT, SIGTSTP) to the job
// of the interrupted line, the way a typed key would have reached it: decides, look by look, which
// group gets the signal again. It owns no process and no timer; its probe reads the terminal and
// /proc and sends, and its owner (LocalTerminal) runs the looks (docs/readiness.md,
// "Cancellation").
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>

#include "backend/contract_types.h"
#include "backend/readiness/terminal_handle.h"

namespace ptybox::backend {

// What the leader of a process group runs, as far as a signal's effect goes: the shell's own
// executable (a child forked, not yet exec'd: the shell's handler, copied with it, takes a signal
// and is then replaced by the program), another program (its own dispositions take it), or
// unknown (the leader is gone or its /proc entry unreadable).
enum class LeaderImage { kShell, kOther, kUnknown };

// What a follow needs from the terminal and /proc, read or done now.
class SignalFollowProbe {
 public:
  virtual ~SignalFollowProbe() = default;
  // The terminal's foreground group, verified to belong to the session; nullopt when the
  // terminal is going.
  virtual std::optional<pid_t> ForegroundGroup() = 0;
  // What the leader of `pgid` runs now.
  virtual LeaderImage ImageOf(pid_t pgid) = 0;
  // Sends the signal to the group `pgid`; false when it did not go (no process of it is left).
  virtual bool Deliver(pid_t pgid) = 0;
};

class SignalFollow final {
 public:
  using Millis = std::chrono::milliseconds;
  using Limit = TerminalHandle::SignalFollowLimit;
  // Looks every kFastLook for kFastLooks looks (300 ms), when a forked job usually takes the
  // terminal; a fixed look (kFixedLook) ends there, a canceled send's (kUntilEnded) goes on every
  // kSlowLook until its owner ends it (the send settled): on a busy machine the job of the line
  // may take the terminal, or exec, much later than 300 ms.
  static constexpr Millis kFastLook{4};
  static constexpr int kFastLooks = 75;
  static constexpr Millis kSlowLook{25};

  SignalFollow(SignalFollowProbe& probe, pid_t shell_pgid, Limit limit);

  // The first signal went to `pgid` (the verified foreground group), whose leader ran `before`
  // just before it was sent. Decides what it may have missed: when that leader ran the shell's
  // image then and runs another program now, it exec'd around the signal, which the shell's
  // handler may have taken: the signal goes again, now to the program.
  void Delivered(pid_t pgid, LeaderImage before);
  // Whether the signal may still have to reach a job of the line: it went to the shell itself,
  // or to a job whose leader may have taken it in the shell's image. Looks go on while true.
  [[nodiscard]] bool following() const { return state_ != State::kReached && !over_; }
  // One look: signals a job of the line that took the terminal since, or the watched job again
  // once its leader has exec'd. Returns the delay to the next look, nullopt when the follow is
  // over (the signal reached the job's own program, the job ended and the shell holds the
  // terminal again, the terminal is going, or a fixed look's time is up).
  std::optional<Millis> Look();
  // The last delivery: whether a signal went, and to which group.
  [[nodiscard]] const SignalResult& result() const { return result_; }

 private:
  // kShellHeld: the signal went to the shell's own group (the job not forked, or forked and not
  // yet in its own group). kMayBeCaught: it went to `target_`, whose leader ran (or may have run)
  // the shell's image. kReached: it went to `target_` while its leader ran its own program.
  enum class State { kShellHeld, kMayBeCaught, kReached };

  // Sends to `pgid`, reading its leader's image before (and after, when the shell's image may
  // have taken it); false when the group is gone.
  bool Send(pid_t pgid);
  // After a send that the shell's image may have taken: looks at the leader again.
  void Recheck(pid_t pgid);

  SignalFollowProbe& probe_;
  pid_t shell_pgid_;
  Limit limit_;
  State state_ = State::kShellHeld;
  pid_t target_ = 0;
  int looks_ = 0;
  bool over_ = false;
  SignalResult result_;
};

}  // namespace ptybox::backend
