// JSON Schemas of the contract's results as MCP tools describe them (runtime/methods.cc puts one
// in each method's entry), and the compact form tools/list sends. Schemas use only keywords that
// mean the same in JSON Schema draft-07 and 2020-12 (MCP's default dialect), so every host's
// validator reads them alike.
#pragma once

#include <string>
#include <vector>

#include "runtime/rpc/json_rpc.h"

namespace ptybox::runtime {

Json Prop(const char* type, std::string description);
Json EnumProp(std::vector<std::string> values, std::string description);
// An output object: every listed property but the `optional` ones is present; later versions
// may add more.
Json Output(Json properties, const std::vector<std::string>& optional = {});
// `schema` that may also be null.
Json Nullable(Json schema);

// The sandbox modes' names, for enums (policy::kModeNames as a list).
std::vector<std::string> ModeNames();

Json SessionIdProp();
Json SessionStatusSchema();
// A SendResult's properties, and the SendResult (every property but `match` required).
Json SendResultProperties();
Json SendResultSchema();
Json SessionListEntrySchema();
// terminal_send's result: a SendResult, or {operationId} for a background send.
Json SendOutputSchema();

// The output schema as tools/list sends it: each property's type only, or with `typed` false
// just {"type": "object"} (what a result means is in the tool's description).
Json Compact(const Json& schema, bool typed);

}  // namespace ptybox::runtime
