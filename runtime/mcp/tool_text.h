// The text a model reads for each result of a contract method (the JSON is the contract's):
// for a send the viewport, then why it returned on one line. Each method's entry in
// runtime/methods.cc names its renderer. Names a session or repository chose are quoted,
// escaped and bounded (runtime/rpc/display_text.h).
#pragma once

#include <string>

#include "common/error.h"
#include "policy/policy.h"
#include "runtime/rpc/json_rpc.h"

namespace ptybox::runtime {

std::string RenderOpen(const Json& result);
std::string RenderSend(const Json& result);  // a SendResult, or {operationId}
std::string RenderWait(const Json& result);
std::string RenderOutput(const Json& result);
std::string RenderCancel(const Json& result);
std::string RenderRead(const Json& result);
std::string RenderSignal(const Json& result);
std::string RenderStatus(const Json& result);
std::string RenderClose(const Json& result);
std::string RenderList(const Json& result);
std::string RenderPolicy(const Json& result);
std::string RenderSetMode(const Json& result);
std::string RenderResize(const Json& result);

// "<kind>: <message>" for a tool error the model can act on.
std::string RenderToolError(const Error& error);

// One capability-neutral clause: the mode, the writable roots and the network, e.g.
// "Sandbox policy: workspace-write mode; writable: /ws and a private /tmp; network denied."
std::string PolicyClause(const policy::ResolvedPolicy& policy);

}  // namespace ptybox::runtime
