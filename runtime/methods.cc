#include "runtime/methods.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <limits>

#include "backend/contract_types.h"
#include "backend/readiness/output_pattern.h"
#include "backend/terminal/key_encoder.h"
#include "backend/terminal/screen.h"
#include "common/base64.h"
#include "common/join.h"
#include "common/propagate.h"
#include "policy/mode.h"
#include "policy/mode_names.h"
#include "policy/network_names.h"
#include "policy/schema.h"
#include "runtime/mcp/tool_schemas.h"
#include "runtime/mcp/tool_text.h"
#include "runtime/owner.h"
#include "runtime/rpc/policy_json.h"

namespace ptybox::runtime {
namespace {

// ---------------------------------------------------------------------------------------------
// Parameter constructors: each states a type and its bounds; the table below uses only these.

// No description: terminal_open's says it returns the sessionId, and tools/list, sent to the
// model on every turn, would repeat one for every tool.
ParamSpec SessionId() { return ParamSpec{.name = "sessionId", .required = true}; }

ParamSpec Str(std::string name, std::string description, size_t max_bytes = kMaxParamStringBytes) {
  return ParamSpec{
      .name = std::move(name), .description = std::move(description), .max_bytes = max_bytes};
}

ParamSpec Int(std::string name, std::string description, int64_t min, int64_t max,
              Json default_value = nullptr) {
  return ParamSpec{.name = std::move(name),
                   .type = ParamType::kInteger,
                   .description = std::move(description),
                   .min = min,
                   .max = max,
                   .default_value = std::move(default_value)};
}

ParamSpec Enum(std::string name, std::vector<std::string> values, std::string description,
               Json default_value = nullptr) {
  return ParamSpec{.name = std::move(name),
                   .type = ParamType::kEnum,
                   .required = default_value.is_null(),
                   .description = std::move(description),
                   .values = std::move(values),
                   .default_value = std::move(default_value)};
}

ParamSpec Required(ParamSpec spec) {
  spec.required = true;
  return spec;
}

// The terminal size, as terminal_open and terminal_resize take it: the screen's own bounds
// (backend/terminal/screen.h), refused here rather than clamped there.
ParamSpec Columns(std::string description, Json default_value = nullptr) {
  return Int("cols", std::move(description), backend::Screen::kMinColumns,
             backend::Screen::kMaxColumns, std::move(default_value));
}
ParamSpec Rows(std::string description, Json default_value = nullptr) {
  return Int("rows", std::move(description), kMinRows, backend::Screen::kMaxRows,
             std::move(default_value));
}

ParamSpec TimeoutMs(std::string description) {
  return Int("timeoutMs", std::move(description), 1, kMaxTimeoutMs);
}

ParamSpec PatternParam() {
  return Str("pattern", "Return at the first output line this RE2 regex matches.",
             backend::kMaxPatternBytes);
}

std::string KeysDescription() {
  // The names are listed in terminal_send's description (and docs/protocol.md).
  return "Instead of input: key names or literal text, pressed in order.";
}

// The key names terminal_send's description lists, from the key encoder's own table: F1 to F12
// as one range.
// Of names for the same key (tmux's IC and Insert) the longest, which says most.
std::string KeyNameList() {
  std::vector<std::pair<std::string, std::string>> keys;  // bytes, name; in table order
  for (const std::string& name : backend::KeyNames()) {
    const bool function_key =
        name.size() > 1 && name[0] == 'F' && std::isdigit(static_cast<unsigned char>(name[1])) != 0;
    const std::string bytes = function_key ? "F" : backend::EncodeKey(name, {}).value_or(name);
    auto same =
        std::find_if(keys.begin(), keys.end(), [&](const auto& key) { return key.first == bytes; });
    if (same == keys.end()) {
      keys.emplace_back(bytes, function_key ? std::string("F1-F12") : name);
    } else if (!function_key && name.size() > same->second.size()) {
      same->second = name;
    }
  }
  std::vector<std::string> names;
  for (const auto& key : keys) names.push_back(key.second);
  return Join(names, " ");
}

std::string SendDescription() {
  return "Type input into a terminal and wait until it is ready for more. input is written "
         "verbatim: end it with a newline (\"\\n\") to run a command or answer a question. "
         "Returns the output (viewport; echo and prompt left out) and waitReason:\n"
         "- stdin_read: the prompt came back (exitCode, cwd set), or the program waits for "
         "input.\n"
         "- inferred_idle: output went quiet for silenceMs; does not prove it finished.\n"
         "- timeout: timeoutMs passed; does not prove it finished.\n"
         "- pattern: the output matched pattern (match).\n"
         "- session_exit: the shell exited.\n"
         "foreground set means a command still runs: terminal_wait for it, or terminal_signal "
         "SIGINT. One send per terminal at a time. background: true returns at once; collect "
         "with terminal_output. Keys: instead of input, keys is a list of key names or text: "
         "[\"C-c\"] (Ctrl-C), [\"Escape\", \":q!\", \"Enter\"] (leave vim); names " +
         KeyNameList() + ", C-/M-/S- prefixes.";
}

// A send's or a wait's viewport: it ends where the scrollback ended when the send settled.
ResultBudget ViewportBudget() {
  return ResultBudget{.texts = {{.field = "viewport", .place = TextPlace::kScrollbackEnd}}};
}

// ---------------------------------------------------------------------------------------------
// Results: each method's result as the contract's JSON (docs/protocol.md, "Types"). Its handler
// below answers with it; the types several methods share first.

Json ToJson(const backend::SessionStatus& status) {
  if (!status.exited) return Json{{"kind", "running"}};
  Json j{{"kind", "exited"}};
  j["exitCode"] = status.exit_code ? Json(*status.exit_code) : Json(nullptr);
  j["signal"] = status.signal ? Json(backend::SignalName(*status.signal)) : Json(nullptr);
  return j;
}

Json ToJson(const backend::SendResult& r) {
  Json j;
  j["viewport"] = r.viewport;
  j["waitReason"] = std::string(backend::ToString(r.wait_reason));
  j["sessionStatus"] = ToJson(r.session_status);
  j["truncated"] = r.truncated;
  j["exitCode"] = r.exit_code ? Json(*r.exit_code) : Json(nullptr);
  j["cwd"] = r.cwd ? Json(*r.cwd) : Json(nullptr);
  j["foreground"] = r.foreground
                        ? Json{{"pgid", r.foreground->pgid}, {"command", r.foreground->command}}
                        : Json(nullptr);
  if (r.match) j["match"] = Json{{"text", r.match->text}, {"line", r.match->line}};
  return j;
}

Json ToJson(const SessionInfo& info, bool for_list) {
  Json j;
  if (for_list) j["sessionId"] = info.session_id;
  j["name"] = info.name;
  j["mode"] = std::string(policy::ToString(info.mode));
  j["busy"] = info.busy;
  j["sessionStatus"] = ToJson(info.status);
  if (!for_list) j["pid"] = info.pid ? Json(*info.pid) : Json(nullptr);
  return j;
}

Json ToJson(const OpenResult& r) {
  Json j;
  j["sessionId"] = r.session_id;
  j["name"] = r.name;
  j["motd"] = r.motd;
  j["pid"] = r.pid ? Json(*r.pid) : Json(nullptr);
  j["mode"] = std::string(policy::ToString(r.mode));
  j["cwd"] = r.cwd;
  return j;
}

Json ToJson(const backend::ReadResult& r) {
  return Json{{"text", r.text},
              {"cursor", r.cursor},
              {"nextCursor", r.next_cursor},
              {"truncated", r.truncated},
              {"end", r.end}};
}

Json ToJson(const backend::SendRead& read) {
  Json j{{"output", read.output}, {"done", read.done}};
  j["result"] = read.result ? ToJson(*read.result) : Json(nullptr);
  if (read.truncated) j["truncated"] = true;
  if (read.output_cursor) j["outputCursor"] = *read.output_cursor;
  return j;
}

}  // namespace

Json WatchStartJson(const WatchStart& start) {
  Json j = ToJson(start.session, true);
  j["watchId"] = start.watch_id;
  j["cols"] = start.screen.columns;
  j["rows"] = start.screen.rows;
  j["lines"] = start.screen.lines;
  j["cursor"] = Json{{"row", start.screen.cursor_row}, {"column", start.screen.cursor_column}};
  j["alternateScreen"] = start.screen.alternate_screen;
  return j;
}

namespace {

// ---------------------------------------------------------------------------------------------
// Handlers: each reads its validated args, calls the service and encodes the result.

template <typename T>
std::function<void(Result<T>)> Encode(Done done, Json (*encode)(const T&)) {
  return [done = std::move(done), encode](Result<T> result) {
    if (!result) return done(Propagate(result));
    done(encode(*result));
  };
}

void Open(MethodCall& c) {
  OpenParams open;
  open.type = c.args.String("type");
  open.name = c.args.OptionalString("name");
  open.cwd = c.args.OptionalString("cwd");
  open.columns = static_cast<int>(*c.args.Int("cols"));
  open.rows = static_cast<int>(*c.args.Int("rows"));
  open.env = c.args.Env("env");
  open.timeout_ms = c.args.Int("timeoutMs");
  c.service.Open(c.owner, std::move(open), c.request_key,
                 Encode<OpenResult>(c.done, [](const OpenResult& r) { return ToJson(r); }));
}

// `pattern`, compiled: refused (invalid params) when RE2 does not accept it.
Result<std::shared_ptr<const backend::OutputPattern>> PatternArg(const MethodCall& c,
                                                                 const char* method) {
  std::optional<std::string> pattern = c.args.OptionalString("pattern");
  if (!pattern) return std::shared_ptr<const backend::OutputPattern>();
  Result<std::shared_ptr<const backend::OutputPattern>> compiled =
      backend::OutputPattern::Compile(*pattern);
  if (!compiled) {
    Error error = compiled.error();
    error.message = std::string(method) + ": " + error.message;
    return std::unexpected(std::move(error));
  }
  return compiled;
}

void Send(MethodCall& c) {
  Result<std::shared_ptr<const backend::OutputPattern>> pattern = PatternArg(c, "terminal_send");
  if (!pattern) return c.done(Propagate(pattern));
  backend::SendRequest request;
  request.pattern = *pattern;
  request.input = c.args.OptionalString("input").value_or("");
  request.keys = c.args.StringList("keys");
  request.timeout_ms = c.args.Int("timeoutMs");
  request.silence_ms = c.args.Int("silenceMs");
  c.service.Send(c.owner, c.args.String("sessionId"), std::move(request), c.args.Bool("background"),
                 c.request_key, Encode<SendOutcome>(c.done, [](const SendOutcome& outcome) {
                   if (outcome.operation_id) return Json{{"operationId", *outcome.operation_id}};
                   return ToJson(*outcome.result);
                 }));
}

void Wait(MethodCall& c) {
  Result<std::shared_ptr<const backend::OutputPattern>> pattern = PatternArg(c, "terminal_wait");
  if (!pattern) return c.done(Propagate(pattern));
  backend::SendRequest request;
  request.pattern = *pattern;
  request.wait = true;
  request.timeout_ms = c.args.Int("timeoutMs");
  request.silence_ms = c.args.Int("silenceMs");
  c.service.Send(c.owner, c.args.String("sessionId"), std::move(request), /*background=*/false,
                 c.request_key, Encode<SendOutcome>(c.done, [](const SendOutcome& outcome) {
                   return ToJson(*outcome.result);
                 }));
}

// The synchronous methods: the service's answer, encoded.
template <typename T>
void Answer(MethodCall& c, Result<T> result, Json (*encode)(const T&)) {
  if (!result) return c.done(Propagate(result));
  c.done(encode(*result));
}

void CollectOutput(MethodCall& c) {
  Answer<backend::SendRead>(c, c.service.Output(*c.owner, c.args.String("sessionId")),
                            [](const backend::SendRead& r) { return ToJson(r); });
}

void Cancel(MethodCall& c) {
  Answer<bool>(c, c.service.Cancel(*c.owner, c.args.String("sessionId")), [](const bool& canceled) {
    return Json{{"canceled", canceled}};
  });
}

void Read(MethodCall& c) {
  backend::ReadRequest request;
  if (std::optional<int64_t> cursor = c.args.Int("cursor")) {
    request.cursor = static_cast<uint64_t>(*cursor);
  }
  request.max_bytes = c.args.Int("maxBytes");
  if (c.args.String("view") == "screen") request.view = backend::ReadView::kScreen;
  Answer<backend::ReadResult>(c, c.service.Read(*c.owner, c.args.String("sessionId"), request),
                              [](const backend::ReadResult& r) { return ToJson(r); });
}

void Signal(MethodCall& c) {
  // The enum admits only ClientSignalNames().
  const int signal = *backend::ParseClientSignal(c.args.String("signal"));
  c.service.Signal(*c.owner, c.args.String("sessionId"), signal,
                   Encode<backend::SignalResult>(c.done, [](const backend::SignalResult& r) {
                     return Json{{"delivered", r.delivered}, {"pgid", r.pgid}};
                   }));
}

void Resize(MethodCall& c) {
  const int columns = static_cast<int>(*c.args.Int("cols"));
  const int rows = static_cast<int>(*c.args.Int("rows"));
  Result<void> resized = c.service.Resize(*c.owner, c.args.String("sessionId"), columns, rows);
  if (!resized) return c.done(Propagate(resized));
  c.done(Json{{"cols", columns}, {"rows", rows}});
}

void Status(MethodCall& c) {
  Answer<SessionInfo>(c, c.service.Status(*c.owner, c.args.String("sessionId")),
                      [](const SessionInfo& info) { return ToJson(info, /*for_list=*/false); });
}

void Close(MethodCall& c) {
  c.service.Close(c.owner, c.args.String("sessionId"), c.args.String("reason"),
                  Encode<backend::SessionStatus>(c.done, [](const backend::SessionStatus& s) {
                    return Json{{"sessionStatus", ToJson(s)}};
                  }));
}

void List(MethodCall& c) {
  Json sessions = Json::array();
  for (const SessionInfo& info : c.service.List(*c.owner)) sessions.push_back(ToJson(info, true));
  c.done(Json{{"sessions", sessions}});
}

void ResolvePolicy(MethodCall& c) {
  Answer<policy::ResolvedPolicy>(c, c.service.ResolvePolicy(*c.owner), PolicyToJson);
}

void SetMode(MethodCall& c) {
  // The enum admits only policy::kModeNames.
  const policy::Mode mode = *policy::ParseMode(c.args.String("mode"));
  Answer<policy::Mode>(c, c.service.SetMode(*c.owner, mode), [](const policy::Mode& set) {
    return Json{{"mode", std::string(policy::ToString(set))}};
  });
}

void Info(MethodCall& c) {  // v1.1; the logic is PtyService::Info
  OwnerInfo info = c.service.Info(*c.owner);
  c.done(Json{{"ownerToken", info.token}, {"detachGraceMs", info.detach_grace_ms}});
}

void Attach(MethodCall& c) {
  // v1.1: attaching replaces the connection's owner, so RpcConnection answers it (after the
  // same validation from this entry); a caller without a connection gets this.
  c.done(Fail(ErrorKind::kInvalidParams,
              "owner_attach is answered by a serve --socket or --stdio connection only",
              "ownerToken"));
}

void OwnerSessions(MethodCall& c) {  // extension: `ptybox ls`
  Result<std::vector<SessionInfo>> listed = c.service.ListByToken(c.args.String("ownerToken"));
  if (!listed) return c.done(Propagate(listed));
  Json sessions = Json::array();
  for (const SessionInfo& info : *listed) sessions.push_back(ToJson(info, true));
  c.done(Json{{"sessions", sessions}});
}

int64_t WatchIdArg(const MethodCall& c) { return *c.args.Int("watchId"); }

void TakeOver(MethodCall& c) {  // extension: `ptybox attach --write`
  Result<void> held = c.service.TakeOver(*c.owner, static_cast<uint64_t>(WatchIdArg(c)));
  if (!held) return c.done(Propagate(held));
  c.done(Json{{"held", true}});
}

void Release(MethodCall& c) {
  Result<void> released = c.service.Release(*c.owner, static_cast<uint64_t>(WatchIdArg(c)));
  if (!released) return c.done(Propagate(released));
  c.done(Json{{"released", true}});
}

void Type(MethodCall& c) {
  std::optional<std::string> bytes = Base64Decode(c.args.String("data"));
  if (!bytes) {
    return c.done(Fail(ErrorKind::kInvalidParams,
                       "terminal_type: data is not base64 (RFC 4648, padded)", "data"));
  }
  Result<void> typed =
      c.service.Type(*c.owner, static_cast<uint64_t>(WatchIdArg(c)), std::move(*bytes));
  if (!typed) return c.done(Propagate(typed));
  c.done(Json{{"typed", true}});
}

void Watch(MethodCall& c) {
  // Extension: the answer is followed by notifications on the same connection, so
  // RpcConnection answers it (after the same validation from this entry).
  c.done(Fail(ErrorKind::kInvalidParams,
              "terminal_watch is answered by a serve --socket or --stdio connection only",
              "sessionId"));
}

void Unwatch(MethodCall& c) {
  c.done(Fail(ErrorKind::kInvalidParams,
              "terminal_unwatch is answered by a serve --socket or --stdio connection only",
              "watchId"));
}

// ---------------------------------------------------------------------------------------------
// The table.

std::vector<MethodSpec> BuildContract() {
  return {
      {.name = "terminal_open",
       .summary = "Open a persistent interactive bash terminal in the sandbox: {sessionId, name, "
                  "motd, pid, mode, cwd}.",
       .params = {Enum("type", {"shell"}, "bash.",
                       "shell"),
                  Str("name", "A display name.", kMaxNameBytes),
                  Str("cwd", "Start directory, relative to the workspace root (the default)."),
                  Columns("Width in columns.", kDefaultColumns),
                  Rows("Height in rows.", kDefaultRows),
                  ParamSpec{.name = "env",
                            .type = ParamType::kEnv,
                            .description = "Extra environment variables for the shell."},
                  TimeoutMs("Startup deadline.")},
       .handler = Open,
.mcp = McpFace{.title = "Open a terminal",
 .description = "Open a persistent bash terminal in the sandbox; returns its sessionId. State (cwd, "
      "variables, a REPL, a server) carries between sends: reuse it for the task.",
 .output_schema = Output(Json{{"sessionId", SessionIdProp()},
                  {"name", Prop("string", "The display name (may be empty).")},
                  {"motd", Prop("string", "What the terminal printed on start.")},
                  {"pid", Nullable(Prop("integer", "The shell's process id on the host."))},
                  {"mode", EnumProp(ModeNames(), "The sandbox mode the terminal runs in.")},
                  {"cwd", Prop("string", "The directory the shell started in.")}}),
 .typed_output = false,
 .hints = ToolHints{.read_only = false, .destructive = false, .idempotent = false, .open_world = false},
 .render = RenderOpen,
 .budget = ResultBudget{.texts = {{.field = "motd"}}}}},
      {.name = "terminal_send",
       .summary = "Type input into a terminal and wait until it is ready for more: a SendResult, "
                  "or {operationId} in the background.",
       .params = {SessionId(),
                  Str("input",
                      "Bytes typed verbatim; end with \"\\n\" to press Enter.",
                      kUnboundedString),
                  ParamSpec{.name = "keys",
                            .type = ParamType::kStringList,
                            .description = KeysDescription(),
                            .max_bytes = kMaxKeyBytes,
                            .max_items = kMaxKeys},
                  TimeoutMs("Deadline (default 30000)."),
                  Int("silenceMs", "Quiet time that returns inferred_idle (default 3000).", 1,
                      kMaxTimeoutMs),
                  PatternParam(),
                  ParamSpec{.name = "background",
                            .type = ParamType::kBoolean,
                            .description = "Return at once; collect with terminal_output.",
                            .default_value = false}},
       .exactly_one_of = {"input", "keys"},
       .handler = Send,
.mcp = McpFace{.title = "Send input to a terminal",
 .description = SendDescription(),
 .output_schema = SendOutputSchema(),
 .typed_output = true,
 .hints = ToolHints{.read_only = false, .destructive = true, .idempotent = false, .open_world = true},
 .render = RenderSend,
 .budget = ViewportBudget()}},
      {.name = "terminal_wait",
       .summary = "Wait for readiness as a send does, without typing anything: a SendResult for "
                  "the output since the previous send's or wait's result.",
       .params = {SessionId(),
                  TimeoutMs("Deadline (default 30000)."),
                  Int("silenceMs", "Quiet time that returns inferred_idle (default 3000).", 1,
                      kMaxTimeoutMs),
                  PatternParam()},
       .handler = Wait,
.mcp = McpFace{.title = "Wait without typing",
 .description = "Wait for a command a send left running (foreground set) without typing; returns like "
      "terminal_send, with the output since the previous result.",
 .output_schema = SendResultSchema(),
 .typed_output = true,
 .hints = ToolHints{.read_only = true, .destructive = false, .idempotent = false, .open_world = true},
 .render = RenderWait,
 .budget = ViewportBudget()}},
      {.name = "terminal_output",
       .summary = "Collect the output of a background send produced since the previous call: "
                  "{output, done, result}.",
       .params = {SessionId()},
       .handler = CollectOutput,
.mcp = McpFace{.title = "Collect background output",
 .description = "Collect a background send's output since the previous call; once done, result is its "
      "settled result (as terminal_send). Call again until done.",
 .output_schema = Output(Json{{"output", Prop("string", "Output produced since the previous call.")},
                  {"done", Prop("boolean", "The send has settled.")},
                  {"result", Nullable(Json{{"type", "object"},
                                           {"description", "The settled result once done."},
                                           {"properties", SendResultProperties()},
                                           {"required", SendResultSchema()["required"]}})},
                  {"truncated", Prop("boolean", "Output was dropped before it was collected.")},
                  {"outputCursor",
                   Json{{"type", "integer"},
                        {"minimum", 0},
                        {"description", "The terminal_read cursor where output starts."}}}},
                 {"truncated", "outputCursor"}),
 .typed_output = false,
 .hints = ToolHints{.read_only = true, .destructive = false, .idempotent = false, .open_world = false},
 .render = RenderOutput,
 .budget = ResultBudget{.texts = {{.field = "output", .place = TextPlace::kCollected}, {.field = "viewport", .within = "result"}}}}},
      {.name = "terminal_cancel",
       .summary = "Cancel the send running on a terminal: {canceled}.",
       .params = {SessionId()},
       .handler = Cancel,
.mcp = McpFace{.title = "Cancel the running send",
 .description = "Stop the running send or wait: unwritten input is dropped, the command gets SIGINT. "
      "canceled false: none was running.",
 .output_schema = Output(Json{{"canceled", Prop("boolean", "A running send was canceled.")}}),
 .typed_output = false,
 .hints = ToolHints{.read_only = false, .destructive = true, .idempotent = false, .open_world = false},
 .render = RenderCancel}},
      {.name = "terminal_read",
       .summary = "One bounded page of a terminal's retained output, or its current screen: "
                  "{text, cursor, nextCursor, truncated, end}.",
       .params = {SessionId(),
                  Int("cursor",
                      "A nextCursor from an earlier read; default: the oldest retained output.",
                      0, INT64_MAX),
                  Int("maxBytes", "Largest page.", 1, INT64_MAX),
                  Enum("view", {"lines", "screen"},
                       "lines (scrollback) or screen (the screen now).",
                       "lines")},
       .handler = Read,
.mcp = McpFace{.title = "Read terminal output again",
 .description = "Read retained output again, a page at a time: scrollback lines (pass nextCursor back "
      "as cursor; end: newest reached) or view \"screen\" (the screen now).",
 .output_schema = Output(Json{
          {"text", Prop("string", "The page.")},
          {"cursor",
           Json{{"type", "integer"}, {"minimum", 0}, {"description", "Where this page starts."}}},
          {"nextCursor", Json{{"type", "integer"},
                              {"minimum", 0},
                              {"description", "Pass as cursor to read the next page."}}},
          {"truncated", Prop("boolean", "Output before cursor was already dropped.")},
          {"end", Prop("boolean", "The page reaches the newest output.")}}),
 .typed_output = false,
 .hints = ToolHints{.read_only = true, .destructive = false, .idempotent = true, .open_world = false},
 .render = RenderRead,
 .budget = ResultBudget{.texts = {{.field = "text", .place = TextPlace::kPage}}}}},
      {.name = "terminal_signal",
       .summary = "Send a signal to the verified foreground process group: {delivered, pgid}.",
       .params = {SessionId(),
                  Enum("signal", backend::ClientSignalNames(), "The signal to deliver.")},
       .handler = Signal,
.mcp = McpFace{.title = "Signal the foreground program",
 .description = "Signal the terminal's foreground process group (not the shell): SIGINT interrupts "
      "like Ctrl-C, SIGTERM ends, SIGKILL forces.",
 .output_schema = Output(Json{{"delivered", Prop("boolean", "The signal was delivered.")},
                  {"pgid", Prop("integer", "The process group that received it.")}}),
 .typed_output = false,
 .hints = ToolHints{.read_only = false, .destructive = true, .idempotent = false, .open_world = false},
 .render = RenderSignal}},
      {.name = "terminal_status",
       .summary = "One terminal's status: {sessionStatus, busy, name, mode, pid}.",
       .params = {SessionId()},
       .handler = Status,
.mcp = McpFace{.title = "Terminal status",
 .description = "One terminal: shell running or exited, busy (a send is active), name, mode, pid.",
 .output_schema = Output(Json{{"sessionStatus", SessionStatusSchema()},
                  {"busy", Prop("boolean", "A send is active.")},
                  {"name", Prop("string", "The display name (may be empty).")},
                  {"mode", EnumProp(ModeNames(), "The sandbox mode it runs in.")},
                  {"pid", Nullable(Prop("integer", "The shell's process id on the host."))}}),
 .typed_output = false,
 .hints = ToolHints{.read_only = true, .destructive = false, .idempotent = true, .open_world = false},
 .render = RenderStatus}},
      {.name = "terminal_close",
       .summary = "End a terminal and every process of it: {sessionStatus}.",
       .params = {SessionId(),
                  ParamSpec{.name = "reason",
                            .description = "Why, for the server's log.",
                            .max_bytes = kMaxReasonBytes,
                            .default_value = "closed by the client"}},
       .handler = Close,
.mcp = McpFace{.title = "Close a terminal",
 .description = "Close a terminal: end every process started in it, then return.",
 .output_schema = Output(Json{{"sessionStatus", SessionStatusSchema()}}),
 .typed_output = false,
 .hints = ToolHints{.read_only = false, .destructive = true, .idempotent = true, .open_world = false},
 .render = RenderClose}},
      {.name = "terminal_list",
       .summary = "This owner's terminals: {sessions: [{sessionId, name, mode, busy, "
                  "sessionStatus}]}.",
       .handler = List,
.mcp = McpFace{.title = "List terminals",
 .description = "List this connection's terminals: sessionId, name, mode, busy, status.",
 .output_schema = Output(Json{{"sessions", Json{{"type", "array"}, {"items", SessionListEntrySchema()}}}}),
 .typed_output = false,
 .hints = ToolHints{.read_only = true, .destructive = false, .idempotent = true, .open_world = false},
 .render = RenderList}},
      {.name = "policy_resolve",
       .summary = "The policy terminals opened now run under: {mode, ceiling, workspaceRoot, "
                  "writableRoots, network, source}.",
       .handler = ResolvePolicy,
.mcp = McpFace{.title = "Show the sandbox policy",
 .description = "Show the sandbox policy new terminals run under: mode, writable roots, network, "
      "ceiling.",
 .output_schema = Output(
          Json{{"mode", EnumProp(ModeNames(), "The effective mode.")},
               {"ceiling", EnumProp(ModeNames(), "The widest mode policy_set_mode may choose.")},
               {"workspaceRoot", Prop("string", "The workspace root.")},
               {"writableRoots", Json{{"type", "array"},
                                      {"items", Json{{"type", "string"}}},
                                      {"description", "Directories a terminal may write."}}},
               {"network", EnumProp({std::string(policy::NetworkName(true)),
                                    std::string(policy::NetworkName(false))},
                                   "Whether the network is reachable.")},
               {"source",
                Json{{"type", "object"},
                     {"description", "The policy files read and where each value came from."},
                     {"properties",
                      {{"files", Json{{"type", "array"}, {"items", Json{{"type", "string"}}}}},
                       {"values", Json{{"type", "object"},
                                       {"additionalProperties", Json{{"type", "string"}}}}}}}}}}),
 .typed_output = false,
 .hints = ToolHints{.read_only = true, .destructive = false, .idempotent = true, .open_world = false},
 .render = RenderPolicy}},
      {.name = "policy_set_mode",
       .summary = "Change the mode of terminals opened from now on: {mode}.",
       .params = {Enum("mode", ModeNames(), "The mode for terminals opened from now on.")},
       .handler = SetMode,
.mcp = McpFace{.title = "Change the sandbox mode",
 .description = "Set the sandbox mode of terminals opened from now on. Narrowing is free; widening asks "
      "the user and may be refused (then stay in the mode). mode_fenced while a terminal is "
      "open: close them first.",
 .output_schema = Output(Json{{"mode", EnumProp(ModeNames(), "The effective mode now.")}}),
 .typed_output = false,
 .hints = ToolHints{.read_only = false, .destructive = false, .idempotent = true, .open_world = false},
 .render = RenderSetMode,
 .needs_consent = true,
 .changes_policy = true}},
      {.name = "terminal_resize",
       .summary = "Resize a terminal (SIGWINCH to its foreground group, the screen model "
                  "resized): {cols, rows}.",
       .params = {SessionId(), Required(Columns("New width in columns.")),
                  Required(Rows("New height in rows."))},
       .handler = Resize,
.mcp = McpFace{.title = "Resize a terminal",
 .description = "Resize a terminal as resizing a window does: the program gets SIGWINCH and redraws.",
 .output_schema = Output(Json{{"cols", Prop("integer", "The width now.")},
                  {"rows", Prop("integer", "The height now.")}}),
 .typed_output = false,
 .hints = ToolHints{.read_only = false, .destructive = false, .idempotent = true, .open_world = false},
 .render = RenderResize}},
      // v1.1, JSON-RPC only (no MCP tool: `ptybox mcp --connect` calls them itself).
      {.name = "owner_info",
       .summary = "This connection's owner: {ownerToken, detachGraceMs}.",
       .handler = Info},
      {.name = "owner_attach",
       .summary = "Make this connection the detached owner with that token: {sessions, "
                  "operations}.",
       .params = {Required(Str("ownerToken", "The token owner_info gave the detached owner."))},
       .handler = Attach},
      // Extensions beyond contract v1.2 (docs/protocol.md, "Watching a session"), JSON-RPC only:
      // a person's `ptybox ls` and `ptybox attach`.
      {.name = "owner_sessions",
       .summary = "The sessions of the owner with that token (as terminal_list): {sessions}.",
       .params = {Required(Str("ownerToken", "The owner's token (owner_info; the file `ptybox "
                                             "mcp --connect` keeps)."))},
       .handler = OwnerSessions},
      {.name = "terminal_watch",
       .summary = "Watch a session: {watchId, sessionId, name, mode, cols, rows, lines, cursor, "
                  "alternateScreen, busy, sessionStatus}, then terminal_watch_output "
                  "(and terminal_watch_resized) notifications.",
       .params = {SessionId(),
                  Str("ownerToken", "The token of the session's owner, when it is not this "
                                    "connection's.")},
       .handler = Watch},
      {.name = "terminal_unwatch",
       .summary = "Stop a watch of this connection: {unwatched: true}.",
       .params = {Required(Int("watchId", "The watchId terminal_watch returned.", 1,
                               std::numeric_limits<int64_t>::max()))},
       .handler = Unwatch},
      {.name = "terminal_takeover",
       .summary = "Take the watched session over (a person types; the agent's sends answer "
                  "busy until released): {held: true}.",
       .params = {Required(Int("watchId", "The watchId terminal_watch returned.", 1,
                               std::numeric_limits<int64_t>::max()))},
       .handler = TakeOver},
      {.name = "terminal_type",
       .summary = "Write a person's keystrokes to the session this watch holds: {typed: true}.",
       .params = {Required(Int("watchId", "The watchId terminal_watch returned.", 1,
                               std::numeric_limits<int64_t>::max())),
                  Required(Str("data", "The keystrokes' bytes, base64.", kMaxTypedBase64Bytes))},
       .handler = Type},
      {.name = "terminal_release",
       .summary = "Give the session back to its agent: {released: true}.",
       .params = {Required(Int("watchId", "The watchId terminal_watch returned.", 1,
                               std::numeric_limits<int64_t>::max()))},
       .handler = Release},
  };
}

// ---------------------------------------------------------------------------------------------
// Validation.

// A client's env, checked by exactly the rules of a policy file's env.set (policy/schema.h):
// the same names refused, the same value bound, no NUL in a name or a value.
// Its messages start with "env" (pinned by the escape tests), not with the method.
Result<void> CheckEnv(const std::map<std::string, std::string>& env) {
  if (env.size() > policy::kMaxListEntries) {
    return Fail(ErrorKind::kInvalidParams,
                "env has " + std::to_string(env.size()) + " variables; at most " +
                    std::to_string(policy::kMaxListEntries) + " are allowed",
                "env");
  }
  for (const auto& [name, value] : env) {
    if (auto problem = policy::EnvNameProblem(name, policy::EnvUse::kSet)) {
      return Fail(ErrorKind::kInvalidParams, "env: " + *problem + "; remove it from env", "env");
    }
    if (auto problem = policy::EnvValueProblem(value)) {
      return Fail(ErrorKind::kInvalidParams, "env." + name + ": " + *problem, "env." + name);
    }
  }
  return {};
}

Result<Json> StringList(const Params& p, const std::string& method, const ParamSpec& spec) {
  const Json& raw = p.raw();
  auto it = raw.find(spec.name);
  if (it == raw.end() || it->is_null()) return Json(nullptr);
  auto fail = [&](const std::string& what, const std::string& context) {
    return Fail(ErrorKind::kInvalidParams, method + ": " + what, context);
  };
  if (!it->is_array() || it->empty()) {
    return fail("\"" + spec.name + "\" must be a non-empty list of strings", spec.name);
  }
  if (it->size() > spec.max_items) {
    return fail("\"" + spec.name + "\" has " + std::to_string(it->size()) +
                    " entries; the maximum is " + std::to_string(spec.max_items),
                spec.name);
  }
  for (size_t i = 0; i < it->size(); ++i) {
    const Json& entry = (*it)[i];
    const std::string at = spec.name + "[" + std::to_string(i) + "]";
    if (!entry.is_string()) return fail("\"" + at + "\" must be a string", at);
    const size_t size = entry.get_ref<const std::string&>().size();
    if (size > spec.max_bytes) {
      return fail("\"" + at + "\" is " + std::to_string(size) + " bytes; the maximum is " +
                      std::to_string(spec.max_bytes) + " bytes",
                  at);
    }
  }
  return *it;
}

// One param's value (null when absent), or the error naming it.
Result<Json> ValidateOne(const Params& p, const std::string& method, const ParamSpec& spec) {
  auto value = [](auto result) -> Result<Json> {
    if (!result) return Propagate(result);
    if constexpr (requires { result->has_value(); }) {
      if (!result->has_value()) return Json(nullptr);
      return Json(**result);
    } else {
      return Json(*result);
    }
  };
  switch (spec.type) {
    case ParamType::kString:
    case ParamType::kEnum: {
      Result<Json> text = spec.required ? value(p.RequiredString(spec.name, spec.max_bytes))
                                        : value(p.OptionalString(spec.name, spec.max_bytes));
      if (!text || text->is_null() || spec.type == ParamType::kString) return text;
      const std::string& got = text->get_ref<const std::string&>();
      if (std::find(spec.values.begin(), spec.values.end(), got) == spec.values.end()) {
        return Fail(ErrorKind::kInvalidParams,
                    method + ": unknown " + spec.name + " \"" + Abbreviate(got) + "\" (" +
                        JoinAlternatives(spec.values) + ")",
                    spec.name);
      }
      return text;
    }
    case ParamType::kInteger: {
      Result<Json> number = value(p.OptionalInt(spec.name, spec.min, spec.max));
      if (number && number->is_null() && spec.required) {
        return Fail(ErrorKind::kInvalidParams,
                    method + ": \"" + spec.name + "\" (an integer from " +
                        std::to_string(spec.min) + " to " + std::to_string(spec.max) +
                        ") is required",
                    spec.name);
      }
      return number;
    }
    case ParamType::kBoolean:
      return value(p.OptionalBool(spec.name));
    case ParamType::kEnv: {
      Result<std::map<std::string, std::string>> env = p.StringMap(spec.name);
      if (!env) return Propagate(env);
      if (Result<void> ok = CheckEnv(*env); !ok) return Propagate(ok);
      return env->empty() ? Json(nullptr) : Json(*env);
    }
    case ParamType::kStringList:
      return StringList(p, method, spec);
  }
  return Json(nullptr);
}

}  // namespace

bool Args::Has(const std::string& name) const { return values_.contains(name); }

std::string Args::String(const std::string& name) const {
  auto it = values_.find(name);
  return it != values_.end() ? it->get<std::string>() : std::string();
}

std::optional<std::string> Args::OptionalString(const std::string& name) const {
  auto it = values_.find(name);
  if (it == values_.end()) return std::nullopt;
  return it->get<std::string>();
}

std::optional<int64_t> Args::Int(const std::string& name) const {
  auto it = values_.find(name);
  if (it == values_.end()) return std::nullopt;
  return it->get<int64_t>();
}

bool Args::Bool(const std::string& name) const {
  auto it = values_.find(name);
  return it != values_.end() && it->get<bool>();
}

std::map<std::string, std::string> Args::Env(const std::string& name) const {
  auto it = values_.find(name);
  if (it == values_.end()) return {};
  return it->get<std::map<std::string, std::string>>();
}

std::vector<std::string> Args::StringList(const std::string& name) const {
  auto it = values_.find(name);
  if (it == values_.end()) return {};
  return it->get<std::vector<std::string>>();
}

Json AttachResultJson(const AttachResult& attached) {
  Json sessions = Json::array();
  for (const SessionInfo& info : attached.sessions) sessions.push_back(ToJson(info, true));
  Json operations = Json::array();
  for (const auto& [operation, session] : attached.operations) {
    operations.push_back(Json{{"operationId", operation}, {"sessionId", session}});
  }
  return Json{{"sessions", sessions}, {"operations", operations}};
}

const std::vector<MethodSpec>& Contract() {
  static const std::vector<MethodSpec> kContract = BuildContract();
  return kContract;
}

namespace {

Result<void> TableError(const std::string& method, const std::string& what) {
  return Fail(ErrorKind::kInternal,
              "the contract table (runtime/methods.cc) is broken: " +
                  (method.empty() ? std::string() : method + ": ") + what,
              method);
}

Result<void> CheckParams(const MethodSpec& method) {
  std::vector<std::string> seen;
  for (const ParamSpec& param : method.params) {
    if (param.name.empty()) return TableError(method.name, "a parameter has no name");
    if (std::find(seen.begin(), seen.end(), param.name) != seen.end()) {
      return TableError(method.name, "parameter \"" + param.name + "\" is listed twice");
    }
    seen.push_back(param.name);
    if (param.type == ParamType::kEnum && param.values.empty()) {
      return TableError(method.name, "enum \"" + param.name + "\" has no values");
    }
    if (param.type == ParamType::kInteger && param.min > param.max) {
      return TableError(method.name, "\"" + param.name + "\" has min above max");
    }
  }
  for (const std::string& name : method.exactly_one_of) {
    if (std::find(seen.begin(), seen.end(), name) == seen.end()) {
      return TableError(method.name, "exactly_one_of names \"" + name + "\", no parameter");
    }
  }
  return {};
}

// The facts a face states for the MCP server (budget, consent) against the method's params.
Result<void> CheckFaceFacts(const MethodSpec& method) {
  const McpFace& face = *method.mcp;
  size_t located = 0;
  for (const BoundedText& text : face.budget.texts) {
    if (text.field.empty())
      return TableError(method.name, "its budget names a text without a field");
    if (text.place == TextPlace::kNowhere) continue;
    ++located;
    if (!text.within.empty()) {
      return TableError(method.name, "its budget locates \"" + text.field + "\" inside \"" +
                                         text.within +
                                         "\"; only a field of the result itself is located");
    }
    const ParamSpec* max_bytes = FindByName(method.params, "maxBytes");
    if (text.place == TextPlace::kPage &&
        (max_bytes == nullptr || max_bytes->type != ParamType::kInteger)) {
      return TableError(method.name, "its budget pages \"" + text.field +
                                         "\", and it takes no integer \"maxBytes\"");
    }
  }
  if (located > 1) return TableError(method.name, "its budget locates more than one text");
  const ParamSpec* mode = FindByName(method.params, "mode");
  if (face.needs_consent && (mode == nullptr || mode->type != ParamType::kEnum)) {
    return TableError(method.name, "its MCP face needs consent, and it takes no \"mode\"");
  }
  return {};
}

Result<void> CheckFace(const MethodSpec& method) {
  if (!method.mcp) return {};
  const McpFace& face = *method.mcp;
  if (face.title.empty() || face.description.empty()) {
    return TableError(method.name, "its MCP face needs a title and a description");
  }
  if (!face.output_schema.is_object() || face.output_schema.value("type", "") != "object") {
    return TableError(method.name, "its MCP face needs an object output schema");
  }
  if (face.render == nullptr) return TableError(method.name, "its MCP face has no renderer");
  return CheckFaceFacts(method);
}

}  // namespace

Result<void> CheckContract(const std::vector<MethodSpec>& table) {
  std::vector<std::string> names;
  for (const MethodSpec& method : table) {
    if (method.name.empty()) return TableError("", "an entry has no name");
    if (std::find(names.begin(), names.end(), method.name) != names.end()) {
      return TableError(method.name, "listed twice");
    }
    names.push_back(method.name);
    if (method.handler == nullptr) return TableError(method.name, "no handler");
    if (Result<void> params = CheckParams(method); !params) return params;
    if (Result<void> face = CheckFace(method); !face) return face;
  }
  for (const NamedMethod& named : kMethodsNamedByServers) {
    const MethodSpec* method = FindByName(table, named.name);
    if (method == nullptr) {
      return TableError(std::string(named.name), "missing, and the servers call it by name");
    }
    if (named.mcp_tool && !method->mcp) {
      return TableError(std::string(named.name), "no MCP face, and ptybox mcp calls it by name");
    }
  }
  return {};
}

const MethodSpec* FindMethod(std::string_view name) { return FindByName(Contract(), name); }

bool IsContractMethod(std::string_view method) { return FindMethod(method) != nullptr; }

Result<Args> ValidateParams(const MethodSpec& method, const Json& params) {
  std::vector<std::string> allowed;
  for (const ParamSpec& spec : method.params) allowed.push_back(spec.name);
  Result<Params> p = Params::Check(params, method.name, allowed);
  if (!p) return Propagate(p);
  Json values = Json::object();
  for (const ParamSpec& spec : method.params) {
    Result<Json> value = ValidateOne(*p, method.name, spec);
    if (!value) return Propagate(value);
    if (!value->is_null()) {
      values[spec.name] = std::move(*value);
    } else if (!spec.default_value.is_null()) {
      values[spec.name] = spec.default_value;
    }
  }
  if (!method.exactly_one_of.empty()) {
    size_t given = 0;
    std::vector<std::string> quoted;
    for (const std::string& name : method.exactly_one_of) {
      given += values.contains(name) ? 1 : 0;
      quoted.push_back("\"" + name + "\"");
    }
    if (given != 1) {
      return Fail(ErrorKind::kInvalidParams,
                  method.name + ": give exactly one of " + JoinAlternatives(quoted) +
                      (given == 0 ? " (none was given)" : " (not both)"),
                  method.exactly_one_of.front());
    }
  }
  return Args(std::move(values));
}

void CallMethod(PtyService& service, const std::shared_ptr<Owner>& owner, const std::string& method,
                const Json& params, const std::string& request_key, Done done) {
  const MethodSpec* spec = FindMethod(method);
  if (spec == nullptr) {
    return done(Fail(ErrorKind::kInternal, "no contract method named " + method, method));
  }
  Result<Args> args = ValidateParams(*spec, params);
  if (!args) return done(Propagate(args));
  MethodCall call{service, owner, *args, request_key, std::move(done)};
  spec->handler(call);
}

}  // namespace ptybox::runtime
