// Model consent over MCP (docs/security.md, "Model consent"): the caller of a tool is the model,
// the party the sandbox confines, so it may keep or narrow its mode but never widen it alone.
// Pure decisions and texts: whether a mode needs the user's consent, whether the host can ask
// (elicitation), the elicitation/create request, reading its answer, and the refusals a model
// can act on. McpServer sends, times and cancels the request.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "common/error.h"
#include "policy/mode.h"
#include "policy/policy.h"
#include "runtime/rpc/json_rpc.h"

namespace ptybox::runtime {

// True when `requested` is wider than `widest_free`: the mode the server started with, or the
// widest one the user already accepted on this connection.
[[nodiscard]] bool NeedsConsent(policy::Mode requested, policy::Mode widest_free);

// True when the host declared the elicitation capability with form mode (an empty object means
// form, as the spec says) in a protocol version that has elicitation (2025-06-18 and later).
[[nodiscard]] bool CanElicitForm(const Json& client_capabilities,
                                 std::string_view protocol_version);

// The params of the elicitation/create request that asks the user: a message naming the
// current and requested mode and what the requested one allows, and an empty form (the answer
// is the action: accept, decline or cancel).
[[nodiscard]] Json ConsentRequestParams(const policy::ResolvedPolicy& current,
                                        const policy::ResolvedPolicy& wanted,
                                        std::string_view protocol_version);

// The host's answer to that request (the whole JSON-RPC response): nullopt when the user
// accepted, otherwise why it is a refusal ("the user declined it", ...).
[[nodiscard]] std::optional<std::string> ConsentRefusal(const Json& response);

// kBusy for a second widening while the user is still being asked about the first.
[[nodiscard]] Error ConsentInProgress();
// kPolicyDenied for a widening the host cannot ask the user about (no elicitation).
[[nodiscard]] Error ConsentUnavailable(policy::Mode current, policy::Mode wanted);
// kPolicyDenied for a widening the user did not accept; `why` from ConsentRefusal or a bound.
[[nodiscard]] Error ConsentRefused(policy::Mode current, policy::Mode wanted,
                                   const std::string& why);

}  // namespace ptybox::runtime
