// The private home: where it may be mounted, and the environment that points into it.
#include "sandbox/session_home.h"

#include <algorithm>

namespace ptybox::sandbox {
namespace {

bool IsUnderOrEqual(const std::filesystem::path& path, const std::filesystem::path& dir) {
  const std::filesystem::path rel =
      path.lexically_normal().lexically_relative(dir.lexically_normal());
  return !rel.empty() && *rel.begin() != "..";
}

std::vector<std::string>::const_iterator FindVariable(const std::vector<std::string>& environment,
                                                      std::string_view name) {
  return std::find_if(environment.begin(), environment.end(), [&](const std::string& entry) {
    return entry.size() > name.size() && entry.starts_with(name) && entry[name.size()] == '=';
  });
}

}  // namespace

const std::vector<HomeVariable>& SessionHomeVariables() {
  static const std::vector<HomeVariable> variables = {
      {"XDG_CACHE_HOME", ".cache"},      {"XDG_CONFIG_HOME", ".config"},
      {"XDG_DATA_HOME", ".local/share"}, {"XDG_STATE_HOME", ".local/state"},
      {"npm_config_cache", ".npm"},      {"PIP_CACHE_DIR", ".cache/pip"},
      {"CARGO_HOME", ".cargo"},          {"GOPATH", "go"},
      {"GOCACHE", ".cache/go-build"},    {"APT_CONFIG", kSessionAptConfig},
  };
  return variables;
}

bool SessionHomeMountable(const SandboxSpec& spec) {
  const std::filesystem::path home = kSessionHome;
  const bool parent_is_run_dir = std::any_of(spec.run_dirs.begin(), spec.run_dirs.end(),
                                             [&](const std::filesystem::path& dir) {
                                               return dir.lexically_normal() == home.parent_path();
                                             });
  if (!parent_is_run_dir) return false;
  std::vector<std::filesystem::path> granted = spec.writable_roots;
  granted.push_back(spec.workspace_root);
  granted.push_back(spec.cwd);
  return std::none_of(granted.begin(), granted.end(), [&](const std::filesystem::path& root) {
    return !root.empty() && (IsUnderOrEqual(root, home) || IsUnderOrEqual(home, root));
  });
}

std::filesystem::path SessionAptConfigPath(const std::vector<std::string>& environment,
                                           const std::filesystem::path& home) {
  if (home.empty() || FindVariable(environment, "APT_CONFIG") != environment.end()) return {};
  return home / kSessionAptConfig;
}

void PointEnvironmentAtHome(std::vector<std::string>& environment,
                            const std::filesystem::path& home) {
  auto find = [&](std::string_view name) {
    const auto at = FindVariable(environment, name);
    return environment.begin() + (at - environment.cbegin());
  };
  const std::string home_entry = "HOME=" + home.string();
  if (auto it = find("HOME"); it != environment.end()) {
    *it = home_entry;
  } else {
    environment.push_back(home_entry);
  }
  for (const HomeVariable& variable : SessionHomeVariables()) {
    if (find(variable.name) != environment.end()) continue;
    environment.push_back(std::string(variable.name) + "=" + (home / variable.relative).string());
  }
}

}  // namespace ptybox::sandbox
