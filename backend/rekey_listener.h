// The daemon's end of a session's rekey listener: the socket ptybox-init bound on 127.0.0.1 in
// the session's network namespace (sandbox/init/init_protocol.h, RekeyListenerMessage). It
// accepts one connection at a time, always: while nothing is expected, each is closed at once
// with nothing written (so stale connections never wait for a later rebootstrap). Once armed
// (Expect), the next connection's request line is read; the answer is written only when it is
// kRekeyRequest and `refusal` finds nothing wrong with its client end right then; otherwise, and
// for any connection after the first, it is closed with nothing written. Each arming ends once,
// through `done`. Everything on the reactor; reads are asynchronous. docs/readiness.md, "exec
// bash".
#pragma once

#include <asio/io_context.hpp>
#include <asio/ip/tcp.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "backend/readiness/rekey.h"
#include "common/error.h"
#include "common/unique_fd.h"

namespace ptybox::backend {

class RekeyListener final : public std::enable_shared_from_this<RekeyListener> {
 public:
  struct Expectation {
    // Right before the answer: empty when the connection from `client` to `server` may have it.
    std::function<std::optional<std::string>(TcpEndpoint client, TcpEndpoint server)> refusal;
    std::string answer;
    // Once: empty after the answer was written, otherwise why the connection got nothing.
    std::function<void(std::optional<std::string> refusal)> done;
  };

  // Takes init's listening socket (bound to 127.0.0.1:port).
  static Result<std::shared_ptr<RekeyListener>> Start(asio::io_context& io, UniqueFd listener,
                                                      uint16_t port);
  ~RekeyListener();
  RekeyListener(const RekeyListener&) = delete;
  RekeyListener& operator=(const RekeyListener&) = delete;

  [[nodiscard]] uint16_t port() const { return port_; }
  // The next connection is served for `expectation` (a previous arming is dropped unanswered).
  void Expect(Expectation expectation);
  // Drops the arming: a connection being read is closed with nothing written; `done` is not
  // called.
  void Disarm();
  void Stop();

 private:
  RekeyListener(asio::io_context& io, uint16_t port);
  void Accept();
  void ReadRequest();
  void Finish(std::optional<std::string> refusal);

  asio::ip::tcp::acceptor acceptor_;
  asio::ip::tcp::socket connection_;
  uint16_t port_ = 0;
  std::optional<Expectation> expected_;
  std::string request_;
  char chunk_[kMaxRekeyRequestBytes + 1] = {};
  bool accepting_ = false;  // an accept is pending
  bool reading_ = false;    // a request is being read
  uint64_t arming_ = 0;     // tells a read's completion from a later arming's
  bool stopped_ = false;
};

}  // namespace ptybox::backend
