// One session's output, fanned out to the people watching it (`ptybox attach`, the
// terminal_watch extension of docs/protocol.md) and to its recording. The service gives every
// session one hub as its output tap, from its first byte: the prompt markers (OSC 6973 with
// the session's nonce) are stripped once here, so no watcher ever sees the nonce. A watcher
// that cannot keep up says so by returning false from its sink; it is then dropped with a
// reason, never waited for: the hub never blocks the session or the reactor.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "backend/backend.h"
#include "runtime/audit/audit_record.h"
#include "runtime/audit/audit_sink.h"

namespace ptybox::runtime {

// How one watcher leaves (the notification's `reason`).
enum class WatchEnd {
  kUnwatched,  // terminal_unwatch, or its connection ended
  kClosed,     // the session was closed
  kSlow,       // its queue passed the bound: dropped
  kOwnerGone,  // the session's owner is gone
};
[[nodiscard]] std::string_view WatchEndName(WatchEnd end);

// The bound on what may wait unsent on a watcher's connection (its queue): above it the next
// chunk drops the watcher instead of queueing more.
inline constexpr size_t kMaxWatchQueueBytes = 1024 * 1024;
// Watchers of one session at once (fan-out work per output chunk stays bounded).
inline constexpr size_t kMaxWatchersPerSession = 16;

// The pure decision behind dropping a slow watcher: may `chunk` bytes be queued on a connection
// that already holds `unsent` bytes?
[[nodiscard]] inline bool WatchMayQueue(size_t unsent, size_t chunk,
                                        size_t bound = kMaxWatchQueueBytes) {
  return unsent <= bound && chunk <= bound - unsent;
}

class WatchHub final {
 public:
  struct Watcher {
    // One chunk of output (markers stripped); false: this watcher cannot take it (its queue is
    // full) and is dropped with kSlow.
    std::function<bool(std::string_view bytes)> on_output;
    // The watch ended for `end` (not called for Remove()).
    std::function<void(WatchEnd end)> on_end;
    // The session was resized (terminal_resize): its screen at the new size, after every chunk
    // of output passed so far; false: this watcher cannot take it (dropped with kSlow).
    std::function<bool(const backend::ScreenSnapshot& screen)> on_resize = {};
  };

  // `recording`: the session's recording tap, which sees the raw output (nullptr: none).
  explicit WatchHub(std::shared_ptr<SessionTap> recording) : recording_(std::move(recording)) {}

  // The session's output tap.
  void Output(std::string_view bytes);
  [[nodiscard]] bool full() const { return watchers_.size() >= kMaxWatchersPerSession; }
  // Adds a watcher; its id is unique in this daemon (so a connection names it alone).
  void Add(uint64_t id, Watcher watcher) { watchers_[id] = std::move(watcher); }
  // Removes a watcher without telling it; false when it is not here.
  bool Remove(uint64_t id) { return watchers_.erase(id) > 0; }
  // The session was resized: every watcher gets `screen` (the model at the new size).
  void Resized(const backend::ScreenSnapshot& screen);
  // Ends every watcher with `end` (the session closed).
  void EndAll(WatchEnd end);
  [[nodiscard]] size_t size() const { return watchers_.size(); }

 private:
  std::shared_ptr<SessionTap> recording_;
  // Drops the watchers `slow` names, each told kSlow.
  void DropSlow(const std::vector<uint64_t>& slow);

  audit::MarkerStripper markers_;
  std::map<uint64_t, Watcher> watchers_;
};

}  // namespace ptybox::runtime
