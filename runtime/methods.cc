#include "runtime/methods.h"

#include <algorithm>
#include <cstdint>

#include "backend/types.h"
#include "runtime/owner.h"

namespace ptybox::runtime {
namespace {

constexpr int64_t kMaxTimeoutMs = 24LL * 3600 * 1000;

using Done = std::function<void(Result<Json>)>;

Result<backend::SendRequest> SendRequestFrom(const Params& p) {
  backend::SendRequest request;
  Result<std::string> input = p.RequiredString("input", kUnboundedString);
  if (!input) return std::unexpected(input.error());
  request.input = std::move(*input);
  Result<std::optional<int64_t>> timeout = p.OptionalInt("timeoutMs", 1, kMaxTimeoutMs);
  if (!timeout) return std::unexpected(timeout.error());
  request.timeout_ms = *timeout;
  Result<std::optional<int64_t>> silence = p.OptionalInt("silenceMs", 1, kMaxTimeoutMs);
  if (!silence) return std::unexpected(silence.error());
  request.silence_ms = *silence;
  return request;
}

Result<OpenParams> OpenParamsFrom(const Params& p) {
  OpenParams open;
  auto type = p.OptionalString("type");
  auto name = p.OptionalString("name", kMaxNameBytes);
  auto cwd = p.OptionalString("cwd");
  auto cols = p.OptionalInt("cols", 2, 1000);
  auto rows = p.OptionalInt("rows", 2, 500);
  auto env = p.StringMap("env");
  auto timeout = p.OptionalInt("timeoutMs", 1, kMaxTimeoutMs);
  for (const Error* e : {type ? nullptr : &type.error(), name ? nullptr : &name.error(),
                         cwd ? nullptr : &cwd.error(), cols ? nullptr : &cols.error(),
                         rows ? nullptr : &rows.error(), env ? nullptr : &env.error(),
                         timeout ? nullptr : &timeout.error()}) {
    if (e != nullptr) return std::unexpected(*e);
  }
  if (*type) open.type = **type;
  open.name = *name;
  open.cwd = *cwd;
  if (*cols) open.columns = static_cast<int>(**cols);
  if (*rows) open.rows = static_cast<int>(**rows);
  open.env = std::move(*env);
  open.timeout_ms = *timeout;
  return open;
}

Result<backend::ReadRequest> ReadRequestFrom(const Params& p) {
  backend::ReadRequest request;
  Result<std::optional<int64_t>> cursor = p.OptionalInt("cursor", 0, INT64_MAX);
  if (!cursor) return std::unexpected(cursor.error());
  if (*cursor) request.cursor = static_cast<uint64_t>(**cursor);
  Result<std::optional<int64_t>> max_bytes = p.OptionalInt("maxBytes", 1, INT64_MAX);
  if (!max_bytes) return std::unexpected(max_bytes.error());
  request.max_bytes = *max_bytes;
  Result<std::optional<std::string>> view = p.OptionalString("view");
  if (!view) return std::unexpected(view.error());
  if (*view && **view == "screen") {
    request.view = backend::ReadView::kScreen;
  } else if (*view && **view != "lines") {
    return Fail(ErrorKind::kInvalidParams,
                "terminal_read: \"view\" must be \"lines\" or \"screen\"", "view");
  }
  return request;
}

}  // namespace

const std::vector<std::string>& ContractMethods() {
  static const std::vector<std::string> kMethods = {
      "terminal_open", "terminal_send",   "terminal_output", "terminal_cancel",
      "terminal_read", "terminal_signal", "terminal_status", "terminal_close",
      "terminal_list", "policy_resolve",  "policy_set_mode", "owner_info", "owner_attach"};
  return kMethods;
}

bool IsContractMethod(std::string_view method) {
  const std::vector<std::string>& all = ContractMethods();
  return std::find(all.begin(), all.end(), method) != all.end();
}

void CallMethod(PtyService& service, const std::shared_ptr<Owner>& owner, const std::string& method,
                const Json& raw, const std::string& request_key, Done done) {
  auto check = [&](std::vector<std::string> allowed) {
    return Params::Check(raw, method, std::move(allowed));
  };
  auto fail = [&](const Error& error) { done(std::unexpected(error)); };

  if (method == "terminal_open") {
    Result<Params> p = check({"type", "name", "cwd", "cols", "rows", "env", "timeoutMs"});
    if (!p) return fail(p.error());
    Result<OpenParams> open = OpenParamsFrom(*p);
    if (!open) return fail(open.error());
    service.Open(owner, std::move(*open), request_key, [done](Result<OpenResult> result) {
      if (!result) return done(std::unexpected(result.error()));
      done(ToJson(*result));
    });
    return;
  }
  if (method == "terminal_send") {
    Result<Params> p = check({"sessionId", "input", "timeoutMs", "silenceMs", "background"});
    if (!p) return fail(p.error());
    Result<std::string> session = p->RequiredString("sessionId");
    if (!session) return fail(session.error());
    Result<backend::SendRequest> request = SendRequestFrom(*p);
    if (!request) return fail(request.error());
    Result<std::optional<bool>> background = p->OptionalBool("background");
    if (!background) return fail(background.error());
    service.Send(owner, *session, std::move(*request), background->value_or(false), request_key,
                 [done](Result<SendOutcome> outcome) {
                   if (!outcome) return done(std::unexpected(outcome.error()));
                   if (outcome->operation_id) {
                     return done(Json{{"operationId", *outcome->operation_id}});
                   }
                   done(ToJson(*outcome->result));
                 });
    return;
  }
  if (method == "terminal_output" || method == "terminal_cancel" || method == "terminal_status") {
    Result<Params> p = check({"sessionId"});
    if (!p) return fail(p.error());
    Result<std::string> session = p->RequiredString("sessionId");
    if (!session) return fail(session.error());
    if (method == "terminal_output") {
      Result<backend::SendRead> read = service.Output(*owner, *session);
      if (!read) return fail(read.error());
      return done(ToJson(*read));
    }
    if (method == "terminal_cancel") {
      Result<bool> canceled = service.Cancel(*owner, *session);
      if (!canceled) return fail(canceled.error());
      return done(Json{{"canceled", *canceled}});
    }
    Result<SessionInfo> info = service.Status(*owner, *session);
    if (!info) return fail(info.error());
    return done(ToJson(*info, /*for_list=*/false));
  }
  if (method == "terminal_read") {
    Result<Params> p = check({"sessionId", "cursor", "maxBytes", "view"});
    if (!p) return fail(p.error());
    Result<std::string> session = p->RequiredString("sessionId");
    if (!session) return fail(session.error());
    Result<backend::ReadRequest> request = ReadRequestFrom(*p);
    if (!request) return fail(request.error());
    Result<backend::ReadResult> read = service.Read(*owner, *session, *request);
    if (!read) return fail(read.error());
    return done(ToJson(*read));
  }
  if (method == "terminal_signal") {
    Result<Params> p = check({"sessionId", "signal"});
    if (!p) return fail(p.error());
    Result<std::string> session = p->RequiredString("sessionId");
    if (!session) return fail(session.error());
    Result<std::string> name = p->RequiredString("signal");
    if (!name) return fail(name.error());
    std::optional<int> signal = backend::ParseClientSignal(*name);
    if (!signal) {
      return fail(Error{ErrorKind::kInvalidParams,
                        "terminal_signal: unknown signal \"" + Abbreviate(*name) +
                            "\" (SIGINT, SIGTERM, SIGKILL, SIGQUIT, SIGHUP, SIGTSTP or SIGCONT)",
                        "signal"});
    }
    service.Signal(*owner, *session, *signal, [done](Result<backend::SignalResult> result) {
      if (!result) return done(std::unexpected(result.error()));
      done(Json{{"delivered", result->delivered}, {"pgid", result->pgid}});
    });
    return;
  }
  if (method == "terminal_close") {
    Result<Params> p = check({"sessionId", "reason"});
    if (!p) return fail(p.error());
    Result<std::string> session = p->RequiredString("sessionId");
    if (!session) return fail(session.error());
    Result<std::optional<std::string>> reason = p->OptionalString("reason", kMaxReasonBytes);
    if (!reason) return fail(reason.error());
    service.Close(owner, *session, reason->value_or("closed by the client"),
                  [done](Result<backend::SessionStatus> status) {
                    if (!status) return done(std::unexpected(status.error()));
                    done(Json{{"sessionStatus", ToJson(*status)}});
                  });
    return;
  }
  if (method == "terminal_list") {
    Result<Params> p = check({});
    if (!p) return fail(p.error());
    Json sessions = Json::array();
    for (const SessionInfo& info : service.List(*owner)) sessions.push_back(ToJson(info, true));
    return done(Json{{"sessions", sessions}});
  }
  if (method == "policy_resolve") {
    Result<Params> p = check({});
    if (!p) return fail(p.error());
    Result<policy::ResolvedPolicy> resolved = service.ResolvePolicy(*owner);
    if (!resolved) return fail(resolved.error());
    return done(PolicyToJson(*resolved));
  }
  if (method == "policy_set_mode") {
    Result<Params> p = check({"mode"});
    if (!p) return fail(p.error());
    Result<std::string> text = p->RequiredString("mode");
    if (!text) return fail(text.error());
    std::optional<policy::Mode> mode = policy::ParseMode(*text);
    if (!mode) {
      return fail(Error{ErrorKind::kInvalidParams,
                        "policy_set_mode: unknown mode \"" + Abbreviate(*text) +
                            "\" (read-only, workspace-write or danger-full-access)",
                        "mode"});
    }
    Result<policy::Mode> set = service.SetMode(*owner, *mode);
    if (!set) return fail(set.error());
    return done(Json{{"mode", std::string(policy::ToString(*set))}});
  }
  if (method == "owner_info") {  // v1.1; the logic is PtyService::Info
    Result<Params> p = check({});
    if (!p) return fail(p.error());
    OwnerInfo info = service.Info(*owner);
    return done(Json{{"ownerToken", info.token}, {"detachGraceMs", info.detach_grace_ms}});
  }
  if (method == "owner_attach") {  // v1.1: it replaces the connection's owner (RpcConnection)
    return fail(Error{ErrorKind::kInvalidParams,
                      "owner_attach is answered by a serve --socket or --stdio connection only",
                      "ownerToken"});
  }
  fail(Error{ErrorKind::kInternal, "no contract method named " + method, method});
}

}  // namespace ptybox::runtime
