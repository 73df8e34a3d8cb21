// The contract's JSON of a resolved policy (policy_resolve's result, the MCP policy resource):
// mode, ceiling, workspace root, the roots a terminal may write, network, and where each value
// came from.
#pragma once

#include "policy/policy.h"
#include "runtime/rpc/json_rpc.h"

namespace ptybox::runtime {

Json PolicyToJson(const policy::ResolvedPolicy& policy);

}  // namespace ptybox::runtime
