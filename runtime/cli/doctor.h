// `ptybox doctor`: runs the same probes that stand behind sandbox_unavailable and prints each
// result with the fix for a failure.
#pragma once

namespace ptybox::runtime {

int Doctor();

}  // namespace ptybox::runtime
