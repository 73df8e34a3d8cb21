// The policy suites' scratch directory (tests/support/temp_dir.h) and their message templates.
#pragma once

#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <utility>

#include "tests/support/temp_dir.h"

namespace ptybox::policy::testing {

using TempDir = ::ptybox::testing::TempDir;

// Replaces every "{dir}" in `text` with `dir` and every "{parent}" with `parent`.
inline std::string Expand(std::string text, const std::filesystem::path& dir,
                          const std::filesystem::path& parent = {}) {
  for (const auto& [marker, value] : {std::pair<std::string, std::string>{"{dir}", dir.string()},
                                      {"{parent}", parent.string()}}) {
    for (size_t at = text.find(marker); at != std::string::npos; at = text.find(marker, at)) {
      text.replace(at, marker.size(), value);
      at += value.size();
    }
  }
  return text;
}

}  // namespace ptybox::policy::testing
