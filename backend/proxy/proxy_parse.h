// The bytes a session's client sends the proxy, parsed by pure functions: an HTTP proxy
// request head (CONNECT or absolute-form), the SOCKS5 greeting and CONNECT request, and the
// server name (SNI) of a TLS ClientHello. Each takes what has arrived so far and says whether
// it needs more, is done, or is malformed; nothing here allocates beyond the bounded input.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace ptybox::backend::proxy {

// A request head larger than this is refused (431): the proxy never buffers more per client.
inline constexpr size_t kMaxRequestHeadBytes = 16 * 1024;
// A ClientHello spread over more than this is not inspected further (refused).
inline constexpr size_t kMaxClientHelloBytes = 16 * 1024 + 5 * 4;

enum class ParseStatus { kNeedMore, kDone, kBad };

struct HttpRequest {
  bool connect = false;  // CONNECT host:port; otherwise an absolute-form http:// request
  std::string host;      // as the client wrote it (to be checked with policy::NormalizeHost)
  uint16_t port = 0;
  size_t head_bytes = 0;  // the head's length, through the empty line
  // Absolute-form only: the head to send the server (origin-form request line, no Proxy-*
  // headers, `Connection: close` so one connection serves one host).
  std::string forward_head;
};

struct HttpParse {
  ParseStatus status = ParseStatus::kNeedMore;
  HttpRequest request;
  int http_status = 400;  // kBad: the status to answer with
  std::string error;      // kBad: one line saying what was wrong
};

[[nodiscard]] HttpParse ParseHttpRequest(std::string_view bytes);

// SOCKS5 (RFC 1928), no authentication.
struct SocksGreeting {
  ParseStatus status = ParseStatus::kNeedMore;
  size_t consumed = 0;
  bool no_auth_offered = false;
};
[[nodiscard]] SocksGreeting ParseSocksGreeting(std::string_view bytes);

struct SocksRequest {
  ParseStatus status = ParseStatus::kNeedMore;
  size_t consumed = 0;
  uint8_t command = 0;  // 1: CONNECT (the only one served)
  uint8_t reply = 0;    // kBad: the reply code to send (1 general failure, 8 address type)
  std::string host;     // a name (remote resolution) or an address literal
  uint16_t port = 0;
};
[[nodiscard]] SocksRequest ParseSocksRequest(std::string_view bytes);

// SOCKS5 reply codes the proxy sends.
inline constexpr uint8_t kSocksSucceeded = 0;
inline constexpr uint8_t kSocksGeneralFailure = 1;
inline constexpr uint8_t kSocksNotAllowed = 2;
inline constexpr uint8_t kSocksHostUnreachable = 4;
inline constexpr uint8_t kSocksCommandNotSupported = 7;
inline constexpr uint8_t kSocksAddressNotSupported = 8;
// A reply with the bound address 0.0.0.0:0 (clients do not use it for CONNECT).
[[nodiscard]] std::string SocksReply(uint8_t code);

// The SNI of a TLS ClientHello at the start of `bytes` (handshake fragments across records are
// joined). kDone with nullopt: a ClientHello without a server name. kBad: not TLS, or not a
// ClientHello, or malformed.
struct SniParse {
  ParseStatus status = ParseStatus::kNeedMore;
  std::optional<std::string> server_name;
  std::string error;
};
[[nodiscard]] SniParse ParseClientHelloSni(std::string_view bytes);

// Whether a TLS client reaching `normalized_host` names it in the SNI, so that a ClientHello
// without one is refused: not for an IP literal (RFC 6066, section 3, forbids it) nor for a name
// without a dot such as `localhost` (Java's JSSE sends none for those); every other name
// mainstream clients (curl, OpenSSL, GnuTLS, Go, Node, Python, Java) put in the SNI.
[[nodiscard]] bool ServerNameExpected(std::string_view normalized_host);

}  // namespace ptybox::backend::proxy
