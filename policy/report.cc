// CheckPolicyFile runs the single-file checks plus the two that need only the file's own
// location; FormatResolved prints ResolvedPolicy with its sources.
#include "policy/report.h"

#include <algorithm>
#include <optional>
#include <system_error>

#include "common/join.h"
#include "policy/file_reader.h"
#include "policy/layering.h"
#include "policy/network_names.h"
#include "policy/policy_file.h"

namespace ptybox::policy {
namespace {

namespace fs = std::filesystem;

std::string SourceOf(const ResolvedPolicy& policy, const std::string& key) {
  auto found = policy.sources.find(key);
  return found == policy.sources.end() ? std::string("default") : found->second;
}

std::string List(const std::vector<std::string>& items) { return "[" + Join(items) + "]"; }

fs::path AbsoluteNormal(const fs::path& path) {
  std::error_code ec;
  fs::path absolute = fs::absolute(path, ec);
  if (ec) absolute = path;
  return absolute.lexically_normal();
}

// The file read as a spawn reads it in `role`, parsed; nullopt on any problem.
std::optional<PolicyFile> ParseClean(const fs::path& absolute, PolicyRole role) {
  auto text = ReadPolicyFile(absolute, ReadOptions::For(role, /*missing_ok=*/false));
  if (!text || !*text) return std::nullopt;
  ParsedPolicyFile parsed = ParsePolicyText(**text, absolute, role);
  if (!parsed.errors.empty()) return std::nullopt;
  return std::move(parsed.file);
}

// A mapping with a `version` key at the top: what every policy file starts with.
bool LooksLikePolicy(const PolicyYaml& yaml) {
  if (!yaml.tree) return yaml.error_key == "yaml";  // yaml-cpp's messages quote no content
  if (yaml.tree->kind == YamlNode::Kind::kNull) return true;  // "the file is empty"
  if (yaml.tree->kind != YamlNode::Kind::kMap) return false;
  return std::any_of(yaml.tree->entries.begin(), yaml.tree->entries.end(),
                     [](const YamlEntry& e) { return e.key.value == "version"; });
}

}  // namespace

PolicyRole RoleForPath(const fs::path& path) {
  return path.filename() == ".ptybox.yaml" ? PolicyRole::kRepository : PolicyRole::kOperator;
}

std::vector<Error> CheckPolicyFile(const fs::path& path, PolicyRole role, bool follow_links) {
  std::error_code ec;
  fs::path absolute = fs::absolute(path, ec);
  if (ec) absolute = path;
  absolute = absolute.lexically_normal();
  ReadOptions options = ReadOptions::For(role, /*missing_ok=*/false);
  options.follow_symlinks = follow_links;
  options.single_link = !follow_links;
  auto text = ReadPolicyFile(absolute, options);
  if (!text) {
    Error error = std::move(text.error());
    if (error.message.find(absolute.string()) != 0) {
      error.message = absolute.string() + ": " + error.message;
    }
    return {std::move(error)};
  }
  const PolicyYaml yaml = ParsePolicyYaml(**text);
  ParsedPolicyFile parsed = ParsePolicyYamlFile(yaml, absolute, role);
  if (!parsed.errors.empty() && !LooksLikePolicy(yaml)) {
    // Messages quote values and keys; of a file that is not a policy, quote nothing.
    return {Error{ErrorKind::kPolicyError,
                  absolute.string() +
                      ": is not a policy file: its top level is not a mapping with a `version` "
                      "key (a policy starts with `version: 1`). Its content is not shown",
                  absolute.string()}};
  }
  std::vector<Error> errors = std::move(parsed.errors);
  const PolicyFile& file = parsed.file;
  // The launcher's rule on where each entry leads now (the parser checked it as written).
  for (const Located<std::string>& hidden : file.hide) {
    if (hidden.value.starts_with("~/")) continue;
    fs::path canonical = fs::canonical(hidden.value, ec);
    if (ec) continue;
    if (auto reason = UncoverableHideReason(canonical.string())) {
      errors.push_back(
          Error{ErrorKind::kPolicyError,
                hidden.where + ": hide: `" + Printable(hidden.value, 256) + "` leads to " + *reason,
                hidden.where});
    }
  }
  if (role == PolicyRole::kOperator && file.workspace) {
    fs::path canonical = fs::canonical(file.workspace->value, ec);
    if (ec || !fs::is_directory(canonical, ec)) {
      const std::string& where = file.workspace->where;
      errors.push_back(Error{ErrorKind::kPolicyError,
                             where +
                                 ": workspace: " + Printable(file.workspace->value.string(), 256) +
                                 " is not an existing directory; create it or fix the path",
                             where});
    }
  }
  if (role == PolicyRole::kRepository) {
    fs::path root = fs::canonical(absolute.parent_path(), ec);
    if (!ec) {
      std::vector<Error> outside = CheckRepositoryWritable(file, root);
      errors.insert(errors.end(), outside.begin(), outside.end());
    }
  }
  return errors;
}

std::vector<Error> CheckPolicyFiles(const std::vector<fs::path>& paths) {
  std::vector<Error> errors;
  for (const fs::path& path : paths) {
    std::vector<Error> found = CheckPolicyFile(path, RoleForPath(path));
    errors.insert(errors.end(), found.begin(), found.end());
  }
  return errors;
}

std::vector<LayeringCheck> CheckLayering(const std::vector<fs::path>& paths,
                                         const fs::path& default_operator_policy) {
  std::optional<fs::path> operator_path;
  for (const fs::path& path : paths) {
    if (RoleForPath(path) == PolicyRole::kOperator) {
      operator_path = AbsoluteNormal(path);
      break;
    }
  }
  std::error_code ec;
  if (!operator_path && fs::exists(default_operator_policy, ec)) {
    operator_path = AbsoluteNormal(default_operator_policy);
  }
  std::optional<PolicyFile> op;
  if (operator_path) {
    op = ParseClean(*operator_path, PolicyRole::kOperator);
    if (!op) return {};  // its own problems are listed by CheckPolicyFile
  }
  std::vector<LayeringCheck> checks;
  for (const fs::path& path : paths) {
    if (RoleForPath(path) != PolicyRole::kRepository) continue;
    const fs::path absolute = AbsoluteNormal(path);
    std::optional<PolicyFile> repo = ParseClean(absolute, PolicyRole::kRepository);
    fs::path root = fs::canonical(absolute.parent_path(), ec);
    // Its own problems (CheckPolicyFile lists them) come first; layering needs a clean file.
    if (!repo || ec || !CheckRepositoryWritable(*repo, root).empty()) continue;
    LayeringCheck check;
    check.repository = absolute;
    check.layered_on = operator_path ? operator_path->string() : "the built-in defaults";
    auto combined = Combine(LayerInputs{op ? &*op : nullptr, &*repo, root, "default", std::nullopt,
                                        nullptr, AbsoluteNormal(default_operator_policy)});
    if (!combined) {
      check.problems = std::move(combined.error());
    } else {
      check.ignored_in_danger = combined->ignored_repository_file.has_value();
    }
    checks.push_back(std::move(check));
  }
  return checks;
}

std::string FormatResolved(const ResolvedPolicy& policy) {
  std::string out;
  auto line = [&](const std::string& key, const std::string& value, const std::string& source) {
    out += key + ": " + value + "  # " + source + "\n";
  };
  line("mode", std::string(ToString(policy.mode)), SourceOf(policy, "mode"));
  line("ceiling", std::string(ToString(policy.ceiling)), SourceOf(policy, "ceiling"));
  line("workspace", Printable(policy.workspace_root.string(), 4096), SourceOf(policy, "workspace"));
  std::vector<std::string> writable;
  for (const fs::path& root : policy.writable_roots)
    writable.push_back(Printable(root.string(), 4096));
  line("writable", List(writable), SourceOf(policy, "writable"));
  if (policy.network_names) {
    // Each pattern with the file and line that put it there: what `policy resolve` is for.
    line("network", "names only (through ptybox's proxy)", SourceOf(policy, "network"));
    for (const NetworkRule& rule : policy.network_names->allow) {
      line("network.allow", ToString(rule.pattern), rule.where);
    }
    for (const NetworkRule& rule : policy.network_names->deny) {
      line("network.deny", ToString(rule.pattern), rule.where);
    }
  } else {
    line("network", std::string(NetworkName(policy.network_allowed)), SourceOf(policy, "network"));
  }
  std::vector<std::string> hidden;
  for (const std::string& path : policy.hidden) hidden.push_back(Printable(path, 4096));
  line("hide", List(hidden), SourceOf(policy, "hide"));
  line("env.pass", List(policy.env.pass), SourceOf(policy, "env.pass"));
  std::vector<std::string> set;
  for (const auto& [name, value] : policy.env.set) {
    set.push_back(name + ": \"" + Printable(value, 256) + "\"");
  }
  line("env.set", "{" + Join(set) + "}", SourceOf(policy, "env.set"));
  for (const LimitSpec& spec : LimitSpecs()) {
    const std::string key = "limits." + std::string(spec.key);
    std::optional<int64_t> value = spec.Get(policy.limits);
    line(key, value ? std::to_string(*value) : std::string("inherit"), SourceOf(policy, key));
  }
  std::vector<std::string> files;
  for (const fs::path& file : policy.policy_files) files.push_back(Printable(file.string(), 4096));
  out += "policy files: " + List(files) + "\n";
  if (policy.ignored_repository_file) {
    out += "ignored: " + Printable(policy.ignored_repository_file->string(), 4096) +
           "  # the mode is danger-full-access and the operator's "
           "repository.trustInDangerFullAccess is not true\n";
  }
  return out;
}

}  // namespace ptybox::policy
