// How many of a session's proxy refusals reach the audit log: at most kRefusalsLoggedPerSecond
// in any one-second window, then one summary with the count of those not logged. A session
// that loops on a refused name would otherwise write one audit line per attempt, unbounded.
// Pure: the caller passes the time.
#pragma once

#include <chrono>
#include <cstdint>

namespace ptybox::backend::proxy {

inline constexpr uint64_t kRefusalsLoggedPerSecond = 10;

class RefusalLimiter {
 public:
  using Clock = std::chrono::steady_clock;
  struct Step {
    uint64_t unlogged_before = 0;  // > 0: write the summary of the last window first
    bool log = false;              // write this refusal
  };

  [[nodiscard]] Step OnRefusal(Clock::time_point now) {
    Step step;
    if (!started_ || now - window_start_ >= std::chrono::seconds(1)) {
      step.unlogged_before = unlogged_;
      unlogged_ = 0;
      logged_ = 0;
      window_start_ = now;
      started_ = true;
    }
    if (logged_ < kRefusalsLoggedPerSecond) {
      ++logged_;
      step.log = true;
    } else {
      ++unlogged_;
    }
    return step;
  }

  // The refusals not logged since the last summary (when the session's proxy stops).
  [[nodiscard]] uint64_t TakeUnlogged() {
    const uint64_t out = unlogged_;
    unlogged_ = 0;
    return out;
  }

 private:
  bool started_ = false;
  Clock::time_point window_start_{};
  uint64_t logged_ = 0;
  uint64_t unlogged_ = 0;
};

}  // namespace ptybox::backend::proxy
