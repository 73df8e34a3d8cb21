// The pure network-by-name core: pattern parsing, matching, narrowing and the address ranges a
// name may not resolve into.
#include "policy/host_pattern.h"

#include <gtest/gtest.h>

namespace ptybox::policy {
namespace {

HostPattern P(std::string_view text) {
  auto parsed = ParseHostPattern(text);
  EXPECT_TRUE(parsed.has_value()) << text << ": " << (parsed ? "" : parsed.error());
  return parsed.value_or(HostPattern{});
}

NetworkNames Names(std::vector<std::string_view> allow, std::vector<std::string_view> deny = {}) {
  NetworkNames names;
  names.source = "/etc/ptybox/policy.yaml:3:10";
  int line = 4;
  for (auto a : allow) names.allow.push_back({P(a), "op.yaml:" + std::to_string(line++) + ":5"});
  for (auto d : deny) names.deny.push_back({P(d), "op.yaml:" + std::to_string(line++) + ":5"});
  return names;
}

IpAddress Ip(std::string_view text) {
  auto ip = ParseIpLiteral(text);
  EXPECT_TRUE(ip.has_value()) << text;
  return ip.value_or(IpAddress{});
}

TEST(HostPatternTest, ParsesTheWrittenForms) {
  EXPECT_EQ(P("Registry.NPMjs.org."), (HostPattern{"registry.npmjs.org", false, 0}));
  EXPECT_EQ(P("*.example.org"), (HostPattern{"example.org", true, 0}));
  EXPECT_EQ(P("*.example.org:8443"), (HostPattern{"example.org", true, 8443}));
  EXPECT_EQ(P("127.0.0.1:3000"), (HostPattern{"127.0.0.1", false, 3000}));
  EXPECT_EQ(P("[::1]:80"), (HostPattern{"::1", false, 80}));
  EXPECT_EQ(P("::1"), (HostPattern{"::1", false, 0}));
  EXPECT_EQ(ToString(P("[::1]:80")), "[::1]:80");
  EXPECT_EQ(ToString(P("*.Example.org:8443")), "*.example.org:8443");
}

TEST(HostPatternTest, RefusesMalformedPatternsWithTheShape) {
  for (std::string_view bad :
       {"", "*", "*.com", "a*.example.org", "example.org:0", "example.org:65536",
        "example.org:http", "exa mple.org", "[::1", "*.127.0.0.1", "a..b"}) {
    auto parsed = ParseHostPattern(bad);
    EXPECT_FALSE(parsed.has_value()) << bad;
    if (!parsed) {
      EXPECT_FALSE(parsed.error().empty()) << bad;
    }
  }
  EXPECT_NE(ParseHostPattern("*").error().find("`*` alone would allow every name"),
            std::string::npos);
  EXPECT_NE(ParseHostPattern("**.example.org").error().find("`*` may only stand first"),
            std::string::npos);
  EXPECT_NE(ParseHostPattern("*.localhost").error().find("names below localhost"),
            std::string::npos);
  EXPECT_NE(ParseHostPattern("*.com").error().find("whole top-level domain"), std::string::npos);
}

TEST(HostPatternTest, MatchesNamesAndDefaultPorts) {
  const HostPattern exact = P("registry.npmjs.org");
  EXPECT_TRUE(Matches(exact, "registry.npmjs.org", 443));
  EXPECT_TRUE(Matches(exact, "registry.npmjs.org", 80));
  EXPECT_FALSE(Matches(exact, "registry.npmjs.org", 22));
  EXPECT_FALSE(Matches(exact, "evil.registry.npmjs.org", 443));
  EXPECT_FALSE(Matches(exact, "npmjs.org", 443));

  const HostPattern wild = P("*.example.org:8443");
  EXPECT_TRUE(Matches(wild, "a.example.org", 8443));
  EXPECT_TRUE(Matches(wild, "a.b.example.org", 8443));
  EXPECT_FALSE(Matches(wild, "example.org", 8443)) << "subdomains only";
  EXPECT_FALSE(Matches(wild, "badexample.org", 8443)) << "a label boundary, not a suffix";
  EXPECT_FALSE(Matches(wild, "a.example.org", 443));
}

TEST(HostPatternTest, SpecialHostsNeedAnExactPattern) {
  EXPECT_TRUE(IsSpecialHost("localhost"));
  EXPECT_TRUE(IsSpecialHost("db.localhost"));
  EXPECT_TRUE(IsSpecialHost("127.0.0.1"));
  EXPECT_TRUE(IsSpecialHost("2130706433")) << "inet_aton's decimal form of 127.0.0.1";
  EXPECT_TRUE(IsSpecialHost("0x7f.1"));
  EXPECT_FALSE(IsSpecialHost("registry.npmjs.org"));
  EXPECT_FALSE(Matches(P("*.example.localhost.org"), "db.localhost", 80));
  EXPECT_FALSE(Matches(P("*.0.1.example.org"), "127.0.0.1", 80));
  EXPECT_TRUE(Matches(P("localhost:8080"), "localhost", 8080));
}

TEST(HostPatternTest, NormalizesRequestedHosts) {
  EXPECT_EQ(NormalizeHost("Registry.NPMjs.ORG."), "registry.npmjs.org");
  EXPECT_EQ(NormalizeHost("[0:0::1]"), "::1");
  EXPECT_EQ(NormalizeHost("localhost."), "localhost");
  EXPECT_FALSE(NormalizeHost("evil.org/x"));
  EXPECT_FALSE(NormalizeHost("a b"));
  EXPECT_FALSE(NormalizeHost(""));
  EXPECT_FALSE(NormalizeHost(std::string(300, 'a')));
}

TEST(HostPatternTest, DenyWinsAndUnlistedNamesAreRefusedWithTheSource) {
  const NetworkNames names = Names({"*.example.org", "registry.npmjs.org"}, {"secret.example.org"});
  EXPECT_TRUE(DecideName(names, "www.example.org", 443).allowed);
  NameVerdict denied = DecideName(names, "secret.example.org", 443);
  EXPECT_FALSE(denied.allowed);
  EXPECT_EQ(denied.reason,
            "ptybox: secret.example.org:443 is refused by the network policy: it matches `deny: "
            "secret.example.org` at op.yaml:6:5");
  NameVerdict unlisted = DecideName(names, "evil.test", 443);
  EXPECT_FALSE(unlisted.allowed);
  EXPECT_EQ(unlisted.reason,
            "ptybox: evil.test:443 is refused by the network policy: it is not on the allow list "
            "of /etc/ptybox/policy.yaml:3:10");
  EXPECT_FALSE(DecideName(names, "registry.npmjs.org", 22).allowed);
  NameVerdict literal = DecideName(names, "127.0.0.1", 80);
  EXPECT_FALSE(literal.allowed);
  EXPECT_NE(literal.reason.find("IP literals and localhost need an exact entry"),
            std::string::npos);
}

TEST(HostPatternTest, LocalRangesInBothFamilies) {
  for (std::string_view local : {"127.0.0.1",
                                 "127.255.0.9",
                                 "10.1.2.3",
                                 "172.16.0.1",
                                 "172.31.255.255",
                                 "192.168.1.1",
                                 "169.254.169.254",
                                 "100.64.0.1",
                                 "0.0.0.0",
                                 "224.0.0.1",
                                 "255.255.255.255",
                                 "::1",
                                 "::",
                                 "fe80::1",
                                 "fd00:ec2::254",
                                 "fc00::1",
                                 "ff02::1",
                                 "::ffff:127.0.0.1",
                                 "::ffff:10.0.0.1",
                                 "64:ff9b::a9fe:a9fe",
                                 "2002:7f00:1::1",
                                 "::127.0.0.1",
                                 "2001:db8::1",
                                 "64:ff9b:1::1",
                                 "64:ff9b:1:ffff::1"}) {
    EXPECT_TRUE(IsLocalAddress(Ip(local))) << local;
  }
  // Addresses only: no test connects to any of them.
  // The IPv4 documentation ranges are public here: test and lab networks (this project's CI
  // machine among them) give real registries such addresses; the host's own are refused apart.
  for (std::string_view public_address :
       {"192.0.2.1", "198.51.100.7", "203.0.113.9", "::ffff:203.0.113.9", "192.0.3.1",
        "198.51.101.7", "203.0.114.9", "172.32.0.1", "100.128.0.1", "2606:4700::1",
        "64:ff9b:2::1"}) {
    EXPECT_FALSE(IsLocalAddress(Ip(public_address))) << public_address;
  }
}

TEST(HostPatternTest, ANameThatResolvesToALocalAddressIsRefused) {
  const NetworkNames names = Names({"registry.example.org", "localhost:8080", "127.0.0.1:3000"});
  NameVerdict rebound = DecideAddress(names, "registry.example.org", 443, Ip("127.0.0.1"));
  EXPECT_FALSE(rebound.allowed);
  EXPECT_EQ(rebound.reason,
            "ptybox: registry.example.org resolves to 127.0.0.1, a local or private address, "
            "refused by the network policy unless the operator lists that address "
            "(/etc/ptybox/policy.yaml:3:10)");
  EXPECT_FALSE(DecideAddress(names, "registry.example.org", 443, Ip("169.254.169.254")).allowed);
  EXPECT_TRUE(DecideAddress(names, "registry.example.org", 443, Ip("192.0.2.1")).allowed);
  EXPECT_TRUE(DecideAddress(names, "registry.example.org", 443, Ip("172.32.0.1")).allowed);
  // Listed exactly by the operator: localhost may reach loopback, the literal itself too.
  EXPECT_TRUE(DecideAddress(names, "localhost", 8080, Ip("127.0.0.1")).allowed);
  EXPECT_TRUE(DecideAddress(names, "localhost", 8080, Ip("::1")).allowed);
  EXPECT_FALSE(DecideAddress(names, "localhost", 8080, Ip("10.0.0.1")).allowed);
  EXPECT_FALSE(DecideAddress(names, "localhost", 9090, Ip("127.0.0.1")).allowed);
  EXPECT_TRUE(DecideAddress(names, "127.0.0.1", 3000, Ip("127.0.0.1")).allowed);
  EXPECT_FALSE(DecideAddress(names, "evil.example.org", 3000, Ip("127.0.0.2")).allowed);
}

TEST(HostPatternTest, ANameThatResolvesToTheHostItselfIsRefused) {
  // The host's own interface addresses as getifaddrs lists them (IPv4 as mapped).
  const std::vector<IpAddress> own = {Ip("172.32.0.5"), Ip("2606:4700::5")};
  const NetworkNames names = Names({"registry.example.org", "172.32.0.5:8443"});
  NameVerdict self = DecideAddress(names, "registry.example.org", 443, Ip("172.32.0.5"), own);
  EXPECT_FALSE(self.allowed);
  EXPECT_EQ(self.reason,
            "ptybox: registry.example.org resolves to 172.32.0.5, an address of this host "
            "itself, refused by the network policy unless the operator lists that address "
            "(/etc/ptybox/policy.yaml:3:10)");
  // Every IPv6 form that carries the same IPv4 address is the same host.
  for (std::string_view form : {"::ffff:172.32.0.5", "64:ff9b::ac20:5", "::172.32.0.5"}) {
    EXPECT_FALSE(DecideAddress(names, "registry.example.org", 443, Ip(form), own).allowed) << form;
  }
  EXPECT_FALSE(DecideAddress(names, "registry.example.org", 443, Ip("2606:4700::5"), own).allowed);
  EXPECT_TRUE(DecideAddress(names, "registry.example.org", 443, Ip("172.32.0.6"), own).allowed);
  // Listed explicitly by the operator (that literal, that port): allowed.
  EXPECT_TRUE(DecideAddress(names, "172.32.0.5", 8443, Ip("172.32.0.5"), own).allowed);
}

TEST(HostPatternTest, ADeniedLiteralIsDeniedBehindANameToo) {
  NetworkNames names = Names({"registry.example.org", "*.example.net"});
  names.deny.push_back({*ParseHostPattern("172.32.0.9"), "/etc/ptybox/policy.yaml:7:5"});
  names.deny.push_back({*ParseHostPattern("[2606:4700::9]:8080"), "/etc/ptybox/policy.yaml:8:5"});
  NameVerdict denied = DecideAddress(names, "registry.example.org", 443, Ip("172.32.0.9"));
  EXPECT_FALSE(denied.allowed);
  ASSERT_NE(denied.rule, nullptr);
  EXPECT_EQ(denied.reason,
            "ptybox: registry.example.org resolves to 172.32.0.9, refused by the network "
            "policy: it matches `deny: 172.32.0.9` at /etc/ptybox/policy.yaml:7:5");
  EXPECT_FALSE(DecideAddress(names, "a.example.net", 80, Ip("::ffff:172.32.0.9")).allowed);
  // The entry's port applies: 8080 only.
  EXPECT_FALSE(DecideAddress(names, "a.example.net", 8080, Ip("2606:4700::9")).allowed);
  EXPECT_TRUE(DecideAddress(names, "a.example.net", 443, Ip("2606:4700::9")).allowed);
  EXPECT_TRUE(DecideAddress(names, "registry.example.org", 443, Ip("172.32.0.10")).allowed);
}

TEST(HostPatternTest, CoversIsTheNarrowingRule) {
  EXPECT_TRUE(Covers(P("*.example.org"), P("a.example.org")));
  EXPECT_TRUE(Covers(P("*.example.org"), P("*.a.example.org")));
  EXPECT_TRUE(Covers(P("*.example.org"), P("*.example.org:443")));
  EXPECT_FALSE(Covers(P("*.example.org"), P("example.org")));
  EXPECT_FALSE(Covers(P("*.example.org"), P("a.example.org:8080")));
  EXPECT_FALSE(Covers(P("a.example.org"), P("*.a.example.org")));
  EXPECT_TRUE(Covers(P("a.example.org"), P("a.example.org:80")));
  EXPECT_FALSE(Covers(P("a.example.org:80"), P("a.example.org")));
  EXPECT_FALSE(Covers(P("*.example.org"), P("127.0.0.1")));
}

}  // namespace
}  // namespace ptybox::policy
