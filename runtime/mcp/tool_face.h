// The MCP face of a contract method: what tools/list shows a model and how a result reads. Each
// method's entry in the contract table (runtime/methods.cc) carries its face; the catalogue
// (runtime/mcp_tools.h) is a loop over the table.
#pragma once

#include <string>

#include "runtime/mcp/mcp_budget.h"
#include "runtime/rpc/json_rpc.h"

namespace ptybox::runtime {

// The MCP tool annotations (hints to the host, never enforced).
struct ToolHints {
  bool read_only = false;
  bool destructive = true;
  bool idempotent = false;
  bool open_world = true;
};

// readOnlyHint, and the other hints where they differ from the specification's defaults
// (destructive true, idempotent false, open world true): tools/list is sent on every turn.
Json Annotations(const ToolHints& hints);

struct McpFace {
  std::string title = {};
  std::string description = {};  // for a model: what it does and what the result means
  Json output_schema = nullptr;  // the contract's result shape (runtime/mcp/tool_schemas.h)
  // tools/list keeps the output's property types (hosts validate a send's structuredContent);
  // the others' shapes are in their descriptions.
  bool typed_output = false;
  ToolHints hints = {};
  std::string (*render)(const Json& result) = nullptr;  // runtime/mcp/tool_text.h
  // The text fields --max-result-bytes may shorten, and where the located one sits.
  ResultBudget budget = {};
  // Widening the mode to its `mode` argument asks the user first (elicitation, docs/mcp.md);
  // narrowing is free.
  bool needs_consent = false;
  // It changes the policy: the answer is given once the new policy is known and states it
  // (a clause and, for structured hosts, a link to the policy resource).
  bool changes_policy = false;
};

// One tool as tools/list sends it.
struct McpTool {
  std::string name;  // the contract method it calls
  std::string title;
  std::string description;
  Json input_schema;
  Json output_schema;  // compact: runtime/mcp/tool_schemas.h Compact
  Json annotations;
};

}  // namespace ptybox::runtime
