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
#include <vector>

#include "backend/contract_types.h"

namespace ptybox::backend {

class Scrollback final {
 public:
  Scrollback(size_t max_lines, size_t max_bytes);
  void Append(std::string_view line);  // one committed line; it occupies line.size()+1 bytes
  // Drops the lines after `offset` (an earlier end()), so they can be replaced: a send whose
  // output was rendered through a scratch screen (backend/send_render.h). Offsets after it are
  // used again by the lines appended next; when `offset` was already dropped, every retained
  // line goes.
  void Rewind(uint64_t offset);
  [[nodiscard]] uint64_t begin() const { return begin_; }  // offset of the oldest retained byte
  [[nodiscard]] uint64_t end() const { return end_; }      // offset just past the newest line
  [[nodiscard]] size_t lines() const { return line_ends_.size(); }  // retained (first may be cut)
  // One page: from `cursor` (default begin()), at most max_bytes (cut at a UTF-8 boundary, at
  // least one character) of the committed text followed by `pending_line`, the unterminated
  // line, which occupies the offsets from end() on. truncated = cursor < begin(); end = the page
  // reached the end of the pending line. A page holding the whole pending line has next_cursor
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

  size_t max_lines_;
  size_t max_bytes_;
  std::vector<char> ring_;  // byte at offset o lives at ring_[o % ring_.size()]
  uint64_t begin_ = 0;
  uint64_t end_ = 0;
  std::deque<uint64_t> line_ends_;  // offset just past each retained line's "\n"
};

}  // namespace ptybox::backend
