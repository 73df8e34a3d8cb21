#include "runtime/line_connection.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <asio/post.hpp>
#include <asio/write.hpp>
#include <cerrno>

namespace ptybox::runtime {
namespace {

bool IsRegularFile(int fd) {
  struct stat st {};
  return ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
}

}  // namespace

LineConnection::LineConnection(asio::io_context& io, int in_fd, int out_fd)
    : io_(io), in_fd_(in_fd), out_fd_(out_fd) {
  // epoll cannot watch regular files: those are read and written synchronously.
  in_is_file_ = IsRegularFile(in_fd_);
  out_is_file_ = IsRegularFile(out_fd_);
  if (!in_is_file_) {
    in_.emplace(io_, in_fd_ == out_fd_ ? ::dup(in_fd_) : in_fd_);
    in_->non_blocking(true);
  }
  if (!out_is_file_) {
    out_.emplace(io_, out_fd_);
    out_->non_blocking(true);
  }
}

LineConnection::~LineConnection() {
  if (in_) in_->close();
  if (out_) out_->close();
  if (in_is_file_) ::close(in_fd_);
  if (out_is_file_ && out_fd_ != in_fd_) ::close(out_fd_);
}

void LineConnection::Start(Handlers handlers) {
  handlers_ = std::move(handlers);
  if (in_is_file_) {
    std::weak_ptr<LineConnection> weak = weak_from_this();
    asio::post(io_, [weak] {
      std::shared_ptr<LineConnection> self = weak.lock();
      if (!self) return;
      for (;;) {
        ssize_t n = ::read(self->in_fd_, self->chunk_.data(), self->chunk_.size());
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        self->OnData(self->chunk_.data(), static_cast<size_t>(n));
        if (self->closed_) return;
      }
      self->input_done_ = true;
      if (self->handlers_.on_closed) self->handlers_.on_closed();
    });
    return;
  }
  ReadMore();
}

void LineConnection::ReadMore() {
  if (closed_ || !in_) return;
  std::weak_ptr<LineConnection> weak = weak_from_this();
  in_->async_read_some(asio::buffer(chunk_), [weak](const std::error_code& ec, size_t n) {
    std::shared_ptr<LineConnection> self = weak.lock();
    if (!self || self->closed_) return;
    if (ec) {
      self->input_done_ = true;
      if (self->handlers_.on_closed) self->handlers_.on_closed();
      return;
    }
    self->OnData(self->chunk_.data(), n);
    self->ReadMore();
  });
}

void LineConnection::OnData(const char* data, size_t size) {
  std::shared_ptr<LineConnection> keep = shared_from_this();
  std::string_view incoming(data, size);
  while (!incoming.empty() && !closed_) {
    size_t newline = incoming.find('\n');
    if (skipping_) {
      if (newline == std::string_view::npos) return;
      skipping_ = false;
      incoming.remove_prefix(newline + 1);
      continue;
    }
    if (newline == std::string_view::npos) {
      buffer_.append(incoming);
      if (buffer_.size() > kMaxLineBytes) {
        buffer_.clear();
        skipping_ = true;
        if (handlers_.on_oversized_line) handlers_.on_oversized_line();
      }
      return;
    }
    buffer_.append(incoming.substr(0, newline));
    incoming.remove_prefix(newline + 1);
    std::string line;
    line.swap(buffer_);
    if (line.size() > kMaxLineBytes) {
      if (handlers_.on_oversized_line) handlers_.on_oversized_line();
      continue;
    }
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;  // blank lines are ignored
    if (handlers_.on_line) handlers_.on_line(std::move(line));
  }
}

void LineConnection::Send(std::string message) {
  if (closed_) return;
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
  outbox_.push_back(std::move(message));
  WriteMore();
}

void LineConnection::WriteMore() {
  if (writing_ || outbox_.empty() || !out_) return;
  writing_ = true;
  std::weak_ptr<LineConnection> weak = weak_from_this();
  asio::async_write(*out_, asio::buffer(outbox_.front()),
                    [weak](const std::error_code& ec, size_t) {
                      std::shared_ptr<LineConnection> self = weak.lock();
                      if (!self) return;
                      self->writing_ = false;
                      if (ec) {
                        // The peer is gone: nothing more can be delivered.
                        self->outbox_.clear();
                        if (!self->input_done_ && self->handlers_.on_closed) {
                          self->input_done_ = true;
                          self->handlers_.on_closed();
                        }
                        return;
                      }
                      self->outbox_.pop_front();
                      self->WriteMore();
                    });
}

void LineConnection::Close() {
  closed_ = true;
  if (in_) {
    std::error_code ignored;
    in_->cancel(ignored);
  }
}

}  // namespace ptybox::runtime
