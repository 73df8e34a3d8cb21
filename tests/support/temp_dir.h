// The one scratch directory of the tests: `ptybox-test-XXXXXX` (mode 0700) in /tmp or a given
// base, canonical (so expected messages can be built from path()), removed with everything in
// it when the test ends, even where a sandboxed test left read-only bits. Header-only, so the
// unit suites that link no daemon fixture use it too.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>

namespace ptybox::testing {

class TempDir final {
 public:
  TempDir() : TempDir("/tmp") {}
  explicit TempDir(const std::filesystem::path& base) {
    std::string pattern = (base / "ptybox-test-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) {
      throw std::system_error(errno, std::generic_category(), "mkdtemp in " + base.string());
    }
    path_ = std::filesystem::canonical(pattern);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir() {
    std::error_code ec;
    for (auto it = std::filesystem::recursive_directory_iterator(path_, ec);
         !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
      std::filesystem::permissions(it->path(), std::filesystem::perms::owner_all,
                                   std::filesystem::perm_options::add, ec);
    }
    std::filesystem::remove_all(path_, ec);
  }

  [[nodiscard]] const std::filesystem::path& path() const { return path_; }

  // Creates `relative` (and its parents) as a directory; returns its absolute path.
  std::filesystem::path Dir(const std::filesystem::path& relative) const {
    std::filesystem::create_directories(path_ / relative);
    return path_ / relative;
  }
  // Writes `text` to `relative`, creating parent directories; returns its absolute path.
  std::filesystem::path File(const std::filesystem::path& relative, std::string_view text) const {
    const std::filesystem::path file = path_ / relative;
    std::filesystem::create_directories(file.parent_path());
    std::ofstream out(file, std::ios::binary | std::ios::trunc);
    out << text;
    return file;
  }

 private:
  std::filesystem::path path_;
};

}  // namespace ptybox::testing
