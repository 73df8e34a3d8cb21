// The private home of a confined session: an empty tmpfs (mode 0700) at kSessionHome, made
// fresh for each session and gone with it, where HOME and the standard tool-state variables
// point. Tools keep history, caches and configuration there (node, python, npm, pip, cargo,
// go) while the host's own home stays read-only as before (docs/sandbox.md).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "sandbox/bwrap_args.h"

namespace ptybox::sandbox {

// Under /run, whose sandbox copy is an empty tmpfs (a run-time directory wall), so the mount
// point is made there and never on a host directory.
inline constexpr char kSessionHome[] = "/run/ptybox-home";

// Whether `spec` can have the private home: its parent is one of the sandbox's empty run-time
// directories, and no granted root (workspace, writable roots, cwd) lies in or over it.
bool SessionHomeMountable(const SandboxSpec& spec);

// Points the environment at `home`: HOME always (the host's home is read-only inside, and the
// default policy passes its path); the tool-state variables below only where the environment
// does not set them already (an operator's or client's own choice stands).
void PointEnvironmentAtHome(std::vector<std::string>& environment,
                            const std::filesystem::path& home);

// The tool-state variables and where each points, relative to the home.
struct HomeVariable {
  const char* name;
  const char* relative;  // "" for the home itself
};
const std::vector<HomeVariable>& SessionHomeVariables();

// apt's configuration for the session, which ptybox-init writes into the home and APT_CONFIG
// names (one of SessionHomeVariables): the session cannot switch users (its user namespace maps
// one id and denies setgroups), so apt must not try to drop to `_apt`; its download methods died
// doing so (docs/sandbox.md, "The private home").
// ptybox-init (init_main.cc, WriteAptConfig) writes the text.
inline constexpr char kSessionAptConfig[] = ".config/ptybox/apt.conf";

// The file ptybox-init is to write apt's configuration to: the home's kSessionAptConfig, unless
// `environment` (before PointEnvironmentAtHome) sets APT_CONFIG itself (that choice stands).
std::filesystem::path SessionAptConfigPath(const std::vector<std::string>& environment,
                                           const std::filesystem::path& home);

}  // namespace ptybox::sandbox
