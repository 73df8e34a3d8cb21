// Capability hygiene for ptybox-init before it execs the shell in a confined mode: every set
// (effective, permitted, inheritable, ambient, bounding) is checked and emptied, and
// no_new_privs is set.
#pragma once

#include "common/error.h"

namespace ptybox::sandbox {

Result<void> DropAllCapabilities();
// True when the calling process holds no capability in any set and no_new_privs is set.
Result<bool> HoldsNoCapabilities();

}  // namespace ptybox::sandbox
