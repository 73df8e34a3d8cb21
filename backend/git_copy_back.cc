// Copy-back of a session's private git directories (git_copy_back.h).
#include "backend/git_copy_back.h"

#include <string>

#include "common/log.h"
#include "sandbox/git_private.h"

namespace ptybox::backend {

void CopyBackSessionGits(SessionGits& gits, bool last) {
  std::lock_guard lock(gits.mutex);
  for (sandbox::PrivateGit& git : gits.gits) {
    Result<sandbox::GitCopyBack> done =
        sandbox::CopyBackPrivateGit(git.private_fd.Get(), git.host_fd.Get(), git.snapshot);
    if (!done) {
      LogWarn("cannot copy the session's git work back into " + git.host_git.string() + ": " +
              done.error().Describe());
      continue;
    }
    if (done->objects != 0 || done->refs != 0 || done->head || done->index ||
        done->tip_checks != 0) {
      LogInfo("copied the session's git work back into " + git.host_git.string() + ": " +
              std::to_string(done->objects) + " object files, " + std::to_string(done->refs) +
              " refs" + (done->head ? ", HEAD" : "") + (done->index ? ", the index" : "") + "; " +
              std::to_string(done->tip_checks) + " tips checked by the host's git");
    }
  }
  if (last) gits.gits.clear();  // each removes its private directory
}

}  // namespace ptybox::backend
