// The proxy's pure parsers: HTTP request heads, SOCKS5, and the SNI of a ClientHello, each fed
// whole and split at every byte (a client may send any prefix first).
#include "backend/proxy/proxy_parse.h"

#include <gtest/gtest.h>

#include "tests/backend/tls_hello.h"

namespace ptybox::backend::proxy {
namespace {

TEST(ProxyParseTest, ConnectNamesHostAndPort) {
  const std::string head = "CONNECT registry.npmjs.org:443 HTTP/1.1\r\nHost: x\r\n\r\nTAIL";
  for (size_t cut = 0; cut < head.size() - 4; ++cut) {
    EXPECT_EQ(ParseHttpRequest(head.substr(0, cut)).status, ParseStatus::kNeedMore) << cut;
  }
  HttpParse parsed = ParseHttpRequest(head);
  ASSERT_EQ(parsed.status, ParseStatus::kDone);
  EXPECT_TRUE(parsed.request.connect);
  EXPECT_EQ(parsed.request.host, "registry.npmjs.org");
  EXPECT_EQ(parsed.request.port, 443);
  EXPECT_EQ(head.substr(parsed.request.head_bytes), "TAIL");
  HttpParse v6 = ParseHttpRequest("CONNECT [::1]:8080 HTTP/1.1\r\n\r\n");
  ASSERT_EQ(v6.status, ParseStatus::kDone);
  EXPECT_EQ(v6.request.host, "::1");
  EXPECT_EQ(v6.request.port, 8080);
}

TEST(ProxyParseTest, AbsoluteFormIsRewrittenToOriginFormForOneHost) {
  HttpParse parsed = ParseHttpRequest(
      "GET http://Example.org:8080/a?b=c HTTP/1.1\r\nHost: evil.test\r\nProxy-Connection: "
      "keep-alive\r\nProxy-Authorization: Basic eA==\r\nAccept: */*\r\nConnection: keep-alive\r\n"
      "\r\n");
  ASSERT_EQ(parsed.status, ParseStatus::kDone) << parsed.error;
  EXPECT_FALSE(parsed.request.connect);
  EXPECT_EQ(parsed.request.host, "Example.org");
  EXPECT_EQ(parsed.request.port, 8080);
  EXPECT_EQ(parsed.request.forward_head,
            "GET /a?b=c HTTP/1.1\r\nHost: Example.org:8080\r\nAccept: */*\r\nConnection: "
            "close\r\n\r\n");
  HttpParse bare = ParseHttpRequest("GET http://example.org HTTP/1.0\r\n\r\n");
  ASSERT_EQ(bare.status, ParseStatus::kDone);
  EXPECT_EQ(bare.request.port, 80);
  EXPECT_TRUE(bare.request.forward_head.starts_with("GET / HTTP/1.0\r\n"));
}

TEST(ProxyParseTest, MalformedRequestsAreRefusedWithAStatus) {
  struct Case {
    std::string head;
    int status;
  };
  const Case cases[] = {
      {"GET /local HTTP/1.1\r\n\r\n", 400},
      {"GET https://example.org/ HTTP/1.1\r\n\r\n", 400},
      {"GET http://user:pw@example.org/ HTTP/1.1\r\n\r\n", 400},
      {"CONNECT example.org HTTP/1.1\r\n\r\n", 400},
      {"CONNECT example.org:0 HTTP/1.1\r\n\r\n", 400},
      {"CONNECT example.org:99999 HTTP/1.1\r\n\r\n", 400},
      {"CONNECT example.org:443 HTTP/2\r\n\r\n", 505},
      {"GET http://example.org/ HTTP/1.1\r\n folded\r\n\r\n", 400},
      {"GET http://example.org/ HTTP/1.1\r\nno colon\r\n\r\n", 400},
      {"G(T http://example.org/ HTTP/1.1\r\n\r\n", 400},
      {"GET  http://example.org/ HTTP/1.1\r\n\r\n", 400},
      {std::string(kMaxRequestHeadBytes, 'a'), 431},
  };
  for (const Case& c : cases) {
    HttpParse parsed = ParseHttpRequest(c.head);
    EXPECT_EQ(parsed.status, ParseStatus::kBad) << c.head.substr(0, 60);
    EXPECT_EQ(parsed.http_status, c.status) << c.head.substr(0, 60);
    EXPECT_FALSE(parsed.error.empty());
  }
}

TEST(ProxyParseTest, SocksGreetingAndRequest) {
  EXPECT_EQ(ParseSocksGreeting(std::string("\x05", 1)).status, ParseStatus::kNeedMore);
  SocksGreeting greeting = ParseSocksGreeting(std::string("\x05\x02\x02\x00", 4));
  ASSERT_EQ(greeting.status, ParseStatus::kDone);
  EXPECT_TRUE(greeting.no_auth_offered);
  EXPECT_EQ(greeting.consumed, 4u);
  EXPECT_FALSE(ParseSocksGreeting(std::string("\x05\x01\x02", 3)).no_auth_offered);

  const std::string name = std::string("\x05\x01\x00\x03\x09", 5) + "localhost" + "\x1f\x90";
  for (size_t cut = 0; cut < name.size(); ++cut) {
    EXPECT_EQ(ParseSocksRequest(name.substr(0, cut)).status, ParseStatus::kNeedMore) << cut;
  }
  SocksRequest request = ParseSocksRequest(name);
  ASSERT_EQ(request.status, ParseStatus::kDone);
  EXPECT_EQ(request.host, "localhost");
  EXPECT_EQ(request.port, 8080);
  EXPECT_EQ(request.consumed, name.size());

  SocksRequest v4 = ParseSocksRequest(std::string("\x05\x01\x00\x01\x7f\x00\x00\x01\x00\x50", 10));
  ASSERT_EQ(v4.status, ParseStatus::kDone);
  EXPECT_EQ(v4.host, "127.0.0.1");
  EXPECT_EQ(v4.port, 80);
  std::string v6("\x05\x01\x00\x04", 4);
  v6 += std::string(15, '\0') + "\x01" + std::string("\x01\xbb", 2);
  SocksRequest six = ParseSocksRequest(v6);
  ASSERT_EQ(six.status, ParseStatus::kDone);
  EXPECT_EQ(six.host, "0000:0000:0000:0000:0000:0000:0000:0001");

  SocksRequest bind = ParseSocksRequest(name.substr(0, 1) + "\x02" + name.substr(2));
  EXPECT_EQ(bind.status, ParseStatus::kBad);
  EXPECT_EQ(bind.reply, kSocksCommandNotSupported);
  SocksRequest type = ParseSocksRequest(std::string("\x05\x01\x00\x07\x00\x00", 6));
  EXPECT_EQ(type.reply, kSocksAddressNotSupported);
  EXPECT_EQ(SocksReply(kSocksNotAllowed), std::string("\x05\x02\x00\x01\0\0\0\0\0\0", 10));
}

TEST(ProxyParseTest, SniOfAClientHelloSplitAnywhereAndAcrossRecords) {
  const std::string hello = testing::ClientHello("Registry.npmjs.org");
  for (size_t cut = 0; cut < hello.size(); ++cut) {
    EXPECT_EQ(ParseClientHelloSni(hello.substr(0, cut)).status, ParseStatus::kNeedMore) << cut;
  }
  SniParse sni = ParseClientHelloSni(hello);
  ASSERT_EQ(sni.status, ParseStatus::kDone) << sni.error;
  EXPECT_EQ(sni.server_name, "Registry.npmjs.org");

  // The same handshake in two records.
  const std::string handshake = hello.substr(5);
  auto record = [](std::string_view body) {
    return std::string("\x16\x03\x01", 3) + static_cast<char>(body.size() >> 8) +
           static_cast<char>(body.size() & 0xFF) + std::string(body);
  };
  const std::string split = record(handshake.substr(0, 20)) + record(handshake.substr(20));
  SniParse joined = ParseClientHelloSni(split);
  ASSERT_EQ(joined.status, ParseStatus::kDone) << joined.error;
  EXPECT_EQ(joined.server_name, "Registry.npmjs.org");

  SniParse none = ParseClientHelloSni(testing::ClientHello(""));
  ASSERT_EQ(none.status, ParseStatus::kDone);
  EXPECT_FALSE(none.server_name);
  EXPECT_EQ(ParseClientHelloSni("GET / HTTP/1.1\r\n").status, ParseStatus::kBad);
  std::string truncated = hello;
  truncated[6] = 0x7F;  // a handshake length beyond its bound
  EXPECT_EQ(ParseClientHelloSni(truncated).status, ParseStatus::kBad);
}

// Which CONNECT names must come with an SNI: names with a dot; not IP literals (RFC 6066) nor
// dotless names (Java sends none for `localhost`).
TEST(ProxyParseTest, AServerNameIsExpectedForDottedNamesOnly) {
  EXPECT_TRUE(ServerNameExpected("registry.npmjs.org"));
  EXPECT_TRUE(ServerNameExpected("deb.debian.org"));
  EXPECT_TRUE(ServerNameExpected("a.localhost"));
  EXPECT_FALSE(ServerNameExpected("localhost"));
  EXPECT_FALSE(ServerNameExpected("intranet"));
  EXPECT_FALSE(ServerNameExpected("127.0.0.1"));
  EXPECT_FALSE(ServerNameExpected("0x7f.1"));  // a literal the C library connects to
  EXPECT_FALSE(ServerNameExpected("::1"));
  EXPECT_FALSE(ServerNameExpected("2001:db8::1"));
}

}  // namespace
}  // namespace ptybox::backend::proxy
