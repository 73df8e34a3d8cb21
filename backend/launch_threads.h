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

// How many launches run at once: two keep both cores of a small machine busy, two more let a
// launch of a huge workspace (thousands of nested repositories to compose) hold one without
// holding every other owner's open behind it.
inline constexpr int kLaunchThreads = 4;

// Queues `job` to run on a launch thread, in order of arrival. An error (no thread could be
// started at all: the daemon's task limit) means it will never run.
[[nodiscard]] Result<void> PostToLaunchThread(std::function<void()> job);

// Whether `tid` is one of the launch threads: their children are launches in progress or
// launched sessions' children, never orphans (an orphan re-parents to the process's first live
// thread, the reactor's), so the subreaper rule leaves them to their InitSession.
[[nodiscard]] bool IsLaunchThread(pid_t tid);

}  // namespace ptybox::backend
