// Retained scrollback: a byte ring that grows up to its bound, plus the end offset of every
// retained line so whole lines are evicted first.
#include "backend/terminal/scrollback.h"

#include <algorithm>
#include <cstring>

namespace ptybox::backend {
namespace {

constexpr size_t kMinBytes = 64;
constexpr size_t kInitialRing = 64 * 1024;

bool IsContinuation(char c) { return (static_cast<unsigned char>(c) & 0xc0) == 0x80; }

}  // namespace

Scrollback::Scrollback(size_t max_lines, size_t max_bytes)
    : max_lines_(std::max<size_t>(max_lines, 1)), max_bytes_(std::max(max_bytes, kMinBytes)) {
  ring_.resize(std::min(max_bytes_, kInitialRing));
}

void Scrollback::Reserve(size_t bytes) {
  if (bytes <= ring_.size()) return;
  const size_t capacity = std::min(max_bytes_, std::max(bytes, ring_.size() * 2));
  std::vector<char> grown(capacity);
  // Re-home the retained bytes at their offsets modulo the new size.
  const size_t retained = static_cast<size_t>(end_ - begin_);
  std::string copy;
  CopyOut(begin_, retained, copy);
  ring_.swap(grown);
  CopyIn(begin_, copy.data(), copy.size());
}

void Scrollback::CopyIn(uint64_t to, const char* data, size_t size) {
  while (size > 0) {
    const size_t at = static_cast<size_t>(to % ring_.size());
    const size_t chunk = std::min(size, ring_.size() - at);
    std::memcpy(ring_.data() + at, data, chunk);
    to += chunk;
    data += chunk;
    size -= chunk;
  }
}

void Scrollback::CopyOut(uint64_t from, size_t size, std::string& out) const {
  out.reserve(out.size() + size);
  while (size > 0) {
    const size_t at = static_cast<size_t>(from % ring_.size());
    const size_t chunk = std::min(size, ring_.size() - at);
    out.append(ring_.data() + at, chunk);
    from += chunk;
    size -= chunk;
  }
}

void Scrollback::Append(std::string_view line) {
  const uint64_t total = line.size() + 1;
  if (total > max_bytes_) {
    // Longer than everything retained may be: only its last max_bytes_ bytes stay, from a
    // character boundary.
    line_ends_.clear();
    Reserve(max_bytes_);
    std::string_view kept = line.substr(line.size() + 1 - max_bytes_);
    while (!kept.empty() && IsContinuation(kept.front())) kept.remove_prefix(1);
    end_ += total;
    begin_ = end_ - kept.size() - 1;
    CopyIn(begin_, kept.data(), kept.size());
    CopyIn(end_ - 1, "\n", 1);
    line_ends_.push_back(end_);
    return;
  }
  while (!line_ends_.empty() &&
         (end_ - begin_ + total > max_bytes_ || line_ends_.size() >= max_lines_)) {
    begin_ = line_ends_.front();
    line_ends_.pop_front();
  }
  Reserve(static_cast<size_t>(end_ - begin_ + total));
  CopyIn(end_, line.data(), line.size());
  CopyIn(end_ + line.size(), "\n", 1);
  end_ += total;
  line_ends_.push_back(end_);
}

void Scrollback::Rewind(uint64_t offset) {
  if (offset >= end_) return;
  offset = std::max(offset, begin_);
  while (!line_ends_.empty() && line_ends_.back() > offset) line_ends_.pop_back();
  end_ = offset;
}

ReadResult Scrollback::Read(std::optional<uint64_t> cursor, size_t max_bytes,
                            std::string_view pending_line) const {
  ReadResult result;
  const uint64_t wanted = cursor.value_or(begin_);
  result.truncated = wanted < begin_;
  // The unterminated line continues the offsets past end(): it counts against max_bytes like
  // committed text, and a page may stop inside it.
  const uint64_t last = end_ + pending_line.size();
  uint64_t start = wanted > last ? end_ : std::max(wanted, begin_);
  auto byte = [&](uint64_t offset) {
    return offset < end_ ? ByteAt(offset) : pending_line[static_cast<size_t>(offset - end_)];
  };
  while (start < last && IsContinuation(byte(start))) ++start;
  uint64_t stop = start + std::min<uint64_t>(max_bytes, last - start);
  while (stop > start && stop < last && IsContinuation(byte(stop))) --stop;
  if (stop == start && start < last) {  // at least one character
    ++stop;
    while (stop < last && IsContinuation(byte(stop))) ++stop;
  }
  if (start < end_) CopyOut(start, static_cast<size_t>(std::min(stop, end_) - start), result.text);
  if (stop > end_) {
    const uint64_t from = std::max(start, end_);
    result.text.append(
        pending_line.substr(static_cast<size_t>(from - end_), static_cast<size_t>(stop - from)));
  }
  result.cursor = start;
  result.end = stop == last;
  // A page that holds the whole unterminated line leaves the cursor where that line will be
  // committed (the next page shows it again, completed); a page that had to cut it continues
  // inside it.
  result.next_cursor = result.end && start <= end_ ? end_ : stop;
  return result;
}

}  // namespace ptybox::backend
