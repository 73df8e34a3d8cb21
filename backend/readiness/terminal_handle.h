// What a send operation needs from its terminal, as asynchronous calls so that a provider may be
// local or remote and so that every ordering rule of cancellation can be tested with a fake.
// Callbacks never run inside the call that started them.
#pragma once

#include <sys/types.h>

#include <functional>
#include <optional>
#include <string>

#include "backend/contract_types.h"
#include "backend/readiness/foreground_inspector.h"
#include "common/error.h"

namespace ptybox::backend {

class TerminalHandle {
 public:
  virtual ~TerminalHandle() = default;

  // Full foreground inspection. The provider delivers the facts only after it has decoded the
  // output the terminal held when the facts were read, so no fact overtakes the output before it.
  virtual void Inspect(std::function<void(ForegroundFacts)> done) = 0;
  // The pre-write check after a look that verified the shell idle at its prompt: when
  // `verified` (that look's facts) still holds (the same foreground group, none of its tasks
  // has run since, nothing unread), delivers them as Inspect would, without walking /proc
  // again; otherwise a full Inspect.
  virtual void InspectSince(const ForegroundFacts& verified,
                            std::function<void(ForegroundFacts)> done) {
    (void)verified;
    Inspect(std::move(done));
  }
  // The foreground process group, read now (cheap).
  virtual std::optional<pid_t> ForegroundPgid() = 0;
  // Input written to the terminal that no program has read yet, read now; nullopt if unknown.
  virtual std::optional<size_t> UnreadInput() = 0;
  // Turns the terminal's ECHO and ECHONL off again when a program turned them on (`stty sane`),
  // keeping every other setting; returns whether it changed them. No-op where unsupported.
  virtual bool ReassertNoEcho() { return false; }
  // Discards input written to the terminal that no program has read yet (tcflush TCIFLUSH).
  // No-op where unsupported.
  virtual void DiscardUnreadInput() {}
  // Whether a space then ^U reach the line editor as plain text and its unix-line-discard: ^U is
  // the terminal's kill character and neither byte is any other special character (interrupt,
  // end of file, literal next...), which any program can set with stty. False where unknown.
  [[nodiscard]] virtual bool LineDiscardIsInert() const { return false; }
  // Writes all of `bytes` (possibly in pieces); `done` runs once: the count, or the error that
  // rejected the write.
  virtual void Write(std::string bytes, std::function<void(Result<size_t>)> done) = 0;
  // Stops an in-flight write after what has been written so far; its `done` runs with that count.
  // True when bytes of it were left unwritten (dropped).
  virtual bool AbortWrite() = 0;
  // How long a signal that reached the shell itself is followed to the job of the interrupted
  // line (LocalTerminal::StartSignalFollow): a fixed look (a bare terminal_signal, whose answer
  // waits for it), or until EndSignalFollow (a canceled send ends it when it settles).
  enum class SignalFollowLimit { kFixedLook, kUntilEnded };
  // Sends `signal` to the verified foreground process group. When that was the shell's own, the
  // terminal may keep looking for a job of the interrupted line that takes the terminal next
  // (LocalTerminal::StartSignalFollow) before `done` runs; EndSignalFollow ends that look now.
  virtual void SignalForeground(int signal, SignalFollowLimit limit,
                                std::function<void(Result<SignalResult>)> done) = 0;
  virtual void EndSignalFollow() {}
};

}  // namespace ptybox::backend
