// `ptybox run -- CMD`: one command in the resolved sandbox for CI jobs. Its output is streamed
// (it inherits our stdout/stderr), its exit status passed through (128+N when killed by signal N,
// 124 on --timeout, 125 when the sandbox could not start it), and nothing it started outlives it.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "runtime/service.h"

namespace ptybox::runtime {

struct RunOptions {
  ServiceOptions service;
  std::optional<int64_t> timeout_seconds;
  std::vector<std::string> command;
};

int RunCommand(const RunOptions& options);

}  // namespace ptybox::runtime
