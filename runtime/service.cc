#include "runtime/service.h"

#include <asio/post.hpp>

#include "common/log.h"
#include "common/random.h"
#include "policy/resolver.h"
#include "runtime/owner.h"

namespace ptybox::runtime {
namespace {

Error NotFound(const std::string& id) {
  return Error{ErrorKind::kNotFound,
               "no session " + id + " is open on this connection (terminal_list shows yours)",
               "sessionId"};
}

}  // namespace

std::string NewSessionId() { return "pty-" + RandomHex(16); }

PtyService::PtyService(asio::io_context& io, backend::ChildReaper& reaper, ServiceOptions options)
    : io_(io), options_(std::move(options)) {
  auto shell = std::make_unique<backend::ShellBackend>(io_, reaper, options_.shell);
  std::string type(shell->type());
  backends_[type] = std::move(shell);
}

PtyService::~PtyService() = default;

policy::ResolveInputs ResolveInputsFrom(const ServiceOptions& options,
                                        std::optional<policy::Mode> requested_mode) {
  policy::ResolveInputs inputs;
  inputs.operator_policy = options.operator_policy;
  inputs.default_operator_policy = options.default_operator_policy;
  inputs.workspace = options.workspace;
  inputs.workspace_from_cli = options.workspace_from_cli;
  inputs.requested_mode = requested_mode;
  return inputs;
}

std::shared_ptr<Owner> PtyService::OpenOwner(std::string label) {
  auto owner = std::make_shared<Owner>(next_owner_++, std::move(label), options_.mode_override);
  std::erase_if(owners_, [](const std::weak_ptr<Owner>& o) { return o.expired(); });
  owners_.push_back(owner);
  return owner;
}

Result<policy::ResolvedPolicy> PtyService::Resolve(const Owner& owner,
                                                   std::optional<policy::Mode> requested) const {
  return policy::Resolve(
      ResolveInputsFrom(options_, requested ? requested : owner.fence().requested_mode()));
}

Result<std::shared_ptr<backend::BackendSession>> PtyService::Find(Owner& owner,
                                                                  const std::string& id) {
  auto it = owner.sessions.find(id);
  // An id of another owner is indistinguishable from an unknown one.
  if (it == owner.sessions.end()) return std::unexpected(NotFound(id));
  return it->second.session;
}

void PtyService::Open(const std::shared_ptr<Owner>& owner, OpenParams params,
                      std::string request_key, std::function<void(Result<OpenResult>)> done) {
  auto fail = [&](Error error) {
    asio::post(io_, [done, error = std::move(error)] { done(std::unexpected(error)); });
  };
  auto backend = backends_.find(params.type);
  if (backend == backends_.end()) {
    fail(Error{ErrorKind::kInvalidParams,
               "unknown session type \"" + params.type + "\"; the available type is \"shell\"",
               "type"});
    return;
  }
  Result<policy::ResolvedPolicy> resolved = Resolve(*owner, std::nullopt);
  if (!resolved) {
    fail(resolved.error());
    return;
  }
  const auto max_sessions = static_cast<size_t>(resolved->limits.max_sessions);
  if (owner->sessions.size() + owner->pending_opens.size() >= max_sessions) {
    fail(Error{ErrorKind::kPolicyDenied,
               "this connection already has " + std::to_string(max_sessions) +
                   " sessions open or opening (limits.maxSessions); close one first",
               "limits.maxSessions"});
    return;
  }
  if (session_count() >= options_.max_total_sessions) {
    fail(Error{ErrorKind::kPolicyDenied,
               "this daemon already runs " + std::to_string(options_.max_total_sessions) +
                   " sessions across all clients (serve --max-sessions); close one first",
               "maxSessions"});
    return;
  }
  Result<std::filesystem::path> cwd = policy::ResolveCwd(*resolved, params.cwd);
  if (!cwd) {
    fail(cwd.error());
    return;
  }

  backend::SpawnSpec spec;
  spec.name = params.name.value_or("");
  spec.policy = *resolved;
  spec.cwd = *cwd;
  spec.rows = params.rows;
  spec.columns = params.columns;
  spec.env = std::move(params.env);
  spec.timeout_ms = params.timeout_ms;

  const policy::Mode mode = resolved->mode;
  owner->fence().BeginSpawn(mode);
  const std::string cwd_text = cwd->string();
  const std::string name = spec.name;
  std::weak_ptr<Owner> weak_owner = owner;
  auto pending = backend->second->Spawn(
      std::move(spec), [this, weak_owner, request_key, done, mode, cwd_text,
                        name](Result<std::shared_ptr<backend::BackendSession>> spawned) {
        std::shared_ptr<Owner> live = weak_owner.lock();
        if (live) live->pending_opens.erase(request_key);
        if (!spawned) {
          if (live) {
            live->fence().EndSpawn(mode, false);
            live->SpawnSettled();
          }
          done(std::unexpected(spawned.error()));
          return;
        }
        std::shared_ptr<backend::BackendSession> session = *spawned;
        if (!live || live->closed) {
          // The client left while the shell started: nobody may own it; close it now. The
          // spawn counts as in progress until its processes are gone, so a disconnect awaits it.
          session->Close("owner disconnected during open", [session, weak_owner, mode](auto) {
            if (std::shared_ptr<Owner> o = weak_owner.lock()) {
              o->fence().EndSpawn(mode, false);
              o->SpawnSettled();
            }
          });
          done(Fail(ErrorKind::kCanceled, "the client disconnected while the session opened"));
          return;
        }
        live->fence().EndSpawn(mode, true);
        OpenResult result;
        result.session_id = NewSessionId();
        result.name = name;
        result.motd = session->motd();
        result.pid = session->pid();
        result.mode = mode;
        result.cwd = cwd_text;
        live->sessions[result.session_id] = Owner::Entry{name, mode, cwd_text, session};
        LogInfo("owner " + std::to_string(live->id()) + " opened " + result.session_id + " (" +
                std::string(policy::ToString(mode)) + ")");
        done(std::move(result));
      });
  // The spawn may already have completed (a synchronous failure is posted, never inline).
  owner->pending_opens[request_key] = std::move(pending);
}

void PtyService::Send(const std::shared_ptr<Owner>& owner, const std::string& session_id,
                      backend::SendRequest request, bool background, std::string request_key,
                      std::function<void(Result<SendOutcome>)> done) {
  Result<std::shared_ptr<backend::BackendSession>> session = Find(*owner, session_id);
  Result<std::shared_ptr<backend::SendOperation>> op =
      session ? (*session)->StartSend(std::move(request))
              : Result<std::shared_ptr<backend::SendOperation>>(std::unexpected(session.error()));
  if (!op) {
    asio::post(io_, [done, error = op.error()] { done(std::unexpected(error)); });
    return;
  }
  if (background) {
    SendOutcome outcome;
    outcome.operation_id = "op-" + RandomHex(8);
    asio::post(io_, [done, outcome] { done(outcome); });
    return;
  }
  owner->foreground_sends[request_key] = session_id;
  std::weak_ptr<Owner> weak_owner = owner;
  (*op)->SetSettledCallback(
      [weak_owner, request_key, done](const Result<backend::SendResult>& result) {
        if (std::shared_ptr<Owner> o = weak_owner.lock()) o->foreground_sends.erase(request_key);
        if (!result) {
          done(std::unexpected(result.error()));
          return;
        }
        SendOutcome outcome;
        outcome.result = *result;
        done(outcome);
      });
}

Result<backend::SendRead> PtyService::Output(Owner& owner, const std::string& session_id) {
  Result<std::shared_ptr<backend::BackendSession>> session = Find(owner, session_id);
  if (!session) return std::unexpected(session.error());
  std::shared_ptr<backend::SendOperation> op = (*session)->last_send();
  if (!op) {
    return Fail(ErrorKind::kNotFound,
                "no send has run on session " + session_id +
                    "; start one with terminal_send {\"background\": true}",
                "sessionId");
  }
  if (op->settled() && !op->result()->has_value()) return std::unexpected(op->result()->error());
  // The session's own limit, as terminal_read uses it: never the policy files as they are now.
  return op->ReadOutput(static_cast<size_t>((*session)->policy().limits.max_read_bytes));
}

Result<bool> PtyService::Cancel(Owner& owner, const std::string& session_id) {
  Result<std::shared_ptr<backend::BackendSession>> session = Find(owner, session_id);
  if (!session) return std::unexpected(session.error());
  std::shared_ptr<backend::SendOperation> op = (*session)->last_send();
  if (!op || op->settled()) return false;
  return op->Cancel();
}

Result<backend::ReadResult> PtyService::Read(Owner& owner, const std::string& session_id,
                                             const backend::ReadRequest& request) {
  Result<std::shared_ptr<backend::BackendSession>> session = Find(owner, session_id);
  if (!session) return std::unexpected(session.error());
  return (*session)->Read(request);
}

Result<void> PtyService::Resize(Owner& owner, const std::string& session_id, int columns,
                                int rows) {
  Result<std::shared_ptr<backend::BackendSession>> session = Find(owner, session_id);
  if (!session) return std::unexpected(session.error());
  return (*session)->Resize(rows, columns);
}

void PtyService::Signal(Owner& owner, const std::string& session_id, int signal,
                        std::function<void(Result<backend::SignalResult>)> done) {
  Result<std::shared_ptr<backend::BackendSession>> session = Find(owner, session_id);
  if (!session) {
    asio::post(io_, [done, error = session.error()] { done(std::unexpected(error)); });
    return;
  }
  (*session)->Signal(signal, std::move(done));
}

Result<SessionInfo> PtyService::Status(Owner& owner, const std::string& session_id) {
  auto it = owner.sessions.find(session_id);
  if (it == owner.sessions.end()) return std::unexpected(NotFound(session_id));
  const Owner::Entry& entry = it->second;
  SessionInfo info;
  info.session_id = session_id;
  info.name = entry.name;
  info.mode = entry.mode;
  info.busy = entry.session->busy();
  info.status = entry.session->Status();
  info.pid = entry.session->pid();
  return info;
}

void PtyService::Close(const std::shared_ptr<Owner>& owner, const std::string& session_id,
                       std::string reason,
                       std::function<void(Result<backend::SessionStatus>)> done) {
  Result<std::shared_ptr<backend::BackendSession>> session = Find(*owner, session_id);
  if (!session) {
    asio::post(io_, [done, error = session.error()] { done(std::unexpected(error)); });
    return;
  }
  std::weak_ptr<Owner> weak_owner = owner;
  (*session)->Close(std::move(reason),
                    [weak_owner, session_id, done](Result<backend::SessionStatus> closed) {
                      if (closed) {
                        if (std::shared_ptr<Owner> o = weak_owner.lock()) {
                          auto entry = o->sessions.find(session_id);
                          if (entry != o->sessions.end()) {
                            const policy::Mode mode = entry->second.mode;
                            o->sessions.erase(entry);
                            o->fence().SessionClosed(mode);
                          }
                        }
                      }
                      done(std::move(closed));
                    });
}

std::vector<SessionInfo> PtyService::List(Owner& owner) {
  std::vector<SessionInfo> list;
  for (const auto& [id, entry] : owner.sessions) {
    if (Result<SessionInfo> info = Status(owner, id)) list.push_back(*info);
  }
  return list;
}

Result<policy::ResolvedPolicy> PtyService::ResolvePolicy(Owner& owner) {
  return Resolve(owner, std::nullopt);
}

Result<policy::Mode> PtyService::SetMode(Owner& owner, policy::Mode mode) {
  // Without sessions or spawns the current mode does not matter: a policy that resolves only
  // with a requested mode (a broken or denied repository file) must not block the request.
  Result<policy::ResolvedPolicy> current = Resolve(owner, std::nullopt);
  if (!current && owner.fence().fenced()) return std::unexpected(current.error());
  // Above the ceiling is policy_denied whatever the fence says.
  Result<policy::ResolvedPolicy> wanted = Resolve(owner, mode);
  if (!wanted) return std::unexpected(wanted.error());
  const policy::Mode current_mode = current ? current->mode : wanted->mode;
  // Check and commit in one step of the reactor: no spawn can start in between.
  if (Result<void> set = owner.fence().SetMode(wanted->mode, current_mode); !set) {
    return std::unexpected(set.error());
  }
  if ((!current || wanted->mode != current->mode) && owner.on_policy_changed) {
    owner.on_policy_changed(*wanted);
  }
  return wanted->mode;
}

bool PtyService::CancelRequest(Owner& owner, const std::string& request_key,
                               const std::string& reason) {
  if (auto open = owner.pending_opens.find(request_key); open != owner.pending_opens.end()) {
    std::shared_ptr<backend::PendingSpawn> pending = open->second;
    pending->Cancel(reason);
    return true;
  }
  if (auto send = owner.foreground_sends.find(request_key); send != owner.foreground_sends.end()) {
    Result<bool> canceled = Cancel(owner, send->second);
    return canceled && *canceled;
  }
  return false;
}

void PtyService::CloseOwner(const std::shared_ptr<Owner>& owner, std::function<void()> done) {
  owner->closed = true;
  // Pending opens end as canceled; their shells are closed by the spawn itself.
  std::map<std::string, std::shared_ptr<backend::PendingSpawn>> pending;
  pending.swap(owner->pending_opens);
  for (auto& [key, spawn] : pending) spawn->Cancel("the client disconnected");
  // Done once every session is closed and every spawn in progress has ended (a canceled one
  // has answered its terminal_open and left nothing running).
  std::vector<std::string> ids;
  for (const auto& [id, entry] : owner->sessions) ids.push_back(id);
  auto remaining = std::make_shared<size_t>(ids.size() + 1);
  auto finish = std::make_shared<std::function<void()>>(std::move(done));
  auto one_done = [remaining, finish] {
    if (--*remaining == 0) (*finish)();
  };
  owner->WhenSpawnsSettled([this, one_done] { asio::post(io_, one_done); });
  for (const std::string& id : ids) {
    Close(owner, id, "owner disconnected",
          [one_done, id](Result<backend::SessionStatus> closed) {
            if (!closed) LogWarn("closing " + id + ": " + closed.error().message);
            one_done();
          });
  }
}

void PtyService::Shutdown(std::function<void()> done) {
  std::vector<std::shared_ptr<Owner>> live;
  for (const std::weak_ptr<Owner>& weak : owners_) {
    if (std::shared_ptr<Owner> owner = weak.lock()) live.push_back(owner);
  }
  if (live.empty()) {
    asio::post(io_, std::move(done));
    return;
  }
  auto remaining = std::make_shared<size_t>(live.size());
  auto finish = std::make_shared<std::function<void()>>(std::move(done));
  for (const std::shared_ptr<Owner>& owner : live) {
    CloseOwner(owner, [remaining, finish] {
      if (--*remaining == 0) (*finish)();
    });
  }
}

void PtyService::Reload() {
  // Policy files are read on every spawn; reloading means checking them now and saying so.
  LogInfo("SIGHUP: policy files will be read again on the next spawn; live sessions are kept");
  for (const std::weak_ptr<Owner>& weak : owners_) {
    if (std::shared_ptr<Owner> owner = weak.lock()) {
      Result<policy::ResolvedPolicy> resolved = Resolve(*owner, std::nullopt);
      if (!resolved) LogWarn("after reload: " + resolved.error().Describe());
    }
  }
}

size_t PtyService::session_count() const {
  size_t count = 0;
  for (const std::weak_ptr<Owner>& weak : owners_) {
    if (std::shared_ptr<Owner> owner = weak.lock()) {
      // Spawns still count while a canceled one is being cleaned up.
      count += owner->sessions.size() + static_cast<size_t>(owner->fence().spawns_in_progress());
    }
  }
  return count;
}

}  // namespace ptybox::runtime
