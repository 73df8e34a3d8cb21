#include "runtime/mcp_tools.h"

#include <algorithm>
#include <cctype>

#include "policy/mode_names.h"
#include "policy/mode.h"
#include "policy/schema.h"
#include "runtime/rpc/display_text.h"
#include "runtime/methods.h"

namespace ptybox::runtime {
namespace {

// Schemas use only keywords that mean the same in JSON Schema draft-07 and 2020-12 (MCP's
// default dialect), so every host's validator reads them alike.

Json Prop(const char* type, std::string description) {
  return Json{{"type", type}, {"description", std::move(description)}};
}

Json EnumProp(std::vector<std::string> values, std::string description) {
  return Json{{"type", "string"}, {"enum", values}, {"description", std::move(description)}};
}

// An output object: every listed property is present; later versions may add more.
Json Output(Json properties) {
  std::vector<std::string> required;
  for (const auto& [key, value] : properties.items()) required.push_back(key);
  return Json{{"type", "object"}, {"properties", std::move(properties)}, {"required", required}};
}

Json Nullable(Json schema) {
  schema["type"] = Json::array({schema["type"], "null"});
  return schema;
}

const Json& SessionIdProp() {
  static const Json kProp = Prop("string", "The terminal's id, as terminal_open returned it.");
  return kProp;
}

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
      {"waitReason", EnumProp({"stdin_read", "inferred_idle", "timeout", "session_exit", "pattern"},
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
Json SendResultSchema() {
  Json schema = Output(SendResultProperties());
  Json required = Json::array();
  for (const Json& name : schema["required"]) {
    if (name != "match") required.push_back(name);
  }
  schema["required"] = required;
  return schema;
}

Json SessionListEntrySchema() {
  return Output(Json{{"sessionId", SessionIdProp()},
                     {"name", Prop("string", "The display name given at open (may be empty).")},
                     {"mode", EnumProp(ModeNames(), "The sandbox mode it runs in.")},
                     {"busy", Prop("boolean", "A send is active on it.")},
                     {"sessionStatus", SessionStatusSchema()}});
}

// readOnlyHint, and the other hints where they differ from the specification's defaults
// (destructive true, idempotent false, open world true): tools/list is sent on every turn.
Json Annotations(bool read_only, bool destructive, bool idempotent, bool open_world) {
  Json hints{{"readOnlyHint", read_only}};
  if (!read_only && !destructive) hints["destructiveHint"] = false;
  if (!read_only && idempotent) hints["idempotentHint"] = true;
  if (!open_world) hints["openWorldHint"] = false;
  return hints;
}

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
      {"additionalProperties",
       Json{{"type", "string"}, {"maxLength", policy::kMaxEnvValueBytes}}},
      // The reserved names are in propertyNames (tools/list is sent on every turn).
      {"description", "Extra environment variables for the shell."}};
}

// One param of the contract table as a JSON Schema property.
Json ParamSchema(const ParamSpec& spec) {
  Json schema;
  switch (spec.type) {
    case ParamType::kString: schema = Prop("string", spec.description); break;
    case ParamType::kEnum: schema = EnumProp(spec.values, spec.description); break;
    case ParamType::kBoolean: schema = Prop("boolean", spec.description); break;
    case ParamType::kInteger:
      schema = Prop("integer", spec.description);
      schema["minimum"] = spec.min;
      schema["maximum"] = spec.max;
      break;
    case ParamType::kEnv: return EnvSchema();
    case ParamType::kStringList:
      schema = Prop("array", spec.description);
      schema["items"] = Json{{"type", "string"}};
      schema["minItems"] = 1;
      schema["maxItems"] = spec.max_items;
      break;
  }
  if (!spec.default_value.is_null()) schema["default"] = spec.default_value;
  return schema;
}

// A tool's input: the method's params from the contract table; only they are accepted (the
// server refuses others too).
Json InputFor(std::string_view method) {
  const MethodSpec* spec = FindMethod(method);
  Json properties = Json::object();
  std::vector<std::string> required;
  for (const ParamSpec& param : spec->params) {
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

  tools.push_back(McpTool{
      "terminal_open", "Open a terminal",
      "Open a persistent bash terminal in the sandbox; returns its sessionId. State (cwd, "
      "variables, a REPL, a server) carries between sends: reuse it for the task.",
      InputFor("terminal_open"),
      Output(Json{{"sessionId", SessionIdProp()},
                  {"name", Prop("string", "The display name (may be empty).")},
                  {"motd", Prop("string", "What the terminal printed on start.")},
                  {"pid", Nullable(Prop("integer", "The shell's process id on the host."))},
                  {"mode", EnumProp(ModeNames(), "The sandbox mode the terminal runs in.")},
                  {"cwd", Prop("string", "The directory the shell started in.")}}),
      Annotations(false, false, false, false)});

  // Foreground: a SendResult; background: {operationId}. Each branch is complete on its own.
  Json send_output{
      {"type", "object"},
      {"oneOf", Json::array({SendResultSchema(),
                             Output(Json{{"operationId",
                                          Prop("string",
                                               "Background sends only: the id of the started "
                                               "operation; collect with terminal_output.")}})})}};
  tools.push_back(McpTool{
      "terminal_send", "Send input to a terminal",
      "Type input into a terminal and wait until it is ready for more. input is written "
      "verbatim: end it with a newline (\"\\n\") to run a command or answer a question. Returns "
      "the output (viewport; echo and prompt left out) and waitReason:\n"
      "- stdin_read: the prompt came back (exitCode, cwd set), or the program waits for input.\n"
      "- inferred_idle: output went quiet for silenceMs; does not prove it finished.\n"
      "- timeout: timeoutMs passed; does not prove it finished.\n"
      "- pattern: the output matched pattern (match).\n"
      "- session_exit: the shell exited.\n"
      "foreground set means a command still runs: terminal_wait for it, or terminal_signal "
      "SIGINT. One send per terminal at a time. background: true returns at once; "
      "collect with terminal_output. Keys: instead of input, keys is a list of key names or "
      "text: [\"C-c\"] (Ctrl-C), [\"Escape\", \":q!\", \"Enter\"] (leave vim); names Enter Tab "
      "Escape Space BSpace Up Down Left Right Home End PageUp PageDown Delete F1-F12, C-/M-/S- "
      "prefixes.",
      InputFor("terminal_send"),
      send_output, Annotations(false, true, false, true)});

  tools.push_back(McpTool{
      "terminal_wait", "Wait without typing",
      "Wait for a command a send left running (foreground set) without typing; returns like "
      "terminal_send, with the output since the previous result.",
      InputFor("terminal_wait"), SendResultSchema(), Annotations(true, false, false, true)});

  tools.push_back(McpTool{
      "terminal_output", "Collect background output",
      "Collect a background send's output since the previous call; once done, result is its "
      "settled result (as terminal_send). Call again until done.",
      InputFor("terminal_output"),
      Output(Json{{"output", Prop("string", "Output produced since the previous call.")},
                  {"done", Prop("boolean", "The send has settled.")},
                  {"result", Nullable(Json{{"type", "object"},
                                           {"description", "The settled result once done."},
                                           {"properties", SendResultProperties()},
                                           {"required", SendResultSchema()["required"]}})}}),
      Annotations(true, false, false, false)});

  tools.push_back(McpTool{
      "terminal_cancel", "Cancel the running send",
      "Stop the running send or wait: unwritten input is dropped, the command gets SIGINT. "
      "canceled false: none was running.",
      InputFor("terminal_cancel"),
      Output(Json{{"canceled", Prop("boolean", "A running send was canceled.")}}),
      Annotations(false, true, false, false)});

  tools.push_back(McpTool{
      "terminal_read", "Read terminal output again",
      "Read retained output again, a page at a time: scrollback lines (pass nextCursor back "
      "as cursor; end: newest reached) or view \"screen\" (the screen now).",
      InputFor("terminal_read"),
      Output(Json{
          {"text", Prop("string", "The page.")},
          {"cursor",
           Json{{"type", "integer"}, {"minimum", 0}, {"description", "Where this page starts."}}},
          {"nextCursor", Json{{"type", "integer"},
                              {"minimum", 0},
                              {"description", "Pass as cursor to read the next page."}}},
          {"truncated", Prop("boolean", "Output before cursor was already dropped.")},
          {"end", Prop("boolean", "The page reaches the newest output.")}}),
      Annotations(true, false, true, false)});

  tools.push_back(McpTool{
      "terminal_signal", "Signal the foreground program",
      "Signal the terminal's foreground process group (not the shell): SIGINT interrupts "
      "like Ctrl-C, SIGTERM ends, SIGKILL forces.",
      InputFor("terminal_signal"),
      Output(Json{{"delivered", Prop("boolean", "The signal was delivered.")},
                  {"pgid", Prop("integer", "The process group that received it.")}}),
      Annotations(false, true, false, false)});

  tools.push_back(McpTool{
      "terminal_status", "Terminal status",
      "One terminal: shell running or exited, busy (a send is active), name, mode, pid.",
      InputFor("terminal_status"),
      Output(Json{{"sessionStatus", SessionStatusSchema()},
                  {"busy", Prop("boolean", "A send is active.")},
                  {"name", Prop("string", "The display name (may be empty).")},
                  {"mode", EnumProp(ModeNames(), "The sandbox mode it runs in.")},
                  {"pid", Nullable(Prop("integer", "The shell's process id on the host."))}}),
      Annotations(true, false, true, false)});

  tools.push_back(McpTool{
      "terminal_close", "Close a terminal",
      "Close a terminal: end every process started in it, then return.",
      InputFor("terminal_close"),
      Output(Json{{"sessionStatus", SessionStatusSchema()}}),
      Annotations(false, true, true, false)});

  tools.push_back(McpTool{
      "terminal_list", "List terminals",
      "List this connection's terminals: sessionId, name, mode, busy, status.",
      InputFor("terminal_list"),
      Output(Json{{"sessions", Json{{"type", "array"}, {"items", SessionListEntrySchema()}}}}),
      Annotations(true, false, true, false)});

  tools.push_back(McpTool{
      "policy_resolve", "Show the sandbox policy",
      "Show the sandbox policy new terminals run under: mode, writable roots, network, "
      "ceiling.",
      InputFor("policy_resolve"),
      Output(
          Json{{"mode", EnumProp(ModeNames(), "The effective mode.")},
               {"ceiling", EnumProp(ModeNames(), "The widest mode policy_set_mode may choose.")},
               {"workspaceRoot", Prop("string", "The workspace root.")},
               {"writableRoots", Json{{"type", "array"},
                                      {"items", Json{{"type", "string"}}},
                                      {"description", "Directories a terminal may write."}}},
               {"network", EnumProp({"allow", "deny"}, "Whether the network is reachable.")},
               {"source",
                Json{{"type", "object"},
                     {"description", "The policy files read and where each value came from."},
                     {"properties",
                      {{"files", Json{{"type", "array"}, {"items", Json{{"type", "string"}}}}},
                       {"values", Json{{"type", "object"},
                                       {"additionalProperties", Json{{"type", "string"}}}}}}}}}}),
      Annotations(true, false, true, false)});

  tools.push_back(McpTool{
      "policy_set_mode", "Change the sandbox mode",
      "Set the sandbox mode of terminals opened from now on. Narrowing is free; widening asks "
      "the user and may be refused (then stay in the mode). mode_fenced while a terminal is "
      "open: close them first.",
      InputFor("policy_set_mode"),
      Output(Json{{"mode", EnumProp(ModeNames(), "The effective mode now.")}}),
      Annotations(false, false, true, false)});

  tools.push_back(McpTool{
      "terminal_resize", "Resize a terminal",
      "Resize a terminal as resizing a window does: the program gets SIGWINCH and redraws.",
      InputFor("terminal_resize"),
      Output(Json{{"cols", Prop("integer", "The width now.")},
                  {"rows", Prop("integer", "The height now.")}}),
      Annotations(false, false, true, false)});
  return tools;
}

std::string Str(const Json& object, const char* key) {
  auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// "running", "exited (code 3)", "exited (SIGHUP)".
std::string StatusText(const Json& status) {
  if (Str(status, "kind") != "exited") return "running";
  if (status.contains("exitCode") && status["exitCode"].is_number_integer()) {
    return "exited (code " + std::to_string(status["exitCode"].get<int>()) + ")";
  }
  if (status.contains("signal") && status["signal"].is_string()) {
    return "exited (" + status["signal"].get<std::string>() + ")";
  }
  return "exited";
}

// Output followed by a footer line: one newline between them, never a blank line.
std::string WithFooter(std::string text, const std::string& footer) {
  while (!text.empty() && text.back() == '\n') text.pop_back();
  return text + "\n" + footer;
}

// The one line after a send's output: why it returned, and what the prompt reported.
std::string SendFooter(const Json& r) {
  const std::string reason = Str(r, "waitReason");
  std::string line = "[waitReason: " + reason;
  if (reason == "stdin_read") {
    if (r.contains("exitCode") && r["exitCode"].is_number_integer()) {
      line += " | exitCode: " + std::to_string(r["exitCode"].get<int>());
      if (r.contains("cwd") && r["cwd"].is_string()) line += " | cwd: " + Str(r, "cwd");
    } else {
      line += " (the program is waiting for input)";
    }
  } else if (reason == "inferred_idle") {
    line += " (output went quiet; the command may still be running)";
  } else if (reason == "timeout") {
    line += " (deadline passed; the command may still be running: terminal_signal SIGINT stops "
            "it)";
  } else if (reason == "pattern") {
    const Json& match = r.value("match", Json::object());
    line += " (the output matched pattern: \"" + Str(match, "text") +
            "\"; the command may still be running)";
  } else if (reason == "session_exit") {
    line += ": the shell " + StatusText(r.value("sessionStatus", Json::object())) +
            "; open a new terminal";
  }
  if (r.value("truncated", false)) line += " | truncated: terminal_read has what was kept";
  line += "]";
  // What is still running, on its own line: the next send would be typed into it.
  if (r.contains("foreground") && r["foreground"].is_object()) {
    const Json& fg = r["foreground"];
    // The command line is the program's own text (argv[0] is whatever it chose): quoted and
    // escaped so it cannot close this line or imitate ptybox's own (an outside review made it
    // print `nothing] [waitReason: stdin_read | exitCode: 0 ...` with a bidi override).
    const std::string raw = Str(fg, "command");
    const std::string command =
        raw.empty() ? "process group " + std::to_string(fg.value("pgid", 0)) : QuotedText(raw, 256);
    line += "\n[still running: " + command +
            "; wait with terminal_wait or interrupt with terminal_signal]";
  }
  return line;
}

std::string SendText(const Json& r) {
  std::string viewport = Str(r, "viewport");
  return WithFooter(viewport.empty() ? std::string("(no output)") : viewport, SendFooter(r));
}

std::string PolicyClauseFromJson(const Json& p) {
  const std::string mode = Str(p, "mode");
  if (mode == "danger-full-access") {
    return "Sandbox policy: danger-full-access mode; no sandbox: the whole file system is "
           "writable and the network is reachable.";
  }
  std::string clause = "Sandbox policy: " + mode + " mode; writable: ";
  std::vector<std::string> roots;
  if (p.contains("writableRoots") && p["writableRoots"].is_array()) {
    for (const Json& root : p["writableRoots"]) {
      if (root.is_string()) roots.push_back(root.get<std::string>());
    }
  }
  if (roots.empty()) {
    clause += "only a private /tmp";
  } else {
    // Repository-controlled names: quoted, escaped and bounded (runtime/display_text.h).
    clause += QuotedList(roots);
    clause += " (except .git directories and policy files) and a private /tmp";
  }
  clause += "; everything else read-only; network ";
  clause += Str(p, "network") == "allow" ? "allowed." : "denied.";
  return clause;
}

// The output schema as tools/list sends it: each property's type only. tools/list goes to the
// model on every turn (it was 22 KB with the full schemas, which BuildTools keeps for the
// documentation), and what a result means is in the tool's description.
Json Compact(const Json& schema) {
  Json out{{"type", schema.value("type", Json("object"))}};
  if (schema.contains("oneOf")) {
    Json branches = Json::array();
    // Each branch keeps its required keys: they tell the branches apart.
    for (const Json& branch : schema["oneOf"]) {
      Json compact = Compact(branch);
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

std::vector<McpTool> CompactTools() {
  std::vector<McpTool> tools = BuildTools();
  for (McpTool& tool : tools) {
    // A send's result keeps its property types (hosts validate structuredContent); the others'
    // shapes are in their descriptions.
    const bool send_result = tool.name == "terminal_send" || tool.name == "terminal_wait";
    tool.output_schema = send_result ? Compact(tool.output_schema) : Json{{"type", "object"}};
  }
  return tools;
}

}  // namespace

const std::vector<McpTool>& McpTools() {
  static const std::vector<McpTool> kTools = CompactTools();
  return kTools;
}

const McpTool* FindMcpTool(std::string_view name) { return FindByName(McpTools(), name); }

std::string RenderToolResult(std::string_view tool, const Json& r) {
  if (tool == "terminal_open") {
    std::string text = "Opened terminal " + Str(r, "sessionId");
    if (!Str(r, "name").empty()) text += " \"" + Str(r, "name") + "\"";
    text += " (" + Str(r, "mode") + ", cwd " + Str(r, "cwd");
    if (r.contains("pid") && r["pid"].is_number_integer()) {
      text += ", pid " + std::to_string(r["pid"].get<int64_t>());
    }
    text += ").";
    if (!Str(r, "motd").empty()) text += "\n" + Str(r, "motd");
    return text;
  }
  if (tool == "terminal_send") {
    if (r.contains("operationId")) {
      return "Started in the background as " + Str(r, "operationId") +
             "; collect its output with terminal_output.";
    }
    return SendText(r);
  }
  if (tool == "terminal_wait") return SendText(r);
  if (tool == "terminal_output") {
    std::string output = Str(r, "output");
    std::string text = output.empty() ? "(no new output)" : output;
    if (r.value("truncated", false)) {
      text = WithFooter(text, "[some output was dropped before it was collected]");
    }
    if (r.value("done", false) && r.contains("result") && r["result"].is_object()) {
      return WithFooter(text, "[done] " + SendFooter(r["result"]));
    }
    return WithFooter(text, "[still running: call terminal_output again]");
  }
  if (tool == "terminal_cancel") {
    return r.value("canceled", false) ? "Canceled the running send; its command got SIGINT."
                                      : "No send was running, nothing was signalled. A command "
                                        "still running after its send returned is stopped with "
                                        "terminal_signal SIGINT.";
  }
  if (tool == "terminal_read") {
    std::string text = Str(r, "text");
    std::string footer = "[cursor " + std::to_string(r.value("cursor", uint64_t{0})) +
                         ", nextCursor " + std::to_string(r.value("nextCursor", uint64_t{0}));
    footer += r.value("end", false)
                  ? ", end: this is the newest output"
                  : ", more: pass cursor " + std::to_string(r.value("nextCursor", uint64_t{0}));
    if (r.value("truncated", false)) footer += ", truncated: older output was dropped";
    return WithFooter(text.empty() ? std::string("(nothing retained)") : text, footer + "]");
  }
  if (tool == "terminal_signal") {
    return "Delivered the signal to foreground process group " +
           std::to_string(r.value("pgid", 0)) + ".";
  }
  if (tool == "terminal_status") {
    std::string text = "Shell " + StatusText(r.value("sessionStatus", Json::object()));
    text += r.value("busy", false) ? ", a send is active" : ", idle";
    text += ", mode " + Str(r, "mode");
    if (r.contains("pid") && r["pid"].is_number_integer()) {
      text += ", pid " + std::to_string(r["pid"].get<int64_t>());
    }
    return text + ".";
  }
  if (tool == "terminal_close") {
    return "Closed: the shell " + StatusText(r.value("sessionStatus", Json::object())) +
           " and every process of the terminal has ended.";
  }
  if (tool == "terminal_list") {
    if (!r.contains("sessions") || !r["sessions"].is_array() || r["sessions"].empty()) {
      return "No terminals are open.";
    }
    std::string text;
    for (const Json& s : r["sessions"]) {
      if (!text.empty()) text += "\n";
      text += Str(s, "sessionId");
      if (!Str(s, "name").empty()) text += " \"" + Str(s, "name") + "\"";
      text += ": " + Str(s, "mode") + ", " + StatusText(s.value("sessionStatus", Json::object())) +
              (s.value("busy", false) ? ", busy" : "");
    }
    return text;
  }
  if (tool == "policy_resolve") {
    return PolicyClauseFromJson(r) + " Ceiling: " + Str(r, "ceiling") +
           "; workspace root: " + QuotedText(Str(r, "workspaceRoot")) + ".";
  }
  if (tool == "terminal_resize") {
    return "Resized the terminal to " + std::to_string(r.value("cols", 0)) + " columns and " +
           std::to_string(r.value("rows", 0)) + " rows.";
  }
  if (tool == "policy_set_mode") {
    return "Terminals opened from now on run in " + Str(r, "mode") + " mode.";
  }
  return Dump(r);
}

std::string RenderToolError(const Error& error) {
  std::string text = std::string(ToString(error.kind)) + ": " + error.message;
  // A location (a policy file:line, a limit) helps; a bare parameter name the message already
  // states does not.
  const bool bare_name = std::all_of(error.context.begin(), error.context.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) != 0;
  });
  if (!error.context.empty() && !bare_name &&
      error.message.find(error.context) == std::string::npos) {
    text += " (at " + error.context + ")";
  }
  if (!error.cleanup_failure.empty()) text += "; cleanup also failed: " + error.cleanup_failure;
  return text;
}

std::string PolicyClause(const policy::ResolvedPolicy& policy) {
  return PolicyClauseFromJson(PolicyToJson(policy));
}

}  // namespace ptybox::runtime
