// The names NTFS and HFS+ read as `.git` or as git's configuration files (sandbox/git_paths.h),
// against the forms git's own verify_path and fsck refuse.
#include "sandbox/git_paths.h"

#include <gtest/gtest.h>

#include <string>

namespace ptybox::sandbox {
namespace {

TEST(GitPathsTest, DotGitAsNtfsAndHfsReadIt) {
  for (const std::string name :
       {".git", ".GIT", ".Git.", ".git ", ".git. . ", "git~1", "GIT~1", "git~1. ",
        ".git::$INDEX_ALLOCATION", ".git:stream", ".g\u200Cit", "\u200D.git", ".git\uFEFF",
        ".GI\u206At", ".git\u202A",
        // Not UTF-8 after `.git`: git's HFS reading takes it as the end of the name.
        ".git\xff"}) {
    EXPECT_TRUE(GitNamesDotGit(name)) << name;
  }
  for (const std::string name : {"git", ".gi", ".gitx", "x.git", ".git~1", "git~2", "git~1x",
                                 ".git\u00e9", ".gitmodules", ".g\u00efT"}) {
    EXPECT_FALSE(GitNamesDotGit(name)) << name;
  }
}

TEST(GitPathsTest, ConfigurationFilesAsNtfsAndHfsReadThem) {
  for (const std::string name :
       {".gitmodules", ".GITMODULES", ".gitmodules.",      ".gitmodules  ",     ".gitmodules:x",
        "gitmod~1",    "GITMOD~4",    "gitmod~1..",        "gi7eba~1",          "gi7eba~9",
        "gi7eb~12",    "gi~12345",    ".git\u200Cmodules", "\uFEFF.gitmodules", ".gitattributes.",
        "gitatt~2",    "gi7d29~1",    ".gitignore:stream", "gitign~1",          "gi250a~3",
        ".mailmap..",  "mailma~1",    "maba30~1",          ".mail\u200Dmap"}) {
    EXPECT_TRUE(GitNamesConfigurationFile(name)) << name;
  }
  for (const std::string name :
       {"gitmodules", ".gitmodule", ".gitmodulesx", ".gitmodules.x", "gitmod~5", "gitmod~0",
        "gi7eba~a", "gi7eba~10", "gi7ebc~1", "gi7eba~", "x.gitmodules", ".gitm\u00f6dules",
        ".mailmap~1", "readme", ""}) {
    EXPECT_FALSE(GitNamesConfigurationFile(name)) << name;
  }
}

}  // namespace
}  // namespace ptybox::sandbox
