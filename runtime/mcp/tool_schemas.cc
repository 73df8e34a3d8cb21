#include "runtime/mcp/tool_schemas.h"

#include <algorithm>

#include "backend/contract_types.h"
#include "policy/mode_names.h"

namespace ptybox::runtime {
namespace {

// The output schema as tools/list sends it: each property's type only. tools/list goes to the
// model on every turn (it was 22 KB with the full schemas, which BuildTools keeps for the
// documentation), and what a result means is in the tool's description.
Json CompactTypes(const Json& schema) {
  Json out{{"type", schema.value("type", Json("object"))}};
  if (schema.contains("oneOf")) {
    Json branches = Json::array();
    // Each branch keeps its required keys: they tell the branches apart.
    for (const Json& branch : schema["oneOf"]) {
      Json compact = CompactTypes(branch);
      if (branch.contains("required")) compact["required"] = branch["required"];
      branches.push_back(std::move(compact));
    }
    out["oneOf"] = branches;
    return out;
  }
  if (schema.contains("properties")) {
    Json properties = Json::object();
    for (const auto& [name, property] : schema["properties"].items()) {
      properties[name] =
          property.contains("type") ? Json{{"type", property["type"]}} : Json::object();
    }
    out["properties"] = properties;
  }
  return out;
}

}  // namespace

Json Prop(const char* type, std::string description) {
  return Json{{"type", type}, {"description", std::move(description)}};
}

Json EnumProp(std::vector<std::string> values, std::string description) {
  return Json{{"type", "string"}, {"enum", values}, {"description", std::move(description)}};
}

// An output object: every listed property but the optional ones is present; later versions may
// add more.
Json Output(Json properties, const std::vector<std::string>& optional) {
  std::vector<std::string> required;
  for (const auto& [key, value] : properties.items()) {
    if (std::find(optional.begin(), optional.end(), key) == optional.end()) required.push_back(key);
  }
  return Json{{"type", "object"}, {"properties", std::move(properties)}, {"required", required}};
}

Json Nullable(Json schema) {
  schema["type"] = Json::array({schema["type"], "null"});
  return schema;
}

Json SessionIdProp() { return Prop("string", "The terminal's id, as terminal_open returned it."); }

std::vector<std::string> ModeNames() {
  return {policy::kModeNames.begin(), policy::kModeNames.end()};
}

Json SessionStatusSchema() {
  return Json{
      {"type", "object"},
      {"description",
       "The shell's own status: running, or exited with its exit code or the signal that "
       "ended it."},
      {"properties",
       {{"kind", EnumProp({"running", "exited"}, "running or exited")},
        {"exitCode", Nullable(Prop("integer", "The shell's exit code when it exited normally."))},
        {"signal",
         Nullable(Prop("string", "The signal that ended the shell (\"SIGKILL\" style)."))}}},
      {"required", {"kind"}}};
}

Json SendResultProperties() {
  return Json{
      {"viewport",
       Prop("string",
            "What the input produced on the terminal, rendered as text; the echo of the input "
            "and the prompt are left out.")},
      {"waitReason", EnumProp(backend::WaitReasonNames(),
                              "Why the wait ended (see the tool description); only stdin_read "
                              "with an exitCode proves the command finished.")},
      {"sessionStatus", SessionStatusSchema()},
      {"truncated",
       Prop("boolean", "Output was dropped from this result; terminal_read has what was kept.")},
      {"exitCode",
       Nullable(Prop("integer", "The shell's $? when the prompt came back; null otherwise."))},
      {"cwd", Nullable(Prop("string",
                            "The shell's working directory when the prompt came back; null "
                            "otherwise."))},
      {"foreground",
       Nullable(Json{{"type", "object"},
                     {"description",
                      "Still running (the prompt did not come back): the terminal's foreground "
                      "process group and its command line; null at the prompt."},
                     {"properties",
                      {{"pgid", Json{{"type", "integer"}}}, {"command", Json{{"type", "string"}}}}},
                     {"required", {"pgid", "command"}}})},
      {"match", Json{{"type", "object"},
                     {"description", "waitReason pattern only: the matched text and its line."},
                     {"properties",
                      {{"text", Json{{"type", "string"}}}, {"line", Json{{"type", "string"}}}}},
                     {"required", {"text", "line"}}}}};
}

// Every property but match (present only when a pattern settled it) is always there.
Json SendResultSchema() { return Output(SendResultProperties(), {"match"}); }

Json SessionListEntrySchema() {
  return Output(Json{{"sessionId", SessionIdProp()},
                     {"name", Prop("string", "The display name given at open (may be empty).")},
                     {"mode", EnumProp(ModeNames(), "The sandbox mode it runs in.")},
                     {"busy", Prop("boolean", "A send is active on it.")},
                     {"sessionStatus", SessionStatusSchema()}});
}

// readOnlyHint, and the other hints where they differ from the specification's defaults

Json SendOutputSchema() {
  // Each branch is complete on its own.
  return Json{{"type", "object"},
              {"oneOf",
               Json::array({SendResultSchema(),
                            Output(Json{{"operationId", Prop("string",
                                                             "Background sends only: the id of the "
                                                             "started operation; collect with "
                                                             "terminal_output.")}})})}};
}

Json Compact(const Json& schema, bool typed) {
  return typed ? CompactTypes(schema) : Json{{"type", "object"}};
}

}  // namespace ptybox::runtime
