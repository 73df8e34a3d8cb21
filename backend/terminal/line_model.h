// Layer 2 of the terminal decoder: terminal events -> lines. The pending line is a row of cells
// with a cursor, `columns` wide and wrapping, rendered faithfully within the line (overwrites,
// CR, BS, TAB, erase/insert/delete in line, wide and combining characters); LF commits it.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "backend/terminal/vt_parser.h"

namespace ptybox::backend {

// Cells a code point occupies on a terminal: 0 for combining marks and zero-width format
// characters, 2 for East Asian Wide/Fullwidth and emoji, 1 otherwise. Locale-independent.
[[nodiscard]] int TerminalCharWidth(char32_t cp);

class LineModel final : public VtHandler {
 public:
  LineModel(int columns, size_t max_line_bytes);
  void SetColumns(int columns);
  // Receives each committed line (rendered text, no newline), in order.
  void SetLineSink(std::function<void(std::string_view line)> sink);
  // The current unterminated line, rendered (trailing blanks trimmed).
  [[nodiscard]] std::string PendingText() const;
  // The same with its trailing blanks: a prompt like ">>> " as it stands before the input.
  [[nodiscard]] std::string PendingTextUntrimmed() const;
  [[nodiscard]] int columns() const { return static_cast<int>(columns_); }
  // Discards the unterminated line without committing it and starts a new one holding `utf8`
  // (printable text), the cursor after it: the line as a rendering found it.
  void ReplacePending(std::string_view utf8);
  // Keeps every line in cells, never as plain text: the same rendering by the general path, for
  // tests and the fuzzer to compare the two.
  void DisableTextMode();

  void OnPrint(std::string_view utf8) override;
  void OnControl(char c) override;
  void OnCsi(const CsiSequence& csi) override;
  void OnOsc(std::string_view payload) override;

 private:
  // One cell: the UTF-8 bytes of its character (plus attached combining marks), and how many
  // cells the character spans; the cells it covers after the first have width 0 and no bytes.
  struct Cell {
    std::array<char, 14> bytes;
    uint8_t size;
    uint8_t width;
  };
  static constexpr Cell kBlank = {{' '}, 1, 1};

  // Simple mode: while the line holds only printable ASCII (one byte, one cell each), it is
  // kept as its text, which is what most output is; anything else turns it into cells.
  size_t PutSimpleRun(const char* text, size_t size);
  void Materialize();
  void PutChar(const char* bytes, size_t size, size_t width);
  size_t PutAsciiRun(const char* text, size_t size);  // the common case, cell by cell in bulk
  void Combine(const char* bytes, size_t size);
  void Tab();
  void Commit();
  // The cursor, the weight and the wrap state of an empty line (after a commit or a replacement).
  void StartLine();
  void Render(std::string& out, bool trim = true) const;
  // Makes sure no multi-cell character is left half covered by a write or erase of the cells
  // [first, last): characters straddling either edge become blanks.
  void SplitEdges(size_t first, size_t last);
  void SetCell(size_t index, const Cell& cell);
  void Erase(size_t first, size_t last);  // cells of the current row, blanked
  void DeleteChars(size_t count);
  void InsertBlanks(size_t count);
  [[nodiscard]] size_t RowEnd() const { return row_start_ + columns_; }
  [[nodiscard]] size_t Budget() const;  // weight that may still be added
  static size_t Weight(const Cell& cell) { return cell.size > 0 ? cell.size : 1; }

  size_t columns_;
  size_t max_line_bytes_;
  std::function<void(std::string_view)> sink_;
  bool simple_ = true;
  bool text_mode_ = true;    // lines start simple
  std::string text_;         // the line in simple mode
  std::vector<Cell> cells_;  // the line otherwise
  // Sum over the cells of max(size, 1): the rendered size plus the blank each width-0 cell
  // may become. Blanking never raises it, so keeping it within max_line_bytes_ bounds both the
  // cells and the rendered line.
  size_t weight_ = 0;
  size_t cursor_ = 0;          // cell index in the logical line; may be past cells_.size()
  size_t row_start_ = 0;       // first cell of the physical row the cursor is on
  bool wrap_pending_ = false;  // a character was written in the last column (deferred wrap)
  std::string line_;           // reused buffer of the committed line
};

}  // namespace ptybox::backend
