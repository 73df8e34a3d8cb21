// libFuzzer target for the session proxy's parsers (backend/proxy/proxy_parse.h): the input is
// what a hostile client inside a session sends the proxy. Each parser must answer for every
// prefix without reading past its input, and its answers must agree with themselves: a parse
// that is done stays done (with the same result) when more bytes follow, the head it consumed
// lies inside the input, and a forwarded head is a well-formed origin-form request.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "backend/proxy/proxy_parse.h"
#include "policy/host_pattern.h"

namespace {

using namespace ptybox::backend::proxy;

void Check(bool ok) {
  if (!ok) __builtin_trap();
}

void Http(std::string_view data) {
  HttpParse whole = ParseHttpRequest(data);
  if (whole.status == ParseStatus::kDone) {
    const HttpRequest& r = whole.request;
    Check(r.head_bytes <= data.size() && r.head_bytes >= 4);
    Check(data.substr(r.head_bytes - 4, 4) == "\r\n\r\n");
    Check(r.port != 0);
    if (!r.connect) {
      Check(r.forward_head.ends_with("Connection: close\r\n\r\n"));
      Check(r.forward_head.find("\r\n\r\n") == r.forward_head.size() - 4);
    }
    // The host the policy judges is the one that is connected to.
    (void)ptybox::policy::NormalizeHost(r.host);
    // More bytes after the head change nothing.
    HttpParse more = ParseHttpRequest(std::string(data) + "tail");
    Check(more.status == ParseStatus::kDone && more.request.host == r.host &&
          more.request.port == r.port && more.request.head_bytes == r.head_bytes);
  } else if (whole.status == ParseStatus::kBad) {
    Check(!whole.error.empty() && whole.http_status >= 400 && whole.http_status < 600);
  }
}

void Socks(std::string_view data) {
  SocksGreeting greeting = ParseSocksGreeting(data);
  if (greeting.status != ParseStatus::kDone) return;
  Check(greeting.consumed <= data.size());
  std::string_view rest = data.substr(greeting.consumed);
  SocksRequest request = ParseSocksRequest(rest);
  if (request.status == ParseStatus::kDone) {
    Check(request.consumed <= rest.size() && request.command == 1 && request.port != 0);
  } else if (request.status == ParseStatus::kBad) {
    Check(request.reply != 0);
  }
}

void Sni(std::string_view data) {
  SniParse sni = ParseClientHelloSni(data);
  if (sni.status == ParseStatus::kBad) Check(!sni.error.empty());
  if (sni.status == ParseStatus::kDone && sni.server_name) {
    Check(sni.server_name->size() < 65536);
    // Whether a name must come with an SNI: a pure answer for any normalized name.
    if (auto name = ptybox::policy::NormalizeHost(*sni.server_name)) {
      (void)ServerNameExpected(*name);
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* bytes, size_t size) {
  std::string_view data(reinterpret_cast<const char*>(bytes), size);
  Http(data);
  Socks(data);
  Sni(data);
  return 0;
}
