// Network by name: the patterns of `network: {allow: [...], deny: [...]}`, the matcher that
// decides a (host, port) against them, and the address ranges a name may never resolve into
// unless the operator lists them. Pure functions: no resolver, no sockets, no filesystem.
#pragma once

#include <array>
#include <cstdint>
#include <expected>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace ptybox::policy {

// One pattern: `registry.example.org`, `*.example.org` (subdomains only), an IP literal
// (`127.0.0.1`, `[::1]`), each optionally `:port`.
struct HostPattern {
  std::string host;         // lower case, no trailing dot; an IPv6 literal without brackets
  bool subdomains = false;  // written `*.host`: any name below `host`, not `host` itself
  uint16_t port = 0;        // 0: the default ports, 80 and 443
  bool operator==(const HostPattern&) const = default;
};

// A pattern with the "file:line:column" it was written at.
struct NetworkRule {
  HostPattern pattern;
  std::string where;
  bool operator==(const NetworkRule&) const = default;
};

// The effective allowlist of a session: deny wins over allow; a name on neither is refused.
struct NetworkNames {
  std::vector<NetworkRule> allow;
  std::vector<NetworkRule> deny;
  // Where the lists were written ("file:line:column", two joined by " and " when a repository
  // narrowed the operator's): named in every refusal.
  std::string source;
  bool operator==(const NetworkNames&) const = default;
};

inline constexpr size_t kMaxHostPatterns = 256;  // per list and file
inline constexpr size_t kMaxHostNameBytes = 253;

// Parses one pattern as written in a policy file; the error says what is wrong and what a
// pattern looks like.
[[nodiscard]] std::expected<HostPattern, std::string> ParseHostPattern(std::string_view text);
// The pattern as a person writes it: "*.example.org", "registry.npmjs.org:8443", "[::1]:80".
[[nodiscard]] std::string ToString(const HostPattern& pattern);

// A host as a client named it (CONNECT authority, SOCKS name, Host header), normalized the way
// patterns are: lower case, one trailing dot dropped, IPv6 brackets removed. nullopt: not a
// valid host name or IP literal.
[[nodiscard]] std::optional<std::string> NormalizeHost(std::string_view host);

// An IPv4 or IPv6 address as 16 bytes (IPv4 as ::ffff:a.b.c.d).
struct IpAddress {
  std::array<uint8_t, 16> bytes{};
  bool operator==(const IpAddress&) const = default;
};
// Parses a literal the way the C library would connect to it (inet_pton for IPv6; inet_aton
// for IPv4, so `2130706433` and `0x7f.1` are literals too).
[[nodiscard]] std::optional<IpAddress> ParseIpLiteral(std::string_view host);
[[nodiscard]] std::string ToString(const IpAddress& address);

// True for loopback, private, shared (CGNAT), link-local (the cloud metadata address included),
// unique-local, multicast, unspecified, documentation (192.0.2/24, 198.51.100/24, 203.0.113/24,
// 2001:db8::/32), local-use NAT64 (64:ff9b:1::/48) and reserved ranges, in either family
// (IPv4-mapped and NAT64 addresses are judged by the IPv4 address they carry).
[[nodiscard]] bool IsLocalAddress(const IpAddress& address);

// A host that only an exact pattern may allow: an IP literal, `localhost` or a name below it.
[[nodiscard]] bool IsSpecialHost(std::string_view normalized_host);

// True when `pattern` admits (host, port). Special hosts match exact patterns only.
[[nodiscard]] bool Matches(const HostPattern& pattern, std::string_view normalized_host,
                           uint16_t port);

// True when everything `inner` admits, `outer` admits too (a repository narrowing).
[[nodiscard]] bool Covers(const HostPattern& outer, const HostPattern& inner);

struct NameVerdict {
  bool allowed = false;
  const NetworkRule* rule = nullptr;  // the deny or allow rule that decided; nullptr: no rule
  std::string reason;                 // one line for the client and the audit log
};

// The decision on a requested name, before any resolution.
[[nodiscard]] NameVerdict DecideName(const NetworkNames& names, std::string_view normalized_host,
                                     uint16_t port);

// The decision on one address `host` resolved to (after DecideName allowed the host): an
// address an IP-literal `deny:` entry names is refused (naming that entry); a local address, or
// one of `host_addresses` (the host's own interface addresses, any form), is refused unless the
// operator allowed it explicitly (an exact IP-literal pattern for that address, or an exact
// `localhost` pattern for a loopback address).
[[nodiscard]] NameVerdict DecideAddress(const NetworkNames& names, std::string_view normalized_host,
                                        uint16_t port, const IpAddress& address,
                                        std::span<const IpAddress> host_addresses = {});

}  // namespace ptybox::policy
