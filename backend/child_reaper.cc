#include "backend/child_reaper.h"

#include <sys/wait.h>

#include <asio/post.hpp>
#include <csignal>

namespace ptybox::backend {

ChildReaper::ChildReaper(asio::io_context& io) : io_(io), sigchld_(io, SIGCHLD) { Arm(); }

void ChildReaper::Arm() {
  sigchld_.async_wait([this](const std::error_code& ec, int) {
    if (ec) return;
    ReapAll();
    Arm();
  });
}

void ChildReaper::Watch(pid_t pid, ExitCallback callback) {
  auto early = unclaimed_.find(pid);
  if (early != unclaimed_.end()) {
    int status = early->second;
    unclaimed_.erase(early);
    asio::post(io_, [callback = std::move(callback), status] { callback(status); });
    return;
  }
  watchers_[pid] = std::move(callback);
}

void ChildReaper::Unwatch(pid_t pid) { watchers_.erase(pid); }

void ChildReaper::ReapAll() {
  for (;;) {
    int status = 0;
    pid_t pid = ::waitpid(-1, &status, WNOHANG);
    if (pid <= 0) return;
    auto it = watchers_.find(pid);
    if (it == watchers_.end()) {
      // An orphan, or a child whose watcher is not registered yet.
      if (unclaimed_.size() > 1024) unclaimed_.erase(unclaimed_.begin());
      unclaimed_[pid] = status;
      continue;
    }
    ExitCallback callback = std::move(it->second);
    watchers_.erase(it);
    asio::post(io_, [callback = std::move(callback), status] { callback(status); });
  }
}

}  // namespace ptybox::backend
