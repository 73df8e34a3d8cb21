#include "common/error.h"

#include <gtest/gtest.h>

#include "backend/types.h"
#include "policy/mode.h"

namespace ptybox {
namespace {

TEST(ErrorTest, KindsUseTheContractSpelling) {
  EXPECT_EQ(ToString(ErrorKind::kNotFound), "not_found");
  EXPECT_EQ(ToString(ErrorKind::kModeFenced), "mode_fenced");
  EXPECT_EQ(ToString(ErrorKind::kSandboxUnavailable), "sandbox_unavailable");
  EXPECT_EQ(ToString(ErrorKind::kCleanupFailed), "cleanup_failed");
}

TEST(ErrorTest, FromErrnoNamesTheSyscallAndPath) {
  Error e = Error::FromErrno(ErrorKind::kSpawnFailed, "open", "/nope", ENOENT);
  EXPECT_EQ(e.message, "open /nope: No such file or directory");
  EXPECT_EQ(e.context, "/nope");
}

TEST(ModeTest, ParsesOnlyExactSpellings) {
  EXPECT_EQ(policy::ParseMode("read-only"), policy::Mode::kReadOnly);
  EXPECT_EQ(policy::ParseMode("danger-full-access"), policy::Mode::kDangerFullAccess);
  EXPECT_EQ(policy::ParseMode("Danger-Full-Access"), std::nullopt);
  EXPECT_EQ(policy::ParseMode("danger"), std::nullopt);
  EXPECT_TRUE(policy::Within(policy::Mode::kReadOnly, policy::Mode::kWorkspaceWrite));
  EXPECT_FALSE(policy::Within(policy::Mode::kDangerFullAccess, policy::Mode::kWorkspaceWrite));
}

TEST(SignalTest, ClientSignalsAreTheContractList) {
  EXPECT_EQ(backend::ParseClientSignal("SIGINT"), SIGINT);
  EXPECT_EQ(backend::ParseClientSignal("SIGSTOP"), std::nullopt);
  EXPECT_EQ(backend::SignalName(SIGKILL), "SIGKILL");
  EXPECT_EQ(backend::ToString(backend::WaitReason::kInferredIdle), "inferred_idle");
}

TEST(ErrorTest, AnErrnoFailureKeepsItsErrno) {
  Error error = Error::FromErrno(ErrorKind::kSpawnFailed, "open", "/nowhere", ENOENT);
  EXPECT_EQ(error.sys_errno, ENOENT);
  EXPECT_NE(error.message.find("open /nowhere"), std::string::npos) << error.message;
  EXPECT_EQ(Error(ErrorKind::kBusy, "busy").sys_errno, 0);
}

}  // namespace
}  // namespace ptybox
