// The one list of the sandbox modes and their names: schemas, messages, help and the fence
// iterate it (policy/mode.h keeps the enum, kept small because nearly everything includes it).
#pragma once

#include <array>
#include <cstddef>
#include <string>
#include <string_view>

#include "common/tokens.h"
#include "policy/mode.h"

namespace ptybox::policy {

// A mode and its name as one token (common/tokens.h), so neither is written apart.
using ModeToken = NameToken<Mode>;

// Every mode with its name, narrowest first, in the enum's order (ToString indexes it).
inline constexpr std::array<ModeToken, 3> kModeTokens = {{
    {Mode::kReadOnly, "read-only"},
    {Mode::kWorkspaceWrite, "workspace-write"},
    {Mode::kDangerFullAccess, "danger-full-access"},
}};

// The modes, then their names, as lists drawn from kModeTokens (for loops and enums).
inline constexpr std::array<Mode, kModeTokens.size()> kModes = [] {
  std::array<Mode, kModeTokens.size()> modes{};
  for (size_t i = 0; i < kModeTokens.size(); ++i) modes[i] = kModeTokens[i].value;
  return modes;
}();
inline constexpr std::array<std::string_view, kModeTokens.size()> kModeNames = [] {
  std::array<std::string_view, kModeTokens.size()> names{};
  for (size_t i = 0; i < kModeTokens.size(); ++i) names[i] = kModeTokens[i].name;
  return names;
}();
static_assert(InEnumOrder(kModeTokens), "kModeTokens must list the modes in the enum's order");
// "read-only, workspace-write or danger-full-access", for messages and help.
std::string ModeAlternatives();

}  // namespace ptybox::policy
