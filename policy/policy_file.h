// One policy file, parsed and checked on its own: every value with the "file:line:column" it
// was written at. Layering (what a repository file may change) is policy/layering.h's job.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.h"
#include "policy/host_pattern.h"
#include "policy/mode.h"
#include "policy/policy.h"
#include "policy/schema.h"
#include "policy/yaml_tree.h"

namespace ptybox::policy {

// A value and where it was written ("/etc/ptybox/policy.yaml:3:7").
template <typename T>
struct Located {
  T value{};
  std::string where;
};

struct PolicyFile {
  std::filesystem::path path;  // absolute
  PolicyRole role = PolicyRole::kOperator;

  std::optional<Located<Mode>> mode;
  std::optional<Located<Mode>> ceiling;  // operator files only
  // Operator files only: absolute and lexically normal, existence checked when it is used.
  std::optional<Located<std::filesystem::path>> workspace;
  std::optional<std::string> writable_where;             // set when the file has `writable`
  std::vector<Located<std::filesystem::path>> writable;  // canonical, existing directories
  std::optional<Located<bool>> network_allowed;          // `network: deny | allow`
  // `network: {allow: [...], deny: [...]}` (where: the `network` value). `allow` absent: a
  // repository file keeps the operator's allows and only adds denies.
  struct NetworkLists {
    std::optional<std::vector<NetworkRule>> allow;
    std::vector<NetworkRule> deny;
  };
  std::optional<Located<NetworkLists>> network_names;
  std::optional<std::string> env_where;       // set when the file has `env`
  std::optional<std::string> env_pass_where;  // set when the file has `env.pass`
  std::vector<Located<std::string>> env_pass;
  std::optional<std::string> env_set_where;  // set when the file has `env.set`
  std::map<std::string, Located<std::string>> env_set;
  std::map<std::string, Located<int64_t>, std::less<>> limits;  // by YAML key
  // Operator files only: what a repository file may do (docs/security.md).
  std::optional<std::string> repository_env_set_where;      // set when `repository.envSet` is given
  std::vector<Located<std::string>> repository_env_set;     // names a repository env.set may use
  std::optional<Located<bool>> repository_trust_in_danger;  // repository.trustInDangerFullAccess
  std::optional<Located<SessionUidRange>> session_uids;     // operator files only
  // Operator files only: `audit.log`, `audit.recordDir` (absolute or relative to the file),
  // `audit.recordMaxBytes`.
  std::optional<Located<std::filesystem::path>> audit_log;
  std::optional<Located<std::filesystem::path>> audit_record_dir;
  std::optional<Located<int64_t>> audit_record_max_bytes;
  std::optional<std::string> hide_where;  // set when the file has `hide`
  // Absolute and lexically normal, or "~/..." (every home directory); existence not required.
  std::vector<Located<std::string>> hide;
};

struct ParsedPolicyFile {
  PolicyFile file;            // the values that parsed; use only when `errors` is empty
  std::vector<Error> errors;  // every problem found, in file order where practical
};

// The bounded YAML of a file's text, or its first problem (a NUL byte, a syntax error, a
// bound): the costly, filesystem-free half of parsing, which policy/parse_cache.h keeps per
// file identity. What follows (ParsePolicyYamlFile) walks at most the bounded tree.
struct PolicyYaml {
  std::optional<YamlNode> tree;  // nullopt: `error` says why
  std::string error_key;         // "file" or "yaml"
  YamlError error;
};
[[nodiscard]] PolicyYaml ParsePolicyYaml(std::string_view text);
// The checks of ParsePolicyText on already parsed YAML (path existence included, so they run
// at every call: a cached tree never hides a directory that appeared or went away).
[[nodiscard]] ParsedPolicyFile ParsePolicyYamlFile(const PolicyYaml& yaml,
                                                   const std::filesystem::path& path,
                                                   PolicyRole role);

// "<file>:<line>:<column>".
std::string Where(const std::filesystem::path& file, int line, int column);

// Parses `text` as the policy file `path` (absolute; relative paths inside resolve against
// its directory) in `role`. Checks syntax, types, bounds, reserved names and path existence;
// never throws. Every error is kPolicyError with the message
// "<file>:<line>:<column>: <key path>: <what was wrong and what is expected>".
[[nodiscard]] ParsedPolicyFile ParsePolicyText(std::string_view text,
                                               const std::filesystem::path& path, PolicyRole role);

}  // namespace ptybox::policy
