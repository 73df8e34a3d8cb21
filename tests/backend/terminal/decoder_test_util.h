// Test helpers for the decoder: an event recorder (prints coalesced, so how the input was split
// cannot change the record), a parser + line model runner, and the splitter that feeds one
// input whole, at every byte boundary in two parts, in three parts, and byte by byte.
#pragma once

#include <gtest/gtest.h>

#include <cstdio>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "backend/terminal/line_model.h"
#include "backend/terminal/vt_parser.h"

namespace ptybox::backend::testing {

// One string per event: "text:<utf8>", "ctl:<hex>", "csi:<marker><params>;<intermediate><final>",
// "osc:<payload>"; adjacent prints merged.
class EventRecorder final : public VtHandler {
 public:
  void OnPrint(std::string_view utf8) override {
    if (!events.empty() && events.back().starts_with("text:")) {
      events.back().append(utf8);
    } else {
      events.push_back("text:" + std::string(utf8));
    }
  }
  void OnControl(char c) override {
    char buffer[16];
    std::snprintf(buffer, sizeof buffer, "ctl:%02x", static_cast<unsigned char>(c));
    events.emplace_back(buffer);
  }
  void OnCsi(const CsiSequence& csi) override {
    std::string event = "csi:";
    if (csi.private_marker != 0) event.push_back(csi.private_marker);
    for (int i = 0; i < csi.param_count; ++i) {
      if (i > 0) event.push_back(',');
      event += csi.params[static_cast<size_t>(i)] < 0
                   ? std::string("-")
                   : std::to_string(csi.params[static_cast<size_t>(i)]);
    }
    event.push_back(';');
    if (csi.intermediate != 0) event.push_back(csi.intermediate);
    event.push_back(csi.final);
    events.push_back(event);
  }
  void OnOsc(std::string_view payload) override { events.push_back("osc:" + std::string(payload)); }

  std::vector<std::string> events;
};

// The input split at the given cut points.
inline std::vector<std::string_view> SplitAt(std::string_view input, std::vector<size_t> cuts) {
  std::vector<std::string_view> parts;
  size_t from = 0;
  for (size_t cut : cuts) {
    parts.push_back(input.substr(from, cut - from));
    from = cut;
  }
  parts.push_back(input.substr(from));
  return parts;
}

// Every way of splitting `input` the tests try: whole, two parts at every boundary, three
// parts at every pair of boundaries (inputs up to 48 bytes), byte by byte.
inline void ForEachSplit(
    std::string_view input,
    const std::function<void(const std::vector<std::string_view>&, const std::string& how)>& run) {
  run({input}, "whole");
  for (size_t i = 1; i < input.size(); ++i)
    run(SplitAt(input, {i}), "split at " + std::to_string(i));
  if (input.size() <= 48) {
    for (size_t i = 1; i < input.size(); ++i) {
      for (size_t j = i + 1; j < input.size(); ++j) {
        run(SplitAt(input, {i, j}), "split at " + std::to_string(i) + " and " + std::to_string(j));
      }
    }
  }
  std::vector<std::string_view> bytes;
  for (size_t i = 0; i < input.size(); ++i) bytes.push_back(input.substr(i, 1));
  run(bytes, "byte by byte");
}

inline std::vector<std::string> ParseEvents(const std::vector<std::string_view>& parts,
                                            size_t max_sequence_bytes = 256 * 1024) {
  EventRecorder recorder;
  VtParser parser(recorder, max_sequence_bytes);
  for (std::string_view part : parts) parser.Feed(part);
  return recorder.events;
}

struct Rendered {
  std::vector<std::string> lines;
  std::string pending;
  bool operator==(const Rendered&) const = default;
};

inline void PrintTo(const Rendered& r, std::ostream* os) {
  *os << "lines [";
  for (const auto& line : r.lines) *os << ::testing::PrintToString(line) << " ";
  *os << "] pending " << ::testing::PrintToString(r.pending);
}

inline Rendered RenderLines(const std::vector<std::string_view>& parts, int columns = 80,
                            size_t max_line_bytes = 64 * 1024,
                            size_t max_sequence_bytes = 256 * 1024, bool text_mode = true) {
  Rendered result;
  LineModel model(columns, max_line_bytes);
  if (!text_mode) model.DisableTextMode();
  model.SetLineSink([&](std::string_view line) { result.lines.emplace_back(line); });
  VtParser parser(model, max_sequence_bytes);
  for (std::string_view part : parts) parser.Feed(part);
  result.pending = model.PendingText();
  return result;
}

}  // namespace ptybox::backend::testing
