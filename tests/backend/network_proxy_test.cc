// The session proxy on real loopback sockets in this process: a client thread speaks HTTP or
// SOCKS5 to it, a canary server (the only place a connection can go) records what arrives, and
// an injected resolver decides where names point. Refusals must leave the canary untouched.
#include "backend/proxy/network_proxy.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <asio/io_context.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/write.hpp>
#include <chrono>
#include <future>
#include <limits>
#include <map>
#include <thread>

#include "backend/proxy/host_addresses.h"
#include "backend/proxy/proxy_parse.h"
#include "backend/proxy/refusal_limiter.h"
#include "tests/backend/tls_hello.h"

namespace ptybox::backend::proxy {
namespace {

using asio::ip::tcp;

// A listening socket on 127.0.0.1, ephemeral port.
UniqueFd Listen(uint16_t& port) {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  EXPECT_EQ(::bind(fd.Get(), reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  EXPECT_EQ(::listen(fd.Get(), 16), 0);
  EXPECT_EQ(::getsockname(fd.Get(), reinterpret_cast<sockaddr*>(&a), &len), 0);
  port = ntohs(a.sin_port);
  return fd;
}

// Accepts on the reactor; reads what the client sends first, answers "canary-reply", closes.
class Canary {
 public:
  explicit Canary(asio::io_context& io) : acceptor_(io) {
    UniqueFd fd = Listen(port_);
    acceptor_.assign(tcp::v4(), fd.Release());
    Accept();
  }
  [[nodiscard]] uint16_t port() const { return port_; }
  int connections = 0;
  std::string received;

 private:
  void Accept() {
    acceptor_.async_accept([this](const std::error_code& ec, tcp::socket socket) {
      if (ec) return;
      ++connections;
      auto s = std::make_shared<tcp::socket>(std::move(socket));
      auto buffer = std::make_shared<std::array<char, 4096>>();
      s->async_read_some(
          asio::buffer(*buffer), [this, s, buffer](const std::error_code& rec, size_t n) {
            if (rec) return;
            received.append(buffer->data(), n);
            auto reply = std::make_shared<std::string>("canary-reply");
            asio::async_write(*s, asio::buffer(*reply), [s, reply](const std::error_code&, size_t) {
              std::error_code ignored;
              s->shutdown(tcp::socket::shutdown_both, ignored);
              s->close(ignored);
            });
          });
      Accept();
    });
  }
  tcp::acceptor acceptor_;
  uint16_t port_ = 0;
};

// Connects to 127.0.0.1:port, sends `bytes`, reads to the end (blocking, on its own thread).
std::string Exchange(uint16_t port, std::string bytes) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return "connect failed";
  }
  timeval guard{30, 0};  // a hang guard, never an assertion
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &guard, sizeof guard);
  size_t at = 0;
  while (at < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + at, bytes.size() - at);
    if (n <= 0) break;
    at += static_cast<size_t>(n);
  }
  std::string out;
  char buffer[4096];
  for (;;) {
    ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n <= 0) break;
    out.append(buffer, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

policy::NetworkNames Names(std::vector<std::string> allow, std::vector<std::string> deny = {}) {
  policy::NetworkNames names;
  names.source = "/etc/ptybox/policy.yaml:2:10";
  for (const auto& a : allow) names.allow.push_back({*policy::ParseHostPattern(a), "op:1:1"});
  for (const auto& d : deny) names.deny.push_back({*policy::ParseHostPattern(d), "op:2:1"});
  return names;
}

class NetworkProxyTest : public ::testing::Test {
 protected:
  void StartProxy(policy::NetworkNames names, ProxyLimits limits = {}) {
    UniqueFd listener = Listen(proxy_port_);
    ProxyEvents events;
    events.refused = [this](const ProxyRefusal& refusal) { refusals_.push_back(refusal); };
    events.stopped = [this](const ProxyTotals& totals) { stopped_ = totals; };
    auto resolver = [this](const std::string& host, uint16_t port,
                           std::function<void(Result<std::vector<tcp::endpoint>>)> done) {
      resolved_.push_back(host);
      auto it = dns_.find(host);
      if (it == dns_.end()) {
        done(Fail(ErrorKind::kNotFound, "no such name"));
        return;
      }
      // Every name of this test points at the canary, whatever port was asked for.
      (void)port;
      done(std::vector<tcp::endpoint>{
          tcp::endpoint(asio::ip::make_address(it->second), canary_.port())});
    };
    auto started = NetworkProxy::Start(io_, std::move(listener), std::move(names),
                                       std::move(events), limits, resolver);
    ASSERT_TRUE(started.has_value());
    proxy_ = *started;
  }

  // Runs the reactor until the client thread is done.
  std::string Client(std::string bytes) {
    auto result = std::async(std::launch::async, Exchange, proxy_port_, std::move(bytes));
    while (result.wait_for(std::chrono::milliseconds(0)) != std::future_status::ready) {
      io_.run_for(std::chrono::milliseconds(20));
    }
    io_.run_for(std::chrono::milliseconds(20));  // let the canary finish its bookkeeping
    return result.get();
  }

  asio::io_context io_;
  Canary canary_{io_};
  uint16_t proxy_port_ = 0;
  std::shared_ptr<NetworkProxy> proxy_;
  std::vector<ProxyRefusal> refusals_;
  std::optional<ProxyTotals> stopped_;
  std::vector<std::string> resolved_;
  std::map<std::string, std::string> dns_ = {
      {"localhost", "127.0.0.1"}, {"allowed.test", "127.0.0.1"}, {"rebind.test", "127.0.0.1"}};
};

TEST_F(NetworkProxyTest, ConnectToAnAllowedNameRelaysBothWays) {
  StartProxy(Names({"localhost:" + std::to_string(canary_.port())}));
  const std::string reply = Client("CONNECT localhost:" + std::to_string(canary_.port()) +
                                   " HTTP/1.1\r\nHost: x\r\n\r\nhello");
  EXPECT_EQ(reply, "HTTP/1.1 200 Connection established\r\n\r\ncanary-reply");
  EXPECT_EQ(canary_.connections, 1);
  EXPECT_EQ(canary_.received, "hello");
  EXPECT_TRUE(refusals_.empty());
  proxy_->Stop();
  ASSERT_TRUE(stopped_);
  EXPECT_EQ(stopped_->connections, 1u);
  EXPECT_EQ(stopped_->bytes_sent, 5u);
  EXPECT_EQ(stopped_->bytes_received, 12u);
}

TEST_F(NetworkProxyTest, AbsoluteFormGoesToTheNamedHostOnly) {
  const std::string port = std::to_string(canary_.port());
  StartProxy(Names({"localhost:" + port}));
  const std::string reply =
      Client("GET http://localhost:" + port + "/x HTTP/1.1\r\nHost: evil.test\r\n\r\n");
  EXPECT_EQ(reply, "canary-reply");
  EXPECT_EQ(canary_.received,
            "GET /x HTTP/1.1\r\nHost: localhost:" + port + "\r\nConnection: close\r\n\r\n");
}

TEST_F(NetworkProxyTest, RefusalsAnswer403WithTheReasonAndReachNothing) {
  const std::string port = std::to_string(canary_.port());
  StartProxy(
      Names({"localhost:" + port, "*.example.org", "rebind.test:" + port}, {"bad.example.org"}));
  struct Case {
    std::string request;
    std::string says;
  };
  const Case cases[] = {
      {"CONNECT unlisted.test:443 HTTP/1.1\r\n\r\n", "is not on the allow list"},
      {"CONNECT bad.example.org:443 HTTP/1.1\r\n\r\n", "matches `deny: bad.example.org`"},
      {"CONNECT 127.0.0.1:" + port + " HTTP/1.1\r\n\r\n", "IP literals and localhost"},
      {"CONNECT localhost:1 HTTP/1.1\r\n\r\n", "is not on the allow list"},
      {"GET http://[::1]:" + port + "/ HTTP/1.1\r\n\r\n", "is not on the allow list"},
      {"CONNECT rebind.test:" + port + " HTTP/1.1\r\n\r\n",
       "resolves to 127.0.0.1, a local or private address"},
      {"CONNECT bad_name!.test:443 HTTP/1.1\r\n\r\n", "not a host name"},
  };
  for (const Case& c : cases) {
    const std::string reply = Client(c.request);
    EXPECT_TRUE(reply.starts_with("HTTP/1.1 403 Forbidden (ptybox")) << c.request << reply;
    EXPECT_NE(reply.find(c.says), std::string::npos) << c.request << reply;
    // The status line says why too (apt shows only that line): the reason, then its end.
    const std::string status_line = reply.substr(0, reply.find("\r\n"));
    EXPECT_NE(status_line.find(c.says), std::string::npos) << c.request << reply;
    EXPECT_TRUE(status_line.ends_with(")")) << c.request << reply;
  }
  EXPECT_EQ(canary_.connections, 0) << "a refused request reached the canary";
  ASSERT_EQ(refusals_.size(), std::size(cases));
  EXPECT_EQ(refusals_[0].host, "unlisted.test");
  EXPECT_EQ(refusals_[0].port, 443);
  EXPECT_NE(refusals_[0].reason.find("/etc/ptybox/policy.yaml:2:10"), std::string::npos);
  // The name was judged before any resolution; only the rebinding case was resolved.
  EXPECT_EQ(resolved_, (std::vector<std::string>{"rebind.test"}));
}

TEST_F(NetworkProxyTest, ANameResolvingToADeniedLiteralIsRefusedNamingTheEntry) {
  const std::string port = std::to_string(canary_.port());
  // The operator allows the canary's literal, and denies it: deny wins, behind a name too.
  StartProxy(Names({"allowed.test:" + port, "127.0.0.1:" + port}, {"127.0.0.1:" + port}));
  const std::string reply = Client("CONNECT allowed.test:" + port + " HTTP/1.1\r\n\r\n");
  EXPECT_TRUE(reply.starts_with("HTTP/1.1 403 Forbidden (ptybox")) << reply;
  EXPECT_NE(reply.find("resolves to 127.0.0.1, refused by the network policy: it matches "
                       "`deny: 127.0.0.1:" +
                       port + "` at op:2:1"),
            std::string::npos)
      << reply;
  EXPECT_EQ(canary_.connections, 0);
  ASSERT_EQ(refusals_.size(), 1u);
  EXPECT_EQ(refusals_[0].host, "allowed.test");
}

TEST_F(NetworkProxyTest, ANameResolvingToThisHostsOwnAddressIsRefused) {
  // The injected resolver answers with an address of one of this host's interfaces (eth0's,
  // say): nothing is sent there, the decision refuses it first.
  std::string own;
  for (const policy::IpAddress& address : HostInterfaceAddresses()) {
    const std::string text = policy::ToString(address);
    if (text.find(':') == std::string::npos && !text.starts_with("127.")) own = text;
  }
  if (own.empty()) GTEST_SKIP() << "this host has no IPv4 address but loopback";
  dns_["self.test"] = own;
  const std::string port = std::to_string(canary_.port());
  StartProxy(Names({"self.test:" + port}));
  const std::string reply = Client("CONNECT self.test:" + port + " HTTP/1.1\r\n\r\n");
  EXPECT_TRUE(reply.starts_with("HTTP/1.1 403 Forbidden (ptybox")) << reply;
  EXPECT_NE(reply.find("self.test resolves to " + own), std::string::npos) << reply;
  EXPECT_EQ(canary_.connections, 0);
  ASSERT_EQ(refusals_.size(), 1u);
}

TEST_F(NetworkProxyTest, TheSniMustNameTheConnectHost) {
  // The operator lists the canary's address explicitly, so allowed.test may point there.
  StartProxy(Names({"allowed.test", "127.0.0.1:443"}));
  std::string reply =
      Client("CONNECT allowed.test:443 HTTP/1.1\r\n\r\n" + testing::ClientHello("other.test"));
  EXPECT_EQ(reply, "HTTP/1.1 200 Connection established\r\n\r\n");
  EXPECT_EQ(canary_.connections, 0) << "the mismatched ClientHello left the proxy";
  ASSERT_EQ(refusals_.size(), 1u);
  EXPECT_NE(refusals_[0].reason.find("TLS server name `other.test` differs"), std::string::npos);

  const std::string hello = testing::ClientHello("Allowed.Test");
  reply = Client("CONNECT allowed.test:443 HTTP/1.1\r\n\r\n" + hello);
  EXPECT_EQ(reply, "HTTP/1.1 200 Connection established\r\n\r\ncanary-reply");
  EXPECT_EQ(canary_.connections, 1);
  EXPECT_EQ(canary_.received, hello);
}

// A ClientHello without a server name to a name: the proxy cannot tell which site of the
// address it reaches, so it is refused (audited as "no server name") before any connection.
// IP literals (RFC 6066 forbids them in the SNI) and dotless names such as `localhost` (Java
// sends none) are still relayed, their addresses having been checked.
TEST_F(NetworkProxyTest, AClientHelloWithoutServerNameIsRefusedForAName) {
  dns_["127.0.0.1"] = "127.0.0.1";
  StartProxy(Names({"allowed.test", "127.0.0.1:443", "localhost:443"}));
  const std::string hello = testing::ClientHello("");
  std::string reply = Client("CONNECT allowed.test:443 HTTP/1.1\r\n\r\n" + hello);
  EXPECT_EQ(reply, "HTTP/1.1 200 Connection established\r\n\r\n");
  EXPECT_EQ(canary_.connections, 0) << "the ClientHello without a server name left the proxy";
  ASSERT_EQ(refusals_.size(), 1u);
  EXPECT_EQ(refusals_[0].host, "allowed.test");
  EXPECT_EQ(refusals_[0].port, 443);
  EXPECT_NE(refusals_[0].reason.find("carries no server name (SNI)"), std::string::npos)
      << refusals_[0].reason;
  EXPECT_NE(refusals_[0].reason.find("/etc/ptybox/policy.yaml:2:10"), std::string::npos);
  EXPECT_EQ(proxy_->totals().refused, 1u);

  reply = Client("CONNECT 127.0.0.1:443 HTTP/1.1\r\n\r\n" + hello);
  EXPECT_EQ(reply, "HTTP/1.1 200 Connection established\r\n\r\ncanary-reply");
  EXPECT_EQ(canary_.received, hello);
  reply = Client("CONNECT localhost:443 HTTP/1.1\r\n\r\n" + hello);
  EXPECT_EQ(reply, "HTTP/1.1 200 Connection established\r\n\r\ncanary-reply");
  EXPECT_EQ(canary_.connections, 2);
  EXPECT_EQ(refusals_.size(), 1u);
}

// On 443 only a ClientHello whose name is checked goes through: an SSLv2-format hello (no
// extensions, so no name), an alert sent before the hello, or plain bytes are refused.
TEST_F(NetworkProxyTest, OnlyATlsClientHelloIsRelayedTo443) {
  dns_["127.0.0.1"] = "127.0.0.1";
  StartProxy(Names({"allowed.test", "127.0.0.1:443"}));
  const std::string sslv2_hello("\x80\x2e\x01\x00\x02\x00\x15\x00\x00\x00\x10", 11);
  const std::string alert("\x15\x03\x01\x00\x02\x01\x00", 7);
  for (const std::string& first : {sslv2_hello, alert, std::string("SSH-2.0-x\r\n")}) {
    const std::string reply = Client("CONNECT allowed.test:443 HTTP/1.1\r\n\r\n" + first +
                                     testing::ClientHello("allowed.test"));
    EXPECT_EQ(reply, "HTTP/1.1 200 Connection established\r\n\r\n");
  }
  EXPECT_EQ(canary_.connections, 0) << "bytes that are not a checked ClientHello left the proxy";
  ASSERT_EQ(refusals_.size(), 3u);
  EXPECT_NE(refusals_[2].reason.find("does not begin with a TLS ClientHello"), std::string::npos)
      << refusals_[2].reason;
}

TEST_F(NetworkProxyTest, Socks5ResolvesRemotelyAndRefusesWithAReplyCode) {
  const std::string port_bytes{static_cast<char>(canary_.port() >> 8),
                               static_cast<char>(canary_.port() & 0xFF)};
  StartProxy(Names({"localhost:" + std::to_string(canary_.port())}));
  auto request = [&](std::string host) {
    return std::string("\x05\x01\x00", 3) + std::string("\x05\x01\x00\x03", 4) +
           static_cast<char>(host.size()) + host + port_bytes;
  };
  std::string reply = Client(request("localhost") + "hi");
  EXPECT_EQ(reply, std::string("\x05\x00", 2) + SocksReply(kSocksSucceeded) + "canary-reply");
  EXPECT_EQ(canary_.received, "hi");
  reply = Client(request("unlisted.test"));
  EXPECT_EQ(reply, std::string("\x05\x00", 2) + SocksReply(kSocksNotAllowed));
  EXPECT_EQ(canary_.connections, 1);
  ASSERT_EQ(refusals_.size(), 1u);
  EXPECT_EQ(refusals_[0].host, "unlisted.test");
}

TEST_F(NetworkProxyTest, MalformedAndOversizedRequestsAreAnsweredAndClosed) {
  StartProxy(Names({"localhost:" + std::to_string(canary_.port())}));
  EXPECT_TRUE(Client("GET /local HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 400 Bad Request"));
  // Exactly as many bytes as the proxy reads before it answers (more would be reset unread).
  EXPECT_TRUE(Client(std::string(8 * 1024 + 1, 'a')).starts_with("HTTP/1.1 414 URI Too Long"));
  std::string head = "GET http://localhost/ HTTP/1.1\r\nX-Big: ";
  head += std::string(kMaxRequestHeadBytes - head.size(), 'a');
  EXPECT_TRUE(Client(head).starts_with("HTTP/1.1 431 Request Header Fields Too Large"));
  EXPECT_EQ(canary_.connections, 0);
  EXPECT_EQ(proxy_->open_connections(), 0u);
}

TEST_F(NetworkProxyTest, ConnectionsPerSessionAreBounded) {
  StartProxy(Names({"localhost:" + std::to_string(canary_.port())}),
             ProxyLimits{.max_connections = 1});
  // One client holds the only slot with a request it never finishes.
  int holder = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(proxy_port_);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::connect(holder, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::write(holder, "CONN", 4), 4);
  while (proxy_->open_connections() == 0) io_.run_one_for(std::chrono::milliseconds(50));
  // The next is closed at once, with nothing relayed.
  EXPECT_EQ(Client("CONNECT localhost:" + std::to_string(canary_.port()) + " HTTP/1.1\r\n\r\n"),
            "");
  EXPECT_EQ(canary_.connections, 0);
  ::close(holder);
  proxy_->Stop();
  EXPECT_EQ(proxy_->open_connections(), 0u);
}

}  // namespace
}  // namespace ptybox::backend::proxy

namespace ptybox::backend::proxy {
namespace {

// Deadlines end what a client leaves hanging; the test asserts what happened, not when (the
// short limits only keep it quick).
TEST_F(NetworkProxyTest, AnUnfinishedRequestAndAnIdleTunnelAreClosed) {
  StartProxy(Names({"localhost:" + std::to_string(canary_.port())}),
             ProxyLimits{.idle = std::chrono::milliseconds(200),
                         .request = std::chrono::milliseconds(200)});
  // A head that never ends: closed without an answer, nothing connected.
  EXPECT_EQ(Client("CONNECT localhost:" + std::to_string(canary_.port()) + " HTTP/1.1\r\n"), "");
  EXPECT_EQ(canary_.connections, 0);
  // A tunnel where nobody speaks: accepted, connected, then closed when idle.
  EXPECT_EQ(Client("CONNECT localhost:" + std::to_string(canary_.port()) + " HTTP/1.1\r\n\r\n"),
            "HTTP/1.1 200 Connection established\r\n\r\n");
  EXPECT_EQ(canary_.connections, 1);
  EXPECT_EQ(proxy_->open_connections(), 0u);
}

}  // namespace
}  // namespace ptybox::backend::proxy

namespace ptybox::backend::proxy {
namespace {

// A connection to 127.0.0.1:port that sends nothing (the proxy holds it in its request stage).
int Idle(uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  return fd;
}

TEST_F(NetworkProxyTest, TheProcessWideDescriptorBudgetRefusesAConnection) {
  struct Restore {
    ~Restore() { SetProxyConnectionBudget(std::numeric_limits<size_t>::max()); }
  } restore;
  StartProxy(Names({"localhost:" + std::to_string(canary_.port())}));
  SetProxyConnectionBudget(ProxyConnectionsOpen() + 1);
  const int holder = Idle(proxy_port_);
  while (proxy_->open_connections() == 0) io_.run_one_for(std::chrono::milliseconds(50));
  // The per-session cap (64) is far away; the budget is spent: closed at once, nothing relayed.
  EXPECT_EQ(Client("CONNECT localhost:" + std::to_string(canary_.port()) + " HTTP/1.1\r\n\r\n"),
            "");
  EXPECT_EQ(canary_.connections, 0);
  EXPECT_EQ(proxy_->open_connections(), 1u);
  ::close(holder);
  proxy_->Stop();
  EXPECT_EQ(ProxyConnectionsOpen(), 0u) << "a stopped proxy gives its connections back";
}

TEST_F(NetworkProxyTest, AFailingAcceptBacksOffInsteadOfSpinning) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_UNDEFINED__)
  // The sanitizers' own checks need descriptors (UBSan's vptr check probes memory through a
  // pipe): under a cap with none free it reports every virtual call in asio as an invalid
  // object. The ordinary build runs this test (ctest in the build directory).
  GTEST_SKIP() << "needs a process with no free descriptor, which the sanitizers cannot run in";
#endif
  StartProxy(Names({"localhost:" + std::to_string(canary_.port())}));
  const int waiting = Idle(proxy_port_);  // queued in the listener's backlog
  // The cap: this process may open no descriptor beyond the ones it holds, so accept() fails
  // with EMFILE for as long as it lasts.
  rlimit saved{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &saved), 0);
  const int lowest_free = ::dup(0);
  ASSERT_GE(lowest_free, 0);
  ::close(lowest_free);
  rlimit capped = saved;
  capped.rlim_cur = static_cast<rlim_t>(lowest_free);
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &capped), 0);
  io_.run_for(std::chrono::milliseconds(500));
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &saved), 0);
  const uint64_t failures = proxy_->accept_failures();
  EXPECT_GE(failures, 1u) << "the cap did not make accept() fail";
  // A spinning loop fails tens of thousands of times in 0.5 s; 100 ms apart it is about 5
  // (fewer on a busy machine, never many more).
  EXPECT_LE(failures, 50u);
  // Once descriptors are back, the waiting client is accepted.
  while (proxy_->open_connections() == 0) io_.run_one_for(std::chrono::milliseconds(50));
  EXPECT_EQ(proxy_->open_connections(), 1u);
  ::close(waiting);
}

}  // namespace
}  // namespace ptybox::backend::proxy

namespace ptybox::backend::proxy {
namespace {

// Writes `bytes` on a connected socket (the request of a client that then waits).
void Say(int fd, const std::string& bytes) {
  ASSERT_EQ(::write(fd, bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
}

// Session A's names hang in its resolver (their answers are kept, never given); session B's
// proxy shares nothing with A's, and its lookup is answered while A sits at its cap.
TEST_F(NetworkProxyTest, OneSessionsSlowLookupsDelayNoOtherAndAClosedOneFreesItsSlot) {
  const std::string port = std::to_string(canary_.port());
  std::vector<std::function<void(Result<std::vector<tcp::endpoint>>)>> stuck;
  auto resolver = [&](const std::string& host, uint16_t,
                      std::function<void(Result<std::vector<tcp::endpoint>>)> done) {
    if (host == "slow.test") {
      stuck.push_back(std::move(done));
      return;
    }
    done(std::vector<tcp::endpoint>{
        tcp::endpoint(asio::ip::make_address("127.0.0.1"), canary_.port())});
  };
  const policy::NetworkNames names =
      Names({"slow.test:" + port, "fast.test:" + port, "127.0.0.1:" + port});
  uint16_t a_port = 0;
  auto a =
      NetworkProxy::Start(io_, Listen(a_port), names, {}, ProxyLimits{.max_lookups = 2}, resolver);
  ASSERT_TRUE(a.has_value());
  StartProxy(names);  // session B: the fixture's proxy, its own resolver
  dns_["fast.test"] = "127.0.0.1";

  std::vector<int> holders;
  for (int i = 0; i < 2; ++i) {
    holders.push_back(Idle(a_port));
    Say(holders.back(), "CONNECT slow.test:" + port + " HTTP/1.1\r\n\r\n");
  }
  while ((*a)->lookups_in_flight() < 2) io_.run_one_for(std::chrono::milliseconds(50));
  // Over A's cap: a clear 503, no lookup started.
  std::swap(proxy_port_, a_port);
  std::string reply = Client("CONNECT fast.test:" + port + " HTTP/1.1\r\n\r\n");
  std::swap(proxy_port_, a_port);
  EXPECT_TRUE(reply.starts_with("HTTP/1.1 503 Service Unavailable (ptybox")) << reply;
  EXPECT_NE(reply.find("2 name lookups in flight"), std::string::npos) << reply;
  EXPECT_EQ(stuck.size(), 2u);
  // Session B is answered meanwhile.
  reply = Client("CONNECT fast.test:" + port + " HTTP/1.1\r\n\r\nhello");
  EXPECT_EQ(reply, "HTTP/1.1 200 Connection established\r\n\r\ncanary-reply");
  EXPECT_EQ((*a)->lookups_in_flight(), 2u);
  // A client of A gives up: its slot is free although its lookup never answered.
  ::close(holders[0]);
  while ((*a)->lookups_in_flight() > 1) io_.run_one_for(std::chrono::milliseconds(50));
  std::swap(proxy_port_, a_port);
  reply = Client("CONNECT fast.test:" + port + " HTTP/1.1\r\n\r\nagain");
  std::swap(proxy_port_, a_port);
  EXPECT_EQ(reply, "HTTP/1.1 200 Connection established\r\n\r\ncanary-reply");
  // The late answer to the closed connection goes nowhere and frees nothing twice.
  stuck[0](Fail(ErrorKind::kNotFound, "late"));
  EXPECT_EQ((*a)->lookups_in_flight(), 1u);
  ::close(holders[1]);
  (*a)->Stop();
}

}  // namespace
}  // namespace ptybox::backend::proxy

namespace ptybox::backend::proxy {
namespace {

// A refusal loop: what reaches the audit events is bounded, and every refusal is accounted for
// either logged or counted in a summary (how they split depends on the clock, not asserted).
TEST_F(NetworkProxyTest, RefusalEventsAreRateLimitedAndEveryOneIsCounted) {
  StartProxy(Names({"localhost:" + std::to_string(canary_.port())}));
  constexpr int kAttempts = 30;
  for (int i = 0; i < kAttempts; ++i) {
    EXPECT_TRUE(Client("CONNECT unlisted.test:443 HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 403"));
  }
  proxy_->Stop();
  uint64_t logged = 0;
  uint64_t summarized = 0;
  for (const ProxyRefusal& refusal : refusals_) {
    if (refusal.port == 0) {
      EXPECT_NE(refusal.reason.find("more refusals of this session were not logged"),
                std::string::npos)
          << refusal.reason;
      summarized += std::stoull(refusal.reason.substr(std::string("ptybox: ").size()));
    } else {
      ++logged;
    }
  }
  ASSERT_TRUE(stopped_);
  EXPECT_EQ(stopped_->refused, static_cast<uint64_t>(kAttempts));
  EXPECT_EQ(logged + summarized, static_cast<uint64_t>(kAttempts));
  EXPECT_GE(logged, kRefusalsLoggedPerSecond) << "the first ten are always logged";
  EXPECT_EQ(canary_.connections, 0);
}

}  // namespace
}  // namespace ptybox::backend::proxy
