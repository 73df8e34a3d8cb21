// The pure parts of watching a session: the hub's fan-out and slow-watcher rule, the view
// `ptybox attach` draws (letterboxed, controls never passed through), the `ls` table.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "runtime/cli/attach_view.h"
#include "runtime/cli/session_table.h"
#include "runtime/watch_hub.h"

namespace ptybox::runtime {
namespace {

class RecordingTap final : public SessionTap {
 public:
  void Output(std::string_view bytes) override { seen += bytes; }
  std::string seen;
};

TEST(WatchHubTest, TheRecordingSeesRawBytesAndWatchersSeeThemWithoutPromptMarkers) {
  auto tap = std::make_shared<RecordingTap>();
  WatchHub hub(tap);
  std::string watched;
  hub.Add(1, WatchHub::Watcher{.on_output =
                                   [&](std::string_view bytes) {
                                     watched += bytes;
                                     return true;
                                   },
                               .on_end = nullptr});
  // The marker (with the session's nonce) split across chunks.
  hub.Output("a\x1b]6973;non");
  hub.Output(
      "ce;0;/w\x07"
      "b");
  EXPECT_EQ(tap->seen,
            "a\x1b]6973;nonce;0;/w\x07"
            "b");
  EXPECT_EQ(watched, "ab");
  EXPECT_EQ(watched.find("nonce"), std::string::npos);
}

// A resize reaches every watcher with the screen at the new size; one that cannot take it is
// dropped as slow; a watcher without the callback is left alone.
TEST(WatchHubTest, AResizeReachesEveryWatcherAndASlowOneIsDropped) {
  WatchHub hub(nullptr);
  std::vector<std::string> events;
  hub.Add(1, WatchHub::Watcher{
                 .on_output = [](std::string_view) { return true; },
                 .on_end =
                     [&](WatchEnd end) { events.push_back("1:" + std::string(WatchEndName(end))); },
                 .on_resize = [](const backend::ScreenSnapshot&) { return false; }});
  hub.Add(2, WatchHub::Watcher{.on_output = [](std::string_view) { return true; },
                               .on_end = nullptr,
                               .on_resize =
                                   [&](const backend::ScreenSnapshot& screen) {
                                     events.push_back("2:" + std::to_string(screen.columns) + "x" +
                                                      std::to_string(screen.rows));
                                     return true;
                                   }});
  hub.Add(3,
          WatchHub::Watcher{.on_output = [](std::string_view) { return true; }, .on_end = nullptr});
  backend::ScreenSnapshot screen;
  screen.columns = 90;
  screen.rows = 30;
  screen.lines.assign(30, "");
  hub.Resized(screen);
  EXPECT_EQ(events, (std::vector<std::string>{"2:90x30", "1:slow"}));  // dropped after the pass
  EXPECT_EQ(hub.size(), 2u);
}

TEST(WatchHubTest, AWatcherThatCannotTakeAChunkIsDroppedAndToldWhyOthersGoOn) {
  WatchHub hub(nullptr);
  std::vector<std::string> events;
  hub.Add(1, WatchHub::Watcher{.on_output = [](std::string_view) { return false; },
                               .on_end =
                                   [&](WatchEnd end) {
                                     events.push_back("1:" + std::string(WatchEndName(end)));
                                   }});
  std::string second;
  hub.Add(2, WatchHub::Watcher{.on_output =
                                   [&](std::string_view bytes) {
                                     second += bytes;
                                     return true;
                                   },
                               .on_end =
                                   [&](WatchEnd end) {
                                     events.push_back("2:" + std::string(WatchEndName(end)));
                                   }});
  hub.Output("x");
  EXPECT_EQ(events, std::vector<std::string>{"1:slow"});
  EXPECT_EQ(hub.size(), 1u);
  hub.Output("y");
  EXPECT_EQ(second, "xy");
  EXPECT_FALSE(hub.Remove(1));
  hub.EndAll(WatchEnd::kClosed);
  EXPECT_EQ(events, (std::vector<std::string>{"1:slow", "2:closed"}));
  EXPECT_EQ(hub.size(), 0u);
}

TEST(WatchHubTest, TheQueueBoundDecidesWhatMayBeQueued) {
  EXPECT_TRUE(WatchMayQueue(0, 10, 100));
  EXPECT_TRUE(WatchMayQueue(90, 10, 100));
  EXPECT_FALSE(WatchMayQueue(91, 10, 100));
  EXPECT_FALSE(WatchMayQueue(0, 101, 100));
  EXPECT_FALSE(WatchMayQueue(200, 0, 100));  // already over: no more
}

TEST(WatchHubTest, AtMostSoManyWatchersPerSession) {
  WatchHub hub(nullptr);
  for (uint64_t id = 1; id <= kMaxWatchersPerSession; ++id) {
    EXPECT_FALSE(hub.full());
    hub.Add(id, WatchHub::Watcher{.on_output = [](std::string_view) { return true; },
                                  .on_end = nullptr});
  }
  EXPECT_TRUE(hub.full());
}

Json Snapshot(int cols, int rows, std::vector<std::string> lines, int row, int column) {
  lines.resize(static_cast<size_t>(rows));
  return Json{{"cols", cols},    {"rows", rows},
              {"lines", lines},  {"cursor", Json{{"row", row}, {"column", column}}},
              {"name", "agent"}, {"sessionId", "pty-1"}};
}

TEST(AttachViewTest, TheFirstDrawShowsTheSnapshotAndTheStatusLineThenOnlyChanges) {
  AttachView view(Snapshot(20, 3, {"$ ls", "a b"}, 2, 2));
  view.SetTerminalSize(10, 40);
  view.SetStatus("status");
  const std::string first = view.Draw();
  EXPECT_NE(first.find("\x1b[2J"), std::string::npos);
  EXPECT_NE(first.find("\x1b[1;1H$ ls\x1b[K"), std::string::npos);
  EXPECT_NE(first.find("\x1b[2;1Ha b\x1b[K"), std::string::npos);
  EXPECT_NE(first.find("\x1b[10;1H\x1b[7mstatus"), std::string::npos);
  EXPECT_EQ(first.substr(first.size() - 6), "\x1b[3;3H");  // the session's cursor
  EXPECT_TRUE(view.fits());

  view.Feed("hi");
  const std::string second = view.Draw();
  EXPECT_EQ(second, "\x1b[3;1H  hi\x1b[K\x1b[3;5H");  // one row, no status, the cursor
  EXPECT_EQ(view.Draw(), "\x1b[3;5H");                // nothing changed
}

TEST(AttachViewTest, ASmallerTerminalShowsTheTopLeftAndSaysSo) {
  AttachView view(Snapshot(20, 5, {"0123456789abcdefghij", "row1", "row2", "row3", "row4"}, 4, 0));
  view.SetTerminalSize(3, 8);  // two rows of session, the status line
  EXPECT_FALSE(view.fits());
  view.SetStatus("s");
  const std::string drawn = view.Draw();
  EXPECT_NE(drawn.find("\x1b[1;1H01234567\x1b[K"), std::string::npos);
  EXPECT_NE(drawn.find("row1"), std::string::npos);
  EXPECT_EQ(drawn.find("row2"), std::string::npos);
  EXPECT_EQ(drawn.find("89"), std::string::npos);
  // The cursor (row 4) is outside: parked on the status line.
  EXPECT_EQ(drawn.substr(drawn.size() - 6), "\x1b[3;1H");
}

TEST(AttachViewTest, NothingTheSessionPrintsReachesThePersonsTerminalAsAControl) {
  AttachView view(Snapshot(40, 2, {}, 0, 0));
  view.SetTerminalSize(5, 80);
  (void)view.Draw();
  // A title, a clipboard write (OSC 52), a status query that makes the terminal answer, DCS.
  view.Feed(
      "\x1b]0;pwned\x07\x1b]52;c;ZWNobyBoaQ==\x07\x1b[6n\x1bP+q544e\x1b\\ok\x9b"
      "2J");
  const std::string drawn = view.Draw();
  EXPECT_EQ(drawn.find("pwned"), std::string::npos);
  EXPECT_EQ(drawn.find("]52"), std::string::npos);
  EXPECT_EQ(drawn.find("6n"), std::string::npos);
  EXPECT_EQ(drawn.find("\x1bP"), std::string::npos);
  EXPECT_NE(drawn.find("ok"), std::string::npos);
  // Only the view's own sequences: CSI ... H/K/m and nothing else.
  for (size_t at = drawn.find('\x1b'); at != std::string::npos; at = drawn.find('\x1b', at + 1)) {
    ASSERT_EQ(drawn[at + 1], '[') << drawn;
    size_t end = at + 2;
    while (end < drawn.size() &&
           (std::isdigit(static_cast<unsigned char>(drawn[end])) != 0 || drawn[end] == ';')) {
      ++end;
    }
    ASSERT_LT(end, drawn.size());
    EXPECT_NE(std::string("HKmJ").find(drawn[end]), std::string::npos) << drawn;
  }
}

TEST(AttachViewTest, TerminalSafeReplacesEveryControl) {
  EXPECT_EQ(TerminalSafe("a\x1b[2Jb\x07\x7f"
                         "c"),
            "a?[2Jb??c");
  EXPECT_EQ(TerminalSafe("x\xc2\x9by"), "x?y");                       // C1 CSI in UTF-8
  EXPECT_EQ(TerminalSafe("\xc3\xa9t\xc3\xa9"), "\xc3\xa9t\xc3\xa9");  // été stays
}

TEST(AttachViewTest, TheDetachKeyIsCtrlRightBracketAnywhereInARead) {
  EXPECT_EQ(FindDetachKey("abc"), std::nullopt);
  EXPECT_EQ(FindDetachKey("ab\x1d"
                          "c"),
            2u);
  EXPECT_EQ(FindDetachKey("\x03"), std::nullopt);  // Ctrl-C is not it
}

TEST(SessionTableTest, ListsEachSessionAlignedWithHostileNamesMadePrintable) {
  Json sessions = Json::array(
      {Json{{"sessionId", "pty-a"},
            {"name", "build\x1b]0;x\x07"},
            {"mode", "read-only"},
            {"busy", true},
            {"sessionStatus", Json{{"kind", "running"}}}},
       Json{{"sessionId", "pty-bb"},
            {"name", ""},
            {"mode", "workspace-write"},
            {"busy", false},
            {"sessionStatus", Json{{"kind", "exited"}, {"exitCode", 3}, {"signal", nullptr}}}}});
  const std::string table = SessionTable(sessions);
  EXPECT_EQ(table.find('\x1b'), std::string::npos) << table;
  EXPECT_EQ(table.find('\x07'), std::string::npos) << table;
  const std::string header = table.substr(0, table.find('\n'));
  EXPECT_EQ(header.rfind("SESSION  NAME ", 0), 0u) << header;
  EXPECT_NE(header.find("MODE             BUSY  STATUS"), std::string::npos) << header;
  EXPECT_NE(table.find("pty-bb   -"), std::string::npos) << table;
  EXPECT_NE(table.find("yes   running"), std::string::npos) << table;
  EXPECT_NE(table.find("no    exited 3"), std::string::npos) << table;
  EXPECT_EQ(SessionTable(Json::array()), "no sessions\n");
  EXPECT_EQ(StatusText(Json{{"kind", "exited"}, {"exitCode", nullptr}, {"signal", "SIGKILL"}}),
            "killed by SIGKILL");
}

}  // namespace
}  // namespace ptybox::runtime
