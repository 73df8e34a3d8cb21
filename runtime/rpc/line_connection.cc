#include "runtime/rpc/line_connection.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <asio/post.hpp>
#include <asio/write.hpp>
#include <cerrno>
#include <chrono>

#include "common/propagate.h"

namespace ptybox::runtime {
namespace {

bool IsRegularFile(int fd) {
  struct stat st {};
  return ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
}

}  // namespace

Result<std::shared_ptr<LineConnection>> LineConnection::Create(asio::io_context& io, int in_fd,
                                                               int out_fd) {
  std::shared_ptr<LineConnection> connection(new LineConnection(io, in_fd, out_fd));
  if (Result<void> opened = connection->Open(); !opened) return Propagate(opened);
  return connection;
}

LineConnection::LineConnection(asio::io_context& io, int in_fd, int out_fd)
    : io_(io), in_fd_(in_fd), out_fd_(out_fd) {}

Result<void> LineConnection::Open() {
  if (in_fd_ < 0 || out_fd_ < 0) {
    return Fail(ErrorKind::kInternal, "a client connection has no valid descriptor");
  }
  // epoll cannot watch regular files: those are read and written synchronously.
  in_is_file_ = IsRegularFile(in_fd_);
  out_is_file_ = IsRegularFile(out_fd_);
  out_is_in_ = in_fd_ == out_fd_ && !in_is_file_;
  if (!in_is_file_) {
    if (Result<void> watched = Watch(in_, in_fd_); !watched) return watched;
  }
  if (!out_is_file_ && !out_is_in_) return Watch(out_, out_fd_);
  return {};
}

Result<void> LineConnection::Watch(std::optional<asio::posix::stream_descriptor>& slot, int fd) {
  std::error_code ec;
  slot.emplace(io_);
  slot->assign(fd, ec);
  if (!ec) slot->non_blocking(true, ec);
  if (!ec) return {};
  slot.reset();  // the descriptor stays ours to close (the destructor)
  return Fail(ErrorKind::kInternal, "cannot watch a client connection: " + ec.message());
}

LineConnection::~LineConnection() {
  std::error_code ignored;
  const bool in_owned = in_.has_value() && in_->is_open();
  const bool out_owned = out_.has_value() && out_->is_open();
  if (in_) in_->close(ignored);
  if (out_) out_->close(ignored);
  if (!in_owned && in_fd_ >= 0) ::close(in_fd_);
  if (!out_owned && out_fd_ >= 0 && out_fd_ != in_fd_) ::close(out_fd_);
}

void LineConnection::Start(Handlers handlers) {
  handlers_ = std::move(handlers);
  ReadMore();
}

void LineConnection::ReadMore() {
  if (closed_ || input_done_ || reading_ || read_paused_ || pending_at_ < pending_.size()) return;
  reading_ = true;
  std::weak_ptr<LineConnection> weak = weak_from_this();
  if (in_is_file_) {
    asio::post(io_, [weak] {
      std::shared_ptr<LineConnection> self = weak.lock();
      if (!self || self->closed_) return;
      ssize_t n;
      do {
        n = ::read(self->in_fd_, self->chunk_.data(), self->chunk_.size());
      } while (n < 0 && errno == EINTR);
      if (n <= 0) return self->InputEnded();
      self->OnChunk(static_cast<size_t>(n));
    });
    return;
  }
  in_->async_read_some(asio::buffer(chunk_), [weak](const std::error_code& ec, size_t n) {
    std::shared_ptr<LineConnection> self = weak.lock();
    if (!self || self->closed_) return;
    if (ec) return self->InputEnded();
    self->OnChunk(n);
  });
}

void LineConnection::InputEnded() {
  reading_ = false;
  if (input_done_) return;
  input_done_ = true;
  if (handlers_.on_closed) handlers_.on_closed();
}

void LineConnection::OnChunk(size_t size) {
  reading_ = false;
  pending_.assign(chunk_.data(), size);
  pending_at_ = 0;
  ProcessInput();
  ReadMore();
}

void LineConnection::ProcessInput() {
  std::shared_ptr<LineConnection> keep = shared_from_this();
  const auto deadline = std::chrono::steady_clock::now() + kTurnBudget;
  bool handled = false;
  while (pending_at_ < pending_.size() && !closed_) {
    // One turn of the reactor handles this connection's requests for kTurnBudget at most (past
    // the first): a client pipelining thousands of costly requests (resizes of a 500x1000
    // screen, outside review 9) waits behind every other client and session, once per turn.
    if (handled && std::chrono::steady_clock::now() >= deadline) {
      ContinueLater();
      return;
    }
    if (OutputFull()) {
      // The client is not reading its answers: read no further request until it does.
      read_paused_ = true;
      return;
    }
    std::string_view incoming = std::string_view(pending_).substr(pending_at_);
    size_t newline = incoming.find('\n');
    if (skipping_) {
      if (newline == std::string_view::npos) {
        pending_at_ = pending_.size();
        break;
      }
      skipping_ = false;
      pending_at_ += newline + 1;
      continue;
    }
    if (newline == std::string_view::npos) {
      buffer_.append(incoming);
      pending_at_ = pending_.size();
      if (buffer_.size() > kMaxLineBytes) {
        std::string().swap(buffer_);
        skipping_ = true;
        if (handlers_.on_oversized_line) handlers_.on_oversized_line();
      }
      break;
    }
    buffer_.append(incoming.substr(0, newline));
    pending_at_ += newline + 1;
    std::string line;
    line.swap(buffer_);
    if (line.size() > kMaxLineBytes) {
      if (handlers_.on_oversized_line) handlers_.on_oversized_line();
      continue;
    }
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;  // blank lines are ignored
    handled = true;
    if (handlers_.on_line) handlers_.on_line(std::move(line));
  }
  if (pending_at_ >= pending_.size()) {
    pending_.clear();
    pending_at_ = 0;
  }
}

void LineConnection::ContinueLater() {
  if (continue_posted_) return;
  continue_posted_ = true;
  std::weak_ptr<LineConnection> weak = weak_from_this();
  asio::post(io_, [weak] {
    std::shared_ptr<LineConnection> self = weak.lock();
    if (!self) return;
    self->continue_posted_ = false;
    if (self->closed_) return;
    self->ProcessInput();
    self->ReadMore();
  });
}

void LineConnection::Send(std::string message) {
  if (write_failed_) return;
  message.push_back('\n');
  if (out_is_file_) {
    size_t off = 0;
    while (off < message.size()) {
      ssize_t n = ::write(out_fd_, message.data() + off, message.size() - off);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return;
      off += static_cast<size_t>(n);
    }
    return;
  }
  outbox_bytes_ += message.size();
  outbox_.push_back(std::move(message));
  WriteMore();
}

void LineConnection::WriteMore() {
  if (writing_ || outbox_.empty() || write_failed_) return;
  writing_ = true;
  std::weak_ptr<LineConnection> weak = weak_from_this();
  asio::async_write(*out(), asio::buffer(outbox_.front()),
                    [weak](const std::error_code& ec, size_t) {
                      std::shared_ptr<LineConnection> self = weak.lock();
                      if (!self) return;
                      self->writing_ = false;
                      if (ec) {
                        // The peer is gone: nothing more can be delivered; free it all now.
                        self->write_failed_ = true;
                        std::deque<std::string>().swap(self->outbox_);
                        self->outbox_bytes_ = 0;
                        self->OutputDrained();
                        if (!self->input_done_) {
                          self->input_done_ = true;
                          if (self->handlers_.on_closed) self->handlers_.on_closed();
                        }
                        return;
                      }
                      self->outbox_bytes_ -= self->outbox_.front().size();
                      self->outbox_.pop_front();
                      self->OutputDrained();
                      self->WriteMore();
                    });
}

void LineConnection::OutputDrained() {
  if (read_paused_ && outbox_bytes_ <= kOutboxLowWaterBytes) {
    read_paused_ = false;
    ProcessInput();
    ReadMore();
  }
  if (outbox_.empty() && !flushed_waiters_.empty()) {
    std::vector<std::function<void()>> waiters;
    waiters.swap(flushed_waiters_);
    for (auto& waiter : waiters) waiter();
  }
}

void LineConnection::WhenFlushed(std::function<void()> done) {
  if (outbox_.empty() || write_failed_ || out_is_file_) {
    asio::post(io_, std::move(done));
    return;
  }
  flushed_waiters_.push_back(std::move(done));
}

void LineConnection::Close() {
  closed_ = true;
  if (in_ && !out_is_in_) {
    std::error_code ignored;
    in_->cancel(ignored);
  }
}

}  // namespace ptybox::runtime
