#include "runtime/mcp/tool_text.h"

#include <algorithm>
#include <cctype>
#include <optional>
#include <string_view>

#include "backend/contract_types.h"
#include "common/join.h"
#include "policy/mode.h"
#include "policy/network_names.h"
#include "runtime/rpc/display_text.h"
#include "runtime/rpc/policy_json.h"

namespace ptybox::runtime {
namespace {

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

// The wait reason a result names, read from the one table of wait reasons; nullopt for a name
// it does not list.
std::optional<backend::WaitReason> WaitReasonNamed(std::string_view name) {
  for (const backend::WaitReasonToken& token : backend::kWaitReasonTokens) {
    if (token.name == name) return token.value;
  }
  return std::nullopt;
}

// The one line after a send's output: why it returned, and what the prompt reported.
std::string SendFooter(const Json& r) {
  const std::string reason = Str(r, "waitReason");
  std::string line = "[waitReason: " + reason;
  if (const std::optional<backend::WaitReason> known = WaitReasonNamed(reason)) {
    switch (*known) {
      case backend::WaitReason::kStdinRead:
        if (r.contains("exitCode") && r["exitCode"].is_number_integer()) {
          line += " | exitCode: " + std::to_string(r["exitCode"].get<int>());
          if (r.contains("cwd") && r["cwd"].is_string()) line += " | cwd: " + Str(r, "cwd");
        } else {
          line += " (the program is waiting for input)";
        }
        break;
      case backend::WaitReason::kInferredIdle:
        line += " (output went quiet; the command may still be running)";
        break;
      case backend::WaitReason::kTimeout:
        line +=
            " (deadline passed; the command may still be running: terminal_signal SIGINT stops "
            "it)";
        break;
      case backend::WaitReason::kPattern: {
        const Json& match = r.value("match", Json::object());
        line += " (the output matched pattern: \"" + Str(match, "text") +
                "\"; the command may still be running)";
        break;
      }
      case backend::WaitReason::kSessionExit:
        line += ": the shell " + StatusText(r.value("sessionStatus", Json::object())) +
                "; open a new terminal";
        break;
    }
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
    // Repository-controlled names: quoted, escaped and bounded (runtime/rpc/display_text.h).
    clause += QuotedList(roots);
    // What the model may do with git there is said as it is: told that .git was not writable
    // while Git for agents was on, a model would not commit.
    clause += policy::GitWriteEnabled()
                  ? " (except policy files, and the hooks and configuration in .git directories: "
                    "git add, commit, branch and tag work there and come back to the repository "
                    "after each command) and a private /tmp"
                  : " (except .git directories and policy files) and a private /tmp";
  }
  clause += "; everything else read-only; network ";
  if (p.contains("networkNames") && p["networkNames"].is_object()) {
    // Network by name: the names come from policy files, so they are quoted like the roots.
    std::vector<std::string> names;
    const Json& allow = p["networkNames"].value("allow", Json::array());
    for (const Json& rule : allow) {
      if (rule.is_object() && rule.contains("pattern") && rule["pattern"].is_string()) {
        names.push_back(rule["pattern"].get<std::string>());
      }
    }
    clause += names.empty() ? std::string("denied.")
                            : "only to " + QuotedList(names) +
                                  " through ptybox's proxy ($HTTPS_PROXY); other names refused.";
    return clause;
  }
  clause += Str(p, "network") == policy::NetworkName(true) ? "allowed." : "denied.";
  return clause;
}

}  // namespace

std::string RenderOpen(const Json& r) {
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

std::string RenderSend(const Json& r) {
  if (r.contains("operationId")) {
    return "Started in the background as " + Str(r, "operationId") +
           "; collect its output with terminal_output.";
  }
  return SendText(r);
}

std::string RenderWait(const Json& r) { return SendText(r); }

std::string RenderOutput(const Json& r) {
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

std::string RenderCancel(const Json& r) {
  return r.value("canceled", false) ? "Canceled the running send; its command got SIGINT."
                                    : "No send was running, nothing was signalled. A command "
                                      "still running after its send returned is stopped with "
                                      "terminal_signal SIGINT.";
}

std::string RenderRead(const Json& r) {
  std::string text = Str(r, "text");
  std::string footer = "[cursor " + std::to_string(r.value("cursor", uint64_t{0})) +
                       ", nextCursor " + std::to_string(r.value("nextCursor", uint64_t{0}));
  footer += r.value("end", false)
                ? ", end: this is the newest output"
                : ", more: pass cursor " + std::to_string(r.value("nextCursor", uint64_t{0}));
  if (r.value("truncated", false)) footer += ", truncated: older output was dropped";
  return WithFooter(text.empty() ? std::string("(nothing retained)") : text, footer + "]");
}

std::string RenderSignal(const Json& r) {
  return "Delivered the signal to foreground process group " + std::to_string(r.value("pgid", 0)) +
         ".";
}

std::string RenderStatus(const Json& r) {
  std::string text = "Shell " + StatusText(r.value("sessionStatus", Json::object()));
  text += r.value("busy", false) ? ", a send is active" : ", idle";
  text += ", mode " + Str(r, "mode");
  if (r.contains("pid") && r["pid"].is_number_integer()) {
    text += ", pid " + std::to_string(r["pid"].get<int64_t>());
  }
  return text + ".";
}

std::string RenderClose(const Json& r) {
  return "Closed: the shell " + StatusText(r.value("sessionStatus", Json::object())) +
         " and every process of the terminal has ended.";
}

std::string RenderList(const Json& r) {
  if (!r.contains("sessions") || !r["sessions"].is_array() || r["sessions"].empty()) {
    return "No terminals are open.";
  }
  std::vector<std::string> lines;
  for (const Json& s : r["sessions"]) {
    std::string line = Str(s, "sessionId");
    if (!Str(s, "name").empty()) line += " \"" + Str(s, "name") + "\"";
    line += ": " + Str(s, "mode") + ", " + StatusText(s.value("sessionStatus", Json::object())) +
            (s.value("busy", false) ? ", busy" : "");
    lines.push_back(std::move(line));
  }
  return Join(lines, "\n");
}

std::string RenderPolicy(const Json& r) {
  return PolicyClauseFromJson(r) + " Ceiling: " + Str(r, "ceiling") +
         "; workspace root: " + QuotedText(Str(r, "workspaceRoot")) + ".";
}

std::string RenderResize(const Json& r) {
  return "Resized the terminal to " + std::to_string(r.value("cols", 0)) + " columns and " +
         std::to_string(r.value("rows", 0)) + " rows.";
}

std::string RenderSetMode(const Json& r) {
  return "Terminals opened from now on run in " + Str(r, "mode") + " mode.";
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
