#include "runtime/mcp_tools.h"

#include <algorithm>
#include <cctype>

#include "policy/mode_names.h"
#include "policy/mode.h"
#include "policy/schema.h"
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

Json Annotations(bool read_only, bool destructive, bool idempotent, bool open_world) {
  return Json{{"readOnlyHint", read_only},
              {"destructiveHint", destructive},
              {"idempotentHint", idempotent},
              {"openWorldHint", open_world}};
}

// terminal_open's env, from the one set of rules in policy/schema.h (what the service checks).
Json EnvSchema() {
  Json reserved = Json::array();
  std::string names;
  for (std::string_view name : policy::ReservedEnvNames(policy::EnvUse::kSet)) {
    reserved.push_back(std::string(name));
    names += std::string(name) + ", ";
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
      {"description",
       "Extra environment variables for the shell: names like FOO_BAR (at most " +
           std::to_string(policy::kMaxEnvNameBytes) + " characters), values without NUL of at " +
           "most " + std::to_string(policy::kMaxEnvValueBytes) + " bytes. Reserved: " + names +
           "and " + prefix + "*."}};
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
      "Open a persistent interactive bash terminal in the sandbox and return its sessionId. Use "
      "a persistent terminal when state must carry from one command to the next (working "
      "directory, exported variables, an activated virtualenv, a running REPL, debugger or dev "
      "server, a program that asks questions), and reuse it for the whole task rather than "
      "opening one per command. The shell runs under the current sandbox policy (policy_resolve, "
      "resource ptybox://policy): outside its writable roots the file system is read-only, and "
      "the network may be off. motd is what the terminal printed on start. Close terminals you "
      "no longer need with terminal_close; all of them close when this connection ends.",
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
      "Type input into a terminal and wait until it is ready for more. The input is written "
      "verbatim, nothing added: end it with a newline (\"\\n\") to run a command, and answer a "
      "program's question the same way (\"y\\n\"). Returns what the input printed (viewport; "
      "your echoed input and the prompt left out) and why the wait ended (waitReason):\n"
      "- stdin_read: exact readiness. Either the shell prompt came back, so the command "
      "finished and exitCode and cwd are set; or the running program is blocked reading the "
      "terminal (a password prompt, a REPL, a question), so it waits for your next send and "
      "exitCode is null.\n"
      "- inferred_idle: no output for silenceMs. The command may still be running: this does "
      "not prove it finished.\n"
      "- timeout: timeoutMs passed. The command may still be running: this does not prove it "
      "finished.\n"
      "- session_exit: the shell itself exited (sessionStatus has its code); open a new "
      "terminal.\n"
      "After inferred_idle or timeout, look again with terminal_read or terminal_status, or stop "
      "the command with terminal_signal SIGINT (the send has ended, so terminal_cancel has "
      "nothing to cancel). One send runs per terminal at a time (a second "
      "one is refused as busy). For a long job pass background: true and collect its output "
      "with terminal_output. truncated means output was dropped from this result; terminal_read "
      "pages what the scrollback kept.\n"
      "Keys: instead of input, pass keys, a list of key names and text, to press keys that are "
      "awkward as bytes; each entry is a key name or literal text typed as is. Examples: "
      "[\"C-c\"] interrupts the running program (Ctrl-C), [\"C-d\"] sends end-of-file, "
      "[\"Escape\", \":q!\", \"Enter\"] leaves vim without saving, [\"Up\", \"Enter\"] repeats "
      "the previous shell command, [\"q\"] quits less, [\"C-x\", \"C-s\"] saves in nano or "
      "emacs. Names: Enter, Tab, BTab, BSpace, Escape, Space, Up, Down, Left, Right, Home, End, "
      "PageUp, PageDown, Insert, Delete, F1-F12, and C-/M-/S- before a key or one character "
      "(C-c, M-x, S-Tab). Give exactly one of input and keys.",
      InputFor("terminal_send"),
      send_output, Annotations(false, true, false, true)});

  tools.push_back(McpTool{
      "terminal_wait", "Wait without typing",
      "Keep waiting for the command a send left running (foreground set, waitReason "
      "inferred_idle or timeout) without typing anything: returns like terminal_send, with the "
      "output since the previous send's or wait's result. Busy while a send is active.",
      InputFor("terminal_wait"), SendResultSchema(), Annotations(true, false, false, true)});

  tools.push_back(McpTool{
      "terminal_output", "Collect background output",
      "Collect the output of a background send (terminal_send with background: true) produced "
      "since the previous call. done turns true once the send settled; result then holds its "
      "settled result (viewport, waitReason, exitCode, cwd), read as for terminal_send. Call "
      "again until done.",
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
      "Stop the send running on a terminal: input not yet written is dropped and the running "
      "command gets a real SIGINT (like Ctrl-C); the send then returns. canceled is false when "
      "no send was running, and then nothing is signalled: a command still running after its "
      "send returned (timeout, inferred_idle) is stopped with terminal_signal SIGINT.",
      InputFor("terminal_cancel"),
      Output(Json{{"canceled", Prop("boolean", "A running send was canceled.")}}),
      Annotations(false, true, false, false)});

  tools.push_back(McpTool{
      "terminal_read", "Read terminal output again",
      "Read a terminal's retained output again, one bounded page at a time: the scrollback as "
      "lines (default), or view \"screen\" for what the screen shows now (full-screen "
      "programs). Use it for output that arrived after a send returned with inferred_idle or "
      "timeout, or that a send reported as truncated. Omit cursor to start at the oldest "
      "retained output; pass nextCursor back as cursor for the next page; end is true when the "
      "page reaches the newest output; truncated means output before cursor was already "
      "dropped.",
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
      "Send a signal to the program running in the foreground of a terminal (its process "
      "group, not the shell): SIGINT interrupts like Ctrl-C, SIGTERM asks it to end, SIGKILL "
      "forces it, SIGTSTP suspends and SIGCONT resumes it; SIGQUIT and SIGHUP as usual. To stop "
      "a send you started, terminal_cancel does the same with SIGINT.",
      InputFor("terminal_signal"),
      Output(Json{{"delivered", Prop("boolean", "The signal was delivered.")},
                  {"pgid", Prop("integer", "The process group that received it.")}}),
      Annotations(false, true, false, false)});

  tools.push_back(McpTool{
      "terminal_status", "Terminal status",
      "Show one terminal: whether its shell runs or exited (sessionStatus), whether a send is "
      "active (busy), its name, sandbox mode and shell pid.",
      InputFor("terminal_status"),
      Output(Json{{"sessionStatus", SessionStatusSchema()},
                  {"busy", Prop("boolean", "A send is active.")},
                  {"name", Prop("string", "The display name (may be empty).")},
                  {"mode", EnumProp(ModeNames(), "The sandbox mode it runs in.")},
                  {"pid", Nullable(Prop("integer", "The shell's process id on the host."))}}),
      Annotations(true, false, true, false)});

  tools.push_back(McpTool{
      "terminal_close", "Close a terminal",
      "Close a terminal: end its shell and every process started in it, and return once all "
      "of them are gone. Close terminals you are done with; every terminal of this connection "
      "also closes when the connection ends.",
      InputFor("terminal_close"),
      Output(Json{{"sessionStatus", SessionStatusSchema()}}),
      Annotations(false, true, true, false)});

  tools.push_back(McpTool{
      "terminal_list", "List terminals",
      "List the terminals open on this connection with their sessionId, name, mode, busy flag "
      "and status.",
      InputFor("terminal_list"),
      Output(Json{{"sessions", Json{{"type", "array"}, {"items", SessionListEntrySchema()}}}}),
      Annotations(true, false, true, false)});

  tools.push_back(McpTool{
      "policy_resolve", "Show the sandbox policy",
      "Show the sandbox policy that terminals opened now run under: mode, workspace root, "
      "writable roots, network, the ceiling the mode cannot exceed, and which file set each "
      "value. The same policy is the resource ptybox://policy.",
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
      "Change the sandbox mode of terminals opened from now on: read-only (nothing writable but "
      "a private /tmp), workspace-write (the workspace and configured roots writable) or "
      "danger-full-access (no sandbox). You may keep or narrow the mode at any time. A wider "
      "mode than the one this server started with is the user's decision: the user is asked "
      "through the host and the call returns once they answer; it may be refused (the user "
      "declines or does not answer, or the host cannot ask). When refused, continue within the "
      "current mode, or ask the user to restart ptybox mcp with a wider --mode. Never above the "
      "operator's ceiling. Refused with mode_fenced while a terminal is open or opening: close "
      "them first, so a terminal opened with wider access cannot outlive a narrower mode. A "
      "change updates the resource ptybox://policy.",
      InputFor("policy_set_mode"),
      Output(Json{{"mode", EnumProp(ModeNames(), "The effective mode now.")}}),
      Annotations(false, false, true, false)});

  tools.push_back(McpTool{
      "terminal_resize", "Resize a terminal",
      "Change a terminal's size in columns and rows, as resizing a terminal window does: the "
      "running program is told (SIGWINCH) and redraws, stty size and $COLUMNS follow, and "
      "terminal_read view \"screen\" shows the new size. Use it when a full-screen program "
      "(an editor, top, less) needs more room, or to make long lines wrap less.",
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
    std::string command = Str(fg, "command");
    if (command.empty()) command = "process group " + std::to_string(fg.value("pgid", 0));
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
    for (size_t i = 0; i < roots.size(); ++i) clause += (i == 0 ? "" : ", ") + roots[i];
    clause += " (except .git directories and policy files) and a private /tmp";
  }
  clause += "; everything else read-only; network ";
  clause += Str(p, "network") == "allow" ? "allowed." : "denied.";
  return clause;
}

// An output schema without its descriptions: tools/list goes to the model on every turn, and
// what a result means is in the tool's description; the types, enums and required keys stay.
Json WithoutDescriptions(Json schema) {
  if (schema.is_object()) {
    schema.erase("description");
    for (auto& [key, value] : schema.items()) {
      if (key != "enum" && key != "required") value = WithoutDescriptions(std::move(value));
    }
  } else if (schema.is_array()) {
    for (Json& entry : schema) entry = WithoutDescriptions(std::move(entry));
  }
  return schema;
}

std::vector<McpTool> CompactTools() {
  std::vector<McpTool> tools = BuildTools();
  for (McpTool& tool : tools) tool.output_schema = WithoutDescriptions(tool.output_schema);
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
           "; workspace root: " + Str(r, "workspaceRoot") + ".";
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
