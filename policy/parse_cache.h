// Policy files parsed once per version: a file is re-parsed only when its identity (device,
// inode, size, modification and change times) differs from the last parse. The daemon reads
// the operator and repository files at every open, resolve, owner_info, disconnect and SIGHUP;
// with the cache a hostile repository file costs its (bounded) parse once, not at every call
// of every owner. Only the YAML is kept: the checks after it (paths that must exist) run at
// every call, on the bounded tree.
#pragma once

#include <ctime>
#include <filesystem>
#include <memory>
#include <optional>

#include "common/error.h"
#include "policy/file_reader.h"
#include "policy/policy_file.h"

namespace ptybox::policy {

// Whether a parse stored at `stored_at` may stand for a file of `identity` now. A file written
// within `margin` of the parse (by the realtime clock the kernel stamps files with) might have
// changed again within the same timestamp tick without a visible difference, so such a parse
// is never trusted (as git treats "racily clean" entries). Pure, for tests.
[[nodiscard]] bool CachedParseStillValid(const FileIdentity& cached, const FileIdentity& now,
                                         const timespec& stored_at, const timespec& margin);

struct CacheStats {
  size_t parses = 0;  // ParsePolicyYaml calls made by ReadPolicyYaml since the process started
  size_t hits = 0;
};

// ReadPolicyFile then ParsePolicyYaml, through the cache (keyed by the path as given). Same
// errors as ReadPolicyFile; nullopt when the file is missing and that is allowed. Thread-safe.
[[nodiscard]] Result<std::optional<std::shared_ptr<const PolicyYaml>>> ReadPolicyYaml(
    const std::filesystem::path& path, const ReadOptions& options);

CacheStats PolicyCacheStats();

}  // namespace ptybox::policy
