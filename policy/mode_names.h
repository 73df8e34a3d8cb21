// The one list of the sandbox modes and their names: schemas, messages, help and the fence
// iterate it (policy/mode.h keeps the enum, kept small because nearly everything includes it).
#pragma once

#include <array>
#include <string>
#include <string_view>

#include "policy/mode.h"

namespace ptybox::policy {

// Every mode, narrowest first.
inline constexpr std::array<Mode, 3> kModes = {Mode::kReadOnly, Mode::kWorkspaceWrite,
                                               Mode::kDangerFullAccess};
// Their names, in kModes' order.
inline constexpr std::array<std::string_view, 3> kModeNames = {"read-only", "workspace-write",
                                                               "danger-full-access"};
// "read-only, workspace-write or danger-full-access", for messages and help.
std::string ModeAlternatives();

}  // namespace ptybox::policy
