// Append-only files written off the reactor: the audit log and session recordings. The reactor
// only queues lines (a short lock, never a write); one writer thread opens the files and writes
// them. Queues are bounded per file and in total: a line that does not fit is dropped and
// counted, and once lines are written again the file gets the count first (a `dropped`
// record). A file that cannot be opened or written (a directory, a symlink, a full disk) is
// reported once on stderr; sessions never wait for it.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "common/unique_fd.h"

namespace ptybox::runtime {

// What the writer reports once (per family of files: the audit log, all recordings).
struct WriteFailureReport {
  std::string what;       // "the audit log", "session recordings"
  bool reported = false;  // guarded by the writer's lock
};

// Where the writer writes. It never opens a path from the root: a file is either opened
// already (`fd`, the audit log, opened once at startup) or created by its name inside a
// directory held open (`dir`, the recordings' directory), so renaming or replacing a parent
// directory never redirects a write (docs/security.md, "Audit files are reached by descriptor").
struct AppendFileSpec {
  std::filesystem::path path;           // for messages; with `dir`, its last component is the name
  UniqueFd fd;                          // the file itself, already open for appending
  std::shared_ptr<const UniqueFd> dir;  // else: created as openat(dir, path.filename())
  // Created with O_EXCL (a recording: a fresh name); else appended to (the audit log).
  bool exclusive = false;
  size_t max_queued_bytes = 4 * 1024 * 1024;
  // The line that tells a reader `lines` lines (`bytes` bytes) are missing here, before
  // `next_line` (empty at the end of the file); called on the writer thread.
  std::function<std::string(uint64_t lines, uint64_t bytes, std::string_view next_line)>
      dropped_line;
  std::shared_ptr<WriteFailureReport> report;
};

// Counters of one file, for tests and the daemon's log.
struct AppendFileStats {
  uint64_t written_lines = 0;
  uint64_t written_bytes = 0;
  uint64_t dropped_lines = 0;
};

class AsyncWriter final {
 public:
  class File;

  // `total_budget`: bytes queued across every file at most.
  explicit AsyncWriter(size_t total_budget = 32 * 1024 * 1024);
  // Writes what is queued (waiting at most `kDrainWait`), then stops the thread.
  ~AsyncWriter();
  AsyncWriter(const AsyncWriter&) = delete;
  AsyncWriter& operator=(const AsyncWriter&) = delete;

  // With `spec.dir`, the file is created on the writer thread when its first line is written.
  std::shared_ptr<File> Open(AppendFileSpec spec);

  static constexpr std::chrono::seconds kDrainWait{5};
  // After a failed open, how long before the next attempt.
  static constexpr std::chrono::seconds kReopenAfter{1};

 private:
  struct State;
  struct Worker;
  std::shared_ptr<State> state_;
  std::thread thread_;
};

class AsyncWriter::File final {
 public:
  // Queues one line (with its "\n"). Never blocks on I/O; false when it was dropped.
  bool Append(std::string line);
  // No more lines: the file is closed once what is queued was written.
  void Close();
  [[nodiscard]] AppendFileStats stats() const;

 private:
  friend class AsyncWriter;
  struct Item {
    std::string line;
    uint64_t dropped_before_lines = 0;
    uint64_t dropped_before_bytes = 0;
  };
  File(std::shared_ptr<State> state, AppendFileSpec spec)
      : state_(std::move(state)), spec_(std::move(spec)) {}

  std::shared_ptr<State> state_;
  AppendFileSpec spec_;
  // Guarded by the state's lock.
  std::deque<Item> queue_;
  size_t queued_bytes_ = 0;
  uint64_t pending_dropped_lines_ = 0;  // dropped since the last queued line
  uint64_t pending_dropped_bytes_ = 0;
  bool closed_ = false;
  AppendFileStats stats_;
  // Writer thread only.
  int fd_ = -1;
  bool open_failed_ = false;
  std::chrono::steady_clock::time_point retry_at_{};
  uint64_t unwritten_lines_ = 0;  // failed writes, told before the next line that is written
  uint64_t unwritten_bytes_ = 0;
};

}  // namespace ptybox::runtime
