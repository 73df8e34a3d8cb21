#include "common/random.h"

#include <sys/random.h>

#include <cerrno>
#include <string>

namespace ptybox {

std::string RandomHex(size_t bytes) {
  std::string raw(bytes, '\0');
  size_t filled = 0;
  while (filled < bytes) {
    ssize_t n = ::getrandom(raw.data() + filled, bytes - filled, 0);
    if (n > 0) filled += static_cast<size_t>(n);
    // EINTR (or a not yet seeded pool, which blocks rather than fails): try again.
  }
  return HexEncode(raw);
}

std::string HexEncode(std::string_view bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(2 * bytes.size());
  for (const char c : bytes) {
    const auto b = static_cast<unsigned char>(c);
    hex.push_back(kHex[b >> 4]);
    hex.push_back(kHex[b & 0xf]);
  }
  return hex;
}

bool SecretEquals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  }
  // The accumulated difference is read once, after every byte was compared.
  return *static_cast<volatile unsigned char*>(&diff) == 0;
}

}  // namespace ptybox
