#include "runtime/audit/audit_record.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>

#include "backend/terminal/utf8.h"

namespace ptybox::runtime::audit {
namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

bool IsContinuation(unsigned char b) { return (b & 0xC0) == 0x80; }

// Length of the well-formed character at `bytes[i]` (1 for ASCII), 0 when it is not one, or
// nullopt when the bytes end before the character could be judged complete.
std::optional<size_t> CharAt(std::string_view bytes, size_t i) {
  const auto b = static_cast<unsigned char>(bytes[i]);
  if (b < 0x80) return 1;
  std::optional<backend::Utf8Lead> lead = backend::ClassifyUtf8Lead(b);
  if (!lead) return 0;
  for (size_t k = 1; k <= lead->need; ++k) {
    if (i + k >= bytes.size()) return std::nullopt;
    const auto c = static_cast<unsigned char>(bytes[i + k]);
    const bool ok = k == 1 ? (c >= lead->lower && c <= lead->upper) : IsContinuation(c);
    if (!ok) return 0;
  }
  return size_t{1} + lead->need;
}

// Appends the valid UTF-8 of `bytes` to `out`; returns how many trailing bytes form an
// incomplete character (not appended) when `hold_tail`, else replaces them too.
size_t AppendValid(std::string_view bytes, std::string& out, bool hold_tail) {
  size_t i = 0;
  while (i < bytes.size()) {
    std::optional<size_t> n = CharAt(bytes, i);
    if (!n) {
      if (hold_tail) return bytes.size() - i;
      out += kReplacement;
      ++i;
      continue;
    }
    if (*n == 0) {
      out += kReplacement;
      ++i;
      continue;
    }
    out.append(bytes.substr(i, *n));
    i += *n;
  }
  return 0;
}

}  // namespace

std::string ValidUtf8(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  AppendValid(bytes, out, /*hold_tail=*/false);
  return out;
}

Bounded Bound(std::string_view bytes, size_t max_bytes) {
  Bounded out;
  out.original_bytes = bytes.size();
  // Only the bytes that can survive are validated: a hostile megabyte costs no more than this.
  if (bytes.size() <= max_bytes) {
    out.text = ValidUtf8(bytes);
    if (out.text.size() <= max_bytes) return out;
  }
  out.truncated = true;
  const size_t head_room = max_bytes / 4;
  const size_t tail_room = max_bytes - head_room;
  // Raw slices that never overlap, so the omitted count is exact in input bytes.
  const size_t raw_head = std::min(bytes.size(), head_room);
  const size_t raw_tail = std::min(bytes.size() - raw_head, tail_room);
  const size_t omitted = bytes.size() - raw_head - raw_tail;
  std::string head = ValidUtf8(bytes.substr(0, raw_head));
  std::string tail = ValidUtf8(bytes.substr(bytes.size() - raw_tail));
  // Replacements can grow the text three-fold: cut again, at character boundaries.
  if (head.size() > head_room) {
    size_t cut = head_room;
    while (cut > 0 && IsContinuation(static_cast<unsigned char>(head[cut]))) --cut;
    head.resize(cut);
  }
  if (tail.size() > tail_room) {
    size_t from = tail.size() - tail_room;
    while (from < tail.size() && IsContinuation(static_cast<unsigned char>(tail[from]))) ++from;
    tail.erase(0, from);
  }
  out.text = std::move(head) + "\n[... " + std::to_string(omitted) + " bytes omitted ...]\n" +
             std::move(tail);
  return out;
}

void PutBounded(Json& record, const std::string& key, std::string_view bytes, size_t max_bytes) {
  Bounded bounded = Bound(bytes, max_bytes);
  record[key] = std::move(bounded.text);
  if (bounded.truncated) record[key + "Bytes"] = bounded.original_bytes;
}

std::string IsoTimestamp(std::chrono::system_clock::time_point at) {
  using namespace std::chrono;
  const auto since = at.time_since_epoch();
  const time_t seconds = duration_cast<std::chrono::seconds>(since).count();
  const auto millis = duration_cast<milliseconds>(since).count() % 1000;
  tm utc{};
  ::gmtime_r(&seconds, &utc);
  char buf[80];
  std::snprintf(buf, sizeof(buf), "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", utc.tm_year + 1900,
                utc.tm_mon + 1, utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec,
                static_cast<int>(millis));
  return buf;
}

std::string JsonLine(const Json& record) {
  std::string line = record.dump(-1, ' ', false, Json::error_handler_t::replace);
  line += '\n';
  return line;
}

std::string Utf8Stream::Feed(std::string_view bytes) {
  std::string input;
  std::string_view all = bytes;
  if (!held_.empty()) {
    input = std::move(held_) + std::string(bytes);
    held_.clear();
    all = input;
  }
  std::string out;
  out.reserve(all.size());
  const size_t held = AppendValid(all, out, /*hold_tail=*/true);
  held_.assign(all.substr(all.size() - held));
  return out;
}

std::string Utf8Stream::Flush() {
  std::string out;
  AppendValid(held_, out, /*hold_tail=*/false);
  held_.clear();
  return out;
}

std::string MarkerStripper::Feed(std::string_view bytes) {
  static constexpr std::string_view kStart = "\x1b]6973;";
  std::string out;
  out.reserve(bytes.size());
  for (size_t i = 0; i < bytes.size(); ++i) {
    if (!inside_ && held_.empty()) {
      // Outside any marker and nothing held: everything up to the next ESC passes as it is, in
      // one copy (byte by byte, this was 60% of the daemon's CPU under a flood of output).
      const void* esc = std::memchr(bytes.data() + i, '\x1b', bytes.size() - i);
      const size_t end = esc == nullptr
                             ? bytes.size()
                             : static_cast<size_t>(static_cast<const char*>(esc) - bytes.data());
      out.append(bytes.data() + i, end - i);
      if (end == bytes.size()) break;
      i = end;  // the ESC: looked at below
    }
    const char c = bytes[i];
    if (inside_) {
      // A marker ends exactly where the terminal's parser ends an OSC string
      // (backend/terminal/vt_parser.cc, FeedOsc and SequenceByte): BEL or ST end it; CAN or SUB
      // cancel it; an ESC not followed by `\` abandons it and starts a new sequence. Until then
      // every byte belongs to it (other controls are ignored inside a string). What ended it is
      // dropped with it, except the ESC of a new sequence, which is looked at again.
      if (escape_) {
        escape_ = false;
        inside_ = false;
        if (c == '\\') continue;
        held_ = '\x1b';
        --i;  // this byte follows the new sequence's ESC
        continue;
      }
      if (c == '\x07' || c == '\x18' || c == '\x1a') {
        inside_ = false;
        continue;
      }
      // Dropped as it comes, whatever the marker's length: it holds the shell's ${PWD@Q}, which a
      // deep working directory makes longer than any fixed bound (the daemon's prompt parser
      // still accepts it), and passing an over-long marker on gave its nonce to watchers and
      // recordings. Nothing is held, so memory stays bounded; a marker that never ends hides
      // what follows exactly as the terminal's parser does (it discards an over-long OSC string
      // through its end).
      if (c == '\x1b') escape_ = true;
      continue;
    }
    held_ += c;
    if (kStart.starts_with(held_)) {
      if (held_.size() == kStart.size()) {
        held_.clear();
        inside_ = true;
      }
      continue;
    }
    // Not a marker: pass on what was held; its last byte may begin a new one.
    const char last = held_.back();
    held_.pop_back();
    out += held_;
    held_.clear();
    if (last == '\x1b') {
      held_ = last;
    } else {
      out += last;
    }
  }
  return out;
}

std::string CastHeaderLine(const CastHeader& header) {
  Json h = {{"version", 2},
            {"width", header.width},
            {"height", header.height},
            {"timestamp", header.timestamp}};
  if (!header.env.empty()) {
    Json env = Json::object();
    for (const auto& [name, value] : header.env) env[name] = ValidUtf8(value);
    h["env"] = std::move(env);
  }
  if (!header.title.empty()) h["title"] = ValidUtf8(header.title);
  return JsonLine(h);
}

std::string CastEventLine(double seconds, char code, std::string_view data) {
  if (!(seconds >= 0)) seconds = 0;  // NaN and negatives
  char time[32];
  std::snprintf(time, sizeof(time), "%.6f", seconds);
  std::string line = "[";
  line += time;
  line += ", ";
  line += Json(std::string(1, code)).dump();
  line += ", ";
  line += Json(std::string(data)).dump(-1, ' ', false, Json::error_handler_t::replace);
  line += "]\n";
  return line;
}

std::string CastSize(int columns, int rows) {
  return std::to_string(columns) + "x" + std::to_string(rows);
}

}  // namespace ptybox::runtime::audit
