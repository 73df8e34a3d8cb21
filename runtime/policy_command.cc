#include "runtime/policy_command.h"

#include <cstdio>
#include <filesystem>

#include "policy/report.h"
#include "policy/resolver.h"

namespace ptybox::runtime {

int PolicyCheck(const std::vector<std::string>& files,
                const std::filesystem::path& default_operator_policy) {
  std::vector<std::filesystem::path> paths;
  for (const std::string& file : files) paths.emplace_back(file);
  if (paths.empty()) {
    std::error_code ec;
    for (std::filesystem::path candidate : {default_operator_policy,
                                            std::filesystem::current_path(ec) / ".ptybox.yaml"}) {
      if (std::filesystem::exists(candidate, ec)) paths.push_back(candidate);
    }
    if (paths.empty()) {
      std::printf("no policy files found (%s, ./.ptybox.yaml): defaults apply\n",
                  default_operator_policy.string().c_str());
      return 0;
    }
  }
  std::vector<Error> problems = policy::CheckPolicyFiles(paths);
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
      if (check.repository != std::filesystem::absolute(path).lexically_normal()) continue;
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
