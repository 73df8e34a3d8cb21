// One call per spawn: reads the operator and repository policy files afresh (an edit or a SIGHUP
// reload counts at the next spawn; an unchanged file's YAML comes from policy/parse_cache.h),
// layers them and the client's requested mode, and yields the effective mode together with the
// workspace root.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "common/error.h"
#include "policy/command_line.h"
#include "policy/mode.h"
#include "policy/policy.h"

namespace ptybox::policy {

struct ResolveInputs {
  // --policy FILE: must exist. Unset: `default_operator_policy` when present.
  std::optional<std::filesystem::path> operator_policy;
  std::filesystem::path default_operator_policy = kDefaultOperatorPolicy;
  // The workspace (empty: the current directory). When `workspace_from_cli` is false this is
  // only a fallback, used if the operator file has no `workspace` key.
  std::filesystem::path workspace;
  bool workspace_from_cli = true;
  // The owner's policy_set_mode choice or the CLI's --mode; nullopt: the files decide.
  std::optional<Mode> requested_mode;
  // --network, --writable, --env, --hide of run, serve, mcp or policy resolve: a layer between
  // the operator file and the repository file (policy/command_line.h).
  CommandLinePolicy command_line;
};

// The effective policy with `sources` and `policy_files` filled. Errors:
//  kPolicyError  a file is unreadable, malformed or out of bounds ("file:line:col: key: ..."),
//                an explicit --policy file is missing, the workspace is not a directory, a
//                policy flag's value is wrong ("command line --writable x: writable: ...");
//  kPolicyDenied a policy flag, the repository file or the requested mode asks for more than
//                allowed (the message names the flag, file or request that asked and what
//                forbids it).
// When a file has several problems the first is returned and the message says how many more
// `ptybox policy check` will list.
[[nodiscard]] Result<ResolvedPolicy> Resolve(const ResolveInputs& inputs);

// The shell's start directory: the workspace root by default; a relative `cwd` is relative to
// it. Must be an existing directory (kInvalidParams otherwise); outside the workspace root
// (after resolving symlinks and `..`) it is kPolicyDenied unless the mode is
// danger-full-access. The result is canonical.
// The operator file's `audit` settings alone (no workspace, no repository file): the daemon
// and `ptybox run` read them once at startup. Errors as for Resolve's operator file.
[[nodiscard]] Result<AuditPolicy> ReadOperatorAudit(const ResolveInputs& inputs);

// The operator file's `limits.detachGraceMs` (or the default), with no repository file read:
// the grace is operator only, and a broken repository file must not decide it.
[[nodiscard]] Result<int64_t> ReadOperatorDetachGrace(const ResolveInputs& inputs);

[[nodiscard]] Result<std::filesystem::path> ResolveCwd(const ResolvedPolicy& policy,
                                                       const std::optional<std::string>& cwd);

}  // namespace ptybox::policy
