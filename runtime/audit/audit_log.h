// The audit log and session recordings of one daemon or one `ptybox run` (docs/security.md,
// "Audit log and recordings"): JSON lines appended to --audit-log / `audit.log`, one per
// event, and an asciicast file per session under --record / `audit.recordDir`. Every call
// runs on the reactor and only queues; the AsyncWriter's thread writes.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/unique_fd.h"
#include "policy/resolver.h"
#include "policy/schema.h"
#include "runtime/audit/async_writer.h"
#include "runtime/audit/audit_record.h"
#include "runtime/audit/audit_sink.h"
#include "runtime/audit/session_recorder.h"

namespace ptybox::runtime {

struct AuditOptions {
  std::optional<std::filesystem::path> log;         // absolute
  std::optional<std::filesystem::path> record_dir;  // absolute
  int64_t record_max_bytes = policy::kDefaultRecordBytes;
  std::string program;  // "serve", "mcp", "run": the first record says which
};

// The --audit-log/--record flags over the operator policy's `audit` (a flag wins); nullopt
// when neither records anything. A broken operator file is not an error here: every spawn
// reports it.
std::optional<AuditOptions> AuditOptionsFrom(std::optional<std::filesystem::path> log_flag,
                                             std::optional<std::filesystem::path> record_flag,
                                             const policy::ResolveInputs& inputs,
                                             std::string program);

// What AuditLog writes through, opened once at startup (runtime/audit/audit_files.h): never a
// path again afterwards.
struct AuditFiles {
  UniqueFd log;                                // when options.log
  std::shared_ptr<const UniqueFd> record_dir;  // when options.record_dir
};

// Opens the files of `options` (refusing a log or directory inside `session_roots`, the roots
// sessions get) and starts the audit; the error says what, where and how to fix it.
class AuditLog;
Result<std::shared_ptr<AuditLog>> StartAudit(
    AuditOptions options, const std::vector<std::filesystem::path>& session_roots);

class AuditLog final : public AuditSink {
 public:
  AuditLog(AuditOptions options, AuditFiles files);
  ~AuditLog() override;

  // Names that always lead to the log file and the recordings' directory wherever they are now
  // (/proc/self/fd/N of descriptors held for this): what confined sessions get hidden, so a
  // renamed parent does not uncover them (backend/shell_session.cc reads each link at a spawn).
  [[nodiscard]] std::vector<std::filesystem::path> HeldPaths() const;

  [[nodiscard]] bool active() const override { return true; }
  void OwnerOpened(uint64_t owner, std::string_view label) override;
  void OwnerClosed(uint64_t owner) override;
  std::shared_ptr<SessionTap> SpawnStarting(int columns, int rows) override;
  void SessionOpened(const AuditOpened& opened, const policy::ResolvedPolicy& policy,
                     std::shared_ptr<SessionTap> tap) override;
  void Refused(uint64_t owner, std::string_view request, std::string_view session_id,
               const Error& error) override;
  void SendStarted(uint64_t owner, const std::string& session_id, std::string_view input,
                   bool background) override;
  void SendSettled(uint64_t owner, const std::string& session_id,
                   const Result<backend::SendResult>& result) override;
  void WaitStarted(uint64_t owner, const std::string& session_id) override;
  void Signaled(uint64_t owner, const std::string& session_id, int signal,
                const Result<backend::SignalResult>& result) override;
  void Canceled(uint64_t owner, const std::string& session_id, bool canceled) override;
  void Closed(uint64_t owner, const std::string& session_id, std::string_view reason,
              const Result<backend::SessionStatus>& result) override;
  void Resized(uint64_t owner, const std::string& session_id, int columns, int rows) override;
  void NetworkDenied(uint64_t owner, const std::string& session_id,
                     const backend::proxy::ProxyRefusal& refusal) override;
  void NetworkClosed(uint64_t owner, const std::string& session_id,
                     const backend::proxy::ProxyTotals& totals) override;
  void ModeChanged(uint64_t owner, std::optional<policy::Mode> from, policy::Mode to) override;
  void Watched(uint64_t watcher, uint64_t owner, const std::string& session_id,
               std::string_view event, std::string_view reason) override;
  void Typed(uint64_t watcher, uint64_t owner, const std::string& session_id,
             std::string_view bytes) override;

  // `ptybox run`: its one command.
  void RunStarted(const std::vector<std::string>& command, const policy::ResolvedPolicy& policy,
                  const std::filesystem::path& cwd);
  void RunEnded(int exit_code);
  // Its proxy (network by name): as NetworkDenied / NetworkClosed, without owner or session.
  void RunNetworkDenied(const backend::proxy::ProxyRefusal& refusal);
  void RunNetworkClosed(const backend::proxy::ProxyTotals& totals);
  void RunRefused(const Error& error);

 private:
  void Write(std::string_view event, std::optional<uint64_t> owner, audit::Json fields);

  AuditOptions options_;
  std::shared_ptr<const UniqueFd> record_dir_;
  UniqueFd log_ref_;    // a second descriptor of the log, only to name it (HeldPaths)
  AsyncWriter writer_;  // destroyed after the files below were closed
  std::shared_ptr<AsyncWriter::File> log_;
  std::shared_ptr<WriteFailureReport> recording_report_;
  std::map<std::string, std::shared_ptr<SessionRecorder>> recordings_;  // by session id
  uint64_t seq_ = 0;
};

}  // namespace ptybox::runtime
