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
//
// A file named on the command line is read without following a link (the last component) and
// only with a single hard link, whatever its role: a link could point at /etc/shadow and the
// messages would quote its lines. `follow_links` is for the operator file at its default place
// (or PTYBOX_OPERATOR_POLICY), which the resolver follows too. A file that is not a policy at
// all (its top level is not a mapping with `version`) gets one message and none of its text.
[[nodiscard]] std::vector<Error> CheckPolicyFile(const std::filesystem::path& path, PolicyRole role,
                                                 bool follow_links = false);
// CheckPolicyFile for each path with RoleForPath, problems concatenated in order.
[[nodiscard]] std::vector<Error> CheckPolicyFiles(const std::vector<std::filesystem::path>& paths);

// `ptybox policy check` applies the layering a spawn applies whenever it can see both layers.
struct LayeringCheck {
  std::filesystem::path repository;  // absolute
  std::string layered_on;            // the operator file's path, or "the built-in defaults"
  std::vector<Error> problems;       // kPolicyDenied, as a spawn in that workspace reports them
  bool ignored_in_danger = false;    // the result is danger-full-access: the file is not applied
};
// For each repository file among `paths` (RoleForPath), Combine() over the operator layer a
// spawn in the file's directory would use: the first operator file among `paths`, else
// `default_operator_policy` when it exists, else the built-in defaults. Files with problems of
// their own (CheckPolicyFile) are left out, since layering needs them parsed.
[[nodiscard]] std::vector<LayeringCheck> CheckLayering(
    const std::vector<std::filesystem::path>& paths,
    const std::filesystem::path& default_operator_policy = kDefaultOperatorPolicy);

// One line per effective value, "key: value  # source", then the policy files read.
[[nodiscard]] std::string FormatResolved(const ResolvedPolicy& policy);

}  // namespace ptybox::policy
