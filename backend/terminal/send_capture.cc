// Per-send capture: applies the first-line rule, keeps the viewport's head and tail within
// max_result_bytes, and queues committed text for TakeOutput within max_unconsumed_bytes.
#include "backend/terminal/send_capture.h"

#include <algorithm>
#include <string>

namespace ptybox::backend {
namespace {

constexpr size_t kMinResultBytes = 256;
constexpr size_t kMarkerReserve = 96;  // the drop line and its newlines, at their longest
// A cut within this many bytes of a line boundary moves to that boundary.
constexpr size_t kLineAlignDivisor = 8;

bool IsContinuation(char c) { return (static_cast<unsigned char>(c) & 0xc0) == 0x80; }

// The longest prefix of `text` of at most `size` bytes that ends on a character boundary.
size_t CharPrefix(std::string_view text, size_t size) {
  if (size >= text.size()) return text.size();
  while (size > 0 && IsContinuation(text[size])) --size;
  return size;
}

// The start of the longest suffix of `text` of at most `size` bytes that starts a character.
size_t CharSuffixStart(std::string_view text, size_t size) {
  size_t start = size >= text.size() ? 0 : text.size() - size;
  while (start < text.size() && IsContinuation(text[start])) ++start;
  return start;
}

uint64_t CountNewlines(std::string_view text) {
  return static_cast<uint64_t>(std::count(text.begin(), text.end(), '\n'));
}

}  // namespace

SendCapture::SendCapture(size_t max_result_bytes, size_t max_unconsumed_bytes,
                         std::string pending_at_boundary)
    : max_result_bytes_(std::max(max_result_bytes, kMinResultBytes)),
      max_unconsumed_bytes_(std::max<size_t>(max_unconsumed_bytes, 1)),
      pending_at_boundary_(std::move(pending_at_boundary)),
      tail_keep_(max_result_bytes_ - max_result_bytes_ / 2) {}

std::optional<std::string_view> SendCapture::AfterBoundary(std::string_view line) const {
  // The boundary text keeps its trailing blanks (">>> " stays ">>> "), while committed and
  // pending lines are rendered without them: "$" is the prompt line "$ " unchanged.
  std::string_view boundary = pending_at_boundary_;
  std::string_view trimmed = boundary;
  while (!trimmed.empty() && (trimmed.back() == ' ' || trimmed.back() == '\t')) {
    trimmed.remove_suffix(1);
  }
  if (line == boundary || line == trimmed) return std::nullopt;
  const auto mismatch = std::mismatch(line.begin(), line.end(), boundary.begin(), boundary.end());
  size_t common = static_cast<size_t>(mismatch.first - line.begin());
  // A shared lead byte of two different characters is not a common prefix.
  while (common > 0 && common < line.size() && IsContinuation(line[common])) --common;
  return line.substr(common);
}

bool SendCapture::TakeEchoedFirstLine(std::string_view line, std::string_view echoed) {
  if (any_line_ || echoed.empty()) return false;
  const std::optional<std::string_view> contribution = AfterBoundary(line);
  if (!contribution || *contribution != echoed) return false;
  any_line_ = true;
  return true;
}

std::optional<std::string_view> SendCapture::AddLine(std::string_view line,
                                                     std::optional<uint64_t> line_end) {
  if (!any_line_) {
    any_line_ = true;
    const auto contribution = AfterBoundary(line);
    if (!contribution) return std::nullopt;
    line = *contribution;  // a suffix of the line: it still ends at line_end
  }
  std::string text;
  text.reserve(line.size() + 1);
  text.append(line);
  text.push_back('\n');
  std::optional<uint64_t> at;
  if (line_end && *line_end >= text.size()) at = *line_end - text.size();
  Capture(text, at);
  return line;
}

void SendCapture::NotePlace(std::optional<uint64_t> at) {
  if (!places_.empty()) {
    const Place& last = places_.back();
    const bool continues =
        last.scrollback && at && *at == *last.scrollback + (total_bytes_ - last.stream);
    if (continues || (!last.scrollback && !at)) return;
  }
  places_.push_back(Place{total_bytes_, at});
}

void SendCapture::PrunePlaces(uint64_t from) {
  while (places_.size() > 1 && places_[1].stream <= from) places_.pop_front();
}

void SendCapture::ForgetPlaces() {
  places_.clear();
  places_.push_back(Place{UnconsumedStart(), std::nullopt});
}

void SendCapture::Capture(std::string_view text, std::optional<uint64_t> scrollback_at) {
  NotePlace(scrollback_at);
  total_bytes_ += text.size();
  total_newlines_ += CountNewlines(text);

  std::string_view rest = text;
  if (!head_closed_) {
    const size_t room = max_result_bytes_ / 2 - head_.size();
    const size_t take = CharPrefix(rest, room);
    head_.append(rest.substr(0, take));
    rest.remove_prefix(take);
    if (!rest.empty()) head_closed_ = true;
  }
  if (!rest.empty()) {
    tail_.append(rest);
    if (tail_.size() > 2 * tail_keep_) tail_.erase(0, tail_.size() - tail_keep_);
  }

  unconsumed_.append(text);
  if (unconsumed_.size() - unconsumed_begin_ > max_unconsumed_bytes_) {
    unconsumed_begin_ = CharSuffixStart(unconsumed_, max_unconsumed_bytes_);
    dropped_ = true;
  }
  if (unconsumed_begin_ > max_unconsumed_bytes_) {
    unconsumed_.erase(0, unconsumed_begin_);
    unconsumed_begin_ = 0;
  }
  PrunePlaces(UnconsumedStart());
}

std::string SendCapture::TakeOutput(size_t max_bytes, bool* dropped,
                                    std::optional<uint64_t>* scrollback_begin) {
  if (dropped != nullptr) *dropped = dropped_;
  dropped_ = false;
  const std::string_view available = std::string_view(unconsumed_).substr(unconsumed_begin_);
  size_t size = CharPrefix(available, max_bytes);
  if (size == 0 && !available.empty()) {  // at least one character
    size = 1;
    while (size < available.size() && IsContinuation(available[size])) ++size;
  }
  std::string out(available.substr(0, size));
  const uint64_t start = UnconsumedStart();
  if (scrollback_begin != nullptr) {
    // Exact only when one place holds the whole text: no gap and no jump inside it.
    PrunePlaces(start);
    const bool one_place = !places_.empty() && places_.front().stream <= start &&
                           (places_.size() == 1 || places_[1].stream >= start + size);
    *scrollback_begin = std::nullopt;
    if (one_place && places_.front().scrollback && size > 0) {
      *scrollback_begin = *places_.front().scrollback + (start - places_.front().stream);
    }
  }
  unconsumed_begin_ += size;
  if (unconsumed_begin_ == unconsumed_.size()) {
    unconsumed_.clear();
    unconsumed_begin_ = 0;
  }
  PrunePlaces(UnconsumedStart());
  return out;
}

std::string SendCapture::Bound(std::string_view text, size_t max_bytes, bool* truncated) {
  if (text.size() <= max_bytes) {
    if (truncated != nullptr) *truncated = false;
    return std::string(text);
  }
  if (truncated != nullptr) *truncated = true;
  if (max_bytes < kMinResultBytes) return std::string(text.substr(0, CharPrefix(text, max_bytes)));
  SendCapture capture(max_bytes, 1, std::string());
  capture.any_line_ = true;  // no first-line rule: the text is all output
  capture.Capture(text);
  return capture.Viewport(std::string_view(), nullptr);
}

std::string SendCapture::Viewport(std::string_view pending_now, bool* truncated) const {
  std::string_view pending = pending_now;
  if (!any_line_) pending = AfterBoundary(pending_now).value_or(std::string_view());

  std::string result;
  const uint64_t stream = total_bytes_ + pending.size();
  if (stream <= max_result_bytes_) {
    // Nothing was dropped: the tail holds everything after the head.
    result.reserve(static_cast<size_t>(stream));
    result.append(head_);
    result.append(tail_);
    result.append(pending);
    if (!result.empty() && result.back() == '\n') result.pop_back();
    if (truncated != nullptr) *truncated = false;
    return result;
  }

  // Head: the first half, ending at a line boundary when one is close.
  std::string_view head = head_;
  const size_t align = max_result_bytes_ / kLineAlignDivisor;
  if (const size_t nl = head.rfind('\n'); !head.empty() && head.back() != '\n' &&
                                          nl != std::string_view::npos &&
                                          head.size() - nl - 1 <= align) {
    head = head.substr(0, nl + 1);
  }
  // Tail: the newest bytes that fit, starting at a line boundary when one is close.
  std::string after = tail_;
  after.append(pending);
  const size_t budget = max_result_bytes_ - head.size() - kMarkerReserve;
  const size_t tail_start = CharSuffixStart(after, budget);
  std::string_view tail = std::string_view(after).substr(tail_start);
  const bool whole_tail = total_bytes_ == head_.size() + tail_.size();  // tail_ lost nothing
  const bool starts_line = tail_start > 0 ? after[tail_start - 1] == '\n'
                                          : whole_tail && (head_.empty() || head_.back() == '\n');
  if (const size_t nl = tail.find('\n');
      !starts_line && nl != std::string_view::npos && nl + 1 < tail.size() && nl + 1 <= align) {
    tail.remove_prefix(nl + 1);
  }

  const uint64_t dropped_bytes = stream - head.size() - tail.size();
  const uint64_t newlines = total_newlines_ + CountNewlines(pending);
  const uint64_t kept_newlines = CountNewlines(head) + CountNewlines(tail);
  const uint64_t dropped_lines = newlines > kept_newlines ? newlines - kept_newlines : 0;
  result.reserve(head.size() + kMarkerReserve + tail.size());
  result.append(head);
  if (!result.empty() && result.back() != '\n') result.push_back('\n');
  result.append("[... ");
  result.append(std::to_string(dropped_bytes));
  result.append(" bytes (");
  result.append(std::to_string(dropped_lines));
  result.append(dropped_lines == 1 ? " line) dropped ...]" : " lines) dropped ...]");
  if (!tail.empty()) {
    result.push_back('\n');
    result.append(tail);
  }
  if (!result.empty() && result.back() == '\n') result.pop_back();
  if (truncated != nullptr) *truncated = true;
  return result;
}

}  // namespace ptybox::backend
