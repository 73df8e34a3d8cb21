#include "runtime/audit/audit_log.h"

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>

#include "common/log.h"
#include "common/propagate.h"
#include "common/random.h"
#include "runtime/audit/audit_files.h"

namespace ptybox::runtime {
namespace {

using audit::Json;

// Queued audit lines at most (the writer's own bound across files is larger).
constexpr size_t kMaxQueuedLogBytes = 8 * 1024 * 1024;

class NullSink final : public AuditSink {
 public:
  [[nodiscard]] bool active() const override { return false; }
  void OwnerOpened(uint64_t, std::string_view) override {}
  void OwnerClosed(uint64_t) override {}
  std::shared_ptr<SessionTap> SpawnStarting(int, int) override { return nullptr; }
  void SessionOpened(const AuditOpened&, const policy::ResolvedPolicy&,
                     std::shared_ptr<SessionTap>) override {}
  void Refused(uint64_t, std::string_view, std::string_view, const Error&) override {}
  void SendStarted(uint64_t, const std::string&, std::string_view, bool) override {}
  void SendSettled(uint64_t, const std::string&, const Result<backend::SendResult>&) override {}
  void Signaled(uint64_t, const std::string&, int, const Result<backend::SignalResult>&) override {}
  void Canceled(uint64_t, const std::string&, bool) override {}
  void Closed(uint64_t, const std::string&, std::string_view,
              const Result<backend::SessionStatus>&) override {}
  void Resized(uint64_t, const std::string&, int, int) override {}
  void ModeChanged(uint64_t, std::optional<policy::Mode>, policy::Mode) override {}
};

std::string OwnerName(uint64_t owner) { return "conn-" + std::to_string(owner); }

std::string Short(std::string_view text) {
  return audit::Bound(text, audit::kMaxShortFieldBytes).text;
}

Json StatusJson(const backend::SessionStatus& status) {
  Json j = {{"exited", status.exited}};
  if (status.exit_code) j["exitCode"] = *status.exit_code;
  if (status.signal) j["signal"] = backend::SignalName(*status.signal);
  return j;
}

Json ErrorJson(const Error& error) {
  Json j = {{"kind", std::string(ToString(error.kind))}};
  audit::PutBounded(j, "message", error.message, audit::kMaxShortFieldBytes * 2);
  if (!error.context.empty()) j["context"] = Short(error.context);
  return j;
}

Json PathList(const std::vector<std::filesystem::path>& paths) {
  Json list = Json::array();
  for (const std::filesystem::path& p : paths) list.push_back(Short(p.string()));
  return list;
}

// What a session or a run may do, as resolved for it.
void PutPolicy(Json& j, const policy::ResolvedPolicy& p) {
  j["mode"] = std::string(policy::ToString(p.mode));
  j["workspace"] = Short(p.workspace_root.string());
  j["writableRoots"] = PathList(p.writable_roots);
  j["network"] = p.network_allowed;
  if (p.network_names) {
    Json allow = Json::array();
    for (const auto& rule : p.network_names->allow) allow.push_back(policy::ToString(rule.pattern));
    Json deny = Json::array();
    for (const auto& rule : p.network_names->deny) deny.push_back(policy::ToString(rule.pattern));
    j["networkNames"] = Json{{"allow", allow}, {"deny", deny}};
  }
  j["policyFiles"] = PathList(p.policy_files);
}

}  // namespace

std::shared_ptr<AuditSink> NoAudit() {
  static const std::shared_ptr<AuditSink> none = std::make_shared<NullSink>();
  return none;
}

std::optional<AuditOptions> AuditOptionsFrom(std::optional<std::filesystem::path> log_flag,
                                             std::optional<std::filesystem::path> record_flag,
                                             const policy::ResolveInputs& inputs,
                                             std::string program) {
  AuditOptions options;
  options.program = std::move(program);
  if (Result<policy::AuditPolicy> configured = policy::ReadOperatorAudit(inputs)) {
    options.log = configured->log;
    options.record_dir = configured->record_dir;
    options.record_max_bytes = configured->record_max_bytes;
  }
  std::error_code ec;
  if (log_flag) options.log = std::filesystem::absolute(*log_flag, ec).lexically_normal();
  if (record_flag) {
    options.record_dir = std::filesystem::absolute(*record_flag, ec).lexically_normal();
  }
  if (!options.log && !options.record_dir) return std::nullopt;
  return options;
}

Result<std::shared_ptr<AuditLog>> StartAudit(
    AuditOptions options, const std::vector<std::filesystem::path>& session_roots) {
  AuditFiles files;
  if (options.log) {
    if (Result<void> outside =
            CheckOutsideSessionRoots("the audit log", *options.log, session_roots);
        !outside) {
      return Propagate(outside);
    }
    Result<UniqueFd> log = OpenAuditLogFile(*options.log);
    if (!log) return Propagate(log);
    files.log = std::move(*log);
  }
  if (options.record_dir) {
    if (Result<void> outside = CheckOutsideSessionRoots("the recordings' directory",
                                                        *options.record_dir, session_roots);
        !outside) {
      return Propagate(outside);
    }
    Result<std::shared_ptr<const UniqueFd>> dir = OpenRecordDirectory(*options.record_dir);
    if (!dir) return Propagate(dir);
    files.record_dir = std::move(*dir);
  }
  return std::make_shared<AuditLog>(std::move(options), std::move(files));
}

AuditLog::AuditLog(AuditOptions options, AuditFiles files)
    : options_(std::move(options)),
      record_dir_(std::move(files.record_dir)),
      recording_report_(
          std::make_shared<WriteFailureReport>(WriteFailureReport{"session recordings", false})) {
  if (options_.log) {
    AppendFileSpec spec;
    spec.path = *options_.log;
    if (files.log) log_ref_.Reset(::fcntl(files.log.Get(), F_DUPFD_CLOEXEC, 3));
    spec.fd = std::move(files.log);
    spec.max_queued_bytes = kMaxQueuedLogBytes;
    spec.report = std::make_shared<WriteFailureReport>(
        WriteFailureReport{"the audit log " + options_.log->string(), false});
    spec.dropped_line = [](uint64_t lines, uint64_t bytes, std::string_view) {
      Json j = {{"ts", audit::IsoTimestamp(std::chrono::system_clock::now())},
                {"event", "dropped"},
                {"events", lines},
                {"bytes", bytes}};
      return audit::JsonLine(j);
    };
    log_ = writer_.Open(std::move(spec));
  }
  Json started = {{"program", options_.program}, {"pid", ::getpid()}, {"uid", ::getuid()}};
  started["instance"] = RandomHex(8);
  if (options_.record_dir) started["recordDir"] = Short(options_.record_dir->string());
  Write("audit_started", std::nullopt, std::move(started));
  if (options_.log) LogInfo("audit log: " + options_.log->string());
  if (options_.record_dir) LogInfo("session recordings: " + options_.record_dir->string());
}

std::vector<std::filesystem::path> AuditLog::HeldPaths() const {
  std::vector<std::filesystem::path> paths;
  for (int fd : {log_ref_.Get(), record_dir_ ? record_dir_->Get() : -1}) {
    if (fd >= 0) paths.push_back("/proc/self/fd/" + std::to_string(fd));
  }
  return paths;
}

AuditLog::~AuditLog() {
  for (auto& [id, recording] : recordings_) recording->Finish("ptybox: the daemon stopped");
  recordings_.clear();
  Write("audit_stopped", std::nullopt, Json::object());
  if (log_) log_->Close();
}

void AuditLog::Write(std::string_view event, std::optional<uint64_t> owner, Json fields) {
  if (!log_) return;
  Json record = {{"ts", audit::IsoTimestamp(std::chrono::system_clock::now())},
                 {"seq", ++seq_},
                 {"event", std::string(event)}};
  if (owner) record["owner"] = OwnerName(*owner);
  for (auto& [key, value] : fields.items()) record[key] = std::move(value);
  log_->Append(audit::JsonLine(record));
}

void AuditLog::OwnerOpened(uint64_t owner, std::string_view label) {
  Write("owner_connected", owner, {{"client", Short(label)}});
}

void AuditLog::OwnerClosed(uint64_t owner) { Write("owner_disconnected", owner, Json::object()); }

std::shared_ptr<SessionTap> AuditLog::SpawnStarting(int columns, int rows) {
  if (!options_.record_dir) return nullptr;
  SessionRecorder::Options o;
  o.dir = *options_.record_dir;
  o.dir_fd = record_dir_;
  o.max_bytes = options_.record_max_bytes;
  o.columns = columns;
  o.rows = rows;
  o.env = {{"TERM", "xterm-256color"}, {"SHELL", "bash"}};
  o.report = recording_report_;
  return std::make_shared<SessionRecorder>(writer_, std::move(o));
}

void AuditLog::SessionOpened(const AuditOpened& opened, const policy::ResolvedPolicy& policy,
                             std::shared_ptr<SessionTap> tap) {
  Json j = {{"sessionId", opened.session_id}, {"name", Short(opened.name)}};
  PutPolicy(j, policy);
  j["cwd"] = Short(opened.cwd);
  if (opened.pid) j["pid"] = *opened.pid;
  j["cols"] = opened.columns;
  j["rows"] = opened.rows;
  if (auto recorder = std::dynamic_pointer_cast<SessionRecorder>(tap)) {
    recorder->Publish(opened.session_id);
    if (recorder->path()) j["recording"] = Short(recorder->path()->string());
    recordings_[opened.session_id] = std::move(recorder);
  }
  Write("session_opened", opened.owner, std::move(j));
}

void AuditLog::Refused(uint64_t owner, std::string_view request, std::string_view session_id,
                       const Error& error) {
  Json j = {{"request", std::string(request)}};
  if (!session_id.empty()) j["sessionId"] = Short(session_id);
  j["error"] = ErrorJson(error);
  Write("refused", owner, std::move(j));
}

void AuditLog::SendStarted(uint64_t owner, const std::string& session_id, std::string_view input,
                           bool background) {
  Json j = {{"sessionId", session_id}};
  audit::PutBounded(j, "input", input);
  if (background) j["background"] = true;
  Write("send", owner, std::move(j));
  if (auto it = recordings_.find(session_id); it != recordings_.end()) it->second->Input(input);
}

void AuditLog::WaitStarted(uint64_t owner, const std::string& session_id) {
  Write("wait", owner, Json{{"sessionId", session_id}});
}

void AuditLog::SendSettled(uint64_t owner, const std::string& session_id,
                           const Result<backend::SendResult>& result) {
  Json j = {{"sessionId", session_id}};
  if (!result) {
    j["error"] = ErrorJson(result.error());
  } else {
    j["waitReason"] = std::string(backend::ToString(result->wait_reason));
    j["exitCode"] = result->exit_code ? Json(*result->exit_code) : Json(nullptr);
    if (result->cwd) j["cwd"] = Short(*result->cwd);
    j["sessionStatus"] = StatusJson(result->session_status);
    audit::PutBounded(j, "viewport", result->viewport);
    if (result->truncated) j["truncated"] = true;
    if (result->foreground) {
      j["foreground"] =
          Json{{"pgid", result->foreground->pgid}, {"command", Short(result->foreground->command)}};
    }
  }
  Write("send_result", owner, std::move(j));
}

void AuditLog::Signaled(uint64_t owner, const std::string& session_id, int signal,
                        const Result<backend::SignalResult>& result) {
  Json j = {{"sessionId", session_id}, {"signal", backend::SignalName(signal)}};
  if (!result) {
    j["error"] = ErrorJson(result.error());
  } else {
    j["delivered"] = result->delivered;
    j["pgid"] = result->pgid;
  }
  Write("signal", owner, std::move(j));
}

void AuditLog::Canceled(uint64_t owner, const std::string& session_id, bool canceled) {
  Write("cancel", owner, {{"sessionId", session_id}, {"canceled", canceled}});
}

void AuditLog::Closed(uint64_t owner, const std::string& session_id, std::string_view reason,
                      const Result<backend::SessionStatus>& result) {
  Json j = {{"sessionId", session_id}, {"reason", Short(reason)}};
  if (!result) {
    j["error"] = ErrorJson(result.error());
  } else {
    j["status"] = StatusJson(*result);
  }
  Write("close", owner, std::move(j));
  if (!result) return;  // a close may be retried; the recording goes on until it succeeds
  if (auto it = recordings_.find(session_id); it != recordings_.end()) {
    it->second->Finish("ptybox: session closed (" + Short(reason) + ")");
    recordings_.erase(it);
  }
}

void AuditLog::Resized(uint64_t owner, const std::string& session_id, int columns, int rows) {
  Write("resize", owner, {{"sessionId", session_id}, {"cols", columns}, {"rows", rows}});
  if (auto it = recordings_.find(session_id); it != recordings_.end()) {
    it->second->Resize(columns, rows);
  }
}

void AuditLog::NetworkDenied(uint64_t owner, const std::string& session_id,
                             const backend::proxy::ProxyRefusal& refusal) {
  Write("network_denied", owner,
        {{"sessionId", session_id},
         {"host", Short(refusal.host)},
         {"port", refusal.port},
         {"reason", Short(refusal.reason)}});
}

void AuditLog::NetworkClosed(uint64_t owner, const std::string& session_id,
                             const backend::proxy::ProxyTotals& totals) {
  Write("network_closed", owner,
        {{"sessionId", session_id},
         {"connections", totals.connections},
         {"refused", totals.refused},
         {"bytesSent", totals.bytes_sent},
         {"bytesReceived", totals.bytes_received}});
}

void AuditLog::Watched(uint64_t watcher, uint64_t owner, const std::string& session_id,
                       std::string_view event, std::string_view reason) {
  // Logged under the watching owner: who looked at whose session.
  Json j{{"sessionId", session_id}, {"sessionOwner", owner}};
  if (!reason.empty()) j["reason"] = std::string(reason);
  Write(event, watcher, std::move(j));
}

void AuditLog::Typed(uint64_t watcher, uint64_t owner, const std::string& session_id,
                     std::string_view bytes) {
  // Every terminal_type is logged as a send is: an owner may watch and take over its own
  // session, so keys logged only in the recording would let an agent run commands the log never
  // shows. One record per call (attach sends what one read of the person's terminal gave).
  Json j = {{"sessionId", session_id}, {"sessionOwner", owner}, {"bytes", bytes.size()}};
  audit::PutBounded(j, "input", bytes);
  Write("typed", watcher, std::move(j));
  if (auto it = recordings_.find(session_id); it != recordings_.end()) it->second->Input(bytes);
}

void AuditLog::ModeChanged(uint64_t owner, std::optional<policy::Mode> from, policy::Mode to) {
  Json j = {{"to", std::string(policy::ToString(to))}};
  j["from"] = from ? Json(std::string(policy::ToString(*from))) : Json(nullptr);
  Write("mode_changed", owner, std::move(j));
}

void AuditLog::RunStarted(const std::vector<std::string>& command,
                          const policy::ResolvedPolicy& policy, const std::filesystem::path& cwd) {
  Json argv = Json::array();
  size_t total = 0;
  for (const std::string& arg : command) {
    if (argv.size() >= 256 || total > audit::kMaxFieldBytes * 4) {
      argv.push_back("[... " + std::to_string(command.size() - argv.size()) +
                     " more arguments ...]");
      break;
    }
    std::string bounded = audit::Bound(arg, audit::kMaxFieldBytes).text;
    total += bounded.size();
    argv.push_back(std::move(bounded));
  }
  Json j = {{"command", std::move(argv)}};
  PutPolicy(j, policy);
  j["cwd"] = Short(cwd.string());
  Write("run_started", std::nullopt, std::move(j));
}

void AuditLog::RunEnded(int exit_code) {
  Write("run_ended", std::nullopt, {{"exitCode", exit_code}});
}

void AuditLog::RunNetworkDenied(const backend::proxy::ProxyRefusal& refusal) {
  Write("network_denied", std::nullopt,
        {{"host", Short(refusal.host)}, {"port", refusal.port}, {"reason", Short(refusal.reason)}});
}

void AuditLog::RunNetworkClosed(const backend::proxy::ProxyTotals& totals) {
  Write("network_closed", std::nullopt,
        {{"connections", totals.connections},
         {"refused", totals.refused},
         {"bytesSent", totals.bytes_sent},
         {"bytesReceived", totals.bytes_received}});
}

void AuditLog::RunRefused(const Error& error) {
  Write("refused", std::nullopt, {{"request", "run"}, {"error", ErrorJson(error)}});
}

}  // namespace ptybox::runtime
