// Pure parsers of what a client sends the proxy: see proxy_parse.h.
#include "backend/proxy/proxy_parse.h"

#include <charconv>

#include "policy/host_pattern.h"

namespace ptybox::backend::proxy {
namespace {

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    char x = a[i];
    char y = b[i];
    if (x >= 'A' && x <= 'Z') x = static_cast<char>(x - 'A' + 'a');
    if (y >= 'A' && y <= 'Z') y = static_cast<char>(y - 'A' + 'a');
    if (x != y) return false;
  }
  return true;
}

bool IsTokenChar(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
         std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

std::optional<uint16_t> Port(std::string_view text) {
  unsigned value = 0;
  if (text.empty() || text.size() > 5) return std::nullopt;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value == 0 || value > 65535) {
    return std::nullopt;
  }
  return static_cast<uint16_t>(value);
}

// "host:port", "[v6]:port" or, when `default_port` is set, a bare host. The host stays as
// written (brackets removed); policy::NormalizeHost judges it.
bool SplitAuthority(std::string_view authority, std::optional<uint16_t> default_port,
                    std::string& host, uint16_t& port) {
  std::string_view port_text;
  if (!authority.empty() && authority.front() == '[') {
    size_t close = authority.find(']');
    if (close == std::string_view::npos) return false;
    host = std::string(authority.substr(1, close - 1));
    std::string_view rest = authority.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') return false;
      port_text = rest.substr(1);
    }
  } else {
    size_t colon = authority.rfind(':');
    if (colon != std::string_view::npos) {
      port_text = authority.substr(colon + 1);
      authority = authority.substr(0, colon);
    }
    if (authority.find(':') != std::string_view::npos) return false;
    host = std::string(authority);
  }
  if (host.empty()) return false;
  if (port_text.empty()) {
    if (!default_port) return false;
    port = *default_port;
    return true;
  }
  auto parsed = Port(port_text);
  if (!parsed) return false;
  port = *parsed;
  return true;
}

HttpParse Bad(int status, std::string error) {
  HttpParse out;
  out.status = ParseStatus::kBad;
  out.http_status = status;
  out.error = std::move(error);
  return out;
}

uint32_t Be(std::string_view b, size_t at, size_t n) {
  uint32_t v = 0;
  for (size_t i = 0; i < n; ++i) v = (v << 8) | static_cast<uint8_t>(b[at + i]);
  return v;
}

}  // namespace

HttpParse ParseHttpRequest(std::string_view bytes) {
  const size_t end = bytes.find("\r\n\r\n");
  if (end == std::string_view::npos) {
    if (bytes.size() >= kMaxRequestHeadBytes) {
      return Bad(431, "the request head is larger than 16 KiB");
    }
    // A request line that is already wrong need not wait for the rest.
    size_t first = bytes.find("\r\n");
    if (first == std::string_view::npos && bytes.size() > 8 * 1024) {
      return Bad(414, "the request line is too long");
    }
    return {};
  }
  const size_t head_bytes = end + 4;
  if (head_bytes > kMaxRequestHeadBytes) return Bad(431, "the request head is larger than 16 KiB");
  std::string_view head = bytes.substr(0, end + 2);  // every line ends with CRLF
  size_t line_end = head.find("\r\n");
  std::string_view line = head.substr(0, line_end);
  size_t sp1 = line.find(' ');
  size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != std::string_view::npos) {
    return Bad(400, "the request line is not `METHOD target HTTP/1.1`");
  }
  std::string_view method = line.substr(0, sp1);
  std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  std::string_view version = line.substr(sp2 + 1);
  if (method.empty()) return Bad(400, "the request has no method");
  for (char c : method) {
    if (!IsTokenChar(c)) return Bad(400, "the method is not a token");
  }
  if (version != "HTTP/1.1" && version != "HTTP/1.0") {
    return Bad(505, "only HTTP/1.0 and HTTP/1.1 are served");
  }
  for (char c : target) {
    if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7F) {
      return Bad(400, "the request target holds a control character");
    }
  }
  HttpParse out;
  out.status = ParseStatus::kDone;
  out.request.head_bytes = head_bytes;
  if (method == "CONNECT") {
    out.request.connect = true;
    if (!SplitAuthority(target, std::nullopt, out.request.host, out.request.port)) {
      return Bad(400, "CONNECT needs `host:port`");
    }
    return out;
  }
  constexpr std::string_view kScheme = "http://";
  if (target.size() < kScheme.size() || !EqualsIgnoreCase(target.substr(0, 7), kScheme)) {
    if (target.size() >= 8 && EqualsIgnoreCase(target.substr(0, 8), "https://")) {
      return Bad(400, "use CONNECT for https:// (HTTPS_PROXY does it)");
    }
    return Bad(400, "a proxy request needs an absolute http:// URL or CONNECT");
  }
  std::string_view rest = target.substr(kScheme.size());
  size_t path_start = rest.find_first_of("/?#");
  std::string_view authority = rest.substr(0, path_start);
  std::string path =
      path_start == std::string_view::npos ? "/" : std::string(rest.substr(path_start));
  if (!path.empty() && path.front() != '/') path = "/" + path;
  if (authority.find('@') != std::string_view::npos) {
    return Bad(400, "credentials in the URL are not forwarded");
  }
  if (!SplitAuthority(authority, 80, out.request.host, out.request.port)) {
    return Bad(400, "the URL has no valid host[:port]");
  }
  std::string forward = std::string(method) + " " + path + " " + std::string(version) + "\r\n";
  forward += "Host: " + std::string(authority) + "\r\n";
  size_t at = line_end + 2;
  while (at < head.size()) {
    size_t next = head.find("\r\n", at);
    std::string_view header = head.substr(at, next - at);
    at = next + 2;
    if (header.empty()) break;
    if (header.front() == ' ' || header.front() == '\t') {
      return Bad(400, "folded header lines are not accepted");
    }
    size_t colon = header.find(':');
    if (colon == std::string_view::npos || colon == 0) {
      return Bad(400, "a header line has no `name:`");
    }
    std::string_view name = header.substr(0, colon);
    for (char c : name) {
      if (!IsTokenChar(c)) return Bad(400, "a header name is not a token");
    }
    // The target's authority is the Host (RFC 9112 3.2.2); hop-by-hop headers stay here.
    if (EqualsIgnoreCase(name, "host") || EqualsIgnoreCase(name, "proxy-connection") ||
        EqualsIgnoreCase(name, "proxy-authorization") || EqualsIgnoreCase(name, "connection") ||
        EqualsIgnoreCase(name, "keep-alive")) {
      continue;
    }
    forward += std::string(header) + "\r\n";
  }
  forward += "Connection: close\r\n\r\n";
  out.request.forward_head = std::move(forward);
  return out;
}

SocksGreeting ParseSocksGreeting(std::string_view bytes) {
  SocksGreeting out;
  if (bytes.size() < 2) return out;
  if (static_cast<uint8_t>(bytes[0]) != 5 || static_cast<uint8_t>(bytes[1]) == 0) {
    out.status = ParseStatus::kBad;
    return out;
  }
  const size_t n = static_cast<uint8_t>(bytes[1]);
  if (bytes.size() < 2 + n) return out;
  for (size_t i = 0; i < n; ++i) {
    if (bytes[2 + i] == 0) out.no_auth_offered = true;
  }
  out.status = ParseStatus::kDone;
  out.consumed = 2 + n;
  return out;
}

SocksRequest ParseSocksRequest(std::string_view bytes) {
  SocksRequest out;
  if (bytes.size() < 4) return out;
  auto bad = [&](uint8_t reply) {
    out.status = ParseStatus::kBad;
    out.reply = reply;
    return out;
  };
  if (static_cast<uint8_t>(bytes[0]) != 5 || bytes[2] != 0) return bad(kSocksGeneralFailure);
  out.command = static_cast<uint8_t>(bytes[1]);
  const uint8_t type = static_cast<uint8_t>(bytes[3]);
  size_t at = 4;
  if (type == 1) {
    if (bytes.size() < at + 4 + 2) return out;
    out.host = std::to_string(static_cast<uint8_t>(bytes[4])) + "." +
               std::to_string(static_cast<uint8_t>(bytes[5])) + "." +
               std::to_string(static_cast<uint8_t>(bytes[6])) + "." +
               std::to_string(static_cast<uint8_t>(bytes[7]));
    at += 4;
  } else if (type == 3) {
    if (bytes.size() < 5) return out;
    const size_t n = static_cast<uint8_t>(bytes[4]);
    if (n == 0) return bad(kSocksGeneralFailure);
    if (bytes.size() < 5 + n + 2) return out;
    out.host = std::string(bytes.substr(5, n));
    at = 5 + n;
  } else if (type == 4) {
    if (bytes.size() < at + 16 + 2) return out;
    static constexpr char kHex[] = "0123456789abcdef";
    std::string text;
    for (size_t i = 0; i < 16; i += 2) {
      if (i > 0) text += ':';
      const unsigned group = Be(bytes, at + i, 2);
      for (int shift = 12; shift >= 0; shift -= 4) text += kHex[(group >> shift) & 0xF];
    }
    out.host = text;
    at += 16;
  } else {
    return bad(kSocksAddressNotSupported);
  }
  out.port = static_cast<uint16_t>(Be(bytes, at, 2));
  out.consumed = at + 2;
  out.status = ParseStatus::kDone;
  if (out.command != 1) return bad(kSocksCommandNotSupported);
  if (out.port == 0) return bad(kSocksGeneralFailure);
  return out;
}

std::string SocksReply(uint8_t code) {
  return std::string("\x05", 1) + static_cast<char>(code) + std::string("\x00\x01", 2) +
         std::string(6, '\0');
}

SniParse ParseClientHelloSni(std::string_view bytes) {
  SniParse out;
  auto bad = [&](std::string why) {
    out.status = ParseStatus::kBad;
    out.error = std::move(why);
    return out;
  };
  // Join the handshake fragments of consecutive handshake records.
  std::string handshake;
  size_t at = 0;
  bool complete = false;
  while (!complete) {
    if (bytes.size() < at + 5) {
      if (at >= kMaxClientHelloBytes) return bad("the ClientHello is too large");
      return out;
    }
    if (static_cast<uint8_t>(bytes[at]) != 0x16) {
      return bad(at == 0 ? "not a TLS handshake" : "the ClientHello is cut by another record");
    }
    if (static_cast<uint8_t>(bytes[at + 1]) != 3) return bad("not a TLS record");
    const size_t length = Be(bytes, at + 3, 2);
    if (length == 0 || length > 16384 + 2048) return bad("a TLS record of a wrong length");
    if (bytes.size() < at + 5 + length) {
      if (at + 5 + length > kMaxClientHelloBytes + 16384)
        return bad("the ClientHello is too large");
      return out;
    }
    handshake.append(bytes.substr(at + 5, length));
    at += 5 + length;
    if (handshake.size() >= 4) {
      if (static_cast<uint8_t>(handshake[0]) != 1) return bad("not a ClientHello");
      const size_t body = Be(handshake, 1, 3);
      if (body > kMaxClientHelloBytes) return bad("the ClientHello is too large");
      complete = handshake.size() >= 4 + body;
    }
    if (handshake.size() > kMaxClientHelloBytes) return bad("the ClientHello is too large");
  }
  std::string_view h(handshake);
  const size_t body_end = 4 + Be(h, 1, 3);
  size_t p = 4 + 2 + 32;  // version, random
  auto need = [&](size_t n) { return p + n <= body_end; };
  if (!need(1)) return bad("a short ClientHello");
  p += 1 + static_cast<uint8_t>(h[p]);  // session id
  if (!need(2)) return bad("a short ClientHello");
  p += 2 + Be(h, p, 2);  // cipher suites
  if (!need(1)) return bad("a short ClientHello");
  p += 1 + static_cast<uint8_t>(h[p]);  // compression methods
  out.status = ParseStatus::kDone;
  if (p == body_end) return out;  // no extensions
  if (!need(2)) return bad("a short ClientHello");
  const size_t extensions_end = p + 2 + Be(h, p, 2);
  p += 2;
  if (extensions_end > body_end) return bad("extensions overrun the ClientHello");
  while (p + 4 <= extensions_end) {
    const uint32_t type = Be(h, p, 2);
    const size_t length = Be(h, p + 2, 2);
    p += 4;
    if (p + length > extensions_end) return bad("an extension overruns the ClientHello");
    if (type == 0) {
      if (out.server_name) return bad("two server_name extensions");
      size_t q = p;
      if (length < 2 || q + 2 + Be(h, q, 2) != p + length) return bad("a malformed server_name");
      q += 2;
      while (q + 3 <= p + length) {
        const uint8_t name_type = static_cast<uint8_t>(h[q]);
        const size_t name_length = Be(h, q + 1, 2);
        q += 3;
        if (q + name_length > p + length) return bad("a malformed server_name");
        if (name_type == 0) {
          if (out.server_name) return bad("two host names in server_name");
          out.server_name = std::string(h.substr(q, name_length));
        }
        q += name_length;
      }
    }
    p += length;
  }
  if (p != extensions_end) return bad("a malformed extension list");
  return out;
}

bool ServerNameExpected(std::string_view normalized_host) {
  return normalized_host.find('.') != std::string_view::npos &&
         !policy::ParseIpLiteral(normalized_host);
}

}  // namespace ptybox::backend::proxy
