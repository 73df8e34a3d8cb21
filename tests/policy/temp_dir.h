// A scratch directory for one test, removed with everything in it when the test ends.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <utility>

namespace ptybox::policy::testing {

class TempDir final {
 public:
  TempDir() {
    std::string pattern =
        (std::filesystem::temp_directory_path() / "ptybox-policy-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) ADD_FAILURE() << "mkdtemp " << pattern;
    // Canonical, so expected messages can be built from path() directly.
    path_ = std::filesystem::canonical(pattern);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }

  const std::filesystem::path& path() const { return path_; }

  // Creates `relative` (and its parents) as a directory; returns its absolute path.
  std::filesystem::path Dir(const std::filesystem::path& relative) const {
    std::filesystem::create_directories(path_ / relative);
    return path_ / relative;
  }
  // Writes `text` to `relative`, creating parent directories; returns its absolute path.
  std::filesystem::path File(const std::filesystem::path& relative, std::string_view text) const {
    std::filesystem::path file = path_ / relative;
    std::filesystem::create_directories(file.parent_path());
    std::ofstream out(file, std::ios::binary | std::ios::trunc);
    out << text;
    return file;
  }

 private:
  std::filesystem::path path_;
};

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
