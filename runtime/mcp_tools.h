// The MCP face of the contract's methods: one tool per method with its input and output JSON
// Schemas and a description written for a model, the compact text a model reads for each result,
// and the one clause that states the sandbox policy (instructions and the policy resource).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/error.h"
#include "policy/policy.h"
#include "runtime/wire.h"

namespace ptybox::runtime {

struct McpTool {
  std::string name;  // the contract method it calls
  std::string title;
  std::string description;
  Json input_schema;
  Json output_schema;  // the contract's result shape: structuredContent conforms to it
  Json annotations;    // readOnlyHint, destructiveHint, idempotentHint, openWorldHint
};

// Every tool, in the contract's method order.
const std::vector<McpTool>& McpTools();
// nullptr for a name that is not a tool.
const McpTool* FindMcpTool(std::string_view name);

// The compact text rendering of a tool's result (the contract's JSON): for a send the viewport,
// then the wait reason, exit code and cwd on one line.
std::string RenderToolResult(std::string_view tool, const Json& result);
// "<kind>: <message>" for a tool error the model can act on.
std::string RenderToolError(const Error& error);

// One capability-neutral clause: the mode, the writable roots and the network, e.g.
// "Sandbox policy: workspace-write mode; writable: /ws and a private /tmp; network denied."
std::string PolicyClause(const policy::ResolvedPolicy& policy);

}  // namespace ptybox::runtime
