// Wiring of the decoder layers: raw bytes go to the parser (whose events reach the line model,
// then the observer) and to the libvterm screen; committed lines go to the scrollback, then
// to the line listener.
#include "backend/terminal_decoder.h"

namespace ptybox::backend {

void TerminalDecoder::Fanout::OnPrint(std::string_view utf8) {
  line_model_.OnPrint(utf8);
  if (observer_ != nullptr) observer_->OnPrint(utf8);
}

void TerminalDecoder::Fanout::OnControl(char c) {
  line_model_.OnControl(c);
  if (observer_ != nullptr) observer_->OnControl(c);
}

void TerminalDecoder::Fanout::OnCsi(const CsiSequence& csi) {
  line_model_.OnCsi(csi);
  if (observer_ != nullptr) observer_->OnCsi(csi);
}

void TerminalDecoder::Fanout::OnOsc(std::string_view payload) {
  line_model_.OnOsc(payload);
  if (observer_ != nullptr) observer_->OnOsc(payload);
}

TerminalDecoder::TerminalDecoder(Options options)
    : line_model_(options.columns, options.max_line_bytes),
      scrollback_(options.scrollback_lines, options.scrollback_bytes),
      screen_(options.rows, options.columns),
      fanout_(line_model_),
      parser_(fanout_, options.max_sequence_bytes) {
  line_model_.SetLineSink([this](std::string_view line) {
    scrollback_.Append(line);
    if (listener_) listener_(line);
  });
}

void TerminalDecoder::SetObserver(VtHandler* observer) { fanout_.set_observer(observer); }

void TerminalDecoder::SetLineListener(std::function<void(std::string_view line)> listener) {
  listener_ = std::move(listener);
}

void TerminalDecoder::Feed(std::string_view bytes) {
  parser_.Feed(bytes);
  screen_.Feed(bytes);
}

void TerminalDecoder::Resize(int rows, int columns) {
  line_model_.SetColumns(columns);
  screen_.Resize(rows, columns);
}

}  // namespace ptybox::backend
