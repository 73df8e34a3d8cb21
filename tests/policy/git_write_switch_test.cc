// PTYBOX_GIT_WRITE, the switch of Git for agents: on when unset and for the values that mean yes,
// off for every other value, so that a spelling of "off" never leaves it on (outside review 47).
#include <gtest/gtest.h>
#include <stdlib.h>

#include "policy/mode.h"

namespace ptybox::policy {
namespace {

class GitWriteSwitchTest : public ::testing::Test {
 protected:
  void TearDown() override { ::unsetenv("PTYBOX_GIT_WRITE"); }
};

TEST_F(GitWriteSwitchTest, OnWhenUnsetAndForTheValuesThatMeanYes) {
  ::unsetenv("PTYBOX_GIT_WRITE");
  EXPECT_TRUE(GitWriteEnabled());
  for (const char* yes : {"1", "true", "yes", "on"}) {
    ::setenv("PTYBOX_GIT_WRITE", yes, 1);
    EXPECT_TRUE(GitWriteEnabled()) << yes;
  }
}

TEST_F(GitWriteSwitchTest, OffForEveryOtherValue) {
  for (const char* other : {"0", "false", "off", "no", "", "0 ", " 1", "ON", "2", "disable"}) {
    ::setenv("PTYBOX_GIT_WRITE", other, 1);
    EXPECT_FALSE(GitWriteEnabled()) << "\"" << other << "\"";
  }
}

}  // namespace
}  // namespace ptybox::policy
