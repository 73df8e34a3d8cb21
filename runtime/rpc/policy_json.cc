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
  return Json{{"mode", std::string(policy::ToString(p.mode))},
              {"ceiling", std::string(policy::ToString(p.ceiling))},
              {"workspaceRoot", p.workspace_root.string()},
              {"writableRoots", writable},
              // Without a sandbox there is no network namespace: the network is reachable.
              {"network",
               policy::NetworkName(p.network_allowed || p.mode == policy::Mode::kDangerFullAccess)},
              {"source", Json{{"files", files}, {"values", sources}}}};
}

}  // namespace ptybox::runtime
