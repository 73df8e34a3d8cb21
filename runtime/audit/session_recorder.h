// One session recorded as an asciicast v2 file (DIR/<sessionId>.cast, 0600) that `asciinema
// play` replays: the header (size, start time, TERM and SHELL), `o` events for the terminal's
// output from its first byte, `i` events for each input sent, `r` events for a resize. Written
// through the AsyncWriter, never on the reactor. Bounded: once the file would pass its size
// limit (audit.recordMaxBytes) the recording stops with a final `m` marker and an `o` line
// that say so.
#pragma once

#include <atomic>
#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/audit/async_writer.h"
#include "runtime/audit/audit_record.h"
#include "runtime/audit/audit_sink.h"

namespace ptybox::runtime {

class SessionRecorder final : public SessionTap {
 public:
  struct Options {
    std::filesystem::path dir;  // for the file's name in the audit log
    // The directory itself, opened once at startup: each recording is created in it by name.
    std::shared_ptr<const UniqueFd> dir_fd;
    int64_t max_bytes = 64LL * 1024 * 1024;
    int columns = 80;
    int rows = 24;
    std::map<std::string, std::string> env;  // TERM, SHELL for the header
    std::shared_ptr<WriteFailureReport> report;
  };
  // Room kept for the final marker.
  static constexpr size_t kFinalReserve = 512;

  SessionRecorder(AsyncWriter& writer, Options options);
  ~SessionRecorder() override;

  void Output(std::string_view bytes) override;
  void Input(std::string_view bytes);
  void Resize(int columns, int rows);
  // Names the file DIR/<session_id>.cast and writes it from the start; what came before
  // (the shell's startup) was kept until now.
  void Publish(const std::string& session_id);
  // Ends the recording; `why` becomes a final marker when not empty.
  void Finish(std::string_view why);

  [[nodiscard]] std::optional<std::filesystem::path> path() const { return path_; }
  [[nodiscard]] bool stopped() const { return stopped_; }

 private:
  double Now() const;
  void Event(char code, std::string_view data);
  void Emit(std::string line);

  AsyncWriter& writer_;
  Options options_;
  std::chrono::steady_clock::time_point start_;
  audit::MarkerStripper markers_;
  audit::Utf8Stream output_;
  std::optional<std::filesystem::path> path_;
  std::shared_ptr<AsyncWriter::File> file_;
  std::vector<std::string> early_;  // before Publish
  int64_t bytes_ = 0;
  double last_time_ = 0;
  std::shared_ptr<std::atomic<double>> latest_ = std::make_shared<std::atomic<double>>(0.0);
  bool stopped_ = false;
  bool finished_ = false;
};

}  // namespace ptybox::runtime
