// The effective policy of one owner at one spawn: what every other component consumes.
// Produced by the resolver from the operator file, the repository file and built-in defaults.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "policy/limits.h"
#include "policy/mode.h"

namespace ptybox::policy {

struct EnvPolicy {
  // Names copied from the daemon's environment when present (an allow-list).
  std::vector<std::string> pass;
  // Values set explicitly; they win over passed ones.
  std::map<std::string, std::string> set;
};

struct ResolvedPolicy {
  Mode mode = Mode::kWorkspaceWrite;
  Mode ceiling = Mode::kDangerFullAccess;
  std::filesystem::path workspace_root;               // absolute, canonical
  std::vector<std::filesystem::path> writable_roots;  // extra writable roots, absolute
  bool network_allowed = false;
  EnvPolicy env;
  Limits limits;
  // Paths hidden from confined sessions (`hide`): absolute, or "~/..." for every home
  // directory (expanded at each spawn by sandbox/host_walls.h).
  std::vector<std::string> hidden;
  // Policy files that contributed; inside a writable root they stay read-only.
  std::vector<std::filesystem::path> policy_files;
  // Where each top-level value came from: "mode" -> "/repo/.ptybox.yaml:2:7" or "default".
  std::map<std::string, std::string> sources;
};

}  // namespace ptybox::policy
