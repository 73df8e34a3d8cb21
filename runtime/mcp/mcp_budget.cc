#include "runtime/mcp/mcp_budget.h"

#include <algorithm>
#include <charconv>

namespace ptybox::runtime {
namespace {

bool IsContinuation(char c) { return (static_cast<unsigned char>(c) & 0xc0) == 0x80; }

// The largest prefix size <= size that does not split a UTF-8 character.
size_t PrefixEnd(std::string_view text, size_t size) {
  size = std::min(size, text.size());
  while (size > 0 && size < text.size() && IsContinuation(text[size])) --size;
  return size;
}

// The smallest start >= start that does not split a UTF-8 character.
size_t SuffixBegin(std::string_view text, size_t start) {
  while (start < text.size() && IsContinuation(text[start])) ++start;
  return start;
}

uint64_t CountLines(std::string_view text) {
  return static_cast<uint64_t>(std::count(text.begin(), text.end(), '\n'));
}

std::optional<uint64_t> ParseCount(std::string_view text) {
  uint64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty()) return std::nullopt;
  return value;
}

}  // namespace

std::string GroupDigits(uint64_t value) {
  std::string digits = std::to_string(value);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out.push_back(',');
    out.push_back(digits[i]);
  }
  return out;
}

std::optional<ElidedSpan> PlanElision(std::string_view text, size_t max_bytes) {
  if (text.size() <= max_bytes) return std::nullopt;
  const size_t room = max_bytes > kElisionLineReserve ? max_bytes - kElisionLineReserve : 0;
  // The tail gets two thirds: a build's errors and the exit status are at the end.
  const size_t head_room = room / 3;
  const size_t tail_room = room - head_room;
  const size_t align = std::max<size_t>(room / 8, 1);

  size_t head_end = PrefixEnd(text, head_room);
  if (size_t nl = text.rfind('\n', head_end == 0 ? 0 : head_end - 1);
      head_end > 0 && text[head_end - 1] != '\n' && nl != std::string_view::npos &&
      head_end - nl - 1 <= align) {
    head_end = nl + 1;
  }
  size_t tail_begin = SuffixBegin(text, text.size() - std::min(tail_room, text.size()));
  tail_begin = std::max(tail_begin, head_end);
  if (tail_begin > 0 && tail_begin < text.size() && text[tail_begin - 1] != '\n') {
    if (size_t nl = text.find('\n', tail_begin);
        nl != std::string_view::npos && nl + 1 < text.size() && nl + 1 - tail_begin <= align) {
      tail_begin = nl + 1;
    }
  }
  return ElidedSpan{head_end, tail_begin};
}

std::optional<BackendDrop> FindBackendDrop(std::string_view region, bool* ambiguous) {
  constexpr std::string_view kOpen = "[... ";
  std::optional<BackendDrop> found;
  size_t at = 0;
  while ((at = region.find(kOpen, at)) != std::string_view::npos) {
    if (at > 0 && region[at - 1] != '\n') {
      at += kOpen.size();
      continue;
    }
    const size_t line_end = region.find('\n', at);
    const std::string_view line = region.substr(
        at, line_end == std::string_view::npos ? std::string_view::npos : line_end - at);
    // "[... N bytes (M lines) dropped ...]" or "(1 line)".
    std::string_view rest = line.substr(kOpen.size());
    const size_t bytes_end = rest.find(" bytes (");
    if (bytes_end != std::string_view::npos) {
      std::optional<uint64_t> bytes = ParseCount(rest.substr(0, bytes_end));
      rest.remove_prefix(bytes_end + 8);
      const size_t lines_end = rest.find(' ');
      std::optional<uint64_t> lines = lines_end == std::string_view::npos
                                          ? std::nullopt
                                          : ParseCount(rest.substr(0, lines_end));
      if (bytes && lines && lines_end != std::string_view::npos &&
          (rest.substr(lines_end) == " lines) dropped ...]" ||
           rest.substr(lines_end) == " line) dropped ...]")) {
        if (found) {
          if (ambiguous != nullptr) *ambiguous = true;
          return std::nullopt;
        }
        found =
            BackendDrop{*bytes, *lines, line.size() + (line_end == std::string_view::npos ? 0 : 1)};
      }
    }
    at += kOpen.size();
  }
  return found;
}

std::optional<ReadPointer> LocateSpan(std::string_view text, const ElidedSpan& span,
                                      const TextAnchor& anchor) {
  const std::string_view left_out = text.substr(span.head_end, span.tail_begin - span.head_end);
  uint64_t bytes = left_out.size();
  uint64_t after_tail = text.size() - span.tail_begin;
  // The backend's marker stands for bytes it dropped; they are in the scrollback, it is not.
  if (anchor.holds_drop) {
    bool ambiguous = false;
    const std::optional<BackendDrop> in_span = FindBackendDrop(left_out, &ambiguous);
    const std::optional<BackendDrop> in_tail =
        FindBackendDrop(text.substr(span.tail_begin), &ambiguous);
    if (ambiguous || (in_span && in_tail)) return std::nullopt;
    if (in_span) bytes = bytes - in_span->line_size + in_span->bytes;
    if (in_tail) after_tail = after_tail - in_tail->line_size + in_tail->bytes;
    if (!in_span && anchor.begin) return ReadPointer{*anchor.begin + span.head_end, bytes};
  } else if (anchor.begin) {
    return ReadPointer{*anchor.begin + span.head_end, bytes};
  }
  if (!anchor.end) return std::nullopt;
  if (*anchor.end < after_tail + bytes) return std::nullopt;
  return ReadPointer{*anchor.end - after_tail - bytes, bytes};
}

std::optional<ReadPointer> KeptPart(const ReadPointer& pointer, std::optional<uint64_t> oldest) {
  if (!oldest || *oldest <= pointer.cursor) return pointer;
  const uint64_t stop = pointer.cursor + pointer.max_bytes;
  if (*oldest >= stop) return std::nullopt;
  return ReadPointer{*oldest, stop - *oldest};
}

std::string ElideText(std::string_view text, size_t max_bytes, const TextAnchor& anchor,
                      const std::string& session_id) {
  std::optional<ElidedSpan> span = PlanElision(text, max_bytes);
  if (!span) return std::string(text);
  const std::string_view left_out = text.substr(span->head_end, span->tail_begin - span->head_end);
  uint64_t bytes = left_out.size();
  uint64_t lines = CountLines(left_out);
  std::optional<BackendDrop> drop =
      anchor.holds_drop ? FindBackendDrop(left_out) : std::optional<BackendDrop>();
  if (drop) {
    bytes = bytes - drop->line_size + drop->bytes;
    lines = lines - 1 + drop->lines;
  }
  std::string line = "[... " + GroupDigits(lines) + (lines == 1 ? " line (" : " lines (") +
                     GroupDigits(bytes) + " bytes) left out here";
  if (std::optional<ReadPointer> pointer = LocateSpan(text, *span, anchor)) {
    // Never a pointer to bytes the scrollback dropped: the read would start elsewhere, and a
    // model that trusts "returns them" takes a later page for the missing lines.
    std::optional<ReadPointer> kept = KeptPart(*pointer, anchor.oldest);
    if (!kept) {
      line += "; the scrollback no longer keeps them ...]";
    } else {
      line += kept->cursor == pointer->cursor
                  ? std::string("; ")
                  : "; only their last " + GroupDigits(kept->max_bytes) + " bytes are kept: ";
      line += "terminal_read {\"sessionId\": " + Dump(Json(session_id)) +
              ", \"cursor\": " + std::to_string(kept->cursor) +
              ", \"maxBytes\": " + std::to_string(kept->max_bytes) + "} returns " +
              (kept->cursor == pointer->cursor ? "them" : "those") +
              " (page on with nextCursor) ...]";
    }
  } else {
    line += "; terminal_read pages what the scrollback kept ...]";
  }
  std::string out(text.substr(0, span->head_end));
  if (!out.empty() && out.back() != '\n') out.push_back('\n');
  out += line;
  if (span->tail_begin < text.size()) {
    out.push_back('\n');
    out.append(text.substr(span->tail_begin));
  }
  return out;
}

const BoundedText* ResultBudget::Located() const {
  for (const BoundedText& text : texts) {
    if (text.place != TextPlace::kNowhere) return &text;
  }
  return nullptr;
}

Json BoundToolResult(const ResultBudget& budget, const Json& r, size_t field_bytes,
                     const TextAnchor& anchor, const std::string& session_id) {
  Json out = r;
  for (const BoundedText& bounded : budget.texts) {
    Json* object = &out;
    if (!bounded.within.empty()) {
      if (!out.is_object() || !out.contains(bounded.within)) continue;
      object = &out[bounded.within];
    }
    if (!object->is_object()) continue;
    auto it = object->find(bounded.field);
    if (it == object->end() || !it->is_string()) continue;
    const std::string& text = it->get_ref<const std::string&>();
    TextAnchor where = bounded.place == TextPlace::kNowhere ? TextAnchor{} : anchor;
    // Only a viewport the backend bounded holds its drop line; collected output and pages never.
    where.holds_drop = bounded.place != TextPlace::kCollected &&
                       bounded.place != TextPlace::kPage &&
                       object->value("truncated", false) == true;
    if (text.size() > field_bytes) *it = ElideText(text, field_bytes, where, session_id);
  }
  return out;
}

}  // namespace ptybox::runtime
