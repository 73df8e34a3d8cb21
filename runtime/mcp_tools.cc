#include "runtime/mcp_tools.h"

#include <cstdint>

#include "policy/schema.h"
#include "runtime/mcp/tool_schemas.h"
#include "runtime/methods.h"

namespace ptybox::runtime {
namespace {

// terminal_open's env, from the one set of rules in policy/schema.h (what the service checks).
Json EnvSchema() {
  Json reserved = Json::array();
  for (std::string_view name : policy::ReservedEnvNames(policy::EnvUse::kSet)) {
    reserved.push_back(std::string(name));
  }
  const std::string prefix(policy::kReservedEnvPrefix);
  return Json{
      {"type", "object"},
      {"maxProperties", policy::kMaxListEntries},
      {"propertyNames",
       Json{{"pattern", policy::EnvNamePattern()},
            {"not", Json{{"anyOf", Json::array({Json{{"enum", reserved}},
                                                Json{{"pattern", "^" + prefix}}})}}}}},
      {"additionalProperties", Json{{"type", "string"}, {"maxLength", policy::kMaxEnvValueBytes}}},
      // The reserved names are in propertyNames (tools/list is sent on every turn).
      {"description", "Extra environment variables for the shell."}};
}

// One param of the contract table as a JSON Schema property.
Json ParamSchema(const ParamSpec& spec) {
  Json schema;
  switch (spec.type) {
    case ParamType::kString:
      schema = Prop("string", spec.description);
      break;
    case ParamType::kEnum:
      schema = EnumProp(spec.values, spec.description);
      break;
    case ParamType::kBoolean:
      schema = Prop("boolean", spec.description);
      break;
    case ParamType::kInteger:
      schema = Prop("integer", spec.description);
      schema["minimum"] = spec.min;
      // INT64_MAX is no bound a model can reach (nor one JavaScript can represent).
      if (spec.max != INT64_MAX) schema["maximum"] = spec.max;
      break;
    case ParamType::kEnv:
      return EnvSchema();
    case ParamType::kStringList:
      schema = Prop("array", spec.description);
      schema["items"] = Json{{"type", "string"}};
      schema["minItems"] = 1;
      schema["maxItems"] = spec.max_items;
      break;
  }
  if (!spec.default_value.is_null()) schema["default"] = spec.default_value;
  if (spec.description.empty()) schema.erase("description");
  return schema;
}

// A tool's input: the method's params from the contract table; only they are accepted (the
// server refuses others too).
Json InputFor(const MethodSpec& spec) {
  Json properties = Json::object();
  std::vector<std::string> required;
  for (const ParamSpec& param : spec.params) {
    properties[param.name] = ParamSchema(param);
    if (param.required) required.push_back(param.name);
  }
  Json schema{{"type", "object"}, {"properties", std::move(properties)}};
  if (!required.empty()) schema["required"] = required;
  schema["additionalProperties"] = false;
  return schema;
}

std::vector<McpTool> BuildTools() {
  std::vector<McpTool> tools;
  for (const MethodSpec& method : Contract()) {
    if (!method.mcp) continue;
    const McpFace& face = *method.mcp;
    tools.push_back(McpTool{.name = method.name,
                            .title = face.title,
                            .description = face.description,
                            .input_schema = InputFor(method),
                            .output_schema = Compact(face.output_schema, face.typed_output),
                            .annotations = Annotations(face.hints)});
  }
  return tools;
}

}  // namespace

const std::vector<McpTool>& McpTools() {
  static const std::vector<McpTool> kTools = BuildTools();
  return kTools;
}

const McpTool* FindMcpTool(std::string_view name) { return FindByName(McpTools(), name); }

const McpFace* FindMcpFace(std::string_view name) {
  const MethodSpec* method = FindMethod(name);
  return method != nullptr && method->mcp ? &*method->mcp : nullptr;
}

std::string RenderToolResult(std::string_view tool, const Json& result) {
  const McpFace* face = FindMcpFace(tool);
  // CheckContract guarantees every tool a renderer; anything else is shown as its JSON.
  if (face == nullptr || face->render == nullptr) return Dump(result);
  return face->render(result);
}

}  // namespace ptybox::runtime
