// Tunables that a policy file may set (operator) or lower (repository), with the defaults of
// the seeds' system. Per-send values in a request override the timing ones for that send.
#pragma once

#include <cstdint>
#include <optional>

namespace ptybox::policy {

struct Limits {
  // Readiness (milliseconds).
  int64_t idle_silence_ms = 3000;
  int64_t handoff_grace_ms = 500;
  int64_t timeout_ms = 30000;          // default absolute deadline of one send
  int64_t startup_timeout_ms = 10000;  // terminal_open until the first verified prompt
  int64_t poll_interval_ms = 50;
  int64_t exact_probe_after_ms = 150;
  // Output.
  int64_t scrollback_lines = 10000;
  int64_t scrollback_bytes = 4 * 1024 * 1024;
  int64_t max_read_bytes = 256 * 1024;
  int64_t max_result_bytes = 256 * 1024;
  // Lifecycle.
  int64_t dispose_grace_ms = 3000;
  int64_t max_sessions = 16;  // open sessions per owner
  // How long an owner outlives its client connection over `serve --socket` (0: closed with it).
  int64_t detach_grace_ms = 0;
  // Resource limits applied inside every session (unset: inherit the daemon's).
  std::optional<int64_t> max_processes;   // RLIMIT_NPROC (per user, not per session)
  std::optional<int64_t> max_open_files;  // RLIMIT_NOFILE
  // The whole session's memory in its cgroup (sandbox/cgroup.h); RLIMIT_AS per process only
  // where no memory cgroup holds the session.
  std::optional<int64_t> max_memory_bytes;
  std::optional<int64_t> max_file_bytes;   // RLIMIT_FSIZE
  std::optional<int64_t> max_cpu_seconds;  // RLIMIT_CPU
  // The session's cgroup: its tasks (processes and threads together, pids.max), held by default
  // so a fork bomb stops at the session's own cap; its CPU bandwidth in thousandths of a core
  // (500: half a core; cpu.max / cpu.cfs_quota_us).
  int64_t max_tasks = 1024;
  std::optional<int64_t> max_cpu_millicores;
  // Pre-started confined shells kept per recently used launch key, claimed at terminal_open
  // (backend/warm_pool.h; 0 disables the pool). Raised by the operator only: lower only.
  int64_t warm_shells = 1;

  bool operator==(const Limits&) const = default;
};

}  // namespace ptybox::policy
