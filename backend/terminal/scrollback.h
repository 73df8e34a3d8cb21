// Layer 3 of the terminal decoder: the retained committed lines of one session, bounded by a
// line count and a byte count, addressed by monotonic byte offsets (each line is its text plus
// "\n"), read in bounded pages that never split a UTF-8 character.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "backend/contract_types.h"

namespace ptybox::backend {

class Scrollback final {
 public:
  Scrollback(size_t max_lines, size_t max_bytes);
  void Append(std::string_view line);  // one committed line; it occupies line.size()+1 bytes
  // Withdraws the lines after `offset` (an earlier end()), so that lines appended next replace
  // them: a send whose output was rendered through a scratch screen (backend/send_render.h).
  // Offsets are never used twice: the withdrawn bytes become a gap that reads as nothing, and the
  // next line starts at end() as before, so a cursor handed out into them is never answered with
  // the rendering's bytes. When `offset` was already dropped, every retained line is withdrawn.
  void Rewind(uint64_t offset);
  [[nodiscard]] uint64_t begin() const { return begin_; }  // offset of the oldest retained byte
  [[nodiscard]] uint64_t end() const { return end_; }      // offset just past the newest line
  // Retained lines (the first may be cut), withdrawn ones not counted.
  [[nodiscard]] size_t lines() const { return line_ends_.size() - gaps_.size(); }
  // One page: from `cursor` (default begin()), at most max_bytes (cut at a UTF-8 boundary, at
  // least one character) of the committed text followed by `pending_line`, the unterminated
  // line, which occupies the offsets from end() on; withdrawn lines are left out. truncated =
  // cursor < begin(), or cursor inside withdrawn lines (the page starts after them); end = the
  // page reached the end of the pending line. A page holding the whole pending line has next_cursor
  // end() (that line is shown again once committed); one that cut it continues inside it.
  // A cursor beyond the pending line is clamped to end(); one inside a UTF-8 character moves
  // forward to the next character.
  [[nodiscard]] ReadResult Read(std::optional<uint64_t> cursor, size_t max_bytes,
                                std::string_view pending_line) const;

 private:
  [[nodiscard]] char ByteAt(uint64_t offset) const { return ring_[offset % ring_.size()]; }
  void CopyOut(uint64_t from, size_t size, std::string& out) const;
  void CopyIn(uint64_t to, const char* data, size_t size);
  void Reserve(size_t bytes);  // grows the ring (up to max_bytes_) to hold `bytes`
  // `offset`, or the end of the withdrawn lines it lies in.
  [[nodiscard]] uint64_t PastGap(uint64_t offset) const;
  // Where the page from `start` stops to hold at most `max_bytes` bytes outside the gaps.
  [[nodiscard]] uint64_t PageStop(uint64_t start, size_t max_bytes, uint64_t last) const;
  // Appends the bytes of [from, to) outside the gaps: committed, then the pending line's.
  void CopyPage(uint64_t from, uint64_t to, std::string_view pending_line, std::string& out) const;

  size_t max_lines_;
  size_t max_bytes_;
  std::vector<char> ring_;  // byte at offset o lives at ring_[o % ring_.size()]
  uint64_t begin_ = 0;
  uint64_t end_ = 0;
  std::deque<uint64_t> line_ends_;  // offset just past each retained line's "\n" (or gap)
  // Withdrawn lines [first, second), oldest first; each is one entry of line_ends_ too, so it
  // is evicted like a line.
  std::deque<std::pair<uint64_t, uint64_t>> gaps_;
};

}  // namespace ptybox::backend
