// The MCP result budget as pure functions: where a long text is cut, what the elision line
// says, and that its terminal_read pointer names exactly the bytes left out.
#include "runtime/mcp/mcp_budget.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

namespace ptybox::runtime {
namespace {

// "1\n2\n...\nN" like `seq 1 N`, and the scrollback it sits in: `before` bytes of earlier
// output, then the text's lines.
std::string Seq(int n) {
  std::string text;
  for (int i = 1; i <= n; ++i) text += std::to_string(i) + (i < n ? "\n" : "");
  return text;
}

TEST(McpBudgetTest, TextThatFitsIsUnchanged) {
  EXPECT_FALSE(PlanElision("short", 100));
  EXPECT_EQ(ElideText("short", 100, {}, "s"), "short");
}

TEST(McpBudgetTest, TheTailGetsTheLargerShareAndCutsFallOnLines) {
  const std::string text = Seq(20000);
  std::optional<ElidedSpan> span = PlanElision(text, 4096);
  ASSERT_TRUE(span);
  EXPECT_GT(text.size() - span->tail_begin, span->head_end);
  EXPECT_EQ(text[span->head_end - 1], '\n');
  EXPECT_EQ(text[span->tail_begin - 1], '\n');
  EXPECT_LE(span->head_end + (text.size() - span->tail_begin) + kElisionLineReserve, 4096u);
}

TEST(McpBudgetTest, APageAnchoredAtItsStartPointsAtTheBytesLeftOut) {
  const std::string scrollback = "earlier\n" + Seq(20000) + "\n";
  const uint64_t page_cursor = 8;  // the page starts after "earlier\n"
  const std::string page = scrollback.substr(page_cursor);
  std::optional<ElidedSpan> span = PlanElision(page, 4096);
  ASSERT_TRUE(span);
  std::optional<ReadPointer> pointer =
      LocateSpan(page, *span, TextAnchor{.begin = page_cursor, .end = std::nullopt});
  ASSERT_TRUE(pointer);
  EXPECT_EQ(scrollback.substr(pointer->cursor, pointer->max_bytes),
            page.substr(span->head_end, span->tail_begin - span->head_end));

  const std::string elided =
      ElideText(page, 4096, TextAnchor{.begin = page_cursor, .end = std::nullopt}, "pty-1");
  EXPECT_LE(elided.size(), 4096u);
  EXPECT_TRUE(elided.ends_with("19999\n20000\n"));
  EXPECT_NE(elided.find("\"cursor\": " + std::to_string(pointer->cursor)), std::string::npos);
  EXPECT_NE(elided.find("\"maxBytes\": " + std::to_string(pointer->max_bytes)), std::string::npos);
  EXPECT_NE(elided.find("terminal_read {\"sessionId\": \"pty-1\""), std::string::npos);
}

TEST(McpBudgetTest, AViewportAnchoredAtItsEndCountsTheBackendsOwnDrop) {
  // The scrollback holds the whole output; the backend's viewport kept its head and tail with
  // its own drop line; the MCP budget cuts deeper.
  const std::string output = Seq(50000);
  const std::string scrollback = "$ seq 1 50000\n" + output + "\n";
  const uint64_t output_at = 14;
  const size_t head = 20000, tail = 30000;
  const std::string head_text = output.substr(0, output.find('\n', head) + 1);
  const size_t tail_at = output.find('\n', output.size() - tail) + 1;
  const std::string tail_text = output.substr(tail_at);
  const uint64_t dropped = tail_at - head_text.size();
  const std::string viewport = head_text + "[... " + std::to_string(dropped) + " bytes (" +
                               std::to_string(std::count(output.begin() + head_text.size(),
                                                         output.begin() + tail_at, '\n')) +
                               " lines) dropped ...]\n" + tail_text;
  // The viewport's last byte is the scrollback's last byte before the final "\n"; its result
  // says truncated, so it holds the backend's drop line.
  const TextAnchor anchor{.begin = std::nullopt,
                          .end = scrollback.size() - 1,
                          .oldest = std::nullopt,
                          .holds_drop = true};
  std::optional<ElidedSpan> span = PlanElision(viewport, 8192);
  ASSERT_TRUE(span);
  std::optional<ReadPointer> pointer = LocateSpan(viewport, *span, anchor);
  ASSERT_TRUE(pointer);
  // The pointer returns exactly what lies between the kept head and the kept tail.
  const std::string kept_head = viewport.substr(0, span->head_end);
  const std::string kept_tail = viewport.substr(span->tail_begin);
  EXPECT_EQ(pointer->cursor, output_at + kept_head.size());
  EXPECT_EQ(scrollback.substr(0, pointer->cursor) +
                scrollback.substr(pointer->cursor, pointer->max_bytes) + kept_tail + "\n",
            scrollback);
  const std::string elided = ElideText(viewport, 8192, anchor, "s");
  EXPECT_NE(elided.find(GroupDigits(pointer->max_bytes) + " bytes) left out"), std::string::npos)
      << elided.substr(0, 200);
  EXPECT_TRUE(elided.ends_with("\n50000"));
}

TEST(McpBudgetTest, KeptPartIsWhatTheScrollbackStillHoldsOfAPointer) {
  const ReadPointer pointer{.cursor = 100, .max_bytes = 50};
  EXPECT_EQ(KeptPart(pointer, std::nullopt)->cursor, 100u);
  EXPECT_EQ(KeptPart(pointer, 0)->max_bytes, 50u);
  EXPECT_EQ(KeptPart(pointer, 100)->max_bytes, 50u);
  std::optional<ReadPointer> end = KeptPart(pointer, 120);
  ASSERT_TRUE(end);
  EXPECT_EQ(end->cursor, 120u);
  EXPECT_EQ(end->max_bytes, 30u);
  EXPECT_FALSE(KeptPart(pointer, 150));
  EXPECT_FALSE(KeptPart(pointer, 1000));
}

// `seq 1 200000` in a session whose scrollback keeps its last 10,000 lines: the send's viewport
// still has the head, the scrollback does not. The pointer names only what a read returns.
TEST(McpBudgetTest, APointerNeverNamesBytesTheScrollbackDropped) {
  const std::string output = Seq(50000);
  const std::string scrollback = output + "\n";
  const TextAnchor whole{.begin = std::nullopt, .end = scrollback.size() - 1};
  std::optional<ElidedSpan> span = PlanElision(output, 8192);
  ASSERT_TRUE(span);
  std::optional<ReadPointer> pointer = LocateSpan(output, *span, whole);
  ASSERT_TRUE(pointer);
  const uint64_t stop = pointer->cursor + pointer->max_bytes;

  // The scrollback starts inside the span left out: only its end is pointed at.
  const uint64_t oldest = scrollback.find("40001\n");
  ASSERT_GT(oldest, pointer->cursor);
  TextAnchor partly = whole;
  partly.oldest = oldest;
  const std::string elided = ElideText(output, 8192, partly, "pty-1");
  EXPECT_LE(elided.size(), 8192u);
  EXPECT_NE(elided.find("; only their last " + GroupDigits(stop - oldest) + " bytes are kept: "),
            std::string::npos)
      << elided.substr(span->head_end, 300);
  EXPECT_NE(elided.find("\"cursor\": " + std::to_string(oldest) +
                        ", \"maxBytes\": " + std::to_string(stop - oldest) + "} returns those"),
            std::string::npos);
  // What that read returns ends right before the kept tail.
  EXPECT_EQ(scrollback.substr(oldest, stop - oldest) + output.substr(span->tail_begin) + "\n",
            scrollback.substr(oldest));

  // The scrollback starts after the span: no pointer at all, and the line says why.
  TextAnchor gone = whole;
  gone.oldest = stop;
  const std::string none = ElideText(output, 8192, gone, "pty-1");
  EXPECT_NE(none.find("left out here; the scrollback no longer keeps them ...]"),
            std::string::npos);
  EXPECT_EQ(none.find("terminal_read {"), std::string::npos);

  // A scrollback that keeps the whole span: the line is the plain pointer.
  TextAnchor kept = whole;
  kept.oldest = pointer->cursor;
  EXPECT_EQ(ElideText(output, 8192, kept, "pty-1"), ElideText(output, 8192, whole, "pty-1"));
}

TEST(McpBudgetTest, WithoutAnAnchorTheLineSaysWhereToPage) {
  const std::string elided = ElideText(Seq(20000), 2048, {}, "s");
  EXPECT_NE(elided.find("left out here; terminal_read pages"), std::string::npos);
  EXPECT_LE(elided.size(), 2048u);
}

TEST(McpBudgetTest, BoundToolResultShortensOnlyTheLongTextFields) {
  // The budgets of terminal_send, terminal_read and terminal_output's faces (runtime/methods.cc).
  const ResultBudget send_budget{
      .texts = {{.field = "viewport", .place = TextPlace::kScrollbackEnd}}};
  const ResultBudget read_budget{.texts = {{.field = "text", .place = TextPlace::kPage}}};
  const ResultBudget output_budget{
      .texts = {{.field = "output"}, {.field = "viewport", .within = "result"}}};
  Json send{{"viewport", Seq(20000)}, {"waitReason", "stdin_read"}, {"exitCode", 0}};
  Json bounded = BoundToolResult(send_budget, send, 4096, {}, "s");
  EXPECT_LE(bounded["viewport"].get<std::string>().size(), 4096u);
  EXPECT_EQ(bounded["exitCode"], 0);
  Json read{{"text", Seq(20000)}, {"cursor", 0}, {"nextCursor", 5}};
  EXPECT_LE(BoundToolResult(read_budget, read, 4096, {}, "s")["text"].get<std::string>().size(),
            4096u);
  Json output{{"output", Seq(20000)}, {"done", true}, {"result", send}};
  Json out = BoundToolResult(output_budget, output, 4096, {}, "s");
  EXPECT_LE(out["output"].get<std::string>().size(), 4096u);
  EXPECT_LE(out["result"]["viewport"].get<std::string>().size(), 4096u);
  // A field the budget does not name is left whole.
  EXPECT_EQ(BoundToolResult(read_budget, send, 4096, {}, "s"), send);
}

TEST(McpBudgetTest, FindBackendDropReadsOnlyAWholeMarkerLine) {
  EXPECT_FALSE(FindBackendDrop("x[... 5 bytes (1 line) dropped ...]\n"));
  std::optional<BackendDrop> drop = FindBackendDrop("a\n[... 5 bytes (1 line) dropped ...]\nb");
  ASSERT_TRUE(drop);
  EXPECT_EQ(drop->bytes, 5u);
  EXPECT_EQ(drop->lines, 1u);
  EXPECT_FALSE(FindBackendDrop("[... 5 bytes (x lines) dropped ...]"));
  EXPECT_EQ(GroupDigits(1288895), "1,288,895");
  EXPECT_EQ(GroupDigits(12), "12");
}

// A chunk of collected output is cut at a byte bound, mid-line, and may hold a line shaped like
// the backend's drop line, with `truncated` (unconsumed output was dropped before it): its
// outputCursor alone places it, and the pointer names exactly the scrollback bytes left out.
TEST(McpBudgetTest, CollectedOutputIsPlacedByItsCursorAlone) {
  std::string scrollback = "$ earlier\n";
  for (int i = 1; i <= 9000; ++i) {
    scrollback += i == 4000 ? std::string("[... 1 bytes (1 line) dropped ...]") : std::to_string(i);
    scrollback += "\n";
  }
  const uint64_t at = 1234;  // mid-line
  const std::string chunk = scrollback.substr(at, 40000);
  const Json result{{"output", chunk},
                    {"done", false},
                    {"result", nullptr},
                    {"truncated", true},
                    {"outputCursor", at}};
  const ResultBudget budget{.texts = {{.field = "output", .place = TextPlace::kCollected}}};
  const Json bounded =
      BoundToolResult(budget, result, 4096, TextAnchor{.begin = at, .end = std::nullopt}, "pty-1");
  const std::string elided = bounded["output"];
  std::optional<ElidedSpan> span = PlanElision(chunk, 4096);
  ASSERT_TRUE(span);
  const std::string left_out = chunk.substr(span->head_end, span->tail_begin - span->head_end);
  EXPECT_NE(elided.find("\"cursor\": " + std::to_string(at + span->head_end) +
                        ", \"maxBytes\": " + std::to_string(left_out.size()) + "}"),
            std::string::npos)
      << elided.substr(span->head_end, 300);
  EXPECT_EQ(scrollback.substr(at + span->head_end, left_out.size()), left_out);
  // The forged line is counted as the output it is.
  EXPECT_NE(elided.find("(" + GroupDigits(left_out.size()) + " bytes) left out here"),
            std::string::npos);
}

// A program can print a line shaped like the backend's drop line: in a text the backend did not
// bound it is output like any other, and two candidates in one bounded text name no pointer.
TEST(McpBudgetTest, AForgedDropLineMovesNeitherTheCountsNorThePointer) {
  std::string scrollback;
  for (int i = 1; i <= 3000; ++i) {
    scrollback +=
        i == 1500 ? std::string("[... 1 bytes (1 line) dropped ...]") : "line " + std::to_string(i);
    scrollback += "\n";
  }
  const std::string viewport = scrollback.substr(0, scrollback.size() - 1);
  const TextAnchor anchor{.begin = std::nullopt, .end = viewport.size()};
  std::optional<ElidedSpan> span = PlanElision(viewport, 4096);
  ASSERT_TRUE(span);
  std::optional<ReadPointer> pointer = LocateSpan(viewport, *span, anchor);
  ASSERT_TRUE(pointer);
  EXPECT_EQ(pointer->cursor, span->head_end);
  EXPECT_EQ(pointer->max_bytes, span->tail_begin - span->head_end);
  TextAnchor bounded = anchor;
  bounded.holds_drop = true;
  const std::string two = "[... 5 bytes (1 line) dropped ...]\n" + viewport;
  std::optional<ElidedSpan> two_span = PlanElision(two, 4096);
  ASSERT_TRUE(two_span);
  EXPECT_FALSE(LocateSpan(two.substr(0), ElidedSpan{0, two_span->tail_begin}, bounded));
  bool ambiguous = false;
  EXPECT_FALSE(FindBackendDrop(
      "[... 5 bytes (1 line) dropped ...]\nx\n[... 6 bytes (1 line) dropped ...]\n", &ambiguous));
  EXPECT_TRUE(ambiguous);
}

}  // namespace
}  // namespace ptybox::runtime
