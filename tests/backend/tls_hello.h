// A minimal TLS 1.2-shaped ClientHello with an optional server name, for the proxy's tests and
// for a client inside a session that must send a crafted SNI.
#pragma once

#include <string>
#include <string_view>

namespace ptybox::backend::proxy::testing {

inline std::string ClientHello(std::string_view server_name) {
  auto u16 = [](size_t v) { return std::string{static_cast<char>(v >> 8), static_cast<char>(v)}; };
  std::string extensions;
  if (!server_name.empty()) {
    std::string list = std::string(1, '\0') + u16(server_name.size()) + std::string(server_name);
    std::string sni = u16(list.size()) + list;
    extensions += u16(0) + u16(sni.size()) + sni;
  }
  extensions += u16(0x000b) + u16(2) + std::string("\x01\x00", 2);       // ec_point_formats
  std::string body = std::string("\x03\x03", 2) + std::string(32, 'r');  // version, random
  body += std::string(1, '\0');                                          // no session id
  body += u16(2) + std::string("\x13\x01", 2);                           // one cipher suite
  body += std::string("\x01\x00", 2);                                    // null compression
  body += u16(extensions.size()) + extensions;
  std::string handshake = std::string(1, '\x01') + static_cast<char>(body.size() >> 16) +
                          u16(body.size() & 0xFFFF) + body;
  return std::string("\x16\x03\x01", 3) + u16(handshake.size()) + handshake;
}

}  // namespace ptybox::backend::proxy::testing
