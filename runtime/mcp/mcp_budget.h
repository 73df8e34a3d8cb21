// What a model receives from one MCP tool result, bounded: `ptybox mcp --max-result-bytes`
// (default 16384) counts every byte of the answer the host receives. A text over its share keeps
// its head and its tail (the tail, where errors and exit statuses are, gets the larger share) and
// one line in between naming what was left out and the terminal_read call that returns it.
// Pure functions: the server supplies the scrollback offsets it learned.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/rpc/json_rpc.h"

namespace ptybox::runtime {

inline constexpr size_t kDefaultMcpResultBytes = 16384;
inline constexpr size_t kMinMcpResultBytes = 4096;
// Below this, a text field is never shortened (the elision line alone is about 150 bytes).
inline constexpr size_t kMinElidedTextBytes = 512;

// Where the kept head ends and the kept tail starts in a text (byte indices, at UTF-8 character
// boundaries; at line boundaries when one is close).
struct ElidedSpan {
  size_t head_end = 0;
  size_t tail_begin = 0;
};

// nullopt when `text` fits in max_bytes; otherwise the span to leave out so that head, tail and
// an elision line of at most kElisionLineReserve bytes fit in max_bytes.
inline constexpr size_t kElisionLineReserve = 256;
[[nodiscard]] std::optional<ElidedSpan> PlanElision(std::string_view text, size_t max_bytes);

// The backend's own drop line in a viewport it already bounded (backend/terminal/send_capture.cc):
// "[... N bytes (M lines) dropped ...]" as a whole line of `region`.
struct BackendDrop {
  uint64_t bytes = 0;
  uint64_t lines = 0;
  size_t line_size = 0;  // the marker line with its "\n"
};
// nullopt when `region` holds no such line, or more than one (then *ambiguous is set, when
// given): a program can print a line of that shape, so only a text whose result says the
// backend bounded it (`truncated`) is searched, and two candidates name no count.
[[nodiscard]] std::optional<BackendDrop> FindBackendDrop(std::string_view region,
                                                         bool* ambiguous = nullptr);

// How a text maps onto the session's scrollback (byte offsets, backend/terminal/scrollback.h):
// `begin`, the offset of its first byte (a terminal_read page, or collected output at its
// `outputCursor`), or `end`, the offset just past its
// last byte (a send's viewport, anchored at the scrollback's end when the send settled).
// `oldest`, when known, is the scrollback's oldest retained offset: a send's viewport may hold a
// head the scrollback already dropped (it keeps its last scrollbackLines lines), so a pointer
// before it would name bytes no read returns.
struct TextAnchor {
  std::optional<uint64_t> begin;
  std::optional<uint64_t> end;
  std::optional<uint64_t> oldest = std::nullopt;
  // The text may hold the backend's drop line: its result says `truncated`. Otherwise a line of
  // that shape is the program's output and counts as such.
  bool holds_drop = false;
};

// The terminal_read call that returns the bytes a span left out of `text`.
struct ReadPointer {
  uint64_t cursor = 0;
  uint64_t max_bytes = 0;
};
[[nodiscard]] std::optional<ReadPointer> LocateSpan(std::string_view text, const ElidedSpan& span,
                                                    const TextAnchor& anchor);

// The part of `pointer` the scrollback still keeps when its oldest retained offset is `oldest`:
// the pointer itself when all of it is kept, its end when only that is, nullopt when none is.
[[nodiscard]] std::optional<ReadPointer> KeptPart(const ReadPointer& pointer,
                                                  std::optional<uint64_t> oldest);

// `text` within max_bytes: unchanged when it fits, else head, one elision line, tail.
[[nodiscard]] std::string ElideText(std::string_view text, size_t max_bytes,
                                    const TextAnchor& anchor, const std::string& session_id);

// Where a text field of a tool result sits in the session's scrollback.
enum class TextPlace {
  kNowhere,        // not located: a motd, a settled background send's viewport
  kScrollbackEnd,  // ends where the scrollback ended when it settled: a send's viewport
  kPage,           // a page of scrollback starting at the result's `cursor`: a read's text
  kCollected,      // a background send's collected output: it starts at the result's
                   // `outputCursor` when the backend knows that (the bytes there are exactly it)
};

// One text field of a tool result that the budget may shorten.
struct BoundedText {
  std::string field;
  std::string within = {};  // the object holding it ("result"); empty: the result itself
  TextPlace place = TextPlace::kNowhere;
};

// Which text fields of a tool's result the budget may shorten, in the method's MCP face
// (runtime/mcp/tool_face.h), so the server names no method. At most one field is located
// (kScrollbackEnd, kPage or kCollected): the server learns its anchor.
struct ResultBudget {
  std::vector<BoundedText> texts = {};
  // The located text, nullptr when none is.
  [[nodiscard]] const BoundedText* Located() const;
};

// The tool result `r` (the contract's JSON) with each of `budget`'s text fields bounded to
// `field_bytes`. `anchor` locates the located text in the scrollback when known.
[[nodiscard]] Json BoundToolResult(const ResultBudget& budget, const Json& r, size_t field_bytes,
                                   const TextAnchor& anchor, const std::string& session_id);

// "1,234,567": counts a model reads at a glance.
[[nodiscard]] std::string GroupDigits(uint64_t value);

}  // namespace ptybox::runtime
