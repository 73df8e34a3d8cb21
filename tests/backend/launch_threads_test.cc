// The launch threads (backend/launch_threads.h): launches that take long (a huge workspace's
// mounts) never hold a later launch behind them, up to the thread bound.
#include "backend/launch_threads.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>

namespace ptybox::backend {
namespace {

TEST(LaunchThreadsTest, LaunchesThatKeepTheirThreadsNeverHoldALaterOne) {
  struct Shared {
    std::mutex mutex;
    std::condition_variable changed;
    bool released = false;
    int holding = 0;
    bool later_ran = false;
    bool later_on_a_launch_thread = false;
  };
  auto shared = std::make_shared<Shared>();  // outlives the test if a thread is still leaving
  constexpr int kHeld = 16;  // an owner's default maxSessions: more than any fixed small pool
  for (int i = 0; i < kHeld; ++i) {
    ASSERT_TRUE(PostToLaunchThread([shared] {
      std::unique_lock lock(shared->mutex);
      ++shared->holding;
      shared->changed.notify_all();
      shared->changed.wait(lock, [&] { return shared->released; });
      --shared->holding;
      shared->changed.notify_all();
    }));
  }
  ASSERT_TRUE(PostToLaunchThread([shared] {
    std::lock_guard lock(shared->mutex);
    shared->later_ran = true;
    shared->later_on_a_launch_thread = IsLaunchThread(::gettid());
    shared->changed.notify_all();
  }));
  std::unique_lock lock(shared->mutex);
  // A hang guard only: the later launch runs while every earlier one still holds its thread
  // (none is released before this wait ends).
  EXPECT_TRUE(shared->changed.wait_for(lock, std::chrono::seconds(60), [&] {
    return shared->later_ran && shared->holding == kHeld;
  }));
  EXPECT_TRUE(shared->later_on_a_launch_thread);
  EXPECT_FALSE(IsLaunchThread(::gettid()));
  shared->released = true;
  shared->changed.notify_all();
  EXPECT_TRUE(shared->changed.wait_for(lock, std::chrono::seconds(60),
                                       [&] { return shared->holding == 0; }));
}

}  // namespace
}  // namespace ptybox::backend
