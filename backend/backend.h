// The backend interfaces (docs/architecture.md): a backend owns how one session type starts and
// detects readiness; a backend session owns terminal state, sends and captured-process quiescence.
// The service publishes a session only after its spawn succeeded, then owns ids and owners.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "backend/contract_types.h"
#include "backend/send_operation.h"
#include "common/error.h"
#include "policy/policy.h"

namespace ptybox::backend {

struct SpawnSpec {
  std::string name;
  policy::ResolvedPolicy policy;
  std::filesystem::path cwd;  // resolved start directory
  int rows = 40;
  int columns = 120;
  std::map<std::string, std::string> env;  // the client's additions (already validated)
  std::optional<int64_t> timeout_ms;       // startup deadline; default from the policy
  // Sees every byte the terminal outputs, from the first (a session recording); may be empty.
  std::function<void(std::string_view)> output_tap;
  // Network by name: what the session's proxy refused, and its totals at the end (the audit
  // log's `network_denied` and `network_closed`); may be empty.
  proxy::ProxyEvents network_events;
};

// The rendered screen of a session at one moment: what `ptybox attach` draws first (every row,
// trailing blanks trimmed; the cursor; whether a full-screen program shows the alternate screen).
struct ScreenSnapshot {
  int rows = 0;
  int columns = 0;
  std::vector<std::string> lines;  // `rows` entries
  int cursor_row = 0;
  int cursor_column = 0;
  bool alternate_screen = false;
};

struct SessionGits;  // backend/git_copy_back.h

class BackendSession {
 public:
  virtual ~BackendSession() = default;
  // Workspace-write: the session's private git directories, for the copy-back after each send
  // (backend/git_copy_back.h); null when it has none.
  [[nodiscard]] virtual std::shared_ptr<SessionGits> gits() const { return nullptr; }
  // Initial bounded terminal output, returned from terminal_open.
  [[nodiscard]] virtual const std::string& motd() const = 0;
  // Host pid of the top-level process.
  [[nodiscard]] virtual std::optional<pid_t> pid() const = 0;
  // Starts one exclusive send; `busy` while another holds the slot, `closed` after exit/close.
  virtual Result<std::shared_ptr<SendOperation>> StartSend(SendRequest request) = 0;
  // The operation holding the slot, or the last one (for background output).
  [[nodiscard]] virtual std::shared_ptr<SendOperation> last_send() const = 0;
  [[nodiscard]] virtual bool busy() const = 0;
  // The session's own resolved policy (its limits bound reads and results).
  [[nodiscard]] virtual const policy::ResolvedPolicy& policy() const = 0;
  // One bounded page of retained scrollback, or the current screen.
  [[nodiscard]] virtual ReadResult Read(const ReadRequest& request) const = 0;
  // The screen model as it is now, every byte the output tap has seen included; nullopt for a
  // session type without one.
  [[nodiscard]] virtual std::optional<ScreenSnapshot> Snapshot() const { return std::nullopt; }
  // A person's keystrokes (`ptybox attach --write`), written as they are: no readiness, no
  // result. `busy` while a send holds the slot (a person's keys never go inside a send),
  // `closed` after exit or close.
  virtual Result<void> WriteTyped(std::string /*bytes*/) {
    return Fail(ErrorKind::kInvalidParams, "this session type takes no typed input");
  }
  // Resizes the terminal (the kernel sends SIGWINCH to its foreground group) and its screen
  // model; sizes are within the screen's bounds (backend/terminal/screen.h).
  virtual Result<void> Resize(int rows, int columns) = 0;
  // Signals the verified foreground process group.
  virtual void Signal(int signal, std::function<void(Result<SignalResult>)> done) = 0;
  [[nodiscard]] virtual SessionStatus Status() const = 0;
  // Idempotently ends the whole process tree and awaits quiescence, then settles an active send
  // as session_exit. A cleanup failure is reported and close may be retried.
  virtual void Close(std::string reason, std::function<void(Result<SessionStatus>)> done) = 0;
};

// An unpublished spawn in progress.
class PendingSpawn {
 public:
  virtual ~PendingSpawn() = default;
  // Closes the unpublished shell; the spawn then fails with `canceled` and `reason`, keeping a
  // cleanup failure alongside.
  virtual void Cancel(std::string reason) = 0;
};

class Backend {
 public:
  using SpawnCallback = std::function<void(Result<std::shared_ptr<BackendSession>>)>;
  virtual ~Backend() = default;
  [[nodiscard]] virtual std::string_view type() const = 0;
  // Creates a session; `done` gets it once ready, or an error after partial resources were
  // cleaned up.
  virtual std::shared_ptr<PendingSpawn> Spawn(SpawnSpec spec, SpawnCallback done) = 0;
  // Ends whatever the backend keeps beside its sessions (pre-started shells); `done` once
  // nothing of it is left.
  virtual void Shutdown(std::function<void()> done) = 0;
};

}  // namespace ptybox::backend
