// A small map from path to (identity, parse time, YAML), cleared when it grows past its cap:
// a daemon serves a handful of workspaces, and a miss costs only one bounded parse.
#include "policy/parse_cache.h"

#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "common/propagate.h"

namespace ptybox::policy {
namespace {

constexpr size_t kMaxEntries = 16;  // a daemon reads two files; each entry is at most ~2.5 MB
// Timestamps on files come from a coarse clock (one tick, at most 10 ms); a second is far past
// any tick and leaves a file that stays unchanged cached from its second parse on.
constexpr timespec kRacyMargin{1, 0};

struct Entry {
  FileIdentity identity;
  timespec stored_at{};
  std::shared_ptr<const PolicyYaml> yaml;
};

struct Cache {
  std::mutex mutex;
  std::map<std::string, Entry> entries;
  CacheStats stats;
};

Cache& TheCache() {
  static Cache* cache = new Cache();  // never destroyed: no exit-time order problems
  return *cache;
}

bool Before(const timespec& a, const timespec& b) {
  return a.tv_sec < b.tv_sec || (a.tv_sec == b.tv_sec && a.tv_nsec < b.tv_nsec);
}

timespec Minus(const timespec& a, const timespec& b) {
  timespec out{a.tv_sec - b.tv_sec, a.tv_nsec - b.tv_nsec};
  if (out.tv_nsec < 0) {
    out.tv_nsec += 1'000'000'000;
    --out.tv_sec;
  }
  return out;
}

}  // namespace

bool CachedParseStillValid(const FileIdentity& cached, const FileIdentity& now,
                           const timespec& stored_at, const timespec& margin) {
  if (!(cached == now)) return false;
  const timespec trusted_before = Minus(stored_at, margin);
  return Before(now.mtime, trusted_before) && Before(now.ctime, trusted_before);
}

Result<std::optional<std::shared_ptr<const PolicyYaml>>> ReadPolicyYaml(
    const std::filesystem::path& path, const ReadOptions& options) {
  auto opened = OpenPolicyFile(path, options);
  if (!opened) return Propagate(std::move(opened));
  if (!*opened) return std::nullopt;
  const FileIdentity identity = (*opened)->identity;
  const std::string key = path.string();
  Cache& cache = TheCache();
  {
    std::lock_guard<std::mutex> lock(cache.mutex);
    auto found = cache.entries.find(key);
    if (found != cache.entries.end() &&
        CachedParseStillValid(found->second.identity, identity, found->second.stored_at,
                              kRacyMargin)) {
      ++cache.stats.hits;
      return found->second.yaml;
    }
  }
  // Taken before the read: a write during the read makes the entry racy, never wrongly fresh.
  timespec stored_at{};
  ::clock_gettime(CLOCK_REALTIME, &stored_at);
  auto text = ReadOpenedPolicyFile(**opened, path);
  if (!text) return Propagate(std::move(text));
  auto yaml = std::make_shared<const PolicyYaml>(ParsePolicyYaml(*text));
  std::lock_guard<std::mutex> lock(cache.mutex);
  ++cache.stats.parses;
  // A file that grew or shrank while it was read is not the version the identity names.
  if (text->size() != static_cast<size_t>(identity.size)) return yaml;
  if (cache.entries.size() >= kMaxEntries && !cache.entries.contains(key)) cache.entries.clear();
  cache.entries[key] = Entry{identity, stored_at, yaml};
  return yaml;
}

CacheStats PolicyCacheStats() {
  Cache& cache = TheCache();
  std::lock_guard<std::mutex> lock(cache.mutex);
  return cache.stats;
}

}  // namespace ptybox::policy
