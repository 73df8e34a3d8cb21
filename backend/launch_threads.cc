#include "backend/launch_threads.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>

namespace ptybox::backend {
namespace {

class LaunchThreads final {
 public:
  Result<void> Post(std::function<void()> job) {
    std::lock_guard lock(mutex_);
    if (Result<void> started = StartLocked(); !started) return started;
    jobs_.push_back(std::move(job));
    wake_.notify_one();
    return {};
  }

  bool Contains(pid_t tid) const {
    for (const std::atomic<pid_t>& t : tids_) {
      if (t.load(std::memory_order_acquire) == tid) return true;
    }
    return false;
  }

 private:
  // Under mutex_: starts the threads not started yet. Some are enough; none is an error.
  Result<void> StartLocked() {
    std::string why;
    for (; started_ < kLaunchThreads; ++started_) {
      try {
        std::thread([this, slot = started_] { Serve(slot); }).detach();
      } catch (const std::system_error& e) {
        why = e.what();
        break;
      }
    }
    if (started_ > 0) return {};
    return Fail(ErrorKind::kSpawnFailed, "cannot start a thread to launch the session (" + why +
                                             "); nothing was started. Try again, or raise the "
                                             "daemon's task limit");
  }

  [[noreturn]] void Serve(int slot) {
    sigset_t all;
    ::sigfillset(&all);
    ::pthread_sigmask(SIG_SETMASK, &all, nullptr);
    tids_[slot].store(::gettid(), std::memory_order_release);
    for (;;) {
      std::function<void()> job;
      {
        std::unique_lock lock(mutex_);
        wake_.wait(lock, [this] { return !jobs_.empty(); });
        job = std::move(jobs_.front());
        jobs_.pop_front();
      }
      job();
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> jobs_;
  int started_ = 0;
  std::array<std::atomic<pid_t>, kLaunchThreads> tids_{};
};

// Never destroyed: its threads serve until the process ends.
LaunchThreads& Threads() {
  static LaunchThreads* threads = new LaunchThreads();
  return *threads;
}

}  // namespace

Result<void> PostToLaunchThread(std::function<void()> job) {
  return Threads().Post(std::move(job));
}

bool IsLaunchThread(pid_t tid) { return Threads().Contains(tid); }

}  // namespace ptybox::backend
