// One client connection that speaks newline-delimited messages over a pair of descriptors
// (standard input/output, or both ends of an accepted Unix socket). Reads are bounded; a line
// over the bound is reported and skipped, and the connection stays usable.
#pragma once

#include <asio/io_context.hpp>
#include <asio/posix/stream_descriptor.hpp>
#include <array>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>

namespace ptybox::runtime {

class LineConnection final : public std::enable_shared_from_this<LineConnection> {
 public:
  struct Handlers {
    std::function<void(std::string line)> on_line;
    std::function<void()> on_oversized_line;  // a line longer than the bound was skipped
    std::function<void()> on_closed;          // end of input or a transport error
  };
  static constexpr size_t kMaxLineBytes = 16 * 1024 * 1024;

  // Takes ownership of both descriptors (they may be the same one).
  LineConnection(asio::io_context& io, int in_fd, int out_fd);
  ~LineConnection();

  void Start(Handlers handlers);
  // Queues one message; a '\n' is appended.
  void Send(std::string message);
  // Stops reading and writing; pending output is flushed first when `flush` is set.
  void Close();
  [[nodiscard]] bool closed() const { return closed_; }

 private:
  void ReadMore();
  void OnData(const char* data, size_t size);
  void WriteMore();
  void Finish();

  asio::io_context& io_;
  int in_fd_;
  int out_fd_;
  std::optional<asio::posix::stream_descriptor> in_;
  std::optional<asio::posix::stream_descriptor> out_;
  bool in_is_file_ = false;
  bool out_is_file_ = false;
  Handlers handlers_;
  std::string buffer_;
  bool skipping_ = false;
  std::deque<std::string> outbox_;
  bool writing_ = false;
  bool closed_ = false;
  bool input_done_ = false;
  std::array<char, 64 * 1024> chunk_{};
};

// What a server answers (with its own error shape) when a line over the bound was skipped.
inline constexpr const char* kOversizedLineMessage =
    "request line longer than 16 MiB was skipped; send smaller input in several terminal_send "
    "calls";

// Wires a connection's events to a protocol server held weakly: the server provides
// HandleLine(std::string), OnOversizedLine() and OnDisconnected().
template <typename Server>
void AttachServer(LineConnection& connection, const std::shared_ptr<Server>& server) {
  std::weak_ptr<Server> weak = server;
  LineConnection::Handlers handlers;
  handlers.on_line = [weak](std::string line) {
    if (auto self = weak.lock()) self->HandleLine(line);
  };
  handlers.on_oversized_line = [weak] {
    if (auto self = weak.lock()) self->OnOversizedLine();
  };
  handlers.on_closed = [weak] {
    if (auto self = weak.lock()) self->OnDisconnected();
  };
  connection.Start(std::move(handlers));
}

}  // namespace ptybox::runtime
