// The audit rate limit of a session's proxy refusals, with made-up times (no clock, no sleep).
#include "backend/proxy/refusal_limiter.h"

#include <gtest/gtest.h>

namespace ptybox::backend::proxy {
namespace {

using std::chrono::milliseconds;

TEST(RefusalLimiterTest, TenASecondAreLoggedThenOneSummaryCountsTheRest) {
  RefusalLimiter limiter;
  const auto t0 = RefusalLimiter::Clock::time_point{} + std::chrono::hours(1);
  int logged = 0;
  for (int i = 0; i < 25; ++i) {
    RefusalLimiter::Step step = limiter.OnRefusal(t0 + milliseconds(i));
    EXPECT_EQ(step.unlogged_before, 0u);
    if (step.log) ++logged;
  }
  EXPECT_EQ(logged, 10);
  // The next window: the summary of the 15 comes first, then this refusal is logged.
  RefusalLimiter::Step next = limiter.OnRefusal(t0 + milliseconds(1000));
  EXPECT_EQ(next.unlogged_before, 15u);
  EXPECT_TRUE(next.log);
  EXPECT_EQ(limiter.TakeUnlogged(), 0u);
  for (int i = 1; i < 12; ++i) (void)limiter.OnRefusal(t0 + milliseconds(1000 + i));
  // Two over the bound in this window; the proxy's Stop takes them for its last summary.
  EXPECT_EQ(limiter.TakeUnlogged(), 2u);
  EXPECT_EQ(limiter.TakeUnlogged(), 0u);
}

}  // namespace
}  // namespace ptybox::backend::proxy
