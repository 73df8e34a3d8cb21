// The names a path in a session's index may not have when it comes back to the host's index
// (docs/security.md, "Git for agents"). git on the host, and every clone of the person's
// repository on Windows or macOS, reads some names as others: NTFS ends a name at `:` (a stream)
// and drops trailing dots and spaces, answers to 8.3 short names (`git~1`, `gi7eba~1`), and HFS+
// ignores some Unicode code points (`.git<U+200C>modules` is `.gitmodules`). git's own
// verify_path refuses these (core.protectNTFS is on everywhere) and fsck flags them, whatever the
// host's configuration; a session's git run with the protection off staged them, and the person's
// next commit was one their git could not stash and their server refused (outside review 16).
// So both rule sets apply here, always.
#pragma once

#include <string_view>

namespace ptybox::sandbox {

// Whether one path component (no '/') names `.git` on NTFS (`.git` in any case ended by dots or
// spaces then the end or `:`, its short name `git~1`) or on HFS+ (`.git` with ignorable code
// points anywhere).
[[nodiscard]] bool GitNamesDotGit(std::string_view component);

// Whether a symbolic link named `component` would be read by git as one of the files it takes
// configuration or attributes from (`.gitmodules`, `.gitattributes`, `.gitignore`, `.mailmap`),
// on NTFS (trailing dots and spaces, a `:` stream, the 8.3 short names) or on HFS+.
[[nodiscard]] bool GitNamesConfigurationFile(std::string_view component);

}  // namespace ptybox::sandbox
