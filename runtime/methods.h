// The contract's method table (shared/contract.md, "Methods") over PtyService, shared by both
// protocol servers: reads params with messages that name the parameter, calls the service and
// encodes the result. JSON-RPC answers with it as is; MCP wraps it in a tool result.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.h"
#include "runtime/service.h"
#include "runtime/wire.h"

namespace ptybox::runtime {

// Every method of the contract, in the contract's order.
const std::vector<std::string>& ContractMethods();
[[nodiscard]] bool IsContractMethod(std::string_view method);

// Runs one contract method for `owner`. `request_key` identifies the request for cancellation.
// `done` runs exactly once, inline for the synchronous methods, later for open, send, signal and
// close. Bad params are kInvalidParams errors naming the parameter.
void CallMethod(PtyService& service, const std::shared_ptr<Owner>& owner, const std::string& method,
                const Json& params, const std::string& request_key,
                std::function<void(Result<Json>)> done);

}  // namespace ptybox::runtime
