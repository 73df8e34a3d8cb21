#include "runtime/service.h"

#include <asio/post.hpp>
#include <asio/steady_timer.hpp>

#include "backend/git_copy_back.h"
#include "common/count_text.h"
#include "common/log.h"
#include "common/propagate.h"
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

// Joins `count` asynchronous completions: returns the function each calls once; `done` runs on
// the last call (at once when `count` is 0).
std::function<void()> Countdown(size_t count, std::function<void()> done) {
  if (count == 0) {
    done();
    return [] {};
  }
  auto remaining = std::make_shared<size_t>(count);
  auto finish = std::make_shared<std::function<void()>>(std::move(done));
  return [remaining, finish] {
    if (--*remaining == 0) (*finish)();
  };
}

// The reactor's steady clock: the wait ends with the timer, which the handle owns.
StartTimer SteadyTimers(asio::io_context& io) {
  return [&io](std::chrono::milliseconds delay, std::function<void()> fire) {
    auto timer = std::make_shared<asio::steady_timer>(io, delay);
    timer->async_wait([fire = std::move(fire)](const std::error_code& ec) {
      if (!ec) fire();
    });
    return std::shared_ptr<void>(std::move(timer));
  };
}

}  // namespace

std::string NewSessionId() { return "pty-" + RandomHex(16); }

struct PtyService::OpenInFlight {
  std::shared_ptr<OpenTicket> ticket;
  std::function<void(Result<OpenResult>)> done;
  std::string cwd;
  int columns = kDefaultColumns;
  int rows = kDefaultRows;
  std::shared_ptr<SessionTap> tap;
  std::shared_ptr<std::string> network_session;  // the audit's session id for proxy events
  std::shared_ptr<WatchHub> hub;  // the session's output tap: its recording and its watchers
  std::shared_ptr<const policy::ResolvedPolicy> policy;  // as the audit log records it
};

PtyService::PtyService(asio::io_context& io, ServiceOptions options,
                       const MakeBackends& make_backends, StartTimer start_timer)
    : io_(io),
      options_(std::move(options)),
      start_timer_(start_timer ? std::move(start_timer) : SteadyTimers(io)),
      audit_(options_.audit ? options_.audit : NoAudit()) {
  backends_ = make_backends([this]() -> size_t {
    const size_t used = session_count();
    return used >= options_.max_total_sessions ? 0 : options_.max_total_sessions - used;
  });
}

PtyService::~PtyService() {
  // No watcher's sink outlives the service that forgets its watch.
  for (auto& [id, hub] : hubs_) hub->EndAll(WatchEnd::kOwnerGone);
}

policy::ResolveInputs ResolveInputsFrom(const ServiceOptions& options,
                                        std::optional<policy::Mode> requested_mode) {
  policy::ResolveInputs inputs;
  inputs.operator_policy = options.operator_policy;
  inputs.default_operator_policy = options.default_operator_policy;
  inputs.workspace = options.workspace;
  inputs.workspace_from_cli = options.workspace_from_cli;
  inputs.requested_mode = requested_mode;
  inputs.command_line = options.command_line;
  return inputs;
}

std::shared_ptr<Owner> PtyService::OpenOwner(std::string label) {
  // The token is a secret of 256 random bits: never logged, never listed (contract v1.1).
  auto owner = std::make_shared<Owner>(next_owner_++, std::move(label), options_.mode_override,
                                       "owner-" + RandomHex(32));
  std::erase_if(owners_, [](const std::weak_ptr<Owner>& o) { return o.expired(); });
  owners_.push_back(owner);
  audit_->OwnerOpened(owner->id(), owner->label());
  return owner;
}

Result<policy::ResolvedPolicy> PtyService::Resolve(Owner& owner,
                                                   std::optional<policy::Mode> requested) const {
  Result<policy::ResolvedPolicy> resolved = policy::Resolve(
      ResolveInputsFrom(options_, requested ? requested : owner.fence().requested_mode()));
  // The grace comes from the operator's file or the default alone (a repository file may not
  // set it), and is fixed here for the owner's life: see Owner::detach_grace_ms.
  if (resolved) owner.FixDetachGrace(resolved->limits.detach_grace_ms);
  return resolved;
}

Result<std::shared_ptr<backend::BackendSession>> PtyService::Find(Owner& owner,
                                                                  const std::string& id) {
  const Owner::OwnedSession* entry = owner.FindSession(id);
  // An id of another owner is indistinguishable from an unknown one.
  if (!entry) return std::unexpected(NotFound(id));
  return entry->session;
}

std::string PtyService::AvailableTypes() const {
  if (backends_.empty()) return "no session type is available";
  std::string types;
  for (const auto& [type, backend] : backends_) {
    types += (types.empty() ? "\"" : ", \"") + type + "\"";
  }
  return (backends_.size() == 1 ? "the available type is " : "the available types are ") + types;
}

Result<backend::Backend*> PtyService::Admit(Owner& owner, OpenParams& params,
                                            backend::SpawnSpec& spec, OpenInFlight& open) {
  // A request read before the connection closed, or after the daemon began to stop, opens
  // nothing: nobody would own the shell, and the shutdown would not await it.
  if (stopping_ || owner.closed()) {
    return Fail(ErrorKind::kClosed,
                stopping_ ? "the daemon is shutting down; open the session on a running daemon"
                          : "this connection is closing; open the session on a new connection");
  }
  auto backend = backends_.find(params.type);
  if (backend == backends_.end()) {
    return Fail(ErrorKind::kInvalidParams,
                "unknown session type \"" + params.type + "\"; " + AvailableTypes(), "type");
  }
  Result<policy::ResolvedPolicy> resolved = Resolve(owner, std::nullopt);
  if (!resolved) return Propagate(resolved);
  const auto max_sessions = static_cast<size_t>(resolved->limits.max_sessions);
  if (owner.open_and_opening() >= max_sessions) {
    return Fail(ErrorKind::kPolicyDenied,
                "this connection already has " + std::to_string(max_sessions) +
                    " sessions open or opening (limits.maxSessions); close one first",
                "limits.maxSessions");
  }
  if (session_count() >= options_.max_total_sessions) {
    return Fail(ErrorKind::kPolicyDenied,
                "this daemon already runs " + std::to_string(options_.max_total_sessions) +
                    " sessions across all clients (serve --max-sessions); close one first",
                "maxSessions");
  }
  Result<std::filesystem::path> cwd = policy::ResolveCwd(*resolved, params.cwd);
  if (!cwd) return Propagate(cwd);
  Result<std::shared_ptr<OpenTicket>> ticket =
      owner.BeginOpen(params.name.value_or(""), resolved->mode);
  if (!ticket) return Propagate(ticket);

  open.ticket = *ticket;
  open.cwd = cwd->string();
  open.columns = params.columns;
  open.rows = params.rows;
  open.tap = audit_->SpawnStarting(params.columns, params.rows);
  open.policy = std::make_shared<const policy::ResolvedPolicy>(*resolved);
  spec.name = open.ticket->name();
  spec.policy = std::move(*resolved);
  spec.cwd = std::move(*cwd);
  spec.rows = params.rows;
  spec.columns = params.columns;
  spec.env = std::move(params.env);
  spec.timeout_ms = params.timeout_ms;
  // The session id is known once the spawn is published (OnSpawned fills it in).
  open.network_session = std::make_shared<std::string>();
  spec.network_events.refused = [audit = audit_, id = owner.id(), sid = open.network_session](
                                    const backend::proxy::ProxyRefusal& refusal) {
    audit->NetworkDenied(id, *sid, refusal);
  };
  spec.network_events.stopped = [audit = audit_, id = owner.id(), sid = open.network_session](
                                    const backend::proxy::ProxyTotals& totals) {
    audit->NetworkClosed(id, *sid, totals);
  };
  open.hub = std::make_shared<WatchHub>(open.tap);
  spec.output_tap = [hub = open.hub](std::string_view bytes) { hub->Output(bytes); };
  return backend->second.get();
}

void PtyService::Open(const std::shared_ptr<Owner>& owner, OpenParams params,
                      std::string request_key, std::function<void(Result<OpenResult>)> done) {
  done = [audit = audit_, id = owner->id(), done = std::move(done)](Result<OpenResult> result) {
    if (!result) audit->Refused(id, "terminal_open", "", result.error());
    done(std::move(result));
  };
  auto open = std::make_shared<OpenInFlight>();
  backend::SpawnSpec spec;
  Result<backend::Backend*> backend = Admit(*owner, params, spec, *open);
  if (!backend) {
    asio::post(io_, [done, error = backend.error()] { done(std::unexpected(error)); });
    return;
  }
  open->done = std::move(done);
  std::shared_ptr<OpenTicket> ticket = open->ticket;
  std::shared_ptr<backend::PendingSpawn> pending = (*backend)->Spawn(
      std::move(spec), [this, open](Result<std::shared_ptr<backend::BackendSession>> spawned) {
        OnSpawned(*open, std::move(spawned));
      });
  ticket->Track(request_key, std::move(pending));
}

void PtyService::OnSpawned(OpenInFlight& open,
                           Result<std::shared_ptr<backend::BackendSession>> spawned) {
  std::shared_ptr<Owner> live = open.ticket->Settle();
  if (!spawned) {
    open.ticket->End();  // a failed open gives its name back
    open.done(Propagate(spawned));
    return;
  }
  std::shared_ptr<backend::BackendSession> session = *spawned;
  if (!live) {
    // The client left while the shell started: nobody may own it; close it now. The spawn
    // counts as in progress until its processes are gone, so a disconnect awaits it.
    session->Close("owner disconnected during open",
                   [session, ticket = open.ticket](auto) { ticket->End(); });
    open.done(Fail(ErrorKind::kCanceled, "the client disconnected while the session opened"));
    return;
  }
  OpenResult result;
  result.session_id = NewSessionId();
  result.name = open.ticket->name();
  result.motd = session->motd();
  result.pid = session->pid();
  result.mode = open.ticket->mode();
  result.cwd = open.cwd;
  open.ticket->Publish(result.session_id, session, open.cwd);
  if (open.network_session) *open.network_session = result.session_id;
  hubs_[result.session_id] = open.hub;
  LogInfo("owner " + std::to_string(live->id()) + " opened " + result.session_id + " (" +
          std::string(policy::ToString(result.mode)) + ")");
  audit_->SessionOpened(AuditOpened{live->id(), result.session_id, result.name, open.cwd,
                                    result.pid, open.columns, open.rows},
                        *open.policy, open.tap);
  open.done(std::move(result));
}

void PtyService::Send(const std::shared_ptr<Owner>& owner, const std::string& session_id,
                      backend::SendRequest request, bool background, std::string request_key,
                      std::function<void(Result<SendOutcome>)> done) {
  Result<std::shared_ptr<backend::BackendSession>> session = Find(*owner, session_id);
  const bool wait = request.wait;
  using Started = Result<std::shared_ptr<backend::SendOperation>>;
  // A person took the session over (`ptybox attach --write`): their keystrokes go to it,
  // never interleaved with a send.
  Started op = !session ? Started(Propagate(session))
               : holds_.contains(session_id)
                   ? Started(Fail(ErrorKind::kBusy,
                                  "a person holds this session (ptybox attach "
                                  "--write) and types into it; retry once they "
                                  "detach (terminal_status shows busy until then)",
                                  "sessionId"))
                   : (*session)->StartSend(std::move(request));
  if (!op) {
    audit_->Refused(owner->id(), wait ? "terminal_wait" : "terminal_send", session_id, op.error());
    asio::post(io_, [done, error = op.error()] { done(std::unexpected(error)); });
    return;
  }
  // Operations a session replaced are no longer readable: forgotten.
  owner->ForgetReplacedOperations();
  // The typed bytes as the operation holds them: named keys are encoded by now, so a send made
  // of `keys` is audited and recorded like one made of `input`.
  if (wait) {
    audit_->WaitStarted(owner->id(), session_id);
  } else {
    audit_->SendStarted(owner->id(), session_id, (*op)->input(), background);
  }
  auto audit_settled = [audit = audit_, id = owner->id(),
                        session_id](const Result<backend::SendResult>& result) {
    audit->SendSettled(id, session_id, result);
  };
  // Workspace-write: the session's git work goes back to the host's repositories once a send
  // settles (off the reactor), before a foreground send is answered.
  std::weak_ptr<backend::SessionGits> gits;
  if (session) gits = (*session)->gits();
  auto copy_back = [this, gits](std::function<void()> then) {
    std::shared_ptr<backend::SessionGits> held = gits.lock();
    if (!held || !held->any) {  // no private git directory (the default): nothing to copy
      then();
      return;
    }
    const uint64_t waiter = next_copy_back_++;
    copy_back_waiters_.emplace(waiter, std::move(then));
    auto resume = [this, waiter] {
      auto it = copy_back_waiters_.find(waiter);
      if (it == copy_back_waiters_.end()) return;
      std::function<void()> next = std::move(it->second);
      copy_back_waiters_.erase(it);
      next();
    };
    Result<void> started = git_copy_back_.Run<int>(
        "copies the session's git work back",
        [held] {
          backend::CopyBackSessionGits(*held, /*last=*/false);
          return 0;
        },
        [resume](int) { resume(); });
    if (!started) {
      LogWarn(started.error().message + "; the send's git work is copied back at the next one");
      resume();
    }
  };
  if (background) {
    (*op)->SetSettledCallback([audit_settled, copy_back](const Result<backend::SendResult>& r) {
      audit_settled(r);
      copy_back([] {});
    });
    SendOutcome outcome;
    outcome.operation_id = owner->AddOperation(session_id, *op);
    asio::post(io_, [done, outcome] { done(outcome); });
    return;
  }
  std::weak_ptr<Owner> weak_owner = owner;
  const uint64_t generation = owner->TrackForegroundSend(request_key, session_id);
  (*op)->SetSettledCallback([weak_owner, request_key, generation, done, audit_settled,
                             copy_back](const Result<backend::SendResult>& result) {
    audit_settled(result);
    if (std::shared_ptr<Owner> o = weak_owner.lock()) {
      o->ForegroundSendSettled(request_key, generation);
    }
    if (!result) {
      done(Propagate(result));
      return;
    }
    SendOutcome outcome;
    outcome.result = *result;
    copy_back([done, outcome] { done(outcome); });
  });
}

Result<backend::SendRead> PtyService::Output(Owner& owner, const std::string& session_id) {
  Result<std::shared_ptr<backend::BackendSession>> session = Find(owner, session_id);
  if (!session) return Propagate(session);
  std::shared_ptr<backend::SendOperation> op = (*session)->last_send();
  if (!op) {
    return Fail(ErrorKind::kNotFound,
                "no send has run on session " + session_id +
                    "; start one with terminal_send {\"background\": true}",
                "sessionId");
  }
  if (op->settled() && !op->result()->has_value()) return Propagate(*op->result());
  // The session's own limit, as terminal_read uses it: never the policy files as they are now.
  return op->ReadOutput(static_cast<size_t>((*session)->policy().limits.max_read_bytes));
}

Result<bool> PtyService::Cancel(Owner& owner, const std::string& session_id) {
  Result<std::shared_ptr<backend::BackendSession>> session = Find(owner, session_id);
  if (!session) {
    audit_->Refused(owner.id(), "terminal_cancel", session_id, session.error());
    return Propagate(session);
  }
  std::shared_ptr<backend::SendOperation> op = (*session)->last_send();
  const bool canceled = op && !op->settled() && op->Cancel();
  audit_->Canceled(owner.id(), session_id, canceled);
  return canceled;
}

Result<backend::ReadResult> PtyService::Read(Owner& owner, const std::string& session_id,
                                             const backend::ReadRequest& request) {
  Result<std::shared_ptr<backend::BackendSession>> session = Find(owner, session_id);
  if (!session) return Propagate(session);
  return (*session)->Read(request);
}

Result<void> PtyService::Resize(Owner& owner, const std::string& session_id, int columns,
                                int rows) {
  Result<std::shared_ptr<backend::BackendSession>> session = Find(owner, session_id);
  if (!session) return Propagate(session);
  Result<void> resized = (*session)->Resize(rows, columns);
  if (!resized) return resized;
  audit_->Resized(owner.id(), session_id, columns, rows);  // and the recording's "r"
  // Watchers redraw at the new size from the model's screen (docs/protocol.md).
  if (auto hub = hubs_.find(session_id); hub != hubs_.end() && hub->second->size() > 0) {
    if (std::optional<backend::ScreenSnapshot> screen = (*session)->Snapshot()) {
      hub->second->Resized(*screen);
    }
  }
  return resized;
}

void PtyService::Signal(Owner& owner, const std::string& session_id, int signal,
                        std::function<void(Result<backend::SignalResult>)> done) {
  done = [audit = audit_, id = owner.id(), session_id, signal,
          done = std::move(done)](Result<backend::SignalResult> result) {
    audit->Signaled(id, session_id, signal, result);
    done(std::move(result));
  };
  Result<std::shared_ptr<backend::BackendSession>> session = Find(owner, session_id);
  if (!session) {
    asio::post(io_, [done, error = session.error()] { done(std::unexpected(error)); });
    return;
  }
  (*session)->Signal(signal, std::move(done));
}

Result<SessionInfo> PtyService::Status(Owner& owner, const std::string& session_id) {
  const Owner::OwnedSession* entry = owner.FindSession(session_id);
  if (!entry) return std::unexpected(NotFound(session_id));
  SessionInfo info;
  info.session_id = session_id;
  info.name = entry->name;
  info.mode = entry->mode;
  // A session a person holds is busy for its agent too.
  info.busy = entry->session->busy() || holds_.contains(session_id);
  info.status = entry->session->Status();
  info.pid = entry->session->pid();
  return info;
}

void PtyService::Close(const std::shared_ptr<Owner>& owner, const std::string& session_id,
                       std::string reason,
                       std::function<void(Result<backend::SessionStatus>)> done) {
  done = [audit = audit_, id = owner->id(), session_id, reason,
          done = std::move(done)](Result<backend::SessionStatus> result) {
    audit->Closed(id, session_id, reason, result);
    done(std::move(result));
  };
  Result<std::shared_ptr<backend::BackendSession>> session = Find(*owner, session_id);
  if (!session) {
    asio::post(io_, [done, error = session.error()] { done(std::unexpected(error)); });
    return;
  }
  std::weak_ptr<Owner> weak_owner = owner;
  (*session)->Close(std::move(reason),
                    [this, weak_owner, session_id, done](Result<backend::SessionStatus> closed) {
                      // A failed close leaves the session listed: close may be retried.
                      if (std::shared_ptr<Owner> o = weak_owner.lock(); o && closed)
                        o->SessionClosed(session_id);
                      if (closed) {
                        // Its watchers are told, and their watches forgotten.
                        if (auto hub = hubs_.find(session_id); hub != hubs_.end()) {
                          std::shared_ptr<WatchHub> ending = std::move(hub->second);
                          hubs_.erase(hub);
                          ending->EndAll(WatchEnd::kClosed);
                        }
                      }
                      done(std::move(closed));
                    });
}

std::vector<SessionInfo> PtyService::List(Owner& owner) {
  std::vector<SessionInfo> list;
  for (const auto& [id, entry] : owner.sessions()) {
    if (Result<SessionInfo> info = Status(owner, id)) list.push_back(*info);
  }
  return list;
}

std::shared_ptr<Owner> PtyService::OwnerWithToken(const std::string& token) const {
  // Every owner's token is compared, each in constant time: no early exit tells a guess apart.
  std::shared_ptr<Owner> found;
  for (const std::weak_ptr<Owner>& weak : owners_) {
    std::shared_ptr<Owner> owner = weak.lock();
    if (owner && !owner->token().empty() && SecretEquals(owner->token(), token) && !found) {
      found = owner;
    }
  }
  if (found && found->closed()) return nullptr;
  return found;
}

namespace {

Error NoOwnerWithToken() {
  return Error{ErrorKind::kNotFound,
               "no owner of this daemon has this token (wrong token file, or its owner closed); "
               "check --token-file or --workspace",
               "ownerToken"};
}

}  // namespace

Result<std::vector<SessionInfo>> PtyService::ListByToken(const std::string& token) {
  std::shared_ptr<Owner> owner = OwnerWithToken(token);
  if (!owner) return std::unexpected(NoOwnerWithToken());
  return List(*owner);
}

Result<WatchStart> PtyService::Watch(
    Owner& watcher, const std::string& session_id, const std::optional<std::string>& token,
    const std::function<WatchHub::Watcher(uint64_t watch_id)>& make_sink) {
  std::shared_ptr<Owner> target;
  if (token) {
    target = OwnerWithToken(*token);
    if (!target) return std::unexpected(NoOwnerWithToken());
  } else {
    target = watcher.shared_from_this();
  }
  Result<SessionInfo> info = Status(*target, session_id);
  if (!info) return Propagate(info);
  auto hub = hubs_.find(session_id);
  const Owner::OwnedSession* entry = target->FindSession(session_id);
  std::optional<backend::ScreenSnapshot> screen = entry->session->Snapshot();
  if (hub == hubs_.end() || !screen) {
    return Fail(ErrorKind::kNotFound,
                "session " + session_id + " has no screen to watch (its type keeps none)",
                "sessionId");
  }
  if (hub->second->full()) {
    return Fail(ErrorKind::kBusy,
                "session " + session_id + " already has " + std::to_string(kMaxWatchersPerSession) +
                    " watchers; detach one of them (terminal_unwatch) and retry",
                "sessionId");
  }
  const uint64_t watch_id = next_watch_++;
  WatchHub::Watcher sink = make_sink(watch_id);
  // The watcher's own end first tells the service (forgotten, audited), then the connection.
  sink.on_end = [this, watch_id, on_end = std::move(sink.on_end)](WatchEnd end) {
    WatchEnded(watch_id, end);
    if (on_end) on_end(end);
  };
  hub->second->Add(watch_id, std::move(sink));
  watches_[watch_id] = WatchEntry{watcher.id(), target->id(), session_id};
  audit_->Watched(watcher.id(), target->id(), session_id, "session_watched", "");
  LogInfo("owner " + std::to_string(watcher.id()) + " watches " + session_id + " of owner " +
          std::to_string(target->id()));
  WatchStart start;
  start.watch_id = watch_id;
  start.session = std::move(*info);
  start.screen = std::move(*screen);
  return start;
}

void PtyService::WatchEnded(uint64_t watch_id, WatchEnd end) {
  auto it = watches_.find(watch_id);
  if (it == watches_.end()) return;
  // A takeover ends with its watch.
  if (auto held = holds_.find(it->second.session_id);
      held != holds_.end() && held->second == watch_id) {
    holds_.erase(held);
    audit_->Watched(it->second.watcher, it->second.session_owner, it->second.session_id,
                    "session_released", WatchEndName(end));
  }
  audit_->Watched(it->second.watcher, it->second.session_owner, it->second.session_id,
                  "session_unwatched", WatchEndName(end));
  watches_.erase(it);
}

Result<void> PtyService::Unwatch(Owner& watcher, uint64_t watch_id) {
  auto it = watches_.find(watch_id);
  if (it == watches_.end() || it->second.watcher != watcher.id()) {
    return Fail(ErrorKind::kNotFound,
                "no watch " + std::to_string(watch_id) + " of this connection is active",
                "watchId");
  }
  if (auto hub = hubs_.find(it->second.session_id); hub != hubs_.end()) {
    hub->second->Remove(watch_id);
  }
  WatchEnded(watch_id, WatchEnd::kUnwatched);
  return {};
}

Result<PtyService::WatchEntry*> PtyService::OwnWatch(Owner& watcher, uint64_t watch_id) {
  auto it = watches_.find(watch_id);
  if (it == watches_.end() || it->second.watcher != watcher.id()) {
    return Fail(ErrorKind::kNotFound,
                "no watch " + std::to_string(watch_id) + " of this connection is active",
                "watchId");
  }
  return &it->second;
}

Result<void> PtyService::TakeOver(Owner& watcher, uint64_t watch_id) {
  Result<WatchEntry*> watch = OwnWatch(watcher, watch_id);
  if (!watch) return Propagate(watch);
  const std::string& session_id = (*watch)->session_id;
  if (auto held = holds_.find(session_id); held != holds_.end()) {
    if (held->second == watch_id) return {};
    return Fail(ErrorKind::kBusy, "another person holds session " + session_id + " already",
                "watchId");
  }
  auto hub = hubs_.find(session_id);
  std::shared_ptr<backend::BackendSession> session;
  for (const std::weak_ptr<Owner>& weak : owners_) {
    std::shared_ptr<Owner> owner = weak.lock();
    if (owner && owner->id() == (*watch)->session_owner) {
      if (const Owner::OwnedSession* entry = owner->FindSession(session_id)) {
        session = entry->session;
      }
    }
  }
  if (!session || hub == hubs_.end()) {
    return Fail(ErrorKind::kClosed, "session " + session_id + " is closed", "watchId");
  }
  // The agent's send in flight keeps the terminal until it settles: never two writers
  // inside one send.
  if (session->busy()) {
    return Fail(ErrorKind::kBusy,
                "the agent's send is running on session " + session_id +
                    "; take over once it settled (the screen shows when the prompt is back)",
                "watchId");
  }
  holds_[session_id] = watch_id;
  audit_->Watched(watcher.id(), (*watch)->session_owner, session_id, "session_taken_over", "");
  LogInfo("owner " + std::to_string(watcher.id()) + " took over " + session_id);
  return {};
}

Result<void> PtyService::Release(Owner& watcher, uint64_t watch_id) {
  Result<WatchEntry*> watch = OwnWatch(watcher, watch_id);
  if (!watch) return Propagate(watch);
  auto held = holds_.find((*watch)->session_id);
  if (held == holds_.end() || held->second != watch_id) return {};
  holds_.erase(held);
  audit_->Watched(watcher.id(), (*watch)->session_owner, (*watch)->session_id, "session_released",
                  "released");
  return {};
}

Result<void> PtyService::Type(Owner& watcher, uint64_t watch_id, std::string bytes) {
  Result<WatchEntry*> watch = OwnWatch(watcher, watch_id);
  if (!watch) return Propagate(watch);
  const std::string session_id = (*watch)->session_id;
  auto held = holds_.find(session_id);
  if (held == holds_.end() || held->second != watch_id) {
    return Fail(ErrorKind::kBusy,
                "this watch does not hold session " + session_id +
                    "; take it over first (terminal_takeover)",
                "watchId");
  }
  for (const std::weak_ptr<Owner>& weak : owners_) {
    std::shared_ptr<Owner> owner = weak.lock();
    if (!owner || owner->id() != (*watch)->session_owner) continue;
    const Owner::OwnedSession* entry = owner->FindSession(session_id);
    if (!entry) break;
    audit_->Typed(watcher.id(), (*watch)->session_owner, session_id, bytes);
    return entry->session->WriteTyped(std::move(bytes));
  }
  return Fail(ErrorKind::kClosed, "session " + session_id + " is closed", "watchId");
}

Result<policy::ResolvedPolicy> PtyService::ResolvePolicy(Owner& owner) {
  return Resolve(owner, std::nullopt);
}

Result<policy::Mode> PtyService::SetMode(Owner& owner, policy::Mode mode) {
  Result<policy::Mode> set = SetModeChecked(owner, mode);
  if (!set) audit_->Refused(owner.id(), "policy_set_mode", "", set.error());
  return set;
}

Result<policy::Mode> PtyService::SetModeChecked(Owner& owner, policy::Mode mode) {
  // Without sessions or spawns the current mode does not matter: a policy that resolves only
  // with a requested mode (a broken or denied repository file) must not block the request.
  Result<policy::ResolvedPolicy> current = Resolve(owner, std::nullopt);
  if (!current && owner.fence().fenced()) return Propagate(current);
  // Above the ceiling is policy_denied whatever the fence says.
  Result<policy::ResolvedPolicy> wanted = Resolve(owner, mode);
  if (!wanted) return Propagate(wanted);
  const policy::Mode current_mode = current ? current->mode : wanted->mode;
  // Check and commit in one step of the reactor: no spawn can start in between.
  if (Result<void> set = owner.SetMode(wanted->mode, current_mode); !set) {
    return Propagate(set);
  }
  if (!current || wanted->mode != current->mode) {
    audit_->ModeChanged(owner.id(), current ? std::optional(current->mode) : std::nullopt,
                        wanted->mode);
  }
  if ((!current || wanted->mode != current->mode) && owner.on_policy_changed) {
    owner.on_policy_changed(*wanted);
  }
  return wanted->mode;
}

bool PtyService::CancelRequest(Owner& owner, const std::string& request_key,
                               const std::string& reason) {
  if (owner.CancelOpen(request_key, reason)) return true;
  if (std::optional<std::string> session_id = owner.ForegroundSend(request_key)) {
    Result<bool> canceled = Cancel(owner, *session_id);
    return canceled && *canceled;
  }
  return false;
}

void PtyService::CloseOwner(const std::shared_ptr<Owner>& owner, std::function<void()> done) {
  // Audited once: a stdio client's owner is closed at its end of input and again by the
  // shutdown that follows.
  done = [audit = audit_, id = owner->id(), first = !owner->closed(), done = std::move(done)] {
    if (first) audit->OwnerClosed(id);
    done();
  };
  owner->MarkClosed();
  // Opens in progress end as canceled; their shells are closed by the spawn itself.
  owner->CancelOpens("the client disconnected");
  // Done once every session is closed and every spawn in progress has ended (a canceled one
  // has answered its terminal_open and left nothing running).
  std::vector<std::string> ids;
  for (const auto& [id, entry] : owner->sessions()) ids.push_back(id);
  std::function<void()> one_done = Countdown(ids.size() + 1, std::move(done));
  owner->WhenSpawnsSettled([this, one_done] { asio::post(io_, one_done); });
  for (const std::string& id : ids) {
    Close(owner, id, "owner disconnected", [one_done, id](Result<backend::SessionStatus> closed) {
      if (!closed) LogWarn("closing " + id + ": " + closed.error().message);
      one_done();
    });
  }
}

void PtyService::Shutdown(std::function<void()> done) {
  stopping_ = true;
  // Then the backends' pre-started shells: nothing of the daemon outlives it.
  done = [this, done = std::move(done)] {
    std::function<void()> one_done = Countdown(backends_.size(), std::move(done));
    for (auto& [type, backend] : backends_) backend->Shutdown(one_done);
  };
  std::vector<std::shared_ptr<Owner>> live;
  for (const std::weak_ptr<Owner>& weak : owners_) {
    if (std::shared_ptr<Owner> owner = weak.lock()) live.push_back(owner);
  }
  // Detached owners close with the rest; their grace timers stop.
  detached_.clear();
  if (live.empty()) {
    asio::post(io_, std::move(done));
    return;
  }
  std::function<void()> one_done = Countdown(live.size(), std::move(done));
  for (const std::shared_ptr<Owner>& owner : live) {
    // Held until closed: a detached owner has no connection that keeps it (and its sessions).
    CloseOwner(owner, [one_done, owner] { one_done(); });
  }
}

bool PtyService::FixOperatorDetachGrace(Owner& owner) const {
  if (owner.detach_grace_ms()) return true;
  Result<int64_t> grace =
      policy::ReadOperatorDetachGrace(ResolveInputsFrom(options_, std::nullopt));
  if (!grace) return false;
  owner.FixDetachGrace(*grace);
  return true;
}

bool PtyService::DetachOwner(const std::shared_ptr<Owner>& owner) {
  if (!owner->may_detach || owner->closed()) return false;
  // Fixed when the owner's policy first resolved; only an owner whose policy never resolved
  // (no open, no owner_info) reads it now.
  if (!FixOperatorDetachGrace(*owner) || *owner->detach_grace_ms() <= 0) return false;
  const int64_t grace_ms = *owner->detach_grace_ms();
  // An open in flight answers nobody: canceled as on a disconnect (its shell is closed).
  owner->Detach("the client disconnected");
  const uint64_t id = owner->id();
  detached_[id] = Detached{
      owner, start_timer_(std::chrono::milliseconds(grace_ms), [this, id] { ExpireDetached(id); })};
  LogInfo("owner " + std::to_string(id) +
          " detached: " + text::CountText(owner->sessions().size(), "session", "sessions") +
          " keep running for " + std::to_string(grace_ms) + " ms awaiting owner_attach");
  return true;
}

void PtyService::ExpireDetached(uint64_t owner_id) {
  auto it = detached_.find(owner_id);
  if (it == detached_.end()) return;
  std::shared_ptr<Owner> expired = it->second.owner;
  LogInfo("owner " + std::to_string(owner_id) +
          ": detach grace expired with no owner_attach; closing " +
          text::CountText(expired->sessions().size(), "session", "sessions"));
  // This timer is destroyed on a later turn, never inside its own handler.
  asio::post(io_, [timer = std::move(it->second.expiry)] {});
  detached_.erase(it);
  // Exactly as a disconnect: every session closed, awaited.
  CloseOwner(expired, [expired] {
    LogInfo("owner " + std::to_string(expired->id()) + ": closed after its grace");
  });
}

Result<AttachResult> PtyService::AttachOwner(const std::string& token) {
  // Every owner's token is compared, each in constant time: no early exit tells a guess apart.
  std::shared_ptr<Owner> found;
  for (const std::weak_ptr<Owner>& weak : owners_) {
    std::shared_ptr<Owner> owner = weak.lock();
    if (owner && !owner->token().empty() && SecretEquals(owner->token(), token) && !found) {
      found = owner;
    }
  }
  if (!found || found->closed() || (!found->detached() && !found->may_detach)) {
    return Fail(ErrorKind::kNotFound,
                "no detached owner has this token (unknown, expired or already closed); open "
                "new sessions instead",
                "ownerToken");
  }
  if (!found->detached()) {
    return Fail(ErrorKind::kBusy,
                "the owner of this token still has a live connection; close that connection "
                "first, then attach",
                "ownerToken");
  }
  detached_.erase(found->id());  // stops the grace
  found->Attach();
  AttachResult result;
  result.owner = found;
  result.sessions = List(*found);
  for (const auto& [op_id, operation] : found->operations()) {
    result.operations.emplace_back(op_id, operation.session_id);
  }
  LogInfo("owner " + std::to_string(found->id()) +
          " attached: " + std::to_string(result.sessions.size()) + " sessions, " +
          std::to_string(result.operations.size()) + " operations");
  return result;
}

OwnerInfo PtyService::Info(Owner& owner) {
  OwnerInfo info;
  info.token = owner.token();
  if (owner.may_detach) {
    // A broken repository file: the grace is the operator's anyway (as at a disconnect).
    // Ignored when even the operator file cannot be read: the grace stays the one in force.
    if (!Resolve(owner, std::nullopt)) (void)FixOperatorDetachGrace(owner);
    info.detach_grace_ms = owner.detach_grace_ms().value_or(0);
  }
  return info;
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
      count += owner->sessions().size() + static_cast<size_t>(owner->fence().spawns_in_progress());
    }
  }
  return count;
}

}  // namespace ptybox::runtime
