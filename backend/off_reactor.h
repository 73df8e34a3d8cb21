// Work that must not run on the reactor (a walk of a large tree), run on a thread of its own and
// its result handed back to the reactor. One way for every such piece of work: the launch's
// repository walk (init_session.cc) and the warm pool's claim (shell_session.cc); the launch
// itself runs on a launch thread (launch_threads.h) the same way.
//
// The owner keeps an OffReactor; once the owner is destroyed, results still on their way are
// dropped: nothing is posted to an owner that is gone, nor to a reactor that went with it.
// `deliver` is destroyed on the worker thread when that happens, so it must own nothing that
// lives on the reactor (capture an id or a raw owner pointer, keep the state with the owner).
#pragma once

#include <asio/io_context.hpp>
#include <asio/post.hpp>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>

#include "backend/launch_threads.h"
#include "common/error.h"

namespace ptybox::backend {

class OffReactor final {
 public:
  explicit OffReactor(asio::io_context& io) : mailbox_(std::make_shared<Mailbox>()) {
    mailbox_->io = &io;
  }
  ~OffReactor() {
    std::lock_guard lock(mailbox_->mutex);
    mailbox_->io = nullptr;
  }
  OffReactor(const OffReactor&) = delete;
  OffReactor& operator=(const OffReactor&) = delete;

  // Runs `work` on a new thread, then `deliver(result)` on the reactor unless this object was
  // destroyed first. An error (no thread could be started: the daemon's task limit) means
  // neither runs; `what` names the work in that error.
  template <typename T>
  [[nodiscard]] Result<void> Run(const std::string& what, std::function<T()> work,
                                 std::function<void(T)> deliver) {
    try {
      std::thread(Job<T>(std::move(work), std::move(deliver), nullptr)).detach();
    } catch (const std::system_error& e) {
      return std::unexpected(
          Error{ErrorKind::kSpawnFailed, "cannot start the thread that " + what + " (" + e.what() +
                                             "); nothing was started. Try again, or raise the "
                                             "daemon's task limit"});
    }
    return {};
  }

  // The same on one of the launch threads (launch_threads.h), for work that starts a child.
  // `dropped(result)` runs instead of `deliver` once this object is gone (on whichever thread
  // finds it gone): it ends what the result holds (a launched child) and touches nothing else.
  template <typename T>
  [[nodiscard]] Result<void> RunLaunch(std::function<T()> work, std::function<void(T)> deliver,
                                       std::function<void(T)> dropped) {
    return PostToLaunchThread(Job<T>(std::move(work), std::move(deliver), std::move(dropped)));
  }

 private:
  struct Mailbox {
    std::mutex mutex;
    asio::io_context* io = nullptr;  // null once the owner is gone
  };

  // `work` where it runs, then `deliver` posted to the reactor, or `dropped` (when given) once
  // the owner is gone.
  template <typename T>
  std::function<void()> Job(std::function<T()> work, std::function<void(T)> deliver,
                            std::function<void(T)> dropped) {
    return [mailbox = mailbox_, work = std::move(work), deliver = std::move(deliver),
            dropped = std::move(dropped)]() mutable {
      T result = work();
      std::unique_lock lock(mailbox->mutex);
      if (mailbox->io == nullptr) {
        lock.unlock();
        if (dropped) dropped(std::move(result));
        return;
      }
      asio::post(*mailbox->io, [mailbox, deliver = std::move(deliver), dropped = std::move(dropped),
                                result = std::move(result)]() mutable {
        // On the reactor, the thread that destroys the owner: no lock needed to read.
        if (mailbox->io != nullptr) {
          deliver(std::move(result));
        } else if (dropped) {
          dropped(std::move(result));
        }
      });
    };
  }
  std::shared_ptr<Mailbox> mailbox_;
};

}  // namespace ptybox::backend
