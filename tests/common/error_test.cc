#include "common/error.h"

#include <gtest/gtest.h>

#include "backend/contract_types.h"
#include "common/errno_name.h"
#include "policy/mode.h"
#include "tests/support/error_kind.h"

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
  // One signal table names both: the client's list and any signal a result reports.
  EXPECT_EQ(backend::ClientSignalNames(),
            (std::vector<std::string>{"SIGINT", "SIGTERM", "SIGKILL", "SIGQUIT", "SIGHUP",
                                      "SIGTSTP", "SIGCONT"}));
  EXPECT_EQ(backend::SignalName(SIGWINCH), "SIGWINCH");
  EXPECT_EQ(backend::SignalName(SIGRTMIN + 1), "SIG" + std::to_string(SIGRTMIN + 1));
}

TEST(ErrorTest, EveryKindHasItsOwnSpelling) {
  EXPECT_EQ(ToString(ErrorKind::kInternal), "internal");
  EXPECT_EQ(ToString(ErrorKind::kNameTaken), "name_taken");
  EXPECT_EQ(ToString(ErrorKind::kInvalidParams), "invalid_params");
}

TEST(ErrnoNameTest, TheCLibrarysNamesAndANumberForTheRest) {
  EXPECT_EQ(ErrnoName(EPERM), "EPERM");
  EXPECT_EQ(ErrnoName(EAFNOSUPPORT), "EAFNOSUPPORT");
  EXPECT_EQ(ErrnoName(100000), "errno 100000");
}

// The tests' one check of a reply's kind passes only on that kind, and says what it got.
TEST(ErrorKindCheckTest, AnotherKindOrNoErrorFailsNamingWhatCame) {
  const nlohmann::json busy = {{"error", {{"code", -32000}, {"data", {{"kind", "busy"}}}}}};
  EXPECT_TRUE(testing::IsErrorKind(busy, ErrorKind::kBusy));
  const ::testing::AssertionResult other = testing::IsErrorKind(busy, ErrorKind::kNotFound);
  EXPECT_FALSE(other);
  EXPECT_NE(std::string(other.message()).find("expected error kind not_found, got \"busy\""),
            std::string::npos)
      << other.message();
  EXPECT_FALSE(
      testing::IsErrorKind(nlohmann::json{{"result", nlohmann::json::object()}}, ErrorKind::kBusy));
  EXPECT_FALSE(testing::IsErrorKind(nlohmann::json{{"error", {{"code", -32602}}}},
                                    ErrorKind::kInvalidParams));
  EXPECT_EQ(testing::KindName(ErrorKind::kModeFenced), "mode_fenced");
}

TEST(ErrorTest, AnErrnoFailureKeepsItsErrno) {
  Error error = Error::FromErrno(ErrorKind::kSpawnFailed, "open", "/nowhere", ENOENT);
  EXPECT_EQ(error.sys_errno, ENOENT);
  EXPECT_NE(error.message.find("open /nowhere"), std::string::npos) << error.message;
  EXPECT_EQ(Error(ErrorKind::kBusy, "busy").sys_errno, 0);
}

}  // namespace
}  // namespace ptybox
