// libFuzzer target for the JSON-RPC request decoder (runtime/params.h): the input is one line, as
// the line reader hands it to `ptybox serve` and `ptybox mcp`; rpc_checks.h says what is checked.
#include <cstddef>
#include <cstdint>
#include <string>

#include "tests/fuzz/rpc_checks.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ptybox::fuzz::CheckLine(std::string(reinterpret_cast<const char*>(data), size));
  return 0;
}
