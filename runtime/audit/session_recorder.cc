#include "runtime/audit/session_recorder.h"

#include <cstdlib>

namespace ptybox::runtime {

SessionRecorder::SessionRecorder(AsyncWriter& writer, Options options)
    : writer_(writer), options_(std::move(options)), start_(std::chrono::steady_clock::now()) {
  audit::CastHeader header;
  header.width = options_.columns;
  header.height = options_.rows;
  header.timestamp = std::chrono::duration_cast<std::chrono::seconds>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count();
  header.env = options_.env;
  Emit(audit::CastHeaderLine(header));
}

SessionRecorder::~SessionRecorder() { Finish(""); }

double SessionRecorder::Now() const {
  const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  return t;
}

void SessionRecorder::Output(std::string_view bytes) {
  if (stopped_ || bytes.empty()) return;
  std::string text = output_.Feed(markers_.Feed(bytes));
  if (!text.empty()) Event('o', text);
}

void SessionRecorder::Input(std::string_view bytes) {
  if (stopped_ || bytes.empty()) return;
  Event('i', audit::ValidUtf8(bytes));
}

void SessionRecorder::Resize(int columns, int rows) {
  if (stopped_) return;
  Event('r', audit::CastSize(columns, rows));
}

void SessionRecorder::Event(char code, std::string_view data) {
  // The steady clock never goes back; the max keeps events in order even so.
  last_time_ = std::max(last_time_, Now());
  latest_->store(last_time_);
  std::string line = audit::CastEventLine(last_time_, code, data);
  if (bytes_ + static_cast<int64_t>(line.size()) + static_cast<int64_t>(kFinalReserve) >
      options_.max_bytes) {
    stopped_ = true;
    const std::string why = "ptybox: recording stopped: it reached " +
                            std::to_string(options_.max_bytes) +
                            " bytes (audit.recordMaxBytes); the session went on";
    Emit(audit::CastEventLine(last_time_, 'o', "\r\n[" + why + "]\r\n"));
    Emit(audit::CastEventLine(last_time_, 'm', why));
    return;
  }
  Emit(std::move(line));
}

void SessionRecorder::Emit(std::string line) {
  bytes_ += static_cast<int64_t>(line.size());
  if (file_) {
    file_->Append(std::move(line));
  } else {
    early_.push_back(std::move(line));
  }
}

void SessionRecorder::Publish(const std::string& session_id) {
  if (file_ || finished_) return;
  path_ = options_.dir / (session_id + ".cast");
  AppendFileSpec spec;
  spec.path = *path_;
  spec.dir = options_.dir_fd;
  spec.exclusive = true;
  spec.max_queued_bytes = 4 * 1024 * 1024;
  spec.report = options_.report;
  spec.dropped_line = [latest = latest_](uint64_t lines, uint64_t bytes, std::string_view next) {
    // At the time of the event that follows the gap (or the latest one at the end), so times
    // stay monotonic.
    double at = latest->load();
    if (next.size() > 1 && next[0] == '[') {
      at = std::strtod(std::string(next.substr(1, 40)).c_str(), nullptr);
    }
    return audit::CastEventLine(at, 'm',
                                "ptybox: " + std::to_string(lines) + " events (" +
                                    std::to_string(bytes) +
                                    " bytes) could not be recorded here (the recording could "
                                    "not keep up or could not be written)");
  };
  file_ = writer_.Open(std::move(spec));
  for (std::string& line : early_) file_->Append(std::move(line));
  early_.clear();
  early_.shrink_to_fit();
}

void SessionRecorder::Finish(std::string_view why) {
  if (finished_) return;
  finished_ = true;
  if (!stopped_) {
    std::string tail = output_.Flush();
    if (!tail.empty()) Event('o', tail);
  }
  if (!stopped_ && !why.empty()) {
    last_time_ = std::max(last_time_, Now());
    latest_->store(last_time_);
    Emit(audit::CastEventLine(last_time_, 'm', why));
  }
  stopped_ = true;
  if (file_) file_->Close();
}

}  // namespace ptybox::runtime
