// `ptybox policy check` and `ptybox policy resolve`.
#pragma once

#include <string>
#include <vector>

#include "runtime/service.h"

namespace ptybox::runtime {

// One line per problem ("file:line:col: key: message"); exit 0 when every file is valid.
int PolicyCheck(const std::vector<std::string>& files);
// The effective policy and where each value came from; exit 0, or 1 on a policy error.
int PolicyResolve(const ServiceOptions& options);

}  // namespace ptybox::runtime
