// The policy file vocabulary in one place: known keys, the bounds and layering rule of every
// limit, environment-name rules, and "did you mean" suggestions. Pure data and pure functions;
// the parser, the resolver, the docs test and the JSON Schema test all read these tables.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "common/untrusted_text.h"
#include "policy/limits.h"

namespace ptybox::policy {

// Which role a policy file plays. Repository files may only narrow the operator's.
enum class PolicyRole { kOperator, kRepository };
std::string_view ToString(PolicyRole role);  // "operator", "repository"

// How a repository file may change a limit the operator (or the default) set.
enum class LimitRule {
  kFree,          // readiness timings: any value within bounds (and >= repository_min)
  kLowerOnly,     // resources and sizes: equal or lower, never higher
  kOperatorOnly,  // what one owner's file would impose on other owners: no repository value
};

struct LimitSpec {
  std::string_view key;   // YAML name under `limits`, camelCase
  std::string_view unit;  // "milliseconds", "bytes", ... for messages and docs
  int64_t min = 0;
  int64_t max = 0;
  LimitRule rule = LimitRule::kLowerOnly;
  // Exactly one of these is set: the Limits member the key writes.
  int64_t Limits::*value = nullptr;
  std::optional<int64_t> Limits::*optional_value = nullptr;
  // The least a repository file may ask (0: `min`). A value below it would cost every owner of
  // the daemon, not only the sessions of this workspace (docs/policy.md).
  int64_t repository_min = 0;

  // The member's value; nullopt for an unset optional limit (inherit the daemon's).
  [[nodiscard]] std::optional<int64_t> Get(const Limits& limits) const;
  void Set(Limits& limits, int64_t v) const;
};

// Every field of Limits, in the order of policy/limits.h.
std::span<const LimitSpec> LimitSpecs();
const LimitSpec* FindLimit(std::string_view key);

// Top-level keys of a policy file ("version", "mode", ...), and those only an operator may use.
std::span<const std::string_view> TopLevelKeys();
bool IsOperatorOnlyKey(std::string_view key);
// Keys under `env`.
std::span<const std::string_view> EnvKeys();

// Names passed from the daemon's environment when no operator file says otherwise.
std::span<const std::string_view> DefaultEnvPass();
// Paths hidden from confined sessions when no operator file sets `hide` (common credentials).
std::span<const std::string_view> DefaultHidden();

// ---- Environment rules: the one source for policy files (env.pass, env.set,
// repository.envSet), terminal_open's `env` (runtime/service.cc) and the MCP input schema
// (runtime/mcp_tools.cc), which derives its pattern and limits from these constants.

// How a name is used: passed from the daemon's environment, or given a value (policy env.set,
// a client's terminal_open env).
enum class EnvUse { kPass, kSet };

using ::ptybox::kMaxEnvNameBytes;  // common/untrusted_text.h, which ptybox-init links too
inline constexpr size_t kMaxEnvValueBytes = 32 * 1024;
inline constexpr std::string_view kReservedEnvPrefix = "PTYBOX_";

// A portable variable name: [A-Za-z_][A-Za-z0-9_]*, at most kMaxEnvNameBytes characters.
using ::ptybox::IsValidEnvName;
// The same rule as an ECMA-262 regular expression for JSON Schema `pattern`.
std::string EnvNamePattern();
// Names the shell backend owns (prompt and startup hooks, shell options; TERM only for kSet):
// no policy and no client may pass or set them. Every name with kReservedEnvPrefix too.
std::span<const std::string_view> ReservedEnvNames(EnvUse use);
// Why `name` is reserved for `use`, or nullopt when the name is free.
std::optional<std::string> ReservedEnvReason(std::string_view name, EnvUse use = EnvUse::kSet);
// Everything wrong with `name` for `use`, as one sentence naming it ("`X` is not a valid
// variable name; ..." or "`PS1` is reserved: ..."), or nullopt when it may be used.
std::optional<std::string> EnvNameProblem(std::string_view name, EnvUse use);
// A value: at most kMaxEnvValueBytes bytes and no NUL (entries travel NUL-separated to
// ptybox-init and execve, so a NUL would end the value and start a smuggled variable).
std::optional<std::string> EnvValueProblem(std::string_view value);

// ---- Repository files and the environment (docs/security.md).
// Names a repository file's env.set may use when the operator's `repository.envSet` does not
// say otherwise: variables that change output or build parallelism, never what code runs.
std::span<const std::string_view> DefaultRepositoryEnvSet();
// Why a repository file may never set `name`, even when the operator lists it in
// `repository.envSet`: the name makes a program load or run code, read its startup or config
// files from elsewhere, or changes how the shell parses and times out. nullopt otherwise. A
// floor under the allowlist, not a complete list of dangerous names (hence the allowlist).
std::optional<std::string> CodeLoadingEnvReason(std::string_view name);
// Keys under the operator-only `repository` key.
std::span<const std::string_view> RepositoryKeys();
// Keys under the operator-only `audit` key (docs/security.md, "Audit log and recordings").
std::span<const std::string_view> AuditKeys();
// Bounds of `audit.recordMaxBytes`, the size of one session recording.
inline constexpr int64_t kMinRecordBytes = 64 * 1024;
inline constexpr int64_t kMaxRecordBytes = 16LL * 1024 * 1024 * 1024;
inline constexpr int64_t kDefaultRecordBytes = 64LL * 1024 * 1024;

// The closest of `known` to `typo` when it is plausibly a misspelling (case, `_`/`-`
// separators and a small edit distance are forgiven); nullopt otherwise.
std::optional<std::string_view> SuggestKey(std::string_view typo,
                                           std::span<const std::string_view> known);
// Optimal-string-alignment edit distance (insert, delete, substitute, swap neighbours).
int EditDistance(std::string_view a, std::string_view b);

// Untrusted text made safe to echo in a one-line message (common/untrusted_text.h).
using ::ptybox::Printable;

// Why a `hide` entry (absolute, lexically normal; canonical when the launcher asks) cannot be
// covered: it is, or holds, a path every session needs to start (the programs and libraries,
// /etc, /dev, /proc, /sys, /tmp, the run directories where the private home goes, the shells).
// Covering it would make every spawn fail, so the parser refuses it and the launcher never
// places such a cover (a `~/` entry whose link leads there). nullopt when it can be covered.
std::optional<std::string> UncoverableHideReason(std::string_view path);

// A `hide` entry that starts with `~`: "~/rest" made lexically normal, or nullopt unless it is
// `~/` and a path inside the home directory (not `~user/x`, `~/..`, `~/`), without NUL, bounded.
// One rule for policy files and `--hide` (policy/command_line.h).
std::optional<std::string> NormalHomeHide(std::string_view text);

// The repository floor of `limits.pollIntervalMs` (schema.cc says why).
inline constexpr int64_t kRepositoryMinPollIntervalMs = 10;

// Hard caps on file contents.
inline constexpr int64_t kMaxPolicyFileBytes = 1024 * 1024;
// A repository's file is smaller still: any writer of the workspace (a confined session too) can
// rewrite it, and every open, resolve and disconnect parses it again when it changed, on the
// daemon's reactor (a 1 MiB file took 0.25 s there; 64 KiB takes about 15 ms).
inline constexpr int64_t kMaxRepositoryPolicyFileBytes = 64 * 1024;
inline constexpr size_t kMaxListEntries = 256;  // writable, env.pass, env.set, hide, a client env
inline constexpr size_t kMaxPathBytes = 4096;

}  // namespace ptybox::policy
