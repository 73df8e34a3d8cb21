// What the service tells the audit log (docs/security.md, "Audit log and recordings"): one call
// per event a reviewer needs, on the reactor thread. The service calls it at a few points and
// never waits on it; `NoAudit()` is the sink when nothing is recorded. Owners are named by
// their per-connection number only, never by anything a client could present as a credential.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "backend/contract_types.h"
#include "common/error.h"
#include "policy/policy.h"

namespace ptybox::runtime {

// The raw output of one session, from its first byte (a recording).
class SessionTap {
 public:
  virtual ~SessionTap() = default;
  virtual void Output(std::string_view bytes) = 0;
};

struct AuditOpened {
  uint64_t owner = 0;
  std::string session_id;
  std::string name;
  std::string cwd;
  std::optional<pid_t> pid;
  int columns = 0;
  int rows = 0;
};

class AuditSink {
 public:
  virtual ~AuditSink() = default;
  // False for NoAudit(): the service may skip copies it would make only for the sink.
  [[nodiscard]] virtual bool active() const = 0;

  virtual void OwnerOpened(uint64_t owner, std::string_view label) = 0;
  virtual void OwnerClosed(uint64_t owner) = 0;
  // A spawn begins: the tap that sees its output (nullptr when sessions are not recorded). It
  // is named by SessionOpened, or discarded when the spawn fails.
  virtual std::shared_ptr<SessionTap> SpawnStarting(int columns, int rows) = 0;
  virtual void SessionOpened(const AuditOpened& opened, const policy::ResolvedPolicy& policy,
                             std::shared_ptr<SessionTap> tap) = 0;
  // A request that did not happen (or did not complete): its error says why.
  virtual void Refused(uint64_t owner, std::string_view request, std::string_view session_id,
                       const Error& error) = 0;
  virtual void SendStarted(uint64_t owner, const std::string& session_id, std::string_view input,
                           bool background) = 0;
  virtual void SendSettled(uint64_t owner, const std::string& session_id,
                           const Result<backend::SendResult>& result) = 0;
  // terminal_wait: a wait without input; it settles through SendSettled like a send.
  virtual void WaitStarted(uint64_t /*owner*/, const std::string& /*session_id*/) {}
  virtual void Signaled(uint64_t owner, const std::string& session_id, int signal,
                        const Result<backend::SignalResult>& result) = 0;
  virtual void Canceled(uint64_t owner, const std::string& session_id, bool canceled) = 0;
  virtual void Closed(uint64_t owner, const std::string& session_id, std::string_view reason,
                      const Result<backend::SessionStatus>& result) = 0;
  // For terminal_resize: the recording gets an `r` event.
  virtual void Resized(uint64_t owner, const std::string& session_id, int columns, int rows) = 0;
  // Network by name: a request the session's proxy refused (`network_denied`), and the proxy's
  // totals when the session's network ends (`network_closed`). `session_id` is empty for a
  // request made while the session was still opening.
  virtual void NetworkDenied(uint64_t /*owner*/, const std::string& /*session_id*/,
                             const backend::proxy::ProxyRefusal& /*refusal*/) {}
  virtual void NetworkClosed(uint64_t /*owner*/, const std::string& /*session_id*/,
                             const backend::proxy::ProxyTotals& /*totals*/) {}
  virtual void ModeChanged(uint64_t owner, std::optional<policy::Mode> from, policy::Mode to) = 0;
  // A person watches a session (`ptybox attach`): `event` is session_watched when the watch
  // begins and session_unwatched when it ends, `reason` then saying why (unwatched, closed,
  // slow, owner_gone); session_taken_over and session_released (`attach --write`) likewise.
  // `watcher` is the watching connection's owner, `owner` the session's.
  virtual void Watched(uint64_t /*watcher*/, uint64_t /*owner*/, const std::string& /*session_id*/,
                       std::string_view /*event*/, std::string_view /*reason*/) {}
  // Keystrokes written to a session by the watch that took it over (`terminal_type`): a
  // `typed` record, as a send is, and the recording's `i` event. `watcher` is the typing
  // connection's owner, `owner` the session's (the same when an owner types into its own).
  virtual void Typed(uint64_t /*watcher*/, uint64_t /*owner*/, const std::string& /*session_id*/,
                     std::string_view /*bytes*/) {}
};

// The sink that records nothing.
std::shared_ptr<AuditSink> NoAudit();

}  // namespace ptybox::runtime
