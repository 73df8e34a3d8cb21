// Work that must not run on the reactor (a walk of a large tree), run on a thread of its own and
// its result handed back to the reactor. One way for every such piece of work: the launch's
// repository walk (init_session.cc) and the warm pool's claim (shell_session.cc).
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
      std::thread([mailbox = mailbox_, work = std::move(work),
                   deliver = std::move(deliver)]() mutable {
        T result = work();
        std::lock_guard lock(mailbox->mutex);
        if (mailbox->io == nullptr) return;
        asio::post(*mailbox->io,
                   [mailbox, deliver = std::move(deliver), result = std::move(result)]() mutable {
                     // On the reactor, the thread that destroys the owner: no lock needed to read.
                     if (mailbox->io != nullptr) deliver(std::move(result));
                   });
      }).detach();
    } catch (const std::system_error& e) {
      return std::unexpected(
          Error{ErrorKind::kSpawnFailed, "cannot start the thread that " + what + " (" + e.what() +
                                             "); nothing was started. Try again, or raise the "
                                             "daemon's task limit"});
    }
    return {};
  }

 private:
  struct Mailbox {
    std::mutex mutex;
    asio::io_context* io = nullptr;  // null once the owner is gone
  };
  std::shared_ptr<Mailbox> mailbox_;
};

}  // namespace ptybox::backend
