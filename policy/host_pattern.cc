// Host patterns and the decisions on names and addresses: see host_pattern.h.
#include "policy/host_pattern.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <charconv>
#include <cstring>

namespace ptybox::policy {
namespace {

char Lower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }

bool ValidName(std::string_view name) {
  if (name.empty() || name.size() > kMaxHostNameBytes) return false;
  size_t label = 0;
  for (size_t i = 0; i <= name.size(); ++i) {
    if (i == name.size() || name[i] == '.') {
      if (label == 0 || label > 63) return false;
      label = 0;
      continue;
    }
    const char c = name[i];
    const bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
    if (!ok) return false;
    ++label;
  }
  return true;
}

// The port of a trailing ":digits", 1..65535.
std::optional<uint16_t> ParsePort(std::string_view text) {
  if (text.empty() || text.size() > 5) return std::nullopt;
  unsigned value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value == 0 || value > 65535) {
    return std::nullopt;
  }
  return static_cast<uint16_t>(value);
}

bool PortMatches(uint16_t pattern_port, uint16_t port) {
  return pattern_port == 0 ? (port == 80 || port == 443) : port == pattern_port;
}

// The documentation ranges (192.0.2/24, 198.51.100/24, 203.0.113/24) are not here: the public
// internet routes none of them, and networks that use them for real hosts (test and lab
// networks, this project's CI machine among them) reach their registries there. The host's own
// addresses, in whatever range, are refused by the proxy's own-address check.
bool IsLocalV4(const uint8_t* a) {
  const uint8_t b0 = a[0];
  const uint8_t b1 = a[1];
  return b0 == 0 ||                              // "this network", 0.0.0.0
         b0 == 10 ||                             // private
         (b0 == 100 && (b1 & 0xC0) == 64) ||     // shared address space (CGNAT)
         b0 == 127 ||                            // loopback
         (b0 == 169 && b1 == 254) ||             // link-local, cloud metadata
         (b0 == 172 && (b1 & 0xF0) == 16) ||     // private
         (b0 == 192 && b1 == 0 && a[2] == 0) ||  // IETF protocol assignments
         (b0 == 192 && b1 == 168) ||             // private
         (b0 == 198 && (b1 & 0xFE) == 18) ||     // benchmarking
         b0 >= 224;                              // multicast, reserved, broadcast
}

}  // namespace

std::optional<std::string> NormalizeHost(std::string_view host) {
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
    if (host.find(':') == std::string_view::npos) return std::nullopt;
  }
  if (host.find(':') != std::string_view::npos) {
    // An IPv6 literal: keep the canonical text so patterns and requests compare equal.
    auto address = ParseIpLiteral(host);
    if (!address) return std::nullopt;
    return ToString(*address);
  }
  if (!host.empty() && host.back() == '.') host.remove_suffix(1);
  std::string out;
  out.reserve(host.size());
  for (char c : host) out.push_back(Lower(c));
  if (!ValidName(out)) return std::nullopt;
  return out;
}

std::optional<IpAddress> ParseIpLiteral(std::string_view host) {
  if (host.empty() || host.size() > 64) return std::nullopt;
  std::string text(host);
  if (text.size() >= 2 && text.front() == '[' && text.back() == ']') {
    text = text.substr(1, text.size() - 2);
  }
  IpAddress out;
  if (text.find(':') != std::string::npos) {
    in6_addr a6{};
    if (inet_pton(AF_INET6, text.c_str(), &a6) != 1) return std::nullopt;
    std::memcpy(out.bytes.data(), &a6, 16);
    return out;
  }
  in_addr a4{};
  if (inet_aton(text.c_str(), &a4) == 0) return std::nullopt;
  out.bytes[10] = 0xFF;
  out.bytes[11] = 0xFF;
  std::memcpy(out.bytes.data() + 12, &a4, 4);
  return out;
}

std::string ToString(const IpAddress& address) {
  static constexpr uint8_t kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF};
  char buffer[INET6_ADDRSTRLEN] = {};
  if (std::memcmp(address.bytes.data(), kMapped, 12) == 0) {
    inet_ntop(AF_INET, address.bytes.data() + 12, buffer, sizeof buffer);
  } else {
    inet_ntop(AF_INET6, address.bytes.data(), buffer, sizeof buffer);
  }
  return buffer;
}

bool IsLocalAddress(const IpAddress& address) {
  const uint8_t* b = address.bytes.data();
  static constexpr uint8_t kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF};
  static constexpr uint8_t kNat64[12] = {0, 0x64, 0xFF, 0x9B, 0, 0, 0, 0, 0, 0, 0, 0};
  static constexpr uint8_t kCompat[12] = {};
  if (std::memcmp(b, kMapped, 12) == 0 || std::memcmp(b, kNat64, 12) == 0 ||
      std::memcmp(b, kCompat, 12) == 0) {
    // ::a.b.c.d (deprecated compatible form) covers :: and ::1 too: both are local.
    return IsLocalV4(b + 12);
  }
  if ((b[0] & 0xFE) == 0xFC) return true;                  // unique local fc00::/7
  if (b[0] == 0xFE && (b[1] & 0xC0) == 0x80) return true;  // link-local fe80::/10
  if (b[0] == 0xFE && (b[1] & 0xC0) == 0xC0) return true;  // site-local fec0::/10
  if (b[0] == 0xFF) return true;                           // multicast
  // Local-use NAT64 64:ff9b:1::/48 (RFC 8215): a translator of the site's own choosing.
  if (b[0] == 0 && b[1] == 0x64 && b[2] == 0xFF && b[3] == 0x9B && b[4] == 0 && b[5] == 1) {
    return true;
  }
  if (b[0] == 0x20 && b[1] == 0x01 && b[2] == 0x0D && b[3] == 0xB8) return true;  // docs
  if (b[0] == 0x20 && b[1] == 0x02) return IsLocalV4(b + 2);  // 6to4 carries an IPv4
  return false;
}

bool IsSpecialHost(std::string_view host) {
  if (ParseIpLiteral(host)) return true;
  return host == "localhost" || host.ends_with(".localhost") || host == "localhost.localdomain";
}

std::expected<HostPattern, std::string> ParseHostPattern(std::string_view text) {
  const std::string_view shape =
      "a pattern is a host name (`registry.example.org`), `*.` and a domain for its subdomains "
      "(`*.example.org`) or an IP literal, each optionally followed by `:port` (default: 80 and "
      "443)";
  if (text.empty()) return std::unexpected("an empty pattern; " + std::string(shape));
  if (text.size() > kMaxHostNameBytes + 10) {
    return std::unexpected("longer than a host name can be; " + std::string(shape));
  }
  HostPattern out;
  std::string_view host = text;
  // A port: after "]" for a bracketed IPv6 literal, after the only ":" otherwise (a bare IPv6
  // literal has several and no port).
  if (host.front() == '[') {
    size_t close = host.find(']');
    if (close == std::string_view::npos) {
      return std::unexpected("`[` without `]`; write an IPv6 literal as `[::1]` or `[::1]:8080`");
    }
    std::string_view rest = host.substr(close + 1);
    host = host.substr(0, close + 1);
    if (!rest.empty()) {
      auto port = rest.front() == ':' ? ParsePort(rest.substr(1)) : std::nullopt;
      if (!port) return std::unexpected("the port must be a number from 1 to 65535 after `]:`");
      out.port = *port;
    }
  } else if (std::count(host.begin(), host.end(), ':') == 1) {
    size_t colon = host.find(':');
    auto port = ParsePort(host.substr(colon + 1));
    if (!port) {
      return std::unexpected("the port after `:` must be a number from 1 to 65535; " +
                             std::string(shape));
    }
    out.port = *port;
    host = host.substr(0, colon);
  }
  if (host == "*") {
    return std::unexpected(
        "`*` alone would allow every name; list the names, or `*.` and a domain for its "
        "subdomains (`*.example.org`)");
  }
  if (host.starts_with("*.")) {
    out.subdomains = true;
    host.remove_prefix(2);
  }
  if (host.find('*') != std::string_view::npos) {
    return std::unexpected("`*` may only stand first, as `*.`; " + std::string(shape));
  }
  auto normal = NormalizeHost(host);
  if (!normal) return std::unexpected("not a host name or IP literal; " + std::string(shape));
  if (out.subdomains && ParseIpLiteral(*normal)) {
    return std::unexpected("`*.` needs a domain, not an IP literal; " + std::string(shape));
  }
  if (out.subdomains && (*normal == "localhost" || normal->ends_with(".localhost"))) {
    return std::unexpected(
        "names below localhost are allowed only one by one, by an exact "
        "entry (`db.localhost:5432`), never by `*.`");
  }
  if (out.subdomains && normal->find('.') == std::string::npos) {
    // `*.com` would allow a whole top-level domain: almost certainly a mistake.
    return std::unexpected("`*." + *normal +
                           "` would allow a whole top-level domain; name a domain below it, "
                           "like `*.example." +
                           *normal + "`");
  }
  out.host = *normal;
  return out;
}

std::string ToString(const HostPattern& pattern) {
  std::string host = pattern.host;
  const bool v6 = host.find(':') != std::string::npos;
  if (v6 && (pattern.port != 0)) host = "[" + host + "]";
  std::string out = (pattern.subdomains ? "*." : "") + host;
  if (pattern.port != 0) out += ":" + std::to_string(pattern.port);
  return out;
}

bool Matches(const HostPattern& pattern, std::string_view host, uint16_t port) {
  if (!PortMatches(pattern.port, port)) return false;
  if (!pattern.subdomains) return host == pattern.host;
  if (IsSpecialHost(host)) return false;
  return host.size() > pattern.host.size() + 1 && host.ends_with(pattern.host) &&
         host[host.size() - pattern.host.size() - 1] == '.';
}

bool Covers(const HostPattern& outer, const HostPattern& inner) {
  const bool ports = outer.port == 0 ? (inner.port == 0 || inner.port == 80 || inner.port == 443)
                                     : inner.port == outer.port;
  if (!ports) return false;
  if (!outer.subdomains) return !inner.subdomains && inner.host == outer.host;
  if (inner.subdomains && inner.host == outer.host) return true;
  if (IsSpecialHost(inner.host)) return false;
  return inner.host.size() > outer.host.size() + 1 && inner.host.ends_with(outer.host) &&
         inner.host[inner.host.size() - outer.host.size() - 1] == '.';
}

NameVerdict DecideName(const NetworkNames& names, std::string_view host, uint16_t port) {
  const std::string target =
      (host.find(':') != std::string_view::npos ? "[" + std::string(host) + "]"
                                                : std::string(host)) +
      ":" + std::to_string(port);
  for (const NetworkRule& rule : names.deny) {
    if (Matches(rule.pattern, host, port)) {
      return {false, &rule,
              "ptybox: " + target + " is refused by the network policy: it matches `deny: " +
                  ToString(rule.pattern) + "` at " + rule.where};
    }
  }
  for (const NetworkRule& rule : names.allow) {
    if (Matches(rule.pattern, host, port)) return {true, &rule, {}};
  }
  std::string why =
      IsSpecialHost(host) ? " (IP literals and localhost need an exact entry of their own)" : "";
  return {false, nullptr,
          "ptybox: " + target + " is refused by the network policy: it is not on the allow list" +
              why + " of " + names.source};
}

namespace {

// The IPv4 address an IPv6 form carries (mapped, compatible, NAT64), as ::ffff:a.b.c.d; the
// address itself otherwise. Two forms of one host compare equal after this.
IpAddress Canonical(const IpAddress& address) {
  static constexpr uint8_t kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF};
  static constexpr uint8_t kNat64[12] = {0, 0x64, 0xFF, 0x9B, 0, 0, 0, 0, 0, 0, 0, 0};
  static constexpr uint8_t kCompat[12] = {};
  const uint8_t* b = address.bytes.data();
  const bool carries_v4 = std::memcmp(b, kNat64, 12) == 0 ||
                          (std::memcmp(b, kCompat, 12) == 0 && (b[12] | b[13] | b[14]) != 0);
  if (!carries_v4) return address;
  IpAddress out;
  std::memcpy(out.bytes.data(), kMapped, 12);
  std::memcpy(out.bytes.data() + 12, b + 12, 4);
  return out;
}

}  // namespace

NameVerdict DecideAddress(const NetworkNames& names, std::string_view host, uint16_t port,
                          const IpAddress& address, std::span<const IpAddress> host_addresses) {
  const std::string literal = ToString(address);
  const IpAddress canonical = Canonical(address);
  // A denied literal is denied however the client reaches it, by a name that resolves to it too.
  for (const NetworkRule& rule : names.deny) {
    if (rule.pattern.subdomains || !PortMatches(rule.pattern.port, port)) continue;
    std::optional<IpAddress> denied = ParseIpLiteral(rule.pattern.host);
    if (!denied || Canonical(*denied) != canonical) continue;
    return {false, &rule,
            "ptybox: " + std::string(host) + " resolves to " + literal +
                ", refused by the network policy: it matches `deny: " + ToString(rule.pattern) +
                "` at " + rule.where};
  }
  const bool own = std::any_of(host_addresses.begin(), host_addresses.end(),
                               [&](const IpAddress& a) { return Canonical(a) == canonical; });
  if (!own && !IsLocalAddress(address)) return {true, nullptr, {}};
  const bool loopback =
      address == *ParseIpLiteral("::1") ||
      (address.bytes[10] == 0xFF && address.bytes[11] == 0xFF && address.bytes[12] == 127 &&
       std::all_of(address.bytes.begin(), address.bytes.begin() + 10,
                   [](uint8_t b) { return b == 0; }));
  for (const NetworkRule& rule : names.allow) {
    if (rule.pattern.subdomains || !PortMatches(rule.pattern.port, port)) continue;
    if (rule.pattern.host == literal) return {true, &rule, {}};
    if (rule.pattern.host == "localhost" && host == "localhost" && loopback) {
      return {true, &rule, {}};
    }
  }
  const std::string what = own && !IsLocalAddress(address) ? ", an address of this host itself"
                                                           : ", a local or private address";
  return {false, nullptr,
          "ptybox: " + std::string(host) + " resolves to " + literal + what +
              ", refused by the network policy unless the operator lists that address (" +
              names.source + ")"};
}

}  // namespace ptybox::policy
