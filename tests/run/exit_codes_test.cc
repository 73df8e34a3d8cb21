// No exit status of ptybox's own helpers (sandbox/init/child_exec.h) can be read as one of the
// codes `ptybox run` documents (docs/ci.md): 2, 124-127 and 128+N keep their one meaning.
#include <gtest/gtest.h>

#include <set>

#include "runtime/cli/run_command.h"
#include "sandbox/init/child_exec.h"

namespace ptybox {
namespace {

TEST(ExitCodesTest, NoHelperStatusIsADocumentedRunCode) {
  const std::set<int> documented = {runtime::kRunExitUsage, runtime::kRunExitTimeout,
                                    runtime::kRunExitSandbox, runtime::kRunExitCannotExec,
                                    runtime::kRunExitNotFound};
  std::set<int> helpers = {sandbox::kInitExitSetupFailed};
  for (sandbox::ChildStage stage : sandbox::kChildStages) {
    helpers.insert(sandbox::ChildExitCode(stage));
  }
  for (int code : helpers) {
    EXPECT_EQ(documented.count(code), 0U) << code << " is a documented `ptybox run` code";
    EXPECT_LT(code, 128) << code << " reads as killed by signal " << code - 128;
    EXPECT_GT(code, 0) << "0 is success";
  }
}

}  // namespace
}  // namespace ptybox
