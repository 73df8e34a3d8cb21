// The pure encoders behind the audit log and session recordings (docs/security.md, "Audit log
// and recordings"): hostile bytes made into bounded, valid UTF-8; one audit record as one JSON
// line; asciicast v2 header and event lines. No I/O, no clock: callers pass times in.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace ptybox::runtime::audit {

using Json = nlohmann::ordered_json;  // keys in the order written: ts, seq, event first

// Text fields of an audit record (an input, a viewport, a message) keep at most this many
// bytes of text; escaped as JSON that is at most six times as many.
inline constexpr size_t kMaxFieldBytes = 4096;
// Short fields (names, reasons, paths, command arguments).
inline constexpr size_t kMaxShortFieldBytes = 512;

// `bytes` as valid UTF-8: every byte that does not begin a well-formed character (overlongs,
// surrogates and code points past U+10FFFF included) becomes U+FFFD.
std::string ValidUtf8(std::string_view bytes);

// `bytes` made valid UTF-8 and cut to at most `max_bytes` bytes at a character boundary: the
// head (a quarter of the room) and the tail (the rest) around "\n[... N bytes omitted ...]\n",
// since a result's end says most. `original_bytes` is the input's size.
struct Bounded {
  std::string text;
  size_t original_bytes = 0;
  bool truncated = false;
};
Bounded Bound(std::string_view bytes, size_t max_bytes = kMaxFieldBytes);

// Adds `key` (the bounded text) to `record`, and `<key>Bytes` with the original size when it
// was cut.
void PutBounded(Json& record, const std::string& key, std::string_view bytes,
                size_t max_bytes = kMaxFieldBytes);

// "2026-11-30T21:40:05.123Z".
std::string IsoTimestamp(std::chrono::system_clock::time_point at);

// One record as one line: compact JSON, "\n"-terminated, never throwing (any invalid UTF-8
// left in a value is replaced).
std::string JsonLine(const Json& record);

// Splits a byte stream into valid UTF-8 chunks: an incomplete character at the end of one
// chunk is held until the next (a PTY read can end inside a character); invalid bytes become
// U+FFFD.
class Utf8Stream final {
 public:
  std::string Feed(std::string_view bytes);
  // Whatever is held, as U+FFFD (the stream ended inside a character).
  std::string Flush();

 private:
  std::string held_;
};

// Removes the shell backend's prompt markers (OSC 6973 ... BEL or ST,
// backend/readiness/prompt_protocol.h) from a byte stream, also when one is split across reads:
// they carry the session's nonce, which no record keeps, and a terminal shows nothing for them
// anyway. A marker ends exactly where the terminal's parser (backend/terminal/vt_parser.cc) ends an
// OSC string: BEL, ST, CAN, SUB, or an ESC that starts another sequence, so output after a
// cancelled marker is never hidden. A marker of any length is dropped byte by byte as it comes
// (nothing of it is held or passed on), as the terminal shows nothing of an OSC string.
class MarkerStripper final {
 public:
  std::string Feed(std::string_view bytes);

 private:
  std::string held_;     // a possible start of a marker (at most its 7-byte introducer)
  bool inside_ = false;  // the introducer was seen: every byte to the marker's end is dropped
  bool escape_ = false;  // inside, the last byte was ESC (ST or a new sequence follows)
};

// asciicast v2 (https://docs.asciinema.org/manual/asciicast/v2/).
struct CastHeader {
  int width = 80;
  int height = 24;
  int64_t timestamp = 0;                   // Unix seconds
  std::map<std::string, std::string> env;  // TERM, SHELL
  std::string title;
};
std::string CastHeaderLine(const CastHeader& header);
// `[seconds, "o"|"i"|"r"|"m", data]` with microsecond precision; `data` must be valid UTF-8.
std::string CastEventLine(double seconds, char code, std::string_view data);
// The data of an `r` event: "COLSxROWS".
std::string CastSize(int columns, int rows);

}  // namespace ptybox::runtime::audit
