// Replays the fuzzer's regression inputs (tests/fuzz/regressions: each once crashed or hung
// something) through the fuzz target itself, so every invariant it checks is checked in CI.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace ptybox::backend {
namespace {

TEST(FuzzRegressionTest, EveryRegressionInputPasses) {
  const std::filesystem::path dir =
      std::filesystem::path(PTYBOX_SOURCE_DIR) / "tests/fuzz/regressions/decoder";
  int count = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    std::ifstream in(entry.path(), std::ios::binary);
    const std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    SCOPED_TRACE(entry.path().filename().string());
    // A violated invariant traps (the test binary dies); a hang hits ctest's timeout.
    EXPECT_EQ(LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(data.data()), data.size()),
              0);
    ++count;
  }
  EXPECT_GE(count, 5) << "regression inputs missing from " << dir;
}

}  // namespace
}  // namespace ptybox::backend
