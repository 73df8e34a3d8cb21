// Shared by the walls suites (kernel_walls_test.cc, daemon_reach_test.cc, init_reach_test.cc,
// secrets_test.cc): the escape fixture plus tests/escape/walls_probe.py in the workspace.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "tests/escape/escape_support.h"

namespace ptybox::testing {

class WallsTest : public EscapeTest {
 protected:
  void SetUp() override {
    EscapeTest::SetUp();
    std::filesystem::copy_file(WALLS_PROBE_SCRIPT, workspace() / ".escape" / "walls_probe.py");
  }
  // The command line of tests/escape/walls_probe.py with `args`.
  [[nodiscard]] std::string Walls(const std::string& args) const {
    return "python3 " + Quote(workspace() / ".escape" / "walls_probe.py") + " " + args;
  }
  // The command line of ptybox-sandbox-probe with `specs` (each "name[:arg]").
  [[nodiscard]] std::string SandboxProbe(const std::string& specs) const {
    return Quote(workspace() / ".escape" / "ptybox-sandbox-probe") + " " + specs;
  }
};

// ptybox-sandbox-probe output -> {spec: [result, info...]}.
inline std::map<std::string, std::vector<std::string>> ProbeDetails(const std::string& text) {
  std::map<std::string, std::vector<std::string>> out;
  std::string line;
  for (size_t start = 0; start <= text.size();) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::vector<std::string> words = Words(text.substr(start, end - start));
    if (words.size() >= 2) {
      out[words[0]] = std::vector<std::string>(words.begin() + 1, words.end());
    }
    start = end + 1;
  }
  return out;
}

}  // namespace ptybox::testing
