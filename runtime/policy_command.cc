#include "runtime/policy_command.h"

#include <cstdio>
#include <filesystem>

#include "policy/report.h"
#include "policy/resolver.h"

namespace ptybox::runtime {

int PolicyCheck(const std::vector<std::string>& files) {
  std::vector<std::filesystem::path> paths;
  for (const std::string& file : files) paths.emplace_back(file);
  if (paths.empty()) {
    std::error_code ec;
    for (std::filesystem::path candidate : {std::filesystem::path("/etc/ptybox/policy.yaml"),
                                            std::filesystem::current_path(ec) / ".ptybox.yaml"}) {
      if (std::filesystem::exists(candidate, ec)) paths.push_back(candidate);
    }
    if (paths.empty()) {
      std::printf("no policy files found (/etc/ptybox/policy.yaml, ./.ptybox.yaml): defaults apply\n");
      return 0;
    }
  }
  std::vector<Error> problems = policy::CheckPolicyFiles(paths);
  for (const Error& problem : problems) std::printf("%s\n", problem.Describe().c_str());
  if (problems.empty()) {
    for (const auto& path : paths) std::printf("%s: ok\n", path.string().c_str());
    return 0;
  }
  return 1;
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
