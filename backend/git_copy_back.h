// A session's private git directories (sandbox/git_private.h) as the daemon keeps them: shared
// between the session's owner on the reactor and the worker threads that copy them back, each
// copy-back under the one mutex so two never interleave on a snapshot.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <vector>

#include "sandbox/mount_stage.h"

namespace ptybox::backend {

struct SessionGits {
  std::mutex mutex;
  std::vector<sandbox::PrivateGit> gits;  // guarded by `mutex`
  // Whether the launch made any: read on the reactor without the mutex (a copy-back on a worker
  // holds it for as long as it copies), so a session without one never starts a copy-back.
  std::atomic<bool> any{false};
  // The repositories and linked worktrees the launch left read-only though Git for agents is on
  // (sandbox::LaunchedInit::gits_left_read_only); guarded by `mutex`.
  size_t left_read_only = 0;
};

// On a worker thread (never the reactor: it reads and fsyncs files): copies back every private
// git directory of `gits` (sandbox::CopyBackPrivateGit), logging what it refused or left in
// conflict. `last`: the session has ended; the private directories are removed afterwards.
void CopyBackSessionGits(SessionGits& gits, bool last);

}  // namespace ptybox::backend
