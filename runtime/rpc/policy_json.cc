#include "runtime/rpc/policy_json.h"

#include "policy/network_names.h"

namespace ptybox::runtime {

Json PolicyToJson(const policy::ResolvedPolicy& p) {
  Json writable = Json::array();
  if (p.mode == policy::Mode::kWorkspaceWrite) writable.push_back(p.workspace_root.string());
  if (p.mode != policy::Mode::kReadOnly) {
    for (const auto& root : p.writable_roots) writable.push_back(root.string());
  }
  if (p.mode == policy::Mode::kDangerFullAccess) writable = Json::array({"/"});
  Json sources = Json::object();
  for (const auto& [key, from] : p.sources) sources[key] = from;
  Json files = Json::array();
  for (const auto& file : p.policy_files) files.push_back(file.string());
  Json out{{"mode", std::string(policy::ToString(p.mode))},
           {"ceiling", std::string(policy::ToString(p.ceiling))},
           {"workspaceRoot", p.workspace_root.string()},
           {"writableRoots", writable},
           // Without a sandbox there is no network namespace: the network is reachable.
           {"network",
            policy::NetworkName(p.network_allowed || p.mode == policy::Mode::kDangerFullAccess)},
           {"source", Json{{"files", files}, {"values", sources}}}};
  if (p.network_names && p.mode != policy::Mode::kDangerFullAccess) {
    // `network` stays `deny` (the session has no host network); the names it reaches through
    // the proxy come beside it, each with where it was written.
    auto rules = [](const std::vector<policy::NetworkRule>& written) {
      Json list = Json::array();
      for (const auto& rule : written) {
        list.push_back(Json{{"pattern", policy::ToString(rule.pattern)}, {"source", rule.where}});
      }
      return list;
    };
    out["networkNames"] =
        Json{{"allow", rules(p.network_names->allow)}, {"deny", rules(p.network_names->deny)}};
  }
  return out;
}

}  // namespace ptybox::runtime
