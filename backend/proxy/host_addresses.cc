// The host's interface addresses: see host_addresses.h.
#include "backend/proxy/host_addresses.h"

#include <ifaddrs.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstring>

namespace ptybox::backend::proxy {

std::vector<policy::IpAddress> HostInterfaceAddresses() {
  std::vector<policy::IpAddress> out;
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return out;
  for (const ifaddrs* entry = list; entry != nullptr; entry = entry->ifa_next) {
    if (entry->ifa_addr == nullptr) continue;
    policy::IpAddress address;
    if (entry->ifa_addr->sa_family == AF_INET) {
      const auto* v4 = reinterpret_cast<const sockaddr_in*>(entry->ifa_addr);
      address.bytes[10] = 0xFF;
      address.bytes[11] = 0xFF;
      std::memcpy(address.bytes.data() + 12, &v4->sin_addr, 4);
    } else if (entry->ifa_addr->sa_family == AF_INET6) {
      const auto* v6 = reinterpret_cast<const sockaddr_in6*>(entry->ifa_addr);
      std::memcpy(address.bytes.data(), &v6->sin6_addr, 16);
    } else {
      continue;
    }
    out.push_back(address);
  }
  ::freeifaddrs(list);
  return out;
}

}  // namespace ptybox::backend::proxy
