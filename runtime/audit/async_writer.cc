#include "runtime/audit/async_writer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/log.h"

namespace ptybox::runtime {

struct AsyncWriter::State {
  std::mutex mu;
  std::condition_variable work;     // lines queued, a file closed, stopping
  std::condition_variable drained;  // a round of writing ended
  std::vector<std::shared_ptr<File>> files;
  size_t budget = 0;
  size_t total_queued = 0;
  bool stopping = false;
  bool busy = false;

  [[nodiscard]] bool Idle() const {
    if (busy) return false;
    return std::all_of(files.begin(), files.end(), [](const std::shared_ptr<File>& f) {
      return f->queue_.empty() && !f->closed_;
    });
  }
};

namespace {

constexpr size_t kChunkBytes = 256 * 1024;  // one write() at most

std::string Reason(const std::filesystem::path& path, int error) {
  switch (error) {
    case ELOOP:
      return path.string() + " is a symbolic link; it is never followed: name the file itself";
    case EISDIR:
      return path.string() + " is a directory; name a file";
    case ENXIO:
      return path.string() + " is not a regular file";
    case EBADF:
      return path.string() +
             ": its directory is not held open (a bug: files are created only "
             "inside a directory opened at startup)";
    default:
      return path.string() + ": " + std::strerror(error);
  }
}

}  // namespace

// The writing thread: everything it does to the files, with the state it shares with the
// writer's callers (under `state->mu`).
struct AsyncWriter::Worker {
  std::shared_ptr<State> state;

  // Reports a failure once per family, under the lock (the flag is shared between files).
  void Report(File& file, const std::string& message) {
    bool first = false;
    {
      std::lock_guard lock(state->mu);
      if (file.spec_.report && !file.spec_.report->reported) {
        file.spec_.report->reported = true;
        first = true;
      }
    }
    if (first) {
      LogWarn(file.spec_.report->what + ": " + message +
              "; events are dropped and counted until it can be written (reported once)");
    }
  }

  bool TryOpen(File& file) {
    if (file.fd_ >= 0) return true;
    const auto now = std::chrono::steady_clock::now();
    if (file.open_failed_ && now < file.retry_at_) return false;
    int flags = O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK;
    if (file.spec_.exclusive) flags |= O_EXCL;
    // Only ever by name inside the held directory: never a path from the root (a renamed
    // parent cannot redirect it), never a name with a '/' in it.
    const std::string name = file.spec_.path.filename().string();
    int fd = -1;
    int error = EBADF;
    if (file.spec_.dir && file.spec_.dir->Valid() && !name.empty() &&
        name.find('/') == std::string::npos) {
      fd = ::openat(file.spec_.dir->Get(), name.c_str(), flags, 0600);
      error = fd < 0 ? errno : 0;
    }
    struct stat st {};
    if (fd >= 0 && (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))) {
      error = ENXIO;
      ::close(fd);
      fd = -1;
    }
    if (fd < 0) {
      file.open_failed_ = true;
      file.retry_at_ = now + kReopenAfter;
      Report(file, "cannot open " + Reason(file.spec_.path, error));
      return false;
    }
    // Regular files never block; writes are plain blocking writes on this thread.
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    if ((st.st_mode & 077) != 0) {
      LogWarn(file.spec_.path.string() + " is readable or writable by other users (mode " +
              std::to_string((st.st_mode >> 6) & 7) + std::to_string((st.st_mode >> 3) & 7) +
              std::to_string(st.st_mode & 7) + "); `chmod 600` it");
    }
    file.fd_ = fd;
    file.open_failed_ = false;
    return true;
  }

  // Writes `buf` (whole lines ending at `ends`); on a failure, what was written of a line
  // that did not fit is cut off again, so the file holds whole lines only. Returns the
  // number of lines written.
  size_t WriteChunk(File& file, const std::string& buf, const std::vector<size_t>& ends) {
    const off_t start = ::lseek(file.fd_, 0, SEEK_END);
    size_t done = 0;
    int error = 0;
    while (done < buf.size()) {
      ssize_t n = ::write(file.fd_, buf.data() + done, buf.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        error = n < 0 ? errno : ENOSPC;
        break;
      }
      done += static_cast<size_t>(n);
    }
    if (done == buf.size()) return ends.size();
    size_t whole = 0;
    size_t lines = 0;
    for (size_t end : ends) {
      if (end > done) break;
      whole = end;
      ++lines;
    }
    if (whole != done && start >= 0) {
      if (::ftruncate(file.fd_, start + static_cast<off_t>(whole)) != 0) {
        Report(file, "cannot cut a partly written line: " + std::string(std::strerror(errno)));
      }
    }
    Report(file, "cannot write " + Reason(file.spec_.path, error));
    return lines;
  }

  // Writes `items` in order, each after the line that tells what was dropped before it.
  // What cannot be written is counted and told before the next line that is.
  void WriteItems(File& file, std::deque<File::Item>& items, uint64_t trailing_lines,
                  uint64_t trailing_bytes, bool closing) {
    if (file.unwritten_lines_ > 0 && (!items.empty() || closing)) {
      uint64_t& lines = items.empty() ? trailing_lines : items.front().dropped_before_lines;
      uint64_t& bytes = items.empty() ? trailing_bytes : items.front().dropped_before_bytes;
      lines += file.unwritten_lines_;
      bytes += file.unwritten_bytes_;
      file.unwritten_lines_ = 0;
      file.unwritten_bytes_ = 0;
    }
    uint64_t written_lines = 0;
    uint64_t written_bytes = 0;
    uint64_t lost_lines = 0;
    size_t i = 0;
    auto lose_rest = [&] {
      for (; i < items.size(); ++i) {
        file.unwritten_lines_ += items[i].dropped_before_lines + 1;
        file.unwritten_bytes_ += items[i].dropped_before_bytes + items[i].line.size();
        ++lost_lines;
      }
      file.unwritten_lines_ += trailing_lines;
      file.unwritten_bytes_ += trailing_bytes;
      trailing_lines = 0;
    };
    struct Line {
      uint64_t lines;  // 0: a line of the file's own; else a dropped line standing for these
      uint64_t bytes;
    };
    while (i < items.size() || trailing_lines > 0) {
      if (!TryOpen(file)) {
        lose_rest();
        break;
      }
      std::string buf;
      std::vector<size_t> ends;
      std::vector<Line> lines;
      auto add_dropped = [&](uint64_t count, uint64_t bytes, std::string_view next) {
        if (count == 0) return;
        if (file.spec_.dropped_line) buf += file.spec_.dropped_line(count, bytes, next);
        ends.push_back(buf.size());
        lines.push_back(Line{count, bytes});
      };
      while (i < items.size() &&
             (buf.empty() || buf.size() + items[i].line.size() <= kChunkBytes)) {
        add_dropped(items[i].dropped_before_lines, items[i].dropped_before_bytes, items[i].line);
        buf += items[i].line;
        ends.push_back(buf.size());
        lines.push_back(Line{0, items[i].line.size()});
        ++i;
      }
      if (i == items.size()) {
        add_dropped(trailing_lines, trailing_bytes, {});
        trailing_lines = 0;
      }
      const size_t ok = buf.empty() ? ends.size() : WriteChunk(file, buf, ends);
      for (size_t k = 0; k < lines.size(); ++k) {
        const bool own = lines[k].lines == 0;
        if (k < ok) {
          if (own) {
            ++written_lines;
            written_bytes += lines[k].bytes;
          }
        } else {
          file.unwritten_lines_ += own ? 1 : lines[k].lines;
          file.unwritten_bytes_ += lines[k].bytes;
          if (own) ++lost_lines;
        }
      }
      if (ok < lines.size()) {
        lose_rest();
        break;
      }
    }
    std::lock_guard lock(state->mu);
    file.stats_.written_lines += written_lines;
    file.stats_.written_bytes += written_bytes;
    file.stats_.dropped_lines += lost_lines;
  }

  // Takes what the files queued, writes it outside the lock, until the writer stops.
  void Run() {
    std::unique_lock lock(state->mu);
    for (;;) {
      struct Work {
        std::shared_ptr<File> file;
        std::deque<File::Item> items;
        bool closing = false;
        uint64_t trailing_lines = 0;
        uint64_t trailing_bytes = 0;
      };
      std::vector<Work> round;
      for (auto it = state->files.begin(); it != state->files.end();) {
        File& f = **it;
        if (f.queue_.empty() && !f.closed_) {
          ++it;
          continue;
        }
        Work w;
        w.file = *it;
        w.items.swap(f.queue_);
        state->total_queued -= f.queued_bytes_;
        f.queued_bytes_ = 0;
        if (f.closed_) {
          w.closing = true;
          w.trailing_lines = f.pending_dropped_lines_;
          w.trailing_bytes = f.pending_dropped_bytes_;
          f.pending_dropped_lines_ = 0;
          f.pending_dropped_bytes_ = 0;
          it = state->files.erase(it);
        } else {
          ++it;
        }
        round.push_back(std::move(w));
      }
      if (round.empty()) {
        state->drained.notify_all();
        if (state->stopping) break;
        state->work.wait(lock);
        continue;
      }
      state->busy = true;
      lock.unlock();
      for (Work& w : round) {
        WriteItems(*w.file, w.items, w.trailing_lines, w.trailing_bytes, w.closing);
        if (w.closing && w.file->fd_ >= 0) {
          ::close(w.file->fd_);
          w.file->fd_ = -1;
        }
      }
      lock.lock();
      state->busy = false;
    }
    for (const std::shared_ptr<File>& f : state->files) {
      if (f->fd_ >= 0) ::close(f->fd_);
      f->fd_ = -1;
    }
  }
};

AsyncWriter::AsyncWriter(size_t total_budget) : state_(std::make_shared<State>()) {
  state_->budget = total_budget;
  thread_ = std::thread([state = state_] { Worker{state}.Run(); });
}

AsyncWriter::~AsyncWriter() {
  bool drained = false;
  {
    std::unique_lock lock(state_->mu);
    state_->stopping = true;
    state_->work.notify_all();
    drained = state_->drained.wait_for(lock, kDrainWait, [this] { return state_->Idle(); });
    state_->work.notify_all();
  }
  if (drained) {
    thread_.join();
    // The state holds its files and each file holds the state: with the thread gone, break the
    // cycle, or both outlive the writer (a file never closed by its owner).
    decltype(state_->files) files;
    {
      std::lock_guard lock(state_->mu);
      files.swap(state_->files);
    }
  } else {
    LogWarn("the audit writer could not write everything within " +
            std::to_string(kDrainWait.count()) + " s; exiting without the rest");
    thread_.detach();  // it holds its own reference to the state
  }
}

std::shared_ptr<AsyncWriter::File> AsyncWriter::Open(AppendFileSpec spec) {
  const int fd = spec.fd.Release();
  std::shared_ptr<File> file(new File(state_, std::move(spec)));
  file->fd_ = fd;  // an open file is written as is, never opened again
  std::lock_guard lock(state_->mu);
  state_->files.push_back(file);
  return file;
}

bool AsyncWriter::File::Append(std::string line) {
  std::lock_guard lock(state_->mu);
  if (closed_) return false;
  const size_t size = line.size();
  if (queued_bytes_ + size > spec_.max_queued_bytes ||
      state_->total_queued + size > state_->budget) {
    ++pending_dropped_lines_;
    pending_dropped_bytes_ += size;
    ++stats_.dropped_lines;
    return false;
  }
  Item item{std::move(line), pending_dropped_lines_, pending_dropped_bytes_};
  pending_dropped_lines_ = 0;
  pending_dropped_bytes_ = 0;
  queue_.push_back(std::move(item));
  queued_bytes_ += size;
  state_->total_queued += size;
  state_->work.notify_one();
  return true;
}

void AsyncWriter::File::Close() {
  std::lock_guard lock(state_->mu);
  if (closed_) return;
  closed_ = true;
  state_->work.notify_one();
}

AppendFileStats AsyncWriter::File::stats() const {
  std::lock_guard lock(state_->mu);
  return stats_;
}

}  // namespace ptybox::runtime
