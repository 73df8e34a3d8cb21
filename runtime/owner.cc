#include "runtime/owner.h"

#include "common/random.h"

namespace ptybox::runtime {

Owner::Owner(uint64_t id, std::string label, std::optional<policy::Mode> initial_mode,
             std::string token)
    : id_(id), label_(std::move(label)), fence_(initial_mode), token_(std::move(token)) {}

bool Owner::pristine() const {
  return !opened_any_ && sessions_.empty() && fence_.spawns_in_progress() == 0;
}

void Owner::Detach(const std::string& reason) {
  detached_ = true;
  ++connection_generation_;
  on_policy_changed = nullptr;
  CancelOpens(reason);
  // A foreground send in flight goes on as an operation terminal_output reads after attach.
  for (const auto& [key, session_id] : foreground_sends_) {
    auto entry = sessions_.find(session_id);
    if (entry == sessions_.end()) continue;
    std::shared_ptr<backend::SendOperation> op = entry->second.session->last_send();
    if (op && !op->settled()) AddOperation(session_id, op);
  }
  foreground_sends_.clear();
}

void Owner::Attach() {
  detached_ = false;
  std::erase_if(operations_, [&](const auto& entry) {
    std::shared_ptr<backend::SendOperation> op = entry.second.op.lock();
    auto session = sessions_.find(entry.second.session_id);
    return !op || session == sessions_.end() || session->second.session->last_send() != op;
  });
}

void Owner::CancelOpens(const std::string& reason) {
  // Taken out first: a cancel may settle its spawn, which leaves this table.
  std::map<std::string, std::shared_ptr<backend::PendingSpawn>> opens;
  opens.swap(opens_);
  for (auto& [key, spawn] : opens) spawn->Cancel(reason);
}

void Owner::FixDetachGrace(int64_t grace_ms) {
  if (!detach_grace_ms_) detach_grace_ms_ = grace_ms;
}

const Owner::OwnedSession* Owner::FindSession(const std::string& session_id) const {
  auto it = sessions_.find(session_id);
  return it == sessions_.end() ? nullptr : &it->second;
}

void Owner::SessionClosed(const std::string& session_id) {
  auto entry = sessions_.find(session_id);
  if (entry == sessions_.end()) return;
  const policy::Mode mode = entry->second.mode;
  FreeName(entry->second.name, session_id);
  sessions_.erase(entry);
  fence_.SessionClosed(mode);
}

Result<std::shared_ptr<OpenTicket>> Owner::BeginOpen(const std::string& name, policy::Mode mode) {
  // Names are unique among this owner's open and opening sessions, reserved from here on.
  if (!name.empty()) {
    if (auto held = names_.find(name); held != names_.end()) {
      Error taken{ErrorKind::kNameTaken,
                  "this connection already has a session named \"" + name + "\"" +
                      (held->second.empty() ? " still opening" : " (" + held->second + ")") +
                      "; choose another name, or close that session first",
                  "name"};
      taken.holder_session_id = held->second;
      return std::unexpected(std::move(taken));
    }
    names_[name] = "";
  }
  opened_any_ = true;
  fence_.BeginSpawn(mode);
  return std::make_shared<OpenTicket>(weak_from_this(), name, mode);
}

bool Owner::CancelOpen(const std::string& request_key, const std::string& reason) {
  auto open = opens_.find(request_key);
  if (open == opens_.end()) return false;
  std::shared_ptr<backend::PendingSpawn> pending = open->second;  // the cancel may erase it
  pending->Cancel(reason);
  return true;
}

void Owner::WhenSpawnsSettled(std::function<void()> done) {
  if (fence_.spawns_in_progress() == 0) {
    done();
    return;
  }
  spawn_waiters_.push_back(std::move(done));
}

uint64_t Owner::TrackForegroundSend(const std::string& request_key, const std::string& session_id) {
  foreground_sends_[request_key] = session_id;
  return connection_generation_;
}

void Owner::ForegroundSendSettled(const std::string& request_key, uint64_t generation) {
  // After a detach the request key may already name a later connection's request.
  if (generation == connection_generation_) foreground_sends_.erase(request_key);
}

std::optional<std::string> Owner::ForegroundSend(const std::string& request_key) const {
  auto send = foreground_sends_.find(request_key);
  if (send == foreground_sends_.end()) return std::nullopt;
  return send->second;
}

std::string Owner::AddOperation(const std::string& session_id,
                                const std::shared_ptr<backend::SendOperation>& op) {
  std::string id = "op-" + RandomHex(8);
  operations_[id] = Operation{session_id, op};
  return id;
}

void Owner::ForgetReplacedOperations() {
  std::erase_if(operations_, [](const auto& entry) { return entry.second.op.expired(); });
}

void Owner::OpenSettled(const std::string& request_key, const backend::PendingSpawn* pending) {
  // Only this open's entry: after a detach the key may name a later connection's open.
  if (auto open = opens_.find(request_key); open != opens_.end() && open->second.get() == pending) {
    opens_.erase(open);
  }
}

void Owner::EndSpawn(policy::Mode mode, bool published) {
  fence_.EndSpawn(mode, published);
  if (fence_.spawns_in_progress() != 0 || spawn_waiters_.empty()) return;
  std::vector<std::function<void()>> waiters;
  waiters.swap(spawn_waiters_);
  for (auto& waiter : waiters) waiter();
}

void Owner::FreeName(const std::string& name, const std::string& held_by) {
  if (name.empty()) return;
  if (auto held = names_.find(name); held != names_.end() && held->second == held_by) {
    names_.erase(held);
  }
}

OpenTicket::OpenTicket(std::weak_ptr<Owner> owner, std::string name, policy::Mode mode)
    : owner_(std::move(owner)), name_(std::move(name)), mode_(mode) {}

OpenTicket::~OpenTicket() { End(); }

void OpenTicket::Track(const std::string& request_key,
                       std::shared_ptr<backend::PendingSpawn> pending) {
  std::shared_ptr<Owner> owner = owner_.lock();
  if (settled_ || ended_ || !owner || !pending) return;
  request_key_ = request_key;
  pending_ = pending.get();
  owner->opens_[request_key] = std::move(pending);
}

std::shared_ptr<Owner> OpenTicket::Settle() {
  settled_ = true;
  std::shared_ptr<Owner> owner = owner_.lock();
  if (!owner) return nullptr;
  if (pending_) owner->OpenSettled(request_key_, pending_);
  return owner->closed() ? nullptr : owner;
}

void OpenTicket::Publish(const std::string& session_id,
                         std::shared_ptr<backend::BackendSession> session, std::string cwd) {
  std::shared_ptr<Owner> owner = owner_.lock();
  if (ended_ || !owner) return;
  ended_ = true;
  owner->sessions_[session_id] =
      Owner::OwnedSession{name_, mode_, std::move(cwd), std::move(session)};
  if (!name_.empty()) owner->names_[name_] = session_id;
  owner->EndSpawn(mode_, true);
}

void OpenTicket::End() {
  if (ended_) return;
  ended_ = true;
  std::shared_ptr<Owner> owner = owner_.lock();
  if (!owner) return;
  owner->FreeName(name_, "");
  // Last: waking WhenSpawnsSettled waiters may run a disconnect's completion.
  owner->EndSpawn(mode_, false);
}

}  // namespace ptybox::runtime
