// One client connection that speaks newline-delimited messages over a pair of descriptors
// (standard input/output, or one accepted Unix socket). Reads are bounded; a line over the bound
// is reported and skipped, and the connection stays usable. Output is bounded too: while more
// than kOutboxHighWaterBytes of answers wait to be written, no further request is read (the
// client's own writes then block), so a client that never reads cannot grow the daemon.
#pragma once

#include <array>
#include <asio/io_context.hpp>
#include <asio/posix/stream_descriptor.hpp>
#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/log.h"

namespace ptybox::runtime {

class LineConnection final : public std::enable_shared_from_this<LineConnection> {
 public:
  struct Handlers {
    std::function<void(std::string line)> on_line;
    std::function<void()> on_oversized_line;  // a line longer than the bound was skipped
    std::function<void()> on_closed;          // end of input or a transport error
  };
  static constexpr size_t kMaxLineBytes = 16 * 1024 * 1024;
  // Reading pauses above this much unsent output and resumes once it drained below the low mark.
  static constexpr size_t kOutboxHighWaterBytes = 4 * 1024 * 1024;
  static constexpr size_t kOutboxLowWaterBytes = 1024 * 1024;
  // One reactor turn handles one connection's requests for this long at most (past the first);
  // the rest wait for a later turn, behind every other handler (ProcessInput).
  static constexpr std::chrono::microseconds kTurnBudget{2000};

  // Takes ownership of both descriptors (they may be the same one) whatever the outcome;
  // fails (never throws) when a descriptor cannot be registered with the reactor.
  static Result<std::shared_ptr<LineConnection>> Create(asio::io_context& io, int in_fd,
                                                        int out_fd);
  ~LineConnection();

  void Start(Handlers handlers);
  // Queues one message; a '\n' is appended.
  void Send(std::string message);
  // Stops reading; output already queued is still written.
  void Close();
  // Runs `done` once every queued message was written (or the peer is gone).
  void WhenFlushed(std::function<void()> done);
  [[nodiscard]] bool closed() const { return closed_; }
  [[nodiscard]] size_t unsent_bytes() const { return outbox_bytes_; }

 private:
  LineConnection(asio::io_context& io, int in_fd, int out_fd);
  Result<void> Open();
  // Registers `fd` with the reactor in `slot`, non-blocking.
  Result<void> Watch(std::optional<asio::posix::stream_descriptor>& slot, int fd);
  asio::posix::stream_descriptor* out() { return out_is_in_ ? &*in_ : &*out_; }
  void ReadMore();
  void OnChunk(size_t size);
  void ProcessInput();
  void ContinueLater();  // ProcessInput (and ReadMore) again on a later turn
  void InputEnded();
  void WriteMore();
  void OutputDrained();
  [[nodiscard]] bool OutputFull() const { return outbox_bytes_ > kOutboxHighWaterBytes; }

  asio::io_context& io_;
  int in_fd_;
  int out_fd_;
  std::optional<asio::posix::stream_descriptor> in_;
  std::optional<asio::posix::stream_descriptor> out_;
  bool out_is_in_ = false;  // one socket for both directions: one descriptor, no dup()
  bool in_is_file_ = false;
  bool out_is_file_ = false;
  Handlers handlers_;
  std::string buffer_;   // the line in progress
  std::string pending_;  // bytes read but not yet split into lines (while output is full)
  size_t pending_at_ = 0;
  bool skipping_ = false;
  bool reading_ = false;      // a read is in flight
  bool read_paused_ = false;  // paused by a full outbox
  bool continue_posted_ = false;
  std::deque<std::string> outbox_;
  size_t outbox_bytes_ = 0;
  std::vector<std::function<void()>> flushed_waiters_;
  bool writing_ = false;
  bool write_failed_ = false;
  bool closed_ = false;
  bool input_done_ = false;
  std::array<char, 64 * 1024> chunk_{};
};

// What a server answers (with its own error shape) when a line over the bound was skipped.
inline constexpr const char* kOversizedLineMessage =
    "request line longer than 16 MiB was skipped; send smaller input in several terminal_send "
    "calls";

// Wires a connection's events to a protocol server held weakly: the server provides
// HandleLine(std::string), OnOversizedLine() and OnDisconnected(). An exception thrown by a
// handler is logged and stops there: it never reaches the reactor (and every other client).
template <typename Server>
void AttachServer(LineConnection& connection, const std::shared_ptr<Server>& server) {
  std::weak_ptr<Server> weak = server;
  auto guarded = [](const char* what, auto&& call) {
    try {
      call();
    } catch (const std::exception& e) {
      LogError(std::string("a connection handler failed (") + what + "): " + e.what());
    } catch (...) {
      LogError(std::string("a connection handler failed (") + what + ")");
    }
  };
  LineConnection::Handlers handlers;
  handlers.on_line = [weak, guarded](std::string line) {
    if (auto self = weak.lock()) guarded("request", [&] { self->HandleLine(line); });
  };
  handlers.on_oversized_line = [weak, guarded] {
    if (auto self = weak.lock()) guarded("oversized line", [&] { self->OnOversizedLine(); });
  };
  handlers.on_closed = [weak, guarded] {
    if (auto self = weak.lock()) guarded("disconnect", [&] { self->OnDisconnected(); });
  };
  connection.Start(std::move(handlers));
}

}  // namespace ptybox::runtime
