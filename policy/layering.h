// The layering rules as a pure function: built-in defaults, then the operator file (defaults
// and the ceiling), then the command line's policy flags (within what the operator allows),
// then the repository file (may only narrow), then the client's requested mode (up to the
// ceiling). No filesystem access: every path in the inputs is canonical already.
#pragma once

#include <expected>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "common/error.h"
#include "policy/mode.h"
#include "policy/policy.h"
#include "policy/policy_file.h"

namespace ptybox::policy {

struct LayerInputs {
  const PolicyFile* operator_file = nullptr;    // nullptr: no operator file
  const PolicyFile* repository_file = nullptr;  // nullptr: no repository file
  std::filesystem::path workspace_root;         // canonical, existing directory
  std::string workspace_source;                 // "command line", "default" or file:line:col
  std::optional<Mode> requested_mode;           // the client's policy_set_mode / --mode
  // nullptr: no policy flags. The layer policy/command_line.h builds from --network,
  // --writable, --env and --hide: the person who started ptybox, below the operator and above
  // the repository.
  const PolicyFile* command_line = nullptr;
  // The operator file messages name when there is none to read (where one would be read: the
  // default path, or the one PTYBOX_OPERATOR_POLICY or --policy gives); empty: the default.
  std::filesystem::path operator_path{};
};

// The effective policy, or every layering violation (kPolicyDenied, each naming the file
// that asked and the file or default that forbids it).
[[nodiscard]] std::expected<ResolvedPolicy, std::vector<Error>> Combine(const LayerInputs& inputs);

// The widest mode a repository file may name under this operator file (nullptr: none). A
// repository file can be written by whatever runs in the workspace, so it never reaches
// danger-full-access unless the operator's own mode already is that.
Mode RepositoryModeLimit(const PolicyFile* operator_file);

// True when canonical `path` is `root` or lies below it (component-wise, not by prefix).
bool IsWithin(const std::filesystem::path& path, const std::filesystem::path& root);

// The `.git` directory that holds canonical `path`, counted from the first of `roots` (the
// workspace and the writable roots) that lies strictly above it: every repository's `.git` in a
// writable root is read-only inside (docs/security.md, "Protected paths"), so a writable root
// there has no effect. nullopt: no `.git` between any of `roots` and `path`.
std::optional<std::filesystem::path> ProtectedGitAround(
    const std::filesystem::path& path, const std::vector<std::filesystem::path>& roots);

// Repository writable roots outside `workspace_root`, as kPolicyDenied errors.
std::vector<Error> CheckRepositoryWritable(const PolicyFile& repository,
                                           const std::filesystem::path& workspace_root);

}  // namespace ptybox::policy
