#include "backend/rekey_listener.h"

#include <netinet/in.h>
#include <sys/socket.h>

#include <utility>

#include "common/log.h"

namespace ptybox::backend {
namespace {

using asio::ip::tcp;

std::optional<TcpEndpoint> EndpointOf(int fd, bool peer) {
  sockaddr_in address{};
  socklen_t length = sizeof address;
  const int rc = peer ? ::getpeername(fd, reinterpret_cast<sockaddr*>(&address), &length)
                      : ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  if (rc != 0 || address.sin_family != AF_INET) return std::nullopt;
  return TcpEndpoint{address.sin_addr.s_addr, ntohs(address.sin_port)};
}

}  // namespace

RekeyListener::RekeyListener(asio::io_context& io, uint16_t port)
    : acceptor_(io), connection_(io), port_(port) {}

RekeyListener::~RekeyListener() { Stop(); }

Result<std::shared_ptr<RekeyListener>> RekeyListener::Start(asio::io_context& io, UniqueFd listener,
                                                            uint16_t port) {
  std::shared_ptr<RekeyListener> self(new RekeyListener(io, port));
  std::error_code ec;
  self->acceptor_.assign(tcp::v4(), listener.Get(), ec);
  if (ec) return Fail(ErrorKind::kInternal, "the session's rekey listener: " + ec.message());
  (void)listener.Release();
  self->acceptor_.non_blocking(true, ec);
  self->Accept();
  return self;
}

void RekeyListener::Expect(Expectation expectation) {
  Disarm();
  ++arming_;
  expected_ = std::move(expectation);
  if (!accepting_ && !reading_ && !stopped_) Accept();  // after a failed accept
}

void RekeyListener::Disarm() {
  expected_.reset();
  ++arming_;
  std::error_code ignored;
  connection_.close(ignored);  // a pending read completes as aborted and accepts the next
}

void RekeyListener::Stop() {
  if (stopped_) return;
  stopped_ = true;
  expected_.reset();
  std::error_code ignored;
  connection_.close(ignored);
  acceptor_.close(ignored);
}

void RekeyListener::Accept() {
  std::weak_ptr<RekeyListener> weak = weak_from_this();
  accepting_ = true;
  acceptor_.async_accept(connection_, [weak](const std::error_code& ec) {
    std::shared_ptr<RekeyListener> self = weak.lock();
    if (!self) return;
    self->accepting_ = false;
    if (self->stopped_ || ec == asio::error::operation_aborted) return;
    if (ec) {
      // No descriptor left (the daemon's limit): the connection stays queued; its shell's read
      // times out and the rebootstrap ends without the hook. Accepting resumes at the next
      // arming, never in a loop on the reactor.
      LogDebug("rekey listener: accept failed: " + ec.message());
      std::optional<Expectation> expected = std::move(self->expected_);
      self->expected_.reset();
      ++self->arming_;
      if (expected && expected->done) {
        expected->done("the connection could not be accepted: " + ec.message());
      }
      return;
    }
    if (!self->expected_) {
      // Nothing expected: closed at once, nothing written.
      std::error_code ignored;
      self->connection_.close(ignored);
      self->Accept();
      return;
    }
    self->request_.clear();
    self->ReadRequest();
  });
}

void RekeyListener::ReadRequest() {
  std::weak_ptr<RekeyListener> weak = weak_from_this();
  const uint64_t arming = arming_;
  reading_ = true;
  connection_.async_read_some(
      asio::buffer(chunk_, sizeof chunk_), [weak, arming](const std::error_code& ec, size_t n) {
        std::shared_ptr<RekeyListener> self = weak.lock();
        if (!self) return;
        self->reading_ = false;
        if (self->stopped_) return;
        if (arming != self->arming_) {  // disarmed meanwhile: the connection was closed
          self->Accept();
          return;
        }
        if (ec) {
          self->Finish("the connection ended before its request: " + ec.message());
          return;
        }
        self->request_.append(self->chunk_, n);
        const size_t newline = self->request_.find('\n');
        if (newline == std::string::npos) {
          if (self->request_.size() > kMaxRekeyRequestBytes) {
            self->Finish("the request line is too long");
          } else {
            self->ReadRequest();
          }
          return;
        }
        if (newline + 1 != self->request_.size() ||
            std::string_view(self->request_).substr(0, newline) != kRekeyRequest) {
          self->Finish("the request is not ptybox's");
          return;
        }
        const std::optional<TcpEndpoint> client =
            EndpointOf(self->connection_.native_handle(), /*peer=*/true);
        const std::optional<TcpEndpoint> server =
            EndpointOf(self->connection_.native_handle(), /*peer=*/false);
        if (!client || !server) {
          self->Finish("the connection's addresses are unreadable");
          return;
        }
        if (std::optional<std::string> refusal = self->expected_->refusal(*client, *server)) {
          self->Finish(std::move(refusal));
          return;
        }
        // 33 bytes into a fresh connection's empty send buffer: written whole or not at all.
        std::error_code wec;
        const std::string& answer = self->expected_->answer;
        const size_t written =
            self->connection_.write_some(asio::buffer(answer.data(), answer.size()), wec);
        if (wec || written != answer.size()) {
          self->Finish("the answer could not be written");
          return;
        }
        self->Finish(std::nullopt);
      });
}

void RekeyListener::Finish(std::optional<std::string> refusal) {
  std::error_code ignored;
  connection_.close(ignored);
  std::optional<Expectation> expected = std::move(expected_);
  expected_.reset();
  ++arming_;
  if (!stopped_) Accept();
  if (expected && expected->done) expected->done(std::move(refusal));
}

}  // namespace ptybox::backend
