// Unit tests of the one /proc/<pid>/stat parser (daemon and ptybox-init) and the tree walk.
#include "common/proc_stat.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <vector>

namespace ptybox::proc {
namespace {

std::string StatLine(const std::string& comm, char state = 'S', int pgrp = 300, int session = 200,
                     int threads = 3) {
  return "1234 (" + comm + ") " + state + " 1 " + std::to_string(pgrp) + " " +
         std::to_string(session) + " 34816 300 4194560 100 0 0 0 1 2 0 0 20 0 " +
         std::to_string(threads) +
         " 0 69350 3133440 372 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n";
}

TEST(ParseStatTest, ReadsTheFieldsAfterAPlainComm) {
  std::optional<StatFields> f = ParseStat(StatLine("cat"));
  ASSERT_TRUE(f);
  EXPECT_EQ(f->pid, 1234);
  EXPECT_EQ(f->state, 'S');
  EXPECT_EQ(f->ppid, 1);
  EXPECT_EQ(f->pgrp, 300);
  EXPECT_EQ(f->session, 200);
  EXPECT_EQ(f->tty_nr, 34816);
  EXPECT_EQ(f->num_threads, 3);
}

TEST(ParseStatTest, CommWithSpacesAndParenthesesCannotShiftFields) {
  for (const std::string comm : {"a b", ") R 1 2 3 (", "x) S 9 9 9", "((", ")", "a\nb) Z 5"}) {
    std::optional<StatFields> f = ParseStat(StatLine(comm, 'R', 77, 66, 1));
    ASSERT_TRUE(f) << comm;
    EXPECT_EQ(f->state, 'R') << comm;
    EXPECT_EQ(f->pgrp, 77) << comm;
    EXPECT_EQ(f->session, 66) << comm;
    EXPECT_EQ(f->num_threads, 1) << comm;
  }
}

TEST(ParseStatTest, RejectsTruncatedAndGarbageLines) {
  EXPECT_FALSE(ParseStat(""));
  EXPECT_FALSE(ParseStat("1234 (cat"));
  EXPECT_FALSE(ParseStat("1234 (cat) S 1 2"));
  EXPECT_FALSE(ParseStat("1234 (cat) SS 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19"));
  EXPECT_FALSE(ParseStat("x (cat) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19"));
  std::string line = StatLine("cat");
  EXPECT_FALSE(ParseStat(line.substr(0, line.size() / 3)));
}

TEST(ReadStatTest, ReadsThisProcess) {
  std::optional<StatFields> self = ReadStat(::getpid());
  ASSERT_TRUE(self);
  EXPECT_EQ(self->pid, ::getpid());
  EXPECT_EQ(self->ppid, ::getppid());
  EXPECT_EQ(self->state, 'R');
}

TEST(DescendantsTest, FollowsParentLinksBreadthFirstAndIgnoresOthers) {
  std::vector<StatFields> table = {{.pid = 10, .ppid = 1},  {.pid = 11, .ppid = 10},
                                   {.pid = 12, .ppid = 11}, {.pid = 13, .ppid = 10},
                                   {.pid = 20, .ppid = 1},  {.pid = 21, .ppid = 20}};
  EXPECT_EQ(Descendants(table, 10), (std::vector<pid_t>{11, 13, 12}));
  EXPECT_TRUE(Descendants(table, 12).empty());
  EXPECT_TRUE(Descendants(table, 99).empty());
}

TEST(DescendantsTest, AParentLinkCycleEndsTheWalk) {
  std::vector<StatFields> table = {{.pid = 5, .ppid = 6}, {.pid = 6, .ppid = 5}};
  EXPECT_EQ(Descendants(table, 5), (std::vector<pid_t>{6}));
}

}  // namespace
}  // namespace ptybox::proc
