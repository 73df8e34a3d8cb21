// Network by name through the real daemon, real bash and real curl, in both confined modes (the
// daemon as root, and as an ordinary user in the _unprivileged variant): the operator's list
// admits a server this test runs on the host's loopback (listed exactly, as local addresses
// must be); every refused request targets canaries on the host's loopback that must never see
// a connection, so a wall that fails hits a canary, never another machine. The only traffic
// off this machine goes to the npm registry (only when the host itself reaches it) and to
// Debian's archive (deb.debian.org, which apt-get download needs).
#include <gtest/gtest.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <string>
#include <thread>

#include "tests/escape/escape_support.h"

namespace ptybox::testing {
namespace {

namespace fs = std::filesystem;

// An HTTP server on the host's 127.0.0.1 answering every request with "served-by-host".
class HostServer final {
 public:
  HostServer() {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof addr;
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
        ::listen(fd_, 8) != 0 ||
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &length) != 0) {
      return;
    }
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { Serve(); });
  }
  ~HostServer() {
    ::shutdown(fd_, SHUT_RDWR);
    if (thread_.joinable()) thread_.join();
    ::close(fd_);
  }
  HostServer(const HostServer&) = delete;
  HostServer& operator=(const HostServer&) = delete;
  [[nodiscard]] int port() const { return port_; }
  [[nodiscard]] int served() const { return served_; }

 private:
  void Serve() {
    for (;;) {
      const int conn = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (conn < 0) return;
      timeval guard{10, 0};
      ::setsockopt(conn, SOL_SOCKET, SO_RCVTIMEO, &guard, sizeof guard);
      std::string head;
      char buffer[1024];
      while (head.find("\r\n\r\n") == std::string::npos) {
        ssize_t n = ::read(conn, buffer, sizeof buffer);
        if (n <= 0) break;
        head.append(buffer, static_cast<size_t>(n));
      }
      const std::string reply =
          "HTTP/1.0 200 OK\r\nContent-Length: 15\r\nConnection: close\r\n\r\nserved-by-host\n";
      if (::write(conn, reply.data(), reply.size()) > 0) ++served_;
      ::close(conn);
    }
  }
  int fd_ = -1;
  int port_ = 0;
  std::atomic<int> served_{0};
  std::thread thread_;
};

// True when this host resolves and reaches host:port itself.
bool HostReaches(const char* host, const char* port) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host, port, &hints, &found) != 0) return false;
  bool ok = false;
  for (addrinfo* a = found; a != nullptr && !ok; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    timeval guard{10, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &guard, sizeof guard);
    ok = fd >= 0 && ::connect(fd, a->ai_addr, a->ai_addrlen) == 0;
    if (fd >= 0) ::close(fd);
  }
  ::freeaddrinfo(found);
  return ok;
}

class NetworkNamesTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    ASSERT_GT(server_.port(), 0);
    ASSERT_GT(denied_.port(), 0);
    ASSERT_GT(unlisted_.port(), 0);
  }
  [[nodiscard]] const std::string& Mode() const { return GetParam(); }

  std::vector<std::string> Args() {
    const fs::path policy = policy_dir_.path() / "operator.yaml";
    std::ofstream(policy) << "version: 1\nnetwork:\n  allow:\n"
                          << "    - \"localhost:" << server_.port() << "\"\n"
                          << "    - \"localhost:" << denied_.port() << "\"\n"
                          << "    - registry.npmjs.org\n"
                          << "    - deb.debian.org\n"
                          << "    - \"localhost:443\"\n"
                          << "    - \"localhost:" << behind_.port() << "\"\n"
                          << "  deny: [\"localhost:" << denied_.port()
                          << "\", \"127.0.0.1:" << behind_.port() << "\"]\n";
    policy_ = policy;
    audit_ = policy_dir_.path() / "audit" / "audit.log";
    return {"--policy", policy.string(), "--audit-log", audit_.string()};
  }
  Observed Run(const std::string& name, const std::string& command) {
    return RunInSession(client_, session_, Mode(), name, command);
  }
  // Through the session's proxy even for localhost (NO_PROXY lists it for the session's own
  // servers), with the response body and curl's status.
  static std::string Curl(const std::string& url) {
    return "curl -sS --max-time 60 --noproxy '' " + url + "; echo \" curl-exit=$?\"";
  }

  HostServer server_;
  Listener denied_;    // allowed and denied: deny wins
  Listener unlisted_;  // on no list
  Listener behind_;    // its name allowed, the address it resolves to denied as a literal
  TempDir policy_dir_;
  fs::path policy_;
  fs::path audit_;
  Daemon daemon_{Daemon::Options{.extra_args = Args(), .env = {}}};
  RpcClient client_{daemon_.socket()};
  std::string session_;
};

TEST_P(NetworkNamesTest, OnlyListedNamesAreReachedThroughTheProxy) {
  session_ = OpenSession(client_, Mode(), Json{{"cols", 1000}});  // refusal lines never wrap
  ASSERT_FALSE(session_.empty()) << daemon_.Log();
  const std::string served = std::to_string(server_.port());
  const std::string denied = std::to_string(denied_.port());
  const std::string unlisted = std::to_string(unlisted_.port());

  Observed env = Run("proxy-env", "echo \"$HTTPS_PROXY $ALL_PROXY $NO_PROXY\"");
  EXPECT_TRUE(env.Says("http://127.0.0.1:3128 socks5h://127.0.0.1:3128 localhost,127.0.0.1,::1"))
      << env.Show();

  Observed allowed = Run("allowed", Curl("http://localhost:" + served + "/"));
  EXPECT_TRUE(allowed.Says("served-by-host")) << allowed.Show();
  EXPECT_TRUE(allowed.Says("curl-exit=0")) << allowed.Show();
  EXPECT_EQ(server_.served(), 1);
  Observed tunnel =
      Run("allowed-connect", Curl("--proxytunnel http://localhost:" + served + "/tunnel"));
  EXPECT_TRUE(tunnel.Says("served-by-host")) << tunnel.Show();
  Observed socks = Run("allowed-socks",
                       "curl -sS --max-time 60 --noproxy '' -x \"$ALL_PROXY\" "
                       "http://localhost:" +
                           served + "/; echo \" curl-exit=$?\"");
  EXPECT_TRUE(socks.Says("served-by-host")) << socks.Show();

  Observed deny = Run("deny-beats-allow", Curl("http://localhost:" + denied + "/"));
  EXPECT_TRUE(
      deny.Says("is refused by the network policy: it matches `deny: localhost:" + denied + "`"))
      << deny.Show();
  EXPECT_TRUE(deny.Says(policy_.string())) << deny.Show();

  Observed name = Run("unlisted", Curl("http://localhost:" + unlisted + "/"));
  EXPECT_TRUE(name.Says("it is not on the allow list")) << name.Show();
  EXPECT_TRUE(name.Says(policy_.string())) << name.Show();
  Observed https = Run("unlisted-https", Curl("https://localhost:" + unlisted + "/"));
  EXPECT_FALSE(https.Says("curl-exit=0")) << https.Show();
  EXPECT_TRUE(https.Says("CONNECT tunnel failed, response 403")) << https.Show();

  Observed literal = Run("ip-literal", Curl("http://127.0.0.1:" + served + "/"));
  EXPECT_TRUE(literal.Says("IP literals and localhost need an exact entry")) << literal.Show();
  Observed trailing = Run("localhost-dot", Curl("http://localhost.:" + unlisted + "/"));
  EXPECT_TRUE(trailing.Says("it is not on the allow list")) << trailing.Show();

  // Without the proxy nothing is reached: the session's own loopback has no such server.
  Observed direct =
      Run("direct", "curl -sS --max-time 20 --noproxy '*' http://127.0.0.1:" + unlisted +
                        "/; echo \" curl-exit=$?\"");
  EXPECT_TRUE(direct.Says("curl-exit=7")) << direct.Show();
  Observed dns = Run("dns", "getent ahosts registry.npmjs.org; echo \"getent-exit=$?\"");
  EXPECT_TRUE(dns.Says("getent-exit=2")) << dns.Show();

  EXPECT_EQ(server_.served(), 3) << "only the three allowed requests reached the host server";
  EXPECT_FALSE(denied_.HasPendingConnection()) << "a denied request reached its canary";
  EXPECT_FALSE(unlisted_.HasPendingConnection()) << "a refused request reached its canary";

  // The audit log names each refusal, and the session's totals once its shell has ended.
  Json closed = client_.Call("terminal_close", Json{{"sessionId", session_}});
  ASSERT_TRUE(closed.contains("result")) << closed.dump();
  std::vector<Json> denied_events;
  std::optional<Json> totals;
  for (int round = 0; round < 600 && !totals; ++round) {  // the writer is asynchronous
    denied_events.clear();
    std::ifstream log(audit_);
    for (std::string line; std::getline(log, line);) {
      Json event = Json::parse(line, nullptr, false);
      if (event.is_discarded()) continue;
      if (event.value("event", "") == "network_denied") denied_events.push_back(event);
      if (event.value("event", "") == "network_closed") totals = event;
    }
    if (!totals) ::usleep(50'000);
  }
  ASSERT_TRUE(totals) << "no network_closed event in " << audit_;
  EXPECT_EQ(totals->value("sessionId", ""), session_);
  EXPECT_EQ(totals->value("connections", 0), 3);
  EXPECT_EQ(totals->value("refused", 0), static_cast<int>(denied_events.size()));
  EXPECT_GT(totals->value("bytesReceived", 0), 0);
  ASSERT_EQ(denied_events.size(), 5u);  // deny, unlisted, unlisted https, literal, localhost.
  EXPECT_EQ(denied_events[0].value("host", ""), "localhost");
  EXPECT_EQ(denied_events[0].value("port", 0), denied_.port());
  EXPECT_EQ(denied_events[0].value("sessionId", ""), session_);
  EXPECT_NE(denied_events[0].value("reason", "").find("deny: localhost"), std::string::npos);
  EXPECT_EQ(denied_events[3].value("host", ""), "127.0.0.1");
}

// `deny: 127.0.0.1:PORT` holds for a name that resolves to it: `localhost:PORT` is allowed by
// name, yet refused as a whole (naming the deny entry) because one of its addresses is denied.
TEST_P(NetworkNamesTest, ADeniedLiteralIsRefusedBehindAnAllowedName) {
  session_ = OpenSession(client_, Mode(), Json{{"cols", 1000}});
  ASSERT_FALSE(session_.empty()) << daemon_.Log();
  const std::string port = std::to_string(behind_.port());
  Observed behind = Run("deny-behind-name", Curl("http://localhost:" + port + "/"));
  EXPECT_TRUE(
      behind.Says("resolves to 127.0.0.1, refused by the network policy: it matches "
                  "`deny: 127.0.0.1:" +
                  port + "`"))
      << behind.Show();
  EXPECT_FALSE(behind_.HasPendingConnection()) << "the denied address was reached by name";
}

TEST_P(NetworkNamesTest, AnAllowedRegistryWorksOverHttps) {
  session_ = OpenSession(client_, Mode());
  ASSERT_FALSE(session_.empty()) << daemon_.Log();
  if (!HostReaches("registry.npmjs.org", "443")) {
    GTEST_SKIP() << "this host does not reach registry.npmjs.org:443 itself; nothing to prove";
  }
  Observed registry = Run("registry",
                          "curl -sS --max-time 120 -o /dev/null -w 'status=%{http_code}' "
                          "https://registry.npmjs.org/left-pad; echo \" curl-exit=$?\"");
  EXPECT_TRUE(registry.Says("status=200")) << registry.Show();
  EXPECT_TRUE(registry.Says("curl-exit=0")) << registry.Show();
  // npm honours HTTPS_PROXY: its CONNECT carries the SNI of the name it asked for.
  Observed npm = Run("npm-view",
                     "(set -o pipefail; cd /tmp && npm view left-pad name 2>/dev/null | tr a-z "
                     "A-Z); echo \" npm-exit=$?\"");
  EXPECT_TRUE(npm.Says("LEFT-PAD")) << npm.Show();
  EXPECT_TRUE(npm.Says("npm-exit=0")) << npm.Show();
}

// apt through the proxy: apt-get reads http_proxy, and the session's apt configuration
// (APT_CONFIG, in the private home) keeps it from switching to `_apt`, which a sandbox that maps
// one id cannot do (its http method used to die: "setgroups 65534 failed"). An unlisted host is
// refused with the policy's reason in the status line, the only line apt shows.
TEST_P(NetworkNamesTest, AptDownloadsFromTheAllowedArchiveOnly) {
  session_ = OpenSession(client_, Mode(), Json{{"cols", 1000}});
  ASSERT_FALSE(session_.empty()) << daemon_.Log();
  // Not skipped: without the archive nothing here would prove apt works through the proxy.
  ASSERT_TRUE(HostReaches("deb.debian.org", "80"))
      << "this host does not reach deb.debian.org:80 itself, so apt-get download cannot be "
         "tested through the proxy: give the test machine access to Debian's archive";
  ASSERT_EQ(std::system("apt-cache show hello >/dev/null 2>&1"), 0)
      << "this host's apt lists do not know the package `hello`: run apt-get update (with "
         "deb.debian.org in /etc/apt/sources.list.d/) first";
  // The workspace where it is writable (the .deb then lands on the host), else the session's /tmp.
  const bool writable = Mode() == "workspace-write";
  const std::string dir = writable ? "\"$PWD\"" : "/tmp";
  Observed download = Run("apt-get-download",
                          "(set -o pipefail; cd " + dir +
                              " && apt-get download hello 2>&1 | tail -3); echo \" apt-exit=$?\"");
  EXPECT_TRUE(download.Says("apt-exit=0")) << download.Show();
  EXPECT_FALSE(download.Says("setgroups")) << download.Show();
  Observed deb =
      Run("dpkg-deb-reads-it",
          "dpkg-deb -f " + dir + "/hello_*.deb Package Architecture; echo \" dpkg-exit=$?\"");
  EXPECT_TRUE(deb.Says("Package: hello")) << deb.Show();
  EXPECT_TRUE(deb.Says("dpkg-exit=0")) << deb.Show();
  if (writable) {
    bool on_host = false;
    for (const auto& entry : fs::directory_iterator(daemon_.workspace())) {
      const std::string name = entry.path().filename().string();
      if (name.starts_with("hello_") && name.ends_with(".deb")) on_host = entry.file_size() > 0;
    }
    EXPECT_TRUE(on_host) << "no hello_*.deb in the workspace " << daemon_.workspace();
  }

  // apt's http method to a host that is not listed (the canary on the host's loopback, through
  // the proxy: NO_PROXY would send localhost direct): refused, and apt says why.
  const std::string unlisted = std::to_string(unlisted_.port());
  Observed refused = Run("apt-unlisted",
                         "(set -o pipefail; cd /tmp && no_proxy= NO_PROXY= /usr/lib/apt/apt-helper "
                         "download-file http://localhost:" +
                             unlisted +
                             "/x.deb x.deb 2>&1 | grep '^E: '); "
                             "echo \" apt-exit=$?\"");
  EXPECT_TRUE(refused.Says("403  Forbidden (ptybox: ")) << refused.Show();
  EXPECT_TRUE(refused.Says("localhost:" + unlisted)) << refused.Show();
  EXPECT_TRUE(refused.Says("it is not on the allow list")) << refused.Show();
  EXPECT_TRUE(refused.Says(policy_.string())) << refused.Show();
  EXPECT_TRUE(refused.Says("apt-exit=100")) << refused.Show();
  EXPECT_FALSE(unlisted_.HasPendingConnection()) << "a refused apt request reached its canary";
}

TEST_P(NetworkNamesTest, ARepositoryCannotWidenTheList) {
  std::ofstream(daemon_.workspace() / ".ptybox.yaml")
      << "version: 1\nnetwork: {allow: [\"localhost:" << unlisted_.port() << "\"]}\n";
  client_.Call("policy_set_mode", Json{{"mode", Mode()}});
  Json response = client_.Call("terminal_open", Json::object());
  ASSERT_TRUE(response.contains("error")) << response.dump();
  const std::string message = response["error"].value("message", "");
  EXPECT_NE(message.find("is not within the operator's allow list"), std::string::npos) << message;
  EXPECT_NE(message.find(".ptybox.yaml:2:"), std::string::npos) << message;
  EXPECT_FALSE(unlisted_.HasPendingConnection());
}

// A client in the session CONNECTs to an allowed name on 443 and sends a ClientHello naming
// another host: the proxy answers the CONNECT, reads the ClientHello, and closes without a
// connection to the server. The host's 127.0.0.1:443 is the canary when this test may bind it
// (root); the audit log's reason proves the refusal either way.
constexpr std::string_view kSniClient = R"(import socket, struct, sys
def hello(name):
    n = name.encode()
    names = b"\x00" + struct.pack(">H", len(n)) + n
    sni = struct.pack(">H", len(names)) + names
    ext = struct.pack(">HH", 0, len(sni)) + sni
    body = (b"\x03\x03" + b"r" * 32 + b"\x00" + struct.pack(">H", 2) + b"\x13\x01" +
            b"\x01\x00" + struct.pack(">H", len(ext)) + ext)
    hs = b"\x01" + struct.pack(">I", len(body))[1:] + body
    return b"\x16\x03\x01" + struct.pack(">H", len(hs)) + hs
s = socket.create_connection(("127.0.0.1", 3128))
s.settimeout(60)
s.sendall(b"CONNECT localhost:443 HTTP/1.1\r\n\r\n")
r = b""
while b"\r\n\r\n" not in r:
    d = s.recv(100)
    if not d: break
    r += d
print("proxy-said", r.split(b"\r\n")[0].decode())
s.sendall(hello(sys.argv[1]))
rest = s.recv(100)
print("after-hello", len(rest), "bytes", "closed" if not rest else "open")
)";

TEST_P(NetworkNamesTest, TheTlsServerNameMustBeTheConnectName) {
  int canary = -1;
  if (::geteuid() == 0) {
    canary = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(443);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::bind(canary, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
        ::listen(canary, 8) != 0) {
      ::close(canary);
      canary = -1;
    }
  }
  if (canary < 0) {
    std::cout << "  (no canary on 127.0.0.1:443: only root may bind it here; the audit log's "
                 "reason is the proof)\n";
  }
  std::ofstream(daemon_.workspace() / "sni_client.py") << kSniClient;
  session_ = OpenSession(client_, Mode(), Json{{"cols", 1000}});
  ASSERT_FALSE(session_.empty()) << daemon_.Log();
  Observed o = Run("sni-differs", "python3 sni_client.py other.test");
  EXPECT_TRUE(o.Says("proxy-said HTTP/1.1 200 Connection established")) << o.Show();
  EXPECT_TRUE(o.Says("after-hello 0 bytes closed")) << o.Show();
  if (canary >= 0) {
    const int conn = ::accept4(canary, nullptr, nullptr, SOCK_CLOEXEC);
    EXPECT_LT(conn, 0) << "the ClientHello with another name reached 127.0.0.1:443";
    if (conn >= 0) ::close(conn);
    ::close(canary);
  }
  bool found = false;
  for (int round = 0; round < 600 && !found; ++round) {  // the writer is asynchronous
    std::ifstream log(audit_);
    for (std::string line; std::getline(log, line);) {
      Json event = Json::parse(line, nullptr, false);
      if (!event.is_discarded() && event.value("event", "") == "network_denied" &&
          event.value("reason", "")
                  .find("TLS server name `other.test` differs from the "
                        "CONNECT name localhost") != std::string::npos) {
        found = true;
      }
    }
    if (!found) ::usleep(50'000);
  }
  EXPECT_TRUE(found) << "no network_denied event for the SNI in " << audit_;
}

// A second session of the same launch is usually served by the warm pool's pre-started shell,
// whose proxy started before anyone claimed it: its refusals must still be audited under the
// session that claimed it, and its allowed names still work.
TEST_P(NetworkNamesTest, APooledShellReportsToTheSessionThatClaimedIt) {
  const std::string first = OpenSession(client_, Mode(), Json{{"cols", 1000}});
  ASSERT_FALSE(first.empty()) << daemon_.Log();
  std::string second;
  for (int round = 0; round < 600; ++round) {  // until the pool has a shell ready (hang guard)
    if (daemon_.Log().find("warm pool: a pre-started shell is ready") != std::string::npos) break;
    ::usleep(50'000);
  }
  second = OpenSession(client_, Mode(), Json{{"cols", 1000}});
  ASSERT_FALSE(second.empty()) << daemon_.Log();
  const bool pooled = daemon_.Log().find("served by a pre-started shell") != std::string::npos;
  std::cout << "  second session " << (pooled ? "served by the warm pool" : "started afresh")
            << "\n";
  session_ = second;
  Observed allowed =
      Run("pooled-allowed", Curl("http://localhost:" + std::to_string(server_.port()) + "/"));
  EXPECT_TRUE(allowed.Says("served-by-host")) << allowed.Show();
  Observed refused =
      Run("pooled-refused", Curl("http://localhost:" + std::to_string(unlisted_.port()) + "/"));
  EXPECT_TRUE(refused.Says("it is not on the allow list")) << refused.Show();
  EXPECT_FALSE(unlisted_.HasPendingConnection());
  bool found = false;
  for (int round = 0; round < 600 && !found; ++round) {  // the writer is asynchronous
    std::ifstream log(audit_);
    for (std::string line; std::getline(log, line);) {
      Json event = Json::parse(line, nullptr, false);
      if (!event.is_discarded() && event.value("event", "") == "network_denied") {
        EXPECT_EQ(event.value("sessionId", ""), second) << line;
        found = true;
      }
    }
    if (!found) ::usleep(50'000);
  }
  EXPECT_TRUE(found) << "no network_denied event in " << audit_;
}

// The positive control: without a sandbox there is no proxy and no wall, and a direct
// connection reaches the canary that every confined case above must leave untouched.
class NetworkNamesControlTest : public NetworkNamesTest {};

TEST_P(NetworkNamesControlTest, WithoutASandboxTheCanaryIsReached) {
  session_ = OpenSession(client_, Mode());
  ASSERT_FALSE(session_.empty()) << daemon_.Log();
  Observed direct =
      Run("direct-control", "(exec 3<>/dev/tcp/127.0.0.1/" + std::to_string(unlisted_.port()) +
                                ") && echo reached-\"host\"");
  EXPECT_TRUE(direct.Says("reached-host")) << direct.Show();
  EXPECT_TRUE(unlisted_.HasPendingConnection()) << direct.Show();
}

INSTANTIATE_TEST_SUITE_P(Control, NetworkNamesControlTest, ::testing::Values("danger-full-access"),
                         ModeTestName);

INSTANTIATE_TEST_SUITE_P(Modes, NetworkNamesTest, ::testing::Values("read-only", "workspace-write"),
                         ModeTestName);

}  // namespace
}  // namespace ptybox::testing
