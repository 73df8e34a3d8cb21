// The proof behind `exec bash`'s fresh nonce (backend/readiness/rekey.h): the client end of a
// connection to the rekey listener is found by its address in /proc/<pid>/net/tcp and must be
// one of the shell's own descriptors.
#include "backend/readiness/rekey.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <string>

#include "common/unique_fd.h"

namespace ptybox::backend {
namespace {

const uint32_t kLoopback = htonl(INADDR_LOOPBACK);  // printed as 0100007F on this host

std::string Hex(uint32_t value, int width) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%0*X", width, value);
  return buf;
}

// One row of /proc/net/tcp as the kernel prints it.
std::string Row(int sl, TcpEndpoint local, TcpEndpoint remote, const std::string& state,
                const std::string& inode) {
  return "  " + std::to_string(sl) + ": " + Hex(local.address, 8) + ":" + Hex(local.port, 4) + " " +
         Hex(remote.address, 8) + ":" + Hex(remote.port, 4) + " " + state +
         " 00000000:00000000 00:00000000 00000000  1000        0 " + inode +
         " 1 0000000000000000 20 4 30 10 -1\n";
}

constexpr char kHeader[] =
    "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout "
    "inode\n";

TEST(RekeyTableTest, FindsTheEstablishedClientEndByBothAddresses) {
  const TcpEndpoint listener{kLoopback, 40000};
  const TcpEndpoint client{kLoopback, 51000};
  std::string table = kHeader;
  table += Row(0, listener, TcpEndpoint{0, 0}, "0A", "111");              // the listener
  table += Row(1, listener, client, "01", "222");                         // the accepted end
  table += Row(2, TcpEndpoint{kLoopback, 51001}, listener, "01", "333");  // another client
  table += Row(3, client, listener, "01", "444");                         // this client
  EXPECT_EQ(FindEstablishedTcpInode(table, client, listener), 444u);
  EXPECT_EQ(FindEstablishedTcpInode(table, listener, client), 222u);
  EXPECT_EQ(FindEstablishedTcpInode(table, TcpEndpoint{kLoopback, 51002}, listener), std::nullopt);
}

TEST(RekeyTableTest, OnlyAnEstablishedSocketWithAnInodeCounts) {
  const TcpEndpoint listener{kLoopback, 40000};
  const TcpEndpoint client{kLoopback, 51000};
  // A client that closed (FIN_WAIT2) is stale; inode 0 is a socket without a file.
  EXPECT_EQ(FindEstablishedTcpInode(std::string(kHeader) + Row(0, client, listener, "05", "9"),
                                    client, listener),
            std::nullopt);
  EXPECT_EQ(FindEstablishedTcpInode(std::string(kHeader) + Row(0, client, listener, "01", "0"),
                                    client, listener),
            std::nullopt);
  EXPECT_EQ(FindEstablishedTcpInode(std::string(kHeader) + Row(0, client, listener, "01", "9x"),
                                    client, listener),
            std::nullopt);
  // The header is never a row; a short or garbled row is skipped.
  EXPECT_EQ(FindEstablishedTcpInode("", client, listener), std::nullopt);
  EXPECT_EQ(FindEstablishedTcpInode(std::string(kHeader) + "  0: 0100007F:C738 0100007F\n" +
                                        "  1: zz00007F:C738 0100007F:9C40 01 x x x 0 0 5\n" +
                                        Row(2, client, listener, "01", "7"),
                                    client, listener),
            7u);
}

TEST(RekeyFetchCodeTest, BuiltinsOnlyOverTheSessionsPort) {
  const std::string code = RekeyFetchCode(40123);
  EXPECT_EQ(code,
            "{ \\printf 'ptybox-rekey\\n' >&3 && IFS= \\read -r -t 10 __ptybox_n <&3; } "
            "3<>/dev/tcp/127.0.0.1/40123; ");
}

// A listener and a connected client in this process; `client` and `server` as the daemon sees
// them (the accepted socket's peer and local addresses).
struct Connection {
  UniqueFd listener, client, accepted;
  TcpEndpoint client_end, server_end;
};

Connection Connect() {
  Connection c;
  c.listener.Reset(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = kLoopback;
  socklen_t length = sizeof address;
  EXPECT_EQ(::bind(c.listener.Get(), reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
  EXPECT_EQ(::listen(c.listener.Get(), 1), 0);
  EXPECT_EQ(::getsockname(c.listener.Get(), reinterpret_cast<sockaddr*>(&address), &length), 0);
  c.client.Reset(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  EXPECT_EQ(::connect(c.client.Get(), reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
  c.accepted.Reset(::accept4(c.listener.Get(), nullptr, nullptr, SOCK_CLOEXEC));
  EXPECT_TRUE(c.accepted);
  sockaddr_in peer{}, local{};
  length = sizeof peer;
  EXPECT_EQ(::getpeername(c.accepted.Get(), reinterpret_cast<sockaddr*>(&peer), &length), 0);
  length = sizeof local;
  EXPECT_EQ(::getsockname(c.accepted.Get(), reinterpret_cast<sockaddr*>(&local), &length), 0);
  c.client_end = {peer.sin_addr.s_addr, ntohs(peer.sin_port)};
  c.server_end = {local.sin_addr.s_addr, ntohs(local.sin_port)};
  return c;
}

TEST(ClientEndRefusalTest, TheProcessHoldingTheClientEndIsAccepted) {
  Connection c = Connect();
  EXPECT_EQ(ClientEndRefusal(::getpid(), c.client_end, c.server_end), std::nullopt);
}

TEST(ClientEndRefusalTest, AnotherProcessOrAClosedClientIsRefused) {
  Connection c = Connect();
  // A child that holds nothing of this connection (its copies closed) is not the client.
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(c.client.Release());
    ::close(c.accepted.Release());
    ::close(c.listener.Release());
    ::close(ready[0]);
    ::close(ready[1]);  // tells the parent its copies are closed
    ::pause();
    ::_exit(0);
  }
  ::close(ready[1]);
  char byte;
  EXPECT_EQ(::read(ready[0], &byte, 1), 0);
  ::close(ready[0]);
  const std::optional<std::string> refusal = ClientEndRefusal(child, c.client_end, c.server_end);
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  ASSERT_TRUE(refusal.has_value());
  EXPECT_EQ(*refusal, "the client end is not a descriptor of the shell");
  // A client that closed its end: no established socket any more.
  c.client.Reset();
  EXPECT_TRUE(ClientEndRefusal(::getpid(), c.client_end, c.server_end).has_value());
  // A process that does not exist.
  EXPECT_TRUE(ClientEndRefusal(0x3fffffff, c.client_end, c.server_end).has_value());
}

}  // namespace
}  // namespace ptybox::backend
