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
    jobs_.push_back(std::move(job));
    if (Result<void> started = StartLocked(); !started) {
      jobs_.pop_back();
      return started;
    }
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
  // Under mutex_: one more thread when the queued launches outnumber the idle threads (up to
  // kMaxLaunchThreads). Fails only when no thread runs at all and none can be started.
  Result<void> StartLocked() {
    if (jobs_.size() <= idle_ || started_ >= kMaxLaunchThreads) return {};
    try {
      std::thread([this, slot = started_] { Serve(slot); }).detach();
      ++started_;
      return {};
    } catch (const std::system_error& e) {
      if (started_ > 0) return {};  // the running ones take it in turn
      const std::string why = e.what();
      return Fail(ErrorKind::kSpawnFailed,
                  "cannot start a thread to launch the session (" + why +
                      "); nothing was started. Try again, or raise the daemon's task limit");
    }
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
        ++idle_;
        wake_.wait(lock, [this] { return !jobs_.empty(); });
        --idle_;
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
  size_t idle_ = 0;  // threads waiting for a job
  std::array<std::atomic<pid_t>, kMaxLaunchThreads> tids_{};
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
