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
    gaps_.clear();
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
    if (!gaps_.empty() && gaps_.front().second <= begin_) gaps_.pop_front();
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
  // A later gap is withdrawn again with the rest; an offset inside a gap widens it.
  while (!gaps_.empty() && gaps_.back().second > offset) {
    offset = std::min(offset, gaps_.back().first);
    gaps_.pop_back();
  }
  while (!line_ends_.empty() && line_ends_.back() > offset) line_ends_.pop_back();
  gaps_.emplace_back(offset, end_);
  line_ends_.push_back(end_);
}

uint64_t Scrollback::PastGap(uint64_t offset) const {
  for (const auto& [first, second] : gaps_) {
    if (offset >= first && offset < second) return second;
  }
  return offset;
}

uint64_t Scrollback::PageStop(uint64_t start, size_t max_bytes, uint64_t last) const {
  uint64_t stop = start;
  auto gap =
      std::find_if(gaps_.begin(), gaps_.end(), [&](const auto& g) { return g.first >= start; });
  while (max_bytes > 0 && stop < last) {
    if (gap != gaps_.end() && stop == gap->first) {
      stop = gap->second;
      ++gap;
      continue;
    }
    const uint64_t segment_end = gap != gaps_.end() ? std::min(gap->first, last) : last;
    const uint64_t take = std::min<uint64_t>(max_bytes, segment_end - stop);
    stop += take;
    max_bytes -= static_cast<size_t>(take);
  }
  return stop;
}

void Scrollback::CopyPage(uint64_t from, uint64_t to, std::string_view pending_line,
                          std::string& out) const {
  auto copy = [&](uint64_t a, uint64_t b) {
    if (a < end_) CopyOut(a, static_cast<size_t>(std::min(b, end_) - a), out);
    if (b > end_) {
      const uint64_t at = std::max(a, end_);
      out.append(pending_line.substr(static_cast<size_t>(at - end_), static_cast<size_t>(b - at)));
    }
  };
  for (const auto& [first, second] : gaps_) {
    if (second <= from || first >= to) continue;
    if (first > from) copy(from, first);
    from = second;
  }
  if (from < to) copy(from, to);
}

ReadResult Scrollback::Read(std::optional<uint64_t> cursor, size_t max_bytes,
                            std::string_view pending_line) const {
  ReadResult result;
  const uint64_t wanted = cursor.value_or(begin_);
  // The unterminated line continues the offsets past end(): it counts against max_bytes like
  // committed text, and a page may stop inside it.
  const uint64_t last = end_ + pending_line.size();
  uint64_t start = wanted > last ? end_ : std::max(wanted, begin_);
  const uint64_t past_gap = PastGap(start);
  result.truncated = wanted < begin_ || past_gap != start;
  start = past_gap;
  auto byte = [&](uint64_t offset) {
    return offset < end_ ? ByteAt(offset) : pending_line[static_cast<size_t>(offset - end_)];
  };
  // A gap begins and ends at a line's end, so no character spans one: the steps below never
  // cross into a gap from the text they start in.
  while (start < last && IsContinuation(byte(start))) ++start;
  uint64_t stop = PageStop(start, max_bytes, last);
  // The cut back to a character boundary stays after the last gap the page skipped.
  uint64_t floor = start;
  for (const auto& gap : gaps_) {
    if (gap.second <= stop) floor = std::max(floor, gap.second);
  }
  while (stop > floor && stop < last && IsContinuation(byte(stop))) --stop;
  if (stop == start && start < last) {  // at least one character
    ++stop;
    while (stop < last && IsContinuation(byte(stop))) ++stop;
  }
  CopyPage(start, stop, pending_line, result.text);
  result.cursor = start;
  result.end = stop == last;
  // A page that holds the whole unterminated line leaves the cursor where that line will be
  // committed (the next page shows it again, completed); a page that had to cut it continues
  // inside it; a page that ends where withdrawn lines begin continues after them.
  result.next_cursor = result.end && start <= end_ ? end_ : PastGap(stop);
  return result;
}

}  // namespace ptybox::backend
