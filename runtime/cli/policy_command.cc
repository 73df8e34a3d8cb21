#include "runtime/cli/policy_command.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "policy/report.h"
#include "policy/resolver.h"

namespace ptybox::runtime {

int PolicyCheck(const std::vector<std::string>& files,
                const std::filesystem::path& default_operator_policy) {
  namespace fs = std::filesystem;
  std::error_code ec;
  auto absolute = [&](const fs::path& p) {
    fs::path a = fs::absolute(p, ec);
    return (ec ? p : a).lexically_normal();
  };
  // Present at all: a dangling link counts (the resolver refuses it, so must the check).
  auto present = [&](const fs::path& p) {
    return fs::symlink_status(p, ec).type() != fs::file_type::not_found;
  };
  const fs::path default_operator = absolute(default_operator_policy);
  std::vector<fs::path> paths;
  for (const std::string& file : files) paths.emplace_back(file);
  if (paths.empty()) {
    for (fs::path candidate : {default_operator_policy, fs::current_path(ec) / ".ptybox.yaml"}) {
      if (present(candidate)) paths.push_back(candidate);
    }
    if (paths.empty()) {
      std::printf("no policy files found (%s, ./.ptybox.yaml): defaults apply\n",
                  default_operator_policy.string().c_str());
      return 0;
    }
  }
  // The operator file a spawn would layer a repository file on is checked too, even when
  // only repository files were named: a broken one refuses every spawn.
  const bool names_operator = std::any_of(paths.begin(), paths.end(), [](const fs::path& p) {
    return policy::RoleForPath(p) == policy::PolicyRole::kOperator;
  });
  std::vector<Error> problems;
  if (!names_operator && present(default_operator_policy)) {
    problems = policy::CheckPolicyFile(default_operator_policy, policy::PolicyRole::kOperator,
                                       /*follow_links=*/true);
  }
  for (const fs::path& path : paths) {
    // Links are followed only at the operator file's own place, as the resolver does.
    std::vector<Error> found = policy::CheckPolicyFile(
        path, policy::RoleForPath(path), /*follow_links=*/absolute(path) == default_operator);
    problems.insert(problems.end(), found.begin(), found.end());
  }
  // A repository file is checked as a spawn would see it: layered on the operator's.
  std::vector<policy::LayeringCheck> layering =
      policy::CheckLayering(paths, default_operator_policy);
  for (policy::LayeringCheck& check : layering) {
    problems.insert(problems.end(), check.problems.begin(), check.problems.end());
  }
  for (const Error& problem : problems) std::printf("%s\n", problem.Describe().c_str());
  if (!problems.empty()) return 1;
  for (const auto& path : paths) {
    std::string note;
    for (const policy::LayeringCheck& check : layering) {
      if (check.repository != absolute(path)) continue;
      note = " (layered on " + check.layered_on + ")";
      if (check.ignored_in_danger) {
        note = " (layered on " + check.layered_on +
               ": ignored, since sessions there are danger-full-access and the operator's "
               "repository.trustInDangerFullAccess is not true)";
      }
    }
    std::printf("%s: ok%s\n", path.string().c_str(), note.c_str());
  }
  return 0;
}

int PolicyResolve(const ServiceOptions& options) {
  Result<policy::ResolvedPolicy> resolved =
      policy::Resolve(ResolveInputsFrom(options, std::nullopt));
  if (!resolved) {
    std::fprintf(stderr, "%s\n", resolved.error().Describe().c_str());
    return 1;
  }
  std::printf("%s", policy::FormatResolved(*resolved).c_str());
  return 0;
}

}  // namespace ptybox::runtime
