// The addresses of this host's own interfaces (getifaddrs), as the policy compares them: a name
// that resolves to one of them would reach a service on the host itself, so the proxy refuses
// it like a local address (policy::DecideAddress).
#pragma once

#include <vector>

#include "policy/host_pattern.h"

namespace ptybox::backend::proxy {

// Every IPv4 and IPv6 address of every interface, read now (interfaces come and go). Empty
// when getifaddrs fails: the local ranges are still refused.
[[nodiscard]] std::vector<policy::IpAddress> HostInterfaceAddresses();

}  // namespace ptybox::backend::proxy
