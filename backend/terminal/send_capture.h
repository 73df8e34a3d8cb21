// What one send produced after its write boundary: the bounded viewport (head + tail with an
// explicit drop line) and a consumable output stream for background sends. Owns only the
// captured text; lines come from the decoder's line listener.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <string_view>

namespace ptybox::backend {

// First-line rule: the line pending at the boundary (usually the previous prompt, "$ ") is not
// output of this send. If the first line committed after the boundary equals
// pending_at_boundary, it is skipped entirely; otherwise it contributes only what follows its
// longest common prefix with pending_at_boundary (never splitting a UTF-8 character). When no
// line was committed since the boundary, the same rule applies to pending_now.
class SendCapture final {
 public:
  // `pending_at_boundary`: LineModel::PendingTextUntrimmed() when the write was issued.
  SendCapture(size_t max_result_bytes, size_t max_unconsumed_bytes,
              std::string pending_at_boundary);
  // A line committed after the boundary; returns what it contributed to the output (nullopt:
  // nothing, the first-line rule dropped it). `line_end`: the scrollback offset just past the
  // "\n" of the committed line that `line` ends (is a suffix of), when it is one; what it
  // contributes then sits in the scrollback right before it, and TakeOutput can say where.
  std::optional<std::string_view> AddLine(std::string_view line,
                                          std::optional<uint64_t> line_end = std::nullopt);
  // The first line, when what it adds to the boundary text is exactly `echoed` (readline's echo
  // of the send's first input line, on when a program turned the terminal's ECHO back on):
  // taken as the boundary line, adding nothing. False (nothing taken) otherwise.
  [[nodiscard]] bool TakeEchoedFirstLine(std::string_view line, std::string_view echoed);
  // What the unterminated line `pending` contributes now (the first-line rule while no line was
  // committed since the boundary).
  [[nodiscard]] std::optional<std::string_view> PendingContribution(
      std::string_view pending) const {
    return any_line_ ? std::optional<std::string_view>(pending) : AfterBoundary(pending);
  }
  // Committed text not yet taken (each line + "\n"), at most max_bytes (whole characters, at
  // least one); *dropped (when not null) is set when older unconsumed output had to be
  // discarded to respect max_unconsumed_bytes since the previous call. *scrollback_begin (when
  // not null) is the scrollback offset where the taken text starts when it is exactly the
  // scrollback's bytes from there (every line of it added with its line_end, none left out in
  // between), else nullopt.
  std::string TakeOutput(size_t max_bytes, bool* dropped,
                         std::optional<uint64_t>* scrollback_begin = nullptr);
  // The scrollback no longer holds what was captured as it was (a rendering replaced those
  // lines): no later TakeOutput names a scrollback offset for it.
  void ForgetPlaces();
  // The viewport: all captured lines plus `pending_now` (the unterminated line at settlement,
  // without the prompt), trailing newline trimmed, at most max_result_bytes: when longer, its
  // first half and last half with one line "[... N bytes (M lines) dropped ...]" between
  // them, and *truncated (when not null) set.
  [[nodiscard]] std::string Viewport(std::string_view pending_now, bool* truncated) const;
  [[nodiscard]] uint64_t captured_bytes() const { return total_bytes_; }

  // Any text (a rendered screen) within `max_bytes` the way a viewport is: unchanged when it
  // fits; else its head and tail with the drop line (or, under 256 bytes, its longest prefix
  // of whole characters), and *truncated (when not null) set.
  static std::string Bound(std::string_view text, size_t max_bytes, bool* truncated);

 private:
  // What a first line (or pending_now without any line) contributes; nullopt: nothing at all.
  [[nodiscard]] std::optional<std::string_view> AfterBoundary(std::string_view line) const;
  void Capture(std::string_view text, std::optional<uint64_t> scrollback_at = std::nullopt);
  // Records that the next captured byte sits at scrollback offset `at` (nullopt: nowhere known).
  void NotePlace(std::optional<uint64_t> at);
  // The stream offset (of everything captured) of the oldest byte not yet taken or dropped.
  [[nodiscard]] uint64_t UnconsumedStart() const {
    return total_bytes_ - (unconsumed_.size() - unconsumed_begin_);
  }
  // Drops the places that end before stream offset `from`.
  void PrunePlaces(uint64_t from);

  size_t max_result_bytes_;
  size_t max_unconsumed_bytes_;
  std::string pending_at_boundary_;
  bool any_line_ = false;
  // Viewport: the first half of the captured text, and the newest bytes after it.
  std::string head_;
  bool head_closed_ = false;
  std::string tail_;  // its last tail_keep_ bytes are the ones that matter
  size_t tail_keep_;
  uint64_t total_bytes_ = 0;
  uint64_t total_newlines_ = 0;
  // Background consumption.
  std::string unconsumed_;
  size_t unconsumed_begin_ = 0;  // bytes of unconsumed_ before this were taken or dropped
  bool dropped_ = false;
  // Where captured bytes sit in the scrollback: from stream offset `stream` (of everything
  // captured) up to the next place, at `scrollback` on (nullopt: not there as captured).
  struct Place {
    uint64_t stream = 0;
    std::optional<uint64_t> scrollback;
  };
  std::deque<Place> places_;
};

}  // namespace ptybox::backend
