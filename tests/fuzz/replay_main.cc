// A libFuzzer-compatible driver for the normal (g++) build: runs LLVMFuzzerTestOneInput once on
// every file of the directories (or files) given, so each target's seeds and regression inputs
// are replayed by ctest without clang. A violated invariant traps and fails the test; so does a
// directory with no input in it at all.
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

int main(int argc, char** argv) {
  size_t count = 0;
  for (int i = 1; i < argc; ++i) {
    std::vector<std::filesystem::path> files;
    const std::filesystem::path arg = argv[i];
    if (std::filesystem::is_directory(arg)) {
      for (const auto& entry : std::filesystem::directory_iterator(arg)) {
        if (entry.is_regular_file() && entry.path().filename() != ".gitkeep") {
          files.push_back(entry.path());
        }
      }
    } else {
      files.push_back(arg);
    }
    for (const auto& file : files) {
      std::ifstream in(file, std::ios::binary);
      if (!in) {
        std::fprintf(stderr, "replay: cannot read %s\n", file.c_str());
        return 1;
      }
      const std::string data((std::istreambuf_iterator<char>(in)),
                             std::istreambuf_iterator<char>());
      std::printf("replay: %s (%zu bytes)\n", file.c_str(), data.size());
      std::fflush(stdout);
      LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(data.data()), data.size());
      ++count;
    }
  }
  std::printf("replay: %zu inputs passed\n", count);
  if (count == 0) {
    std::fprintf(stderr, "replay: no input found in the paths given\n");
    return 1;
  }
  return 0;
}
