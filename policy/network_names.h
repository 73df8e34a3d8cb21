// The network values, written once: a policy file's `network`, the contract's policy
// (policy_resolve, the MCP policy resource) and the text a person or a model reads.
#pragma once

#include <array>
#include <string_view>

namespace ptybox::policy {

// Denied first: the narrower value.
inline constexpr std::array<std::string_view, 2> kNetworkNames = {"deny", "allow"};

[[nodiscard]] constexpr std::string_view NetworkName(bool allowed) {
  return kNetworkNames[allowed ? 1 : 0];
}

}  // namespace ptybox::policy
