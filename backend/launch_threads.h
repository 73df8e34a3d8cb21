// The threads that launch sessions (sandbox::LaunchInit: the preparation, then the child's start),
// so the reactor never waits on a launch. They live as long as the process: a launched child's
// parent is the thread that started it, and bwrap's --die-with-parent (PR_SET_PDEATHSIG) fires
// when that thread ends, not the process. Every signal is blocked on them (the reactor takes
// the daemon's signals). One process-wide set, started at the first launch, never stopped.
#pragma once

#include <sys/types.h>

#include <functional>

#include "common/error.h"

namespace ptybox::backend {

// The most launch threads there are: one is started whenever a launch arrives and none is idle,
// so launches of huge workspaces (thousands of nested repositories to compose, seconds each)
// that one owner keeps running never hold another owner's open behind them; past this many,
// launches queue in order of arrival. Idle threads cost their stacks' address space only.
inline constexpr int kMaxLaunchThreads = 64;

// Queues `job` to run on a launch thread, in order of arrival. An error (no thread could be
// started at all: the daemon's task limit) means it will never run.
[[nodiscard]] Result<void> PostToLaunchThread(std::function<void()> job);

// Whether `tid` is one of the launch threads: their children are launches in progress or
// launched sessions' children, never orphans (an orphan re-parents to the process's first live
// thread, the reactor's), so the subreaper rule leaves them to their InitSession.
[[nodiscard]] bool IsLaunchThread(pid_t tid);

}  // namespace ptybox::backend
