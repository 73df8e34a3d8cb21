// Reading the files and the workspace (the only filesystem work of resolution), then handing
// everything to the pure Combine().
#include "policy/resolver.h"

#include <sys/stat.h>

#include <deque>
#include <optional>
#include <system_error>
#include <vector>

#include "common/propagate.h"
#include "policy/file_reader.h"
#include "policy/layering.h"
#include "policy/parse_cache.h"
#include "policy/policy_file.h"
#include "policy/schema.h"

namespace ptybox::policy {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kRepositoryFileName = ".ptybox.yaml";

// The first error, telling how many more there are and where to see them.
Error FirstOf(std::vector<Error> errors, const std::string& file) {
  Error first = std::move(errors.front());
  if (errors.size() > 1) {
    const size_t more = errors.size() - 1;
    first.message += " (and " + std::to_string(more) + " more problem" + (more == 1 ? "" : "s") +
                     (file.empty() ? std::string(")")
                                   : "; run `ptybox policy check " + file + "` to list them)");
  }
  return first;
}

fs::path Absolute(const fs::path& path) {
  std::error_code ec;
  fs::path absolute = fs::absolute(path, ec);
  return ec ? path : absolute.lexically_normal();
}

// A broken repository file refuses every spawn in its workspace (failing closed: the file may
// narrow what sessions get). Say so, and who can repair it, since a session may have written it.
Error AsRepositoryRefusal(Error error, const fs::path& path) {
  error.message += ". No session opens in this workspace until its owner fixes or removes " +
                   path.string() + " (anything running in a workspace-write session can write it)";
  return error;
}

// Reads and parses one file; nullopt when it is missing and that is allowed. The YAML comes from
// the parse cache (policy/parse_cache.h): a file is parsed again only when it changed.
Result<std::optional<PolicyFile>> Load(const fs::path& path, PolicyRole role,
                                       const ReadOptions& options) {
  auto yaml = ReadPolicyYaml(path, options);
  if (!yaml) {
    Error error = std::move(yaml.error());
    error.message = "cannot read the " + std::string(ToString(role)) + " policy: " + error.message;
    if (role == PolicyRole::kRepository) error = AsRepositoryRefusal(std::move(error), path);
    return std::unexpected(std::move(error));
  }
  if (!*yaml) return std::nullopt;
  ParsedPolicyFile parsed = ParsePolicyYamlFile(***yaml, path, role);
  if (!parsed.errors.empty()) {
    Error first = FirstOf(std::move(parsed.errors), path.string());
    if (role == PolicyRole::kRepository) first = AsRepositoryRefusal(std::move(first), path);
    return std::unexpected(std::move(first));
  }
  return std::move(parsed.file);
}

Result<fs::path> CanonicalWorkspace(const fs::path& workspace, const std::string& source) {
  const std::string prefix = source == "command line" ? "--workspace"
                             : source == "default"    ? "workspace"
                                                      : source + ": workspace";
  std::error_code ec;
  fs::path canonical = fs::canonical(workspace, ec);
  if (ec) {
    return Fail(ErrorKind::kPolicyError,
                prefix + ": " + Printable(workspace.string(), 256) +
                    " cannot be used as the "
                    "workspace: " +
                    ec.message() + "; create it or name an existing directory",
                source);
  }
  if (!fs::is_directory(canonical, ec)) {
    return Fail(ErrorKind::kPolicyError,
                prefix + ": " + Printable(canonical.string(), 256) +
                    " is not a directory; the workspace must be a directory",
                source);
  }
  return canonical;
}

// The operator file: --policy FILE (which must exist), else the default path when present.
auto LoadOperatorFile(const ResolveInputs& inputs) {
  const bool explicit_file = inputs.operator_policy.has_value();
  const fs::path path =
      Absolute(explicit_file ? *inputs.operator_policy : inputs.default_operator_policy);
  return Load(path, PolicyRole::kOperator,
              ReadOptions::For(PolicyRole::kOperator, /*missing_ok=*/!explicit_file));
}

}  // namespace

Result<AuditPolicy> ReadOperatorAudit(const ResolveInputs& inputs) {
  auto loaded = LoadOperatorFile(inputs);
  if (!loaded) return Propagate(std::move(loaded));
  AuditPolicy audit;
  if (!*loaded) return audit;
  const PolicyFile& op = **loaded;
  if (op.audit_log) audit.log = op.audit_log->value;
  if (op.audit_record_dir) audit.record_dir = op.audit_record_dir->value;
  if (op.audit_record_max_bytes) audit.record_max_bytes = op.audit_record_max_bytes->value;
  return audit;
}

Result<int64_t> ReadOperatorDetachGrace(const ResolveInputs& inputs) {
  auto loaded = LoadOperatorFile(inputs);
  if (!loaded) return Propagate(std::move(loaded));
  int64_t grace = Limits{}.detach_grace_ms;
  if (*loaded) {
    if (auto found = (*loaded)->limits.find("detachGraceMs"); found != (*loaded)->limits.end()) {
      grace = found->second.value;
    }
  }
  return grace;
}

Result<ResolvedPolicy> Resolve(const ResolveInputs& inputs) {
  // 1. The operator file.
  std::optional<PolicyFile> op;
  {
    auto loaded = LoadOperatorFile(inputs);
    if (!loaded) return Propagate(std::move(loaded));
    op = std::move(*loaded);
  }

  // 2. The workspace root: --workspace, else the operator's `workspace`, else the fallback.
  fs::path workspace = inputs.workspace;
  std::string workspace_source = inputs.workspace_from_cli ? "command line" : "default";
  if (!inputs.workspace_from_cli && op && op->workspace) {
    workspace = op->workspace->value;
    workspace_source = op->workspace->where;
  }
  if (workspace.empty()) {
    std::error_code ec;
    workspace = fs::current_path(ec);
    if (ec) {
      return std::unexpected(Error::FromErrno(ErrorKind::kPolicyError, "getcwd", "", ec.value()));
    }
  }
  auto root = CanonicalWorkspace(workspace, workspace_source);
  if (!root) return Propagate(std::move(root));

  // 3. The repository file, never through a symlink, and not when it is the operator file.
  // Not read at all for an explicit danger-full-access request the operator does not extend
  // to repository files: nothing of it would apply (layering.h), so it cannot refuse either.
  std::optional<PolicyFile> repo;
  const fs::path repo_path = *root / kRepositoryFileName;
  std::error_code ec;
  const bool trusted_in_danger =
      op && op->repository_trust_in_danger && op->repository_trust_in_danger->value;
  const bool skip_repository =
      inputs.requested_mode == Mode::kDangerFullAccess && !trusted_in_danger;
  if (!(op && fs::equivalent(op->path, repo_path, ec)) && !skip_repository) {
    auto loaded = Load(repo_path, PolicyRole::kRepository,
                       ReadOptions::For(PolicyRole::kRepository, /*missing_ok=*/true));
    if (!loaded) return Propagate(std::move(loaded));
    repo = std::move(*loaded);
  }

  // 4. The command line's policy flags, relative paths against the workspace root.
  std::optional<PolicyFile> command_line;
  if (!inputs.command_line.empty()) {
    ParsedPolicyFile layer =
        BuildCommandLineLayer(inputs.command_line, CommandLineContext{*root, HostDirectories()});
    if (!layer.errors.empty()) return std::unexpected(FirstOf(std::move(layer.errors), ""));
    command_line = std::move(layer.file);
  }

  // 5. Layering.
  LayerInputs layers{op ? &*op : nullptr,
                     repo ? &*repo : nullptr,
                     *root,
                     workspace_source,
                     inputs.requested_mode,
                     command_line ? &*command_line : nullptr,
                     Absolute(inputs.operator_policy.value_or(inputs.default_operator_policy))};
  auto combined = Combine(layers);
  if (!combined) return std::unexpected(FirstOf(std::move(combined.error()), ""));
  if (skip_repository && !combined->ignored_repository_file &&
      fs::symlink_status(repo_path, ec).type() != fs::file_type::not_found) {
    combined->ignored_repository_file = repo_path;
  }

  // Canonical paths, so the sandbox can keep the files read-only inside writable roots.
  for (fs::path& file : combined->policy_files) {
    fs::path canonical = fs::canonical(file, ec);
    if (!ec) file = std::move(canonical);
  }
  return std::move(*combined);
}

namespace {

// Where the absolute `path` leads with every link followed, a dangling one too; from the first
// part that does not exist (or cannot be looked at) on, the rest is taken as written. nullopt on
// a loop. Unlike weakly_canonical, a link to a missing host path is followed, so whether that
// path exists makes no difference to where it leads.
std::optional<fs::path> FollowLinks(const fs::path& path) {
  std::deque<fs::path> rest;
  for (const fs::path& part : path.relative_path()) rest.push_back(part);
  fs::path done = "/";
  bool missing = false;
  int hops = 0;
  while (!rest.empty()) {
    fs::path part = rest.front();
    rest.pop_front();
    if (part.empty() || part == ".") continue;
    if (part == "..") {
      done = done.parent_path();
      continue;
    }
    fs::path next = done / part;
    struct stat st {};
    if (!missing && ::lstat(next.c_str(), &st) == 0 && S_ISLNK(st.st_mode)) {
      std::error_code ec;
      fs::path target = fs::read_symlink(next, ec);
      if (ec || ++hops > 40) return std::nullopt;
      if (target.is_absolute()) done = "/";
      const fs::path relative = target.relative_path();
      std::vector<fs::path> parts(relative.begin(), relative.end());
      rest.insert(rest.begin(), parts.begin(), parts.end());
      continue;
    }
    if (!missing && ::lstat(next.c_str(), &st) != 0) missing = true;
    done = next;
  }
  return done;
}

}  // namespace

Result<fs::path> ResolveCwd(const ResolvedPolicy& policy, const std::optional<std::string>& cwd) {
  if (!cwd) return policy.workspace_root;
  if (cwd->empty() || cwd->find('\0') != std::string::npos || cwd->size() > kMaxPathBytes) {
    return Fail(ErrorKind::kInvalidParams,
                "cwd must be a non-empty path without NUL characters, at most " +
                    std::to_string(kMaxPathBytes) +
                    " bytes; omit it to start in the workspace "
                    "root");
  }
  fs::path wanted(*cwd);
  if (wanted.is_relative()) wanted = policy.workspace_root / wanted;
  std::error_code ec;
  if (IsConfined(policy.mode)) {
    // Where the path leads is decided before anything about it is said: a path that leaves the
    // workspace (by name or through a link) gets one answer whether or not it exists on the
    // host, and never its resolved form (cwd "/proc/self/cwd" would name the daemon's).
    std::optional<fs::path> leads_to = FollowLinks(wanted);
    if (!leads_to || !IsWithin(*leads_to, policy.workspace_root)) {
      return Fail(ErrorKind::kPolicyDenied,
                  "cwd " + Printable(*cwd, 256) + " is not inside the workspace root " +
                      Printable(policy.workspace_root.string(), 256) + "; in mode `" +
                      std::string(ToString(policy.mode)) +
                      "` a shell starts inside the workspace. Pick a directory inside it, or "
                      "omit cwd",
                  "cwd");
    }
  }
  fs::path canonical = fs::canonical(wanted, ec);
  if (ec) {
    return Fail(ErrorKind::kInvalidParams,
                "cwd " + Printable(*cwd, 256) + " (" + Printable(wanted.string(), 256) +
                    ") cannot be used: " + ec.message() +
                    "; name an existing directory (relative paths start at the workspace root)",
                wanted.string());
  }
  if (!fs::is_directory(canonical, ec)) {
    return Fail(ErrorKind::kInvalidParams,
                "cwd " + Printable(canonical.string(), 256) + " is not a directory",
                canonical.string());
  }
  if (IsConfined(policy.mode) && !IsWithin(canonical, policy.workspace_root)) {
    return Fail(ErrorKind::kPolicyDenied,
                "cwd " + Printable(canonical.string(), 256) + " is outside the workspace root " +
                    Printable(policy.workspace_root.string(), 256) + "; in mode `" +
                    std::string(ToString(policy.mode)) +
                    "` a shell starts inside the workspace. Pick a directory inside it, or "
                    "omit cwd",
                canonical.string());
  }
  return canonical;
}

}  // namespace ptybox::policy
