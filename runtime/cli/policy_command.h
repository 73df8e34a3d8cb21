// `ptybox policy check` and `ptybox policy resolve`.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "runtime/service.h"

namespace ptybox::runtime {

// One line per problem ("file:line:col: key: message"); exit 0 when every file is valid. A
// repository file is also layered as a spawn in its directory would layer it: on the first
// operator file among `files`, else `default_operator_policy` when it exists, else the defaults.
int PolicyCheck(const std::vector<std::string>& files,
                const std::filesystem::path& default_operator_policy);
// The effective policy and where each value came from; exit 0, or 1 on a policy error.
int PolicyResolve(const ServiceOptions& options);

}  // namespace ptybox::runtime
