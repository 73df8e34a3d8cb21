#include "runtime/watch_hub.h"

#include <vector>

namespace ptybox::runtime {

std::string_view WatchEndName(WatchEnd end) {
  switch (end) {
    case WatchEnd::kUnwatched:
      return "unwatched";
    case WatchEnd::kClosed:
      return "closed";
    case WatchEnd::kSlow:
      return "slow";
    case WatchEnd::kOwnerGone:
      return "owner_gone";
  }
  return "unwatched";
}

void WatchHub::Output(std::string_view bytes) {
  if (recording_) recording_->Output(bytes);
  // Stripped whether or not anyone watches: a watcher that joins mid-marker must not see the
  // rest of it.
  const std::string clean = markers_.Feed(bytes);
  if (clean.empty() || watchers_.empty()) return;
  std::vector<uint64_t> slow;
  for (auto& [id, watcher] : watchers_) {
    if (!watcher.on_output(clean)) slow.push_back(id);
  }
  DropSlow(slow);
}

void WatchHub::Resized(const backend::ScreenSnapshot& screen) {
  std::vector<uint64_t> slow;
  for (auto& [id, watcher] : watchers_) {
    if (watcher.on_resize && !watcher.on_resize(screen)) slow.push_back(id);
  }
  DropSlow(slow);
}

void WatchHub::DropSlow(const std::vector<uint64_t>& slow) {
  for (uint64_t id : slow) {
    auto it = watchers_.find(id);
    if (it == watchers_.end()) continue;
    Watcher dropped = std::move(it->second);
    watchers_.erase(it);
    if (dropped.on_end) dropped.on_end(WatchEnd::kSlow);
  }
}

void WatchHub::EndAll(WatchEnd end) {
  std::map<uint64_t, Watcher> ending;
  ending.swap(watchers_);
  for (auto& [id, watcher] : ending) {
    if (watcher.on_end) watcher.on_end(end);
  }
}

}  // namespace ptybox::runtime
