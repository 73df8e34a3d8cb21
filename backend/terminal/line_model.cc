// Layer 2 of the terminal decoder: printable text, C0 controls and in-line CSI edits applied to
// a row of cells with a cursor; LF (and VT, FF) commits the rendered row to the line sink.
#include "backend/terminal/line_model.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace ptybox::backend {
namespace {

constexpr size_t kMaxColumns = 10000;
constexpr size_t kMinLineBytes = 64;
constexpr size_t kTabWidth = 8;

struct Range {
  char32_t first;
  char32_t last;
};

// Zero-width: combining marks (Mn/Me of the common scripts), zero-width format characters,
// variation selectors, emoji skin-tone modifiers, tags. Sorted, disjoint.
constexpr Range kZeroWidth[] = {
    {0x0300, 0x036F},   {0x0483, 0x0489},   {0x0591, 0x05BD},   {0x05BF, 0x05BF}, {0x05C1, 0x05C2},
    {0x05C4, 0x05C5},   {0x05C7, 0x05C7},   {0x0610, 0x061A},   {0x064B, 0x065F}, {0x0670, 0x0670},
    {0x06D6, 0x06DC},   {0x06DF, 0x06E4},   {0x06E7, 0x06E8},   {0x06EA, 0x06ED}, {0x0711, 0x0711},
    {0x0730, 0x074A},   {0x07A6, 0x07B0},   {0x07EB, 0x07F3},   {0x0816, 0x0819}, {0x081B, 0x0823},
    {0x0825, 0x0827},   {0x0829, 0x082D},   {0x0859, 0x085B},   {0x08D3, 0x08E1}, {0x08E3, 0x0902},
    {0x093A, 0x093A},   {0x093C, 0x093C},   {0x0941, 0x0948},   {0x094D, 0x094D}, {0x0951, 0x0957},
    {0x0962, 0x0963},   {0x0981, 0x0981},   {0x09BC, 0x09BC},   {0x09C1, 0x09C4}, {0x09CD, 0x09CD},
    {0x09E2, 0x09E3},   {0x0A01, 0x0A02},   {0x0A3C, 0x0A3C},   {0x0A41, 0x0A51}, {0x0A70, 0x0A71},
    {0x0A81, 0x0A82},   {0x0ABC, 0x0ABC},   {0x0AC1, 0x0AC8},   {0x0ACD, 0x0ACD}, {0x0B01, 0x0B01},
    {0x0B3C, 0x0B3C},   {0x0B41, 0x0B44},   {0x0B4D, 0x0B4D},   {0x0BC0, 0x0BC0}, {0x0BCD, 0x0BCD},
    {0x0C3E, 0x0C40},   {0x0C46, 0x0C56},   {0x0CBC, 0x0CBC},   {0x0CCC, 0x0CCD}, {0x0D41, 0x0D44},
    {0x0D4D, 0x0D4D},   {0x0E31, 0x0E31},   {0x0E34, 0x0E3A},   {0x0E47, 0x0E4E}, {0x0EB1, 0x0EB1},
    {0x0EB4, 0x0EBC},   {0x0EC8, 0x0ECD},   {0x0F18, 0x0F19},   {0x0F35, 0x0F35}, {0x0F37, 0x0F37},
    {0x0F39, 0x0F39},   {0x0F71, 0x0F7E},   {0x0F80, 0x0F84},   {0x102D, 0x1030}, {0x1032, 0x1037},
    {0x1039, 0x103A},   {0x1160, 0x11FF},   {0x135D, 0x135F},   {0x1712, 0x1714}, {0x17B4, 0x17B5},
    {0x17B7, 0x17BD},   {0x17C6, 0x17C6},   {0x17C9, 0x17D3},   {0x180B, 0x180F}, {0x1AB0, 0x1AFF},
    {0x1DC0, 0x1DFF},   {0x200B, 0x200F},   {0x202A, 0x202E},   {0x2060, 0x2064}, {0x20D0, 0x20FF},
    {0x2CEF, 0x2CF1},   {0x2DE0, 0x2DFF},   {0x302A, 0x302D},   {0x3099, 0x309A}, {0xA66F, 0xA672},
    {0xA674, 0xA67D},   {0xA69E, 0xA69F},   {0xFE00, 0xFE0F},   {0xFE20, 0xFE2F}, {0xFEFF, 0xFEFF},
    {0x1F3FB, 0x1F3FF}, {0xE0000, 0xE007F}, {0xE0100, 0xE01EF},
};

// Two cells: East Asian Wide and Fullwidth, and emoji presented as pictographs. Sorted, disjoint.
constexpr Range kWide[] = {
    {0x1100, 0x115F},   {0x231A, 0x231B},   {0x2329, 0x232A},   {0x23E9, 0x23EC},
    {0x23F0, 0x23F0},   {0x23F3, 0x23F3},   {0x25FD, 0x25FE},   {0x2614, 0x2615},
    {0x2648, 0x2653},   {0x267F, 0x267F},   {0x2693, 0x2693},   {0x26A1, 0x26A1},
    {0x26AA, 0x26AB},   {0x26BD, 0x26BE},   {0x26C4, 0x26C5},   {0x26CE, 0x26CE},
    {0x26D4, 0x26D4},   {0x26EA, 0x26EA},   {0x26F2, 0x26F3},   {0x26F5, 0x26F5},
    {0x26FA, 0x26FA},   {0x26FD, 0x26FD},   {0x2705, 0x2705},   {0x270A, 0x270B},
    {0x2728, 0x2728},   {0x274C, 0x274C},   {0x274E, 0x274E},   {0x2753, 0x2755},
    {0x2757, 0x2757},   {0x2795, 0x2797},   {0x27B0, 0x27B0},   {0x27BF, 0x27BF},
    {0x2B1B, 0x2B1C},   {0x2B50, 0x2B50},   {0x2B55, 0x2B55},   {0x2E80, 0x303E},
    {0x3041, 0x3247},   {0x3250, 0x4DBF},   {0x4E00, 0xA4CF},   {0xA960, 0xA97F},
    {0xAC00, 0xD7A3},   {0xF900, 0xFAFF},   {0xFE10, 0xFE19},   {0xFE30, 0xFE6F},
    {0xFF00, 0xFF60},   {0xFFE0, 0xFFE6},   {0x16FE0, 0x16FE4}, {0x17000, 0x18CFF},
    {0x1B000, 0x1B2FF}, {0x1F004, 0x1F004}, {0x1F0CF, 0x1F0CF}, {0x1F18E, 0x1F18E},
    {0x1F191, 0x1F19A}, {0x1F200, 0x1F202}, {0x1F210, 0x1F23B}, {0x1F240, 0x1F248},
    {0x1F250, 0x1F251}, {0x1F260, 0x1F265}, {0x1F300, 0x1F320}, {0x1F32D, 0x1F335},
    {0x1F337, 0x1F37C}, {0x1F37E, 0x1F393}, {0x1F3A0, 0x1F3CA}, {0x1F3CF, 0x1F3D3},
    {0x1F3E0, 0x1F3F0}, {0x1F3F4, 0x1F3F4}, {0x1F3F8, 0x1F3FA}, {0x1F400, 0x1F43E},
    {0x1F440, 0x1F440}, {0x1F442, 0x1F4FC}, {0x1F4FF, 0x1F53D}, {0x1F54B, 0x1F54E},
    {0x1F550, 0x1F567}, {0x1F57A, 0x1F57A}, {0x1F595, 0x1F596}, {0x1F5A4, 0x1F5A4},
    {0x1F5FB, 0x1F64F}, {0x1F680, 0x1F6C5}, {0x1F6CC, 0x1F6CC}, {0x1F6D0, 0x1F6D2},
    {0x1F6D5, 0x1F6D7}, {0x1F6DC, 0x1F6DF}, {0x1F6EB, 0x1F6EC}, {0x1F6F4, 0x1F6FC},
    {0x1F7E0, 0x1F7EB}, {0x1F7F0, 0x1F7F0}, {0x1F90C, 0x1F93A}, {0x1F93C, 0x1F945},
    {0x1F947, 0x1F9FF}, {0x1FA70, 0x1FAFF}, {0x20000, 0x2FFFD}, {0x30000, 0x3FFFD},
};

template <size_t N>
bool InTable(const Range (&table)[N], char32_t cp) {
  if (cp < table[0].first || cp > table[N - 1].last) return false;
  const Range* it = std::upper_bound(std::begin(table), std::end(table), cp,
                                     [](char32_t c, const Range& r) { return c < r.first; });
  return it != std::begin(table) && cp <= (it - 1)->last;
}

// Decodes the character at `s` (valid UTF-8 from the parser); malformed input, which only a
// direct caller can pass, decodes as U+FFFD over one byte.
size_t Decode(const unsigned char* s, size_t available, char32_t* cp) {
  const unsigned char b = s[0];
  size_t size = b >= 0xf0 ? 4 : b >= 0xe0 ? 3 : b >= 0xc0 ? 2 : 0;
  if (b >= 0xf5 || b == 0xc0 || b == 0xc1 || size == 0 || size > available) size = 0;
  char32_t value = size == 2 ? (b & 0x1f) : size == 3 ? (b & 0x0f) : (b & 0x07);
  for (size_t i = 1; i < size; ++i) {
    if ((s[i] & 0xc0) != 0x80) {
      size = 0;
      break;
    }
    value = (value << 6) | (s[i] & 0x3f);
  }
  if (size == 0 || (size == 3 && value < 0x800) || (size == 4 && value < 0x10000) ||
      value > 0x10ffff || (value >= 0xd800 && value <= 0xdfff)) {
    *cp = 0xfffd;
    return 0;
  }
  *cp = value;
  return size;
}

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";

bool IsBlank(char c) { return c == ' ' || c == '\t'; }

bool IsPrintableAscii(char c) { return c >= 0x20 && c < 0x7f; }

// How many of the first `size` bytes are printable ASCII, eight at a time where possible.
size_t PrintableAsciiPrefix(const char* text, size_t size) {
  constexpr uint64_t kOnes = 0x0101010101010101;
  constexpr uint64_t kHigh = 0x8080808080808080;
  size_t k = 0;
  while (size - k >= 8) {
    uint64_t word;
    std::memcpy(&word, text + k, sizeof word);
    if (((word - 0x20 * kOnes) | word | (word + kOnes)) & kHigh) break;
    k += 8;
  }
  while (k < size && IsPrintableAscii(text[k])) ++k;
  return k;
}

}  // namespace

namespace {

int TableWidth(char32_t cp) {
  if (InTable(kZeroWidth, cp)) return 0;
  if (InTable(kWide, cp)) return 2;
  return 1;
}

// The widths of the Basic Multilingual Plane, two bits each, computed once from the tables.
class BmpWidths {
 public:
  BmpWidths() {
    for (char32_t cp = 0; cp < 0x10000; ++cp) {
      bits_[cp / 4] = static_cast<uint8_t>(bits_[cp / 4] | TableWidth(cp) << (cp % 4 * 2));
    }
  }
  [[nodiscard]] int Width(char32_t cp) const { return bits_[cp / 4] >> (cp % 4 * 2) & 3; }

 private:
  std::array<uint8_t, 0x10000 / 4> bits_{};
};

}  // namespace

int TerminalCharWidth(char32_t cp) {
  if (cp < 0x300) return 1;
  if (cp < 0x10000) {
    static const BmpWidths widths;
    return widths.Width(cp);
  }
  return TableWidth(cp);
}

LineModel::LineModel(int columns, size_t max_line_bytes)
    : columns_(std::clamp<size_t>(static_cast<size_t>(std::max(columns, 1)), 1, kMaxColumns)),
      max_line_bytes_(std::max(max_line_bytes, kMinLineBytes)) {}

void LineModel::SetColumns(int columns) {
  columns_ = std::clamp<size_t>(static_cast<size_t>(std::max(columns, 1)), 1, kMaxColumns);
  // The logical line reflows: the cursor keeps its cell, which may now be on another row.
  if (wrap_pending_) {
    const size_t next = cursor_ + 1;
    if (next % columns_ != 0) {
      cursor_ = next;
      wrap_pending_ = false;
    }
  }
  row_start_ = cursor_ - cursor_ % columns_;
}

void LineModel::DisableTextMode() {
  text_mode_ = false;
  Materialize();
}

void LineModel::SetLineSink(std::function<void(std::string_view line)> sink) {
  sink_ = std::move(sink);
}

std::string LineModel::PendingText() const {
  std::string text;
  Render(text);
  return text;
}

std::string LineModel::PendingTextUntrimmed() const {
  std::string text;
  Render(text, /*trim=*/false);
  return text;
}

size_t LineModel::Budget() const {
  return weight_ >= max_line_bytes_ ? 0 : max_line_bytes_ - weight_;
}

void LineModel::OnPrint(std::string_view utf8) {
  const auto* s = reinterpret_cast<const unsigned char*>(utf8.data());
  const size_t n = utf8.size();
  size_t i = 0;
  while (i < n) {
    if (s[i] < 0x80) {
      i += simple_ ? PutSimpleRun(utf8.data() + i, n - i) : PutAsciiRun(utf8.data() + i, n - i);
      continue;
    }
    Materialize();
    char32_t cp = 0;
    const size_t size = Decode(s + i, n - i, &cp);
    if (size == 0) {
      PutChar(kReplacement.data(), kReplacement.size(), 1);
      ++i;
      continue;
    }
    const int width = TerminalCharWidth(cp);
    if (width == 0) {
      Combine(utf8.data() + i, size);
    } else {
      PutChar(utf8.data() + i, size, static_cast<size_t>(width));
    }
    i += size;
  }
}

size_t LineModel::PutSimpleRun(const char* text, size_t size) {
  if (!IsPrintableAscii(text[0])) return 1;  // controls never reach OnPrint from the parser
  if (wrap_pending_) {                       // the deferred wrap happens now
    row_start_ += columns_;
    cursor_ = row_start_;
    wrap_pending_ = false;
  }
  const size_t row_end = RowEnd();
  const size_t k = PrintableAsciiPrefix(text, std::min(size, row_end - cursor_));
  const size_t end = cursor_ + k;
  if (end > max_line_bytes_) {  // a soft break is due: the cell path knows how
    Materialize();
    return PutAsciiRun(text, size);
  }
  if (cursor_ > text_.size()) text_.append(cursor_ - text_.size(), ' ');
  const size_t overwritten = std::min(k, text_.size() - cursor_);
  std::memcpy(text_.data() + cursor_, text, overwritten);
  text_.append(text + overwritten, k - overwritten);
  weight_ = text_.size();
  cursor_ = end;
  if (cursor_ == row_end) {
    --cursor_;
    wrap_pending_ = true;
  }
  return k;
}

void LineModel::Materialize() {
  if (!simple_) return;
  simple_ = false;
  cells_.resize(text_.size());
  for (size_t i = 0; i < text_.size(); ++i) cells_[i] = Cell{{text_[i]}, 1, 1};
  weight_ = text_.size();
  text_.clear();
}

size_t LineModel::PutAsciiRun(const char* text, size_t size) {
  auto printable = [](char c) { return c >= 0x20 && c < 0x7f; };
  if (wrap_pending_ || !printable(text[0])) {
    if (printable(text[0])) PutChar(text, 1, 1);  // controls never reach OnPrint from the parser
    return 1;
  }
  const size_t row_end = RowEnd();
  size_t k = 0;
  // Over one-cell characters (a progress line being redrawn): in place.
  while (k < size && cursor_ < cells_.size() && cells_[cursor_].width == 1 && printable(text[k])) {
    Cell& cell = cells_[cursor_];
    weight_ = weight_ - cell.size + 1;
    cell.bytes[0] = text[k];
    cell.size = 1;
    ++k;
    if (++cursor_ == row_end) {
      --cursor_;
      wrap_pending_ = true;
      return k;
    }
  }
  // At the end of the line: whole cells in one go, up to the end of the row.
  if (cursor_ == cells_.size()) {
    const size_t limit = k + std::min({size - k, row_end - cursor_, Budget()});
    const size_t first = k;
    while (k < limit && printable(text[k])) ++k;
    const size_t added = k - first;
    if (added > 0) {
      cells_.resize(cursor_ + added);
      Cell* cell = cells_.data() + cursor_;  // filled through a local pointer: no reloads
      for (size_t j = 0; j < added; ++j) {
        cell[j].bytes[0] = text[first + j];
        cell[j].size = 1;
        cell[j].width = 1;
      }
      weight_ += added;
      cursor_ += added;
      if (cursor_ == row_end) {
        --cursor_;
        wrap_pending_ = true;
      }
    }
  }
  if (k == 0) {  // over a wide character or a tab, or past the end of the line
    PutChar(text, 1, 1);
    return 1;
  }
  return k;
}

void LineModel::PutChar(const char* bytes, size_t size, size_t width) {
  if (columns_ < 2) width = 1;
  size = std::min(size, Cell{}.bytes.size());
  if (!wrap_pending_ && cursor_ == cells_.size() && cursor_ + width <= RowEnd() &&
      size + width <= Budget()) {
    // Appending at the end of the line, within the row: nothing to split or overwrite.
    Cell& cell = cells_.emplace_back();  // built in place: no copy through the stack
    std::memcpy(cell.bytes.data(), bytes, size);
    cell.size = static_cast<uint8_t>(size);
    cell.width = static_cast<uint8_t>(width);
    if (width == 2) cells_.emplace_back();  // the right half: no bytes, width 0
    weight_ += size + width - 1;
    cursor_ += width;
    if (cursor_ == RowEnd()) {
      --cursor_;
      wrap_pending_ = true;
    }
    return;
  }
  if (wrap_pending_) {  // the deferred wrap happens now
    row_start_ += columns_;
    cursor_ = row_start_;
    wrap_pending_ = false;
  }
  if (width == 2 && cursor_ + 1 == RowEnd()) {
    // Both halves must be on one row: the character goes to the start of the next one.
    row_start_ += columns_;
    cursor_ = row_start_;
  }
  // The weight this write may add: the gap's blanks and the new cells, less the cells it
  // overwrites (each weighs at least 1; blanking what it splits never adds weight).
  const size_t gap = cursor_ > cells_.size() ? cursor_ - cells_.size() : 0;
  const size_t overwritten = cursor_ < cells_.size() ? std::min(width, cells_.size() - cursor_) : 0;
  if (gap + size + width - 1 > Budget() + overwritten) {  // soft break: the line is full
    Commit();
    Materialize();  // this character goes on in cells
  }
  if (cursor_ > cells_.size()) {
    weight_ += cursor_ - cells_.size();
    cells_.resize(cursor_, kBlank);
  }
  const size_t last = cursor_ + width;
  SplitEdges(cursor_, last);
  Cell cell{};
  std::memcpy(cell.bytes.data(), bytes, size);
  cell.size = static_cast<uint8_t>(size);
  cell.width = static_cast<uint8_t>(width);
  SetCell(cursor_, cell);
  for (size_t i = cursor_ + 1; i < last; ++i) SetCell(i, Cell{{}, 0, 0});
  cursor_ = last;
  if (cursor_ >= RowEnd()) {
    cursor_ = RowEnd() - 1;
    wrap_pending_ = true;
  }
}

void LineModel::Combine(const char* bytes, size_t size) {
  // The mark belongs to the character just written: under the cursor when the wrap is
  // pending, else left of it.
  const size_t previous = wrap_pending_ ? cursor_ : cursor_ - 1;
  if ((!wrap_pending_ && cursor_ == 0) || previous >= cells_.size()) {
    PutChar(bytes, size, 1);  // nothing to attach to: shown on its own
    return;
  }
  size_t lead = previous;
  while (lead > 0 && cells_[lead].width == 0) --lead;
  Cell& cell = cells_[lead];
  if (cell.size + size > cell.bytes.size() || size > Budget()) return;  // no room: dropped
  std::memcpy(cell.bytes.data() + cell.size, bytes, size);
  cell.size = static_cast<uint8_t>(cell.size + size);
  weight_ += size;
}

void LineModel::Tab() {
  if (wrap_pending_) return;
  const size_t column = cursor_ - row_start_;
  const size_t stop = std::min((column / kTabWidth + 1) * kTabWidth, columns_ - 1);
  if (stop <= column) return;
  const size_t width = stop - column;
  if (cursor_ >= cells_.size() && cursor_ - cells_.size() + width < Budget()) {
    // At the end of the line: one '\t' spanning the cells up to the stop. Over existing text a
    // tab only moves the cursor, as on a terminal.
    weight_ += cursor_ - cells_.size();
    cells_.resize(cursor_, kBlank);
    SetCell(cursor_, Cell{{'\t'}, 1, static_cast<uint8_t>(width)});
    for (size_t i = 1; i < width; ++i) SetCell(cursor_ + i, Cell{{}, 0, 0});
  }
  cursor_ = row_start_ + stop;
}

void LineModel::SetCell(size_t index, const Cell& cell) {
  if (index == cells_.size()) {
    cells_.push_back(cell);
  } else {
    weight_ -= Weight(cells_[index]);
    cells_[index] = cell;
  }
  weight_ += Weight(cell);
}

void LineModel::SplitEdges(size_t first, size_t last) {
  const size_t n = cells_.size();
  auto blank_character = [&](size_t index) {
    while (index > 0 && cells_[index].width == 0) --index;
    const size_t end = std::min(n, index + std::max<size_t>(cells_[index].width, 1));
    for (size_t i = index; i < end; ++i) SetCell(i, kBlank);
  };
  if (first < n && cells_[first].width == 0) blank_character(first);
  if (last > 0 && last - 1 < n) {
    size_t lead = last - 1;
    while (lead > 0 && cells_[lead].width == 0) --lead;
    if (lead + cells_[lead].width > last) blank_character(lead);
  }
}

void LineModel::Erase(size_t first, size_t last) {
  if (simple_) {
    last = std::min(last, text_.size());
    if (first >= last) return;
    if (last == text_.size()) {
      text_.resize(first);
    } else {
      std::fill(text_.begin() + static_cast<std::ptrdiff_t>(first),
                text_.begin() + static_cast<std::ptrdiff_t>(last), ' ');
    }
    weight_ = text_.size();
    return;
  }
  last = std::min(last, cells_.size());
  if (first >= last) return;
  SplitEdges(first, last);
  if (last == cells_.size()) {
    for (size_t i = first; i < last; ++i) weight_ -= Weight(cells_[i]);
    cells_.resize(first);  // blanks at the end of the line are implicit
    return;
  }
  for (size_t i = first; i < last; ++i) SetCell(i, kBlank);
}

void LineModel::DeleteChars(size_t count) {
  if (cursor_ >= cells_.size()) return;
  const size_t row_end = RowEnd();
  const bool line_continues = cells_.size() > row_end;
  const size_t end = std::min({cursor_ + std::min(count, row_end - cursor_), cells_.size()});
  SplitEdges(cursor_, end);
  for (size_t i = cursor_; i < end; ++i) weight_ -= Weight(cells_[i]);
  const auto first = cells_.begin() + static_cast<std::ptrdiff_t>(cursor_);
  cells_.erase(first, first + static_cast<std::ptrdiff_t>(end - cursor_));
  if (line_continues) {
    // Blanks enter at the right margin so the following rows keep their place.
    const size_t removed = end - cursor_;
    const size_t at = row_end - removed;
    SplitEdges(at, at);
    cells_.insert(cells_.begin() + static_cast<std::ptrdiff_t>(at), removed, kBlank);
    weight_ += removed;
  }
}

void LineModel::InsertBlanks(size_t count) {
  if (cursor_ >= cells_.size()) return;  // blanks after the end of the line change nothing
  const size_t row_end = RowEnd();
  count = std::min({count, row_end - cursor_, Budget()});
  if (count == 0) return;
  SplitEdges(cursor_, cursor_);
  cells_.insert(cells_.begin() + static_cast<std::ptrdiff_t>(cursor_), count, kBlank);
  weight_ += count;
  if (cells_.size() > row_end) {  // what is pushed past the right margin is lost
    const size_t end = std::min(cells_.size(), row_end + count);
    SplitEdges(row_end, end);
    for (size_t i = row_end; i < end; ++i) weight_ -= Weight(cells_[i]);
    const auto first = cells_.begin() + static_cast<std::ptrdiff_t>(row_end);
    cells_.erase(first, first + static_cast<std::ptrdiff_t>(end - row_end));
  }
}

void LineModel::OnControl(char c) {
  switch (c) {
    case '\n':
    case '\v':
    case '\f':
      Commit();
      break;
    case '\r':
      cursor_ = row_start_;
      wrap_pending_ = false;
      break;
    case '\b':
      // From the deferred-wrap state the cursor is back on the last column's character.
      if (wrap_pending_) {
        wrap_pending_ = false;
      } else if (cursor_ > row_start_) {
        --cursor_;
      }
      break;
    case '\t':
      Materialize();
      Tab();
      break;
    default:  // BEL, NUL, SO/SI, ...: nothing to render
      break;
  }
}

void LineModel::ReplacePending(std::string_view utf8) {
  text_.clear();
  cells_.clear();
  simple_ = text_mode_;
  StartLine();
  OnPrint(utf8);
}

void LineModel::OnCsi(const CsiSequence& csi) {
  if (csi.intermediate != 0) return;
  if (csi.private_marker != 0 && !(csi.private_marker == '?' && csi.final == 'K')) return;
  const auto count = static_cast<size_t>(std::max(csi.Param(0, 1), 1));
  switch (csi.final) {
    case 'C':  // CUF
      wrap_pending_ = false;
      cursor_ = std::min(cursor_ + count, RowEnd() - 1);
      break;
    case 'D':  // CUB
      wrap_pending_ = false;
      cursor_ -= std::min(count, cursor_ - row_start_);
      break;
    case 'G':  // CHA
    case '`':  // HPA
      wrap_pending_ = false;
      cursor_ = row_start_ + std::min(count - 1, columns_ - 1);
      break;
    case 'K':  // EL
      wrap_pending_ = false;
      switch (csi.Param(0, 0)) {
        case 0:
          Erase(cursor_, RowEnd());
          break;
        case 1:
          Erase(row_start_, cursor_ + 1);
          break;
        case 2:
          Erase(row_start_, RowEnd());
          break;
        default:
          break;
      }
      break;
    case 'X':  // ECH
      wrap_pending_ = false;
      Erase(cursor_, std::min(cursor_ + count, RowEnd()));
      break;
    case 'P':  // DCH
      wrap_pending_ = false;
      Materialize();
      DeleteChars(count);
      break;
    case '@':  // ICH
      wrap_pending_ = false;
      Materialize();
      InsertBlanks(count);
      break;
    default:  // SGR and everything that leaves the line's text alone, or is not in-line
      break;
  }
}

void LineModel::OnOsc(std::string_view /*payload*/) {}

void LineModel::Render(std::string& out, bool trim) const {
  if (simple_) {
    out.assign(text_);
    while (trim && !out.empty() && IsBlank(out.back())) out.pop_back();
    return;
  }
  // Every cell's whole byte array is copied (branch-free), then the cursor advances by its
  // size: the buffer has one cell array of slack, and weight_ bounds the rendered size.
  constexpr size_t kCellBytes = sizeof(Cell::bytes);
  out.resize(weight_ + kCellBytes);
  char* d = out.data();
  const char* const end = d + out.size();
  for (const Cell& cell : cells_) {
    if (static_cast<size_t>(end - d) < kCellBytes) break;  // cannot happen; never overrun anyway
    std::memcpy(d, cell.bytes.data(), kCellBytes);
    d += cell.size;
  }
  size_t size = static_cast<size_t>(d - out.data());
  while (trim && size > 0 && IsBlank(out[size - 1])) --size;
  out.resize(size);
}

void LineModel::Commit() {
  if (simple_) {
    line_.swap(text_);  // the line's bytes are its text: no rendering
    text_.clear();
    while (!line_.empty() && IsBlank(line_.back())) line_.pop_back();
  } else {
    Render(line_);
    cells_.clear();
    simple_ = text_mode_;
  }
  StartLine();
  if (sink_) sink_(line_);
}

void LineModel::StartLine() {
  weight_ = 0;
  cursor_ = 0;
  row_start_ = 0;
  wrap_pending_ = false;
}

}  // namespace ptybox::backend
