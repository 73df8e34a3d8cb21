// Text for the command line: `ptybox policy check` (every problem of every file, one Error
// each) and `ptybox policy resolve` (each effective value with where it came from).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "common/error.h"
#include "policy/policy.h"
#include "policy/schema.h"

namespace ptybox::policy {

// A file named `.ptybox.yaml` is a repository policy; any other name is an operator policy.
PolicyRole RoleForPath(const std::filesystem::path& path);

// Every problem of one file in `role`: syntax, types, bounds, reserved names, missing paths,
// an operator `workspace` that is not a directory, repository writable roots outside the
// file's directory (the workspace it governs). Empty when the file is fine. Each message is
// one line, "file:line:col: key: message" (or "file: message" when there is no position).
[[nodiscard]] std::vector<Error> CheckPolicyFile(const std::filesystem::path& path,
                                                 PolicyRole role);
// CheckPolicyFile for each path with RoleForPath, problems concatenated in order.
[[nodiscard]] std::vector<Error> CheckPolicyFiles(const std::vector<std::filesystem::path>& paths);

// One line per effective value, "key: value  # source", then the policy files read.
[[nodiscard]] std::string FormatResolved(const ResolvedPolicy& policy);

}  // namespace ptybox::policy
