// The MCP catalogue of the contract's methods: one tool per method entry that has an MCP face
// (runtime/methods.h), its input schema derived from the entry's params, and the text a model
// reads for its result. Both are loops over the contract table.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "runtime/mcp/tool_face.h"
#include "runtime/mcp/tool_text.h"

namespace ptybox::runtime {

// Every tool, in the contract's method order, as tools/list sends it.
const std::vector<McpTool>& McpTools();
// nullptr for a name that is not a tool.
const McpTool* FindMcpTool(std::string_view name);

// The MCP face of the tool `name`; nullptr for a name that is not a tool.
const McpFace* FindMcpFace(std::string_view name);

// The text rendering of a tool's result (the contract's JSON), by the method's renderer.
std::string RenderToolResult(std::string_view tool, const Json& result);

}  // namespace ptybox::runtime
