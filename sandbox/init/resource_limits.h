// The resource limits a policy sets on a session, typed: one table names each limit on
// ptybox-init's command line and maps it to its setrlimit resource, for both ends.
#pragma once

#include <sys/resource.h>

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>

namespace ptybox::sandbox {

enum class LimitedResource { kProcesses, kOpenFiles, kAddressSpace, kFileSize, kCpuSeconds };

struct ResourceLimit {
  LimitedResource resource = LimitedResource::kProcesses;
  int64_t value = 0;  // soft and hard limit alike
  bool operator==(const ResourceLimit&) const = default;
};

struct LimitedResourceInfo {
  LimitedResource resource;
  std::string_view name;  // on ptybox-init's command line: --rlimit NAME=VALUE
  int rlimit;             // RLIMIT_*
};

inline constexpr std::array<LimitedResourceInfo, 5> kLimitedResources = {{
    {LimitedResource::kProcesses, "nproc", RLIMIT_NPROC},
    {LimitedResource::kOpenFiles, "nofile", RLIMIT_NOFILE},
    {LimitedResource::kAddressSpace, "as", RLIMIT_AS},
    {LimitedResource::kFileSize, "fsize", RLIMIT_FSIZE},
    {LimitedResource::kCpuSeconds, "cpu", RLIMIT_CPU},
}};

constexpr const LimitedResourceInfo& InfoOf(LimitedResource resource) {
  for (const LimitedResourceInfo& info : kLimitedResources) {
    if (info.resource == resource) return info;
  }
  return kLimitedResources[0];
}

constexpr std::optional<LimitedResource> LimitedResourceNamed(std::string_view name) {
  for (const LimitedResourceInfo& info : kLimitedResources) {
    if (info.name == name) return info.resource;
  }
  return std::nullopt;
}

}  // namespace ptybox::sandbox
