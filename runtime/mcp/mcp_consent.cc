#include "runtime/mcp/mcp_consent.h"

#include "runtime/mcp/tool_text.h"
#include "runtime/rpc/display_text.h"

namespace ptybox::runtime {
namespace {

constexpr std::string_view kFirstElicitationVersion = "2025-06-18";
constexpr std::string_view kFirstFormModeVersion = "2025-11-25";

// "workspace-write mode; writable: ..." from "Sandbox policy: workspace-write mode; ...".
std::string Allows(const policy::ResolvedPolicy& policy) {
  std::string clause = PolicyClause(policy);
  constexpr std::string_view kPrefix = "Sandbox policy: ";
  if (clause.starts_with(kPrefix)) clause.erase(0, kPrefix.size());
  return clause;
}

std::string Quoted(policy::Mode mode) { return std::string(policy::ToString(mode)); }

// What the model can do next, for every refusal.
std::string NextSteps(policy::Mode current, policy::Mode wanted) {
  return "Continue within " + Quoted(current) +
         " mode (terminals you open keep its limits), or, if the task needs " + Quoted(wanted) +
         ", ask the user to restart `ptybox mcp` with `--mode " + Quoted(wanted) +
         "` in the host's configuration (or to set it in the operator policy).";
}

}  // namespace

bool NeedsConsent(policy::Mode requested, policy::Mode widest_free) {
  return !policy::Within(requested, widest_free);
}

bool CanElicitForm(const Json& client_capabilities, std::string_view protocol_version) {
  // Versions are dates: they compare as strings.
  if (protocol_version < kFirstElicitationVersion) return false;
  if (!client_capabilities.is_object()) return false;
  auto elicitation = client_capabilities.find("elicitation");
  if (elicitation == client_capabilities.end() || !elicitation->is_object()) return false;
  // Form mode: declared, or implied when neither mode is named (the 2025-06-18 shape).
  return elicitation->contains("form") || !elicitation->contains("url");
}

Json ConsentRequestParams(const policy::ResolvedPolicy& current,
                          const policy::ResolvedPolicy& wanted, std::string_view protocol_version) {
  const std::string from = Quoted(current.mode);
  const std::string to = Quoted(wanted.mode);
  // The request and the choice come first, in ptybox's own words; the details after them hold
  // repository-controlled paths, each quoted, escaped and bounded (PolicyClause), so nothing in
  // them can pose as another line of the question.
  std::string message =
      "The AI model asks to widen the sandbox of the terminals it opens from "
      "now on, from " +
      from + " to " + to + ". Accept to allow " + to + " for this connection; decline to keep " +
      from + ".\n";
  message += "Now: " + Allows(current) + "\n";
  message += "Requested: " + Allows(wanted);
  Json params{{"message", std::move(message)},
              {"requestedSchema", Json{{"type", "object"}, {"properties", Json::object()}}}};
  // The mode field exists from 2025-11-25 on (missing means form).
  if (protocol_version >= kFirstFormModeVersion) params["mode"] = "form";
  return params;
}

std::optional<std::string> ConsentRefusal(const Json& response) {
  if (response.contains("error")) {
    const Json& error = response["error"];
    std::string detail = "the host could not ask the user";
    if (error.is_object() && error.contains("message") && error["message"].is_string()) {
      detail += " (" + EscapedText(error["message"].get<std::string>()) + ")";
    }
    return detail;
  }
  auto result = response.find("result");
  if (result == response.end() || !result->is_object()) {
    return std::string("the host's answer had no result");
  }
  auto action = result->find("action");
  if (action == result->end() || !action->is_string()) {
    return std::string("the host's answer named no action");
  }
  const std::string a = action->get<std::string>();
  if (a == "accept") return std::nullopt;
  if (a == "decline") return std::string("the user declined it");
  if (a == "cancel") return std::string("the user dismissed the request without accepting it");
  return "the host answered with an unknown action " + QuotedText(a, 64);
}

Error ConsentInProgress() {
  return Error{ErrorKind::kBusy,
               "the user is still being asked about another mode change: wait for that "
               "policy_set_mode to return, then try again if it is still needed",
               "mode"};
}

Error ConsentUnavailable(policy::Mode current, policy::Mode wanted) {
  return Error{ErrorKind::kPolicyDenied,
               "the sandbox stays in " + Quoted(current) + " mode: widening it to " +
                   Quoted(wanted) +
                   " needs the user's consent, and this MCP host cannot ask the user (it did not "
                   "declare the elicitation capability). " +
                   NextSteps(current, wanted),
               "mode"};
}

Error ConsentRefused(policy::Mode current, policy::Mode wanted, const std::string& why) {
  return Error{ErrorKind::kPolicyDenied,
               "the sandbox stays in " + Quoted(current) + " mode: widening it to " +
                   Quoted(wanted) + " needs the user's consent, and " + why + ". " +
                   NextSteps(current, wanted),
               "mode"};
}

}  // namespace ptybox::runtime
