#include "runtime/cli/attach_view.h"

#include <algorithm>

namespace ptybox::runtime {
namespace {

int IntField(const Json& j, const char* key, int fallback) {
  return j.is_object() && j.contains(key) && j[key].is_number_integer() ? j[key].get<int>()
                                                                        : fallback;
}

std::string MoveTo(int row, int column) {  // 0-based
  return "\x1b[" + std::to_string(row + 1) + ";" + std::to_string(column + 1) + "H";
}

}  // namespace

std::optional<size_t> FindDetachKey(std::string_view keys) {
  const size_t at = keys.find(kDetachKey);
  if (at == std::string_view::npos) return std::nullopt;
  return at;
}

std::string TerminalSafe(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x20 || c == 0x7f) {
      out += '?';
    } else if (c == 0xc2 && i + 1 < text.size() &&
               static_cast<unsigned char>(text[i + 1]) >= 0x80 &&
               static_cast<unsigned char>(text[i + 1]) <= 0x9f) {
      out += '?';  // U+0080..U+009F, the C1 controls in UTF-8
      ++i;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

AttachView::AttachView(const Json& watch)
    : screen_(std::clamp(IntField(watch, "rows", 24), 1, backend::Screen::kMaxRows),
              std::clamp(IntField(watch, "cols", 80), backend::Screen::kMinColumns,
                         backend::Screen::kMaxColumns)) {
  // The snapshot becomes the model's first state: each row written at its place, then the
  // cursor where the session has it. Text only: the model's own parser sees it like output.
  std::string initial = "\x1b[H\x1b[2J";
  if (watch.is_object() && watch.contains("lines") && watch["lines"].is_array()) {
    int row = 0;
    for (const Json& line : watch["lines"]) {
      if (row >= screen_.rows()) break;
      if (line.is_string()) initial += MoveTo(row, 0) + TerminalSafe(line.get<std::string>());
      ++row;
    }
  }
  const Json cursor = watch.is_object() ? watch.value("cursor", Json()) : Json();
  initial += MoveTo(std::clamp(IntField(cursor, "row", 0), 0, screen_.rows() - 1),
                    std::clamp(IntField(cursor, "column", 0), 0, screen_.columns() - 1));
  screen_.Feed(initial);
}

void AttachView::SetTerminalSize(int rows, int columns) {
  term_rows_ = std::max(rows, 2);
  term_columns_ = std::max(columns, 1);
  repaint_ = true;
}

void AttachView::SetStatus(std::string status) { status_ = std::move(status); }

bool AttachView::fits() const {
  return term_rows_ - 1 >= screen_.rows() && term_columns_ >= screen_.columns();
}

std::string AttachView::Draw() {
  std::string out;
  const int shown_rows = std::min(screen_.rows(), term_rows_ - 1);
  const int shown_columns = std::min(screen_.columns(), term_columns_);
  if (repaint_) {
    out += "\x1b[0m\x1b[H\x1b[2J";
    drawn_.assign(static_cast<size_t>(shown_rows), std::nullopt);
    drawn_status_.reset();
    repaint_ = false;
  }
  for (int row = 0; row < shown_rows; ++row) {
    std::string text = TerminalSafe(screen_.RowText(row, 0, shown_columns));
    std::optional<std::string>& drawn = drawn_[static_cast<size_t>(row)];
    if (drawn && *drawn == text) continue;
    out += MoveTo(row, 0) + text + "\x1b[K";
    drawn = std::move(text);
  }
  if (drawn_status_ != status_) {
    // Reverse video, padded (or cut) to the terminal's width; the status is ours, made safe.
    std::string line = TerminalSafe(status_);
    if (line.size() > static_cast<size_t>(term_columns_)) {
      line.resize(static_cast<size_t>(term_columns_));
      // Never end inside a UTF-8 character.
      while (!line.empty() && (static_cast<unsigned char>(line.back()) & 0xc0) == 0x80) {
        line.pop_back();
      }
      if (!line.empty() && static_cast<unsigned char>(line.back()) >= 0xc0) line.pop_back();
    }
    out += MoveTo(term_rows_ - 1, 0) + "\x1b[7m" + line + "\x1b[K\x1b[0m";
    drawn_status_ = status_;
  }
  const backend::Screen::Position cursor = screen_.Cursor();
  if (cursor.row < shown_rows && cursor.column < shown_columns) {
    out += MoveTo(cursor.row, cursor.column);
  } else {
    out += MoveTo(term_rows_ - 1, 0);
  }
  return out;
}

}  // namespace ptybox::runtime
