// `ptybox demo`: starts `ptybox serve --stdio` as a child and drives a short sandboxed session
// in the workspace over the real protocol, printing each request, the answer and its latency.
#pragma once

#include <string>

#include "runtime/service.h"

namespace ptybox::runtime {

int Demo(const std::string& self, const ServiceOptions& options);

}  // namespace ptybox::runtime
