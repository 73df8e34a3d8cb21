// The warm pool: a few pre-started shells, each waiting at its verified prompt for the one
// terminal_open whose launch it matches exactly. Invisible to clients: the policy is still
// resolved at every open, a pooled shell is handed out only when everything its launch depended
// on is equal now (PoolKey, then the shell's own check of a fresh launch), it serves one
// session at most and is never returned to the pool. Refills run on the reactor after an open,
// never in its way. docs/security.md "The warm pool".
#pragma once

#include <asio/io_context.hpp>
#include <asio/steady_timer.hpp>
#include <chrono>
#include <filesystem>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <string>

#include "backend/backend.h"
#include "policy/policy.h"

namespace ptybox::backend {

// What an open asks for, as the pool files it: the whole resolved policy (mode, roots, binds,
// env rules, limits, session uids, hidden paths, the policy files and where each value came
// from), the start directory, the client's environment and the terminal size. Compared with
// ==, never hashed. A matching key is necessary, not sufficient: PooledShell::Matches then
// compares a fresh launch with the one the shell was started with (host facts included).
struct PoolKey {
  policy::ResolvedPolicy policy;
  std::filesystem::path cwd;
  std::map<std::string, std::string> env;
  int rows = 0;
  int columns = 0;
  bool operator==(const PoolKey&) const = default;
};

PoolKey PoolKeyOf(const SpawnSpec& spec);

// The spec a refill starts from: the open's, without what belongs to that open alone (its
// name, its recording tap, its startup deadline).
SpawnSpec PoolSpecOf(const SpawnSpec& spec);

// One pre-started shell, as the pool sees it.
class PooledShell {
 public:
  virtual ~PooledShell() = default;
  // Alive, verified ready at its own prompt, nothing printed and nothing sent since.
  [[nodiscard]] virtual bool Pristine() const = 0;
  // A launch for `spec` built now (host facts collected afresh) equals the one it started with.
  [[nodiscard]] virtual bool Matches(const SpawnSpec& spec) const = 0;
  // Ends it (a start in progress is canceled); `done` once its processes are gone.
  virtual void Discard(std::string reason, std::function<void()> done) = 0;
};

struct WarmPoolOptions {
  // Distinct launch keys kept; the least recently used key's shells go first.
  size_t max_keys = 4;
  // A ready shell nobody claimed for this long is ended.
  std::chrono::milliseconds idle{60'000};
  // How many more shells the daemon may run beside its sessions (serve --max-sessions minus
  // the sessions open or opening); the pool never fills beyond it. Empty: no bound.
  std::function<size_t()> headroom;
};

class WarmPool final : public std::enable_shared_from_this<WarmPool> {
 public:
  // Starts one shell for `spec`; `settled(true)` once it is ready at its prompt, `settled(false)`
  // after a failed start whose processes are gone. `settled` may run at any later turn.
  using Starter = std::function<std::shared_ptr<PooledShell>(const SpawnSpec& spec,
                                                             std::function<void(bool)> settled)>;

  WarmPool(asio::io_context& io, Starter starter, WarmPoolOptions options);
  WarmPool(const WarmPool&) = delete;
  WarmPool& operator=(const WarmPool&) = delete;

  // A ready, pristine shell whose launch equals `spec`'s, removed from the pool; nullptr when
  // none. Shells of this key that no longer match, and shells of the same workspace and mode
  // under another key (a policy or environment that changed since), are discarded.
  std::shared_ptr<PooledShell> Claim(const SpawnSpec& spec);
  // Keeps `spec.policy.limits.warmShells` shells of this key, confined modes only (0: discards
  // the key's shells),
  // within the key bound and the headroom. Starts at most what is missing; never waits.
  void Refill(const SpawnSpec& spec);
  // Ends a shell that Claim handed out but that its open did not take (its claim's check
  // refused it, or the open was canceled meanwhile). Drain awaits it like the pool's own.
  void DiscardClaimed(std::shared_ptr<PooledShell> shell, const std::string& reason);
  // Ends every shell and refuses refills from now on; `done` once none is left, including those
  // given to DiscardClaimed.
  void Drain(std::function<void()> done);

  struct Counters {
    size_t starting = 0;
    size_t ready = 0;
    size_t discarding = 0;
    uint64_t started = 0;
    uint64_t claimed = 0;
    uint64_t discarded = 0;
  };
  [[nodiscard]] Counters counters() const;

 private:
  struct Entry {
    uint64_t id = 0;
    PoolKey key;
    std::shared_ptr<PooledShell> shell;
    bool ready = false;
    std::unique_ptr<asio::steady_timer> expiry;
  };
  using Iterator = std::list<Entry>::iterator;

  Iterator Find(uint64_t id);
  // Ends the shells of `key`'s workspace and mode whose policy differs from `key`'s.
  void DiscardStale(const PoolKey& key);
  void OnSettled(uint64_t id, bool ok);
  void Discard(Iterator entry, const std::string& reason);
  // Ends one shell and counts it in discarding_ until its processes are gone.
  void End(std::shared_ptr<PooledShell> shell, const std::string& reason);
  void Touch(const PoolKey& key);
  void EvictKeysBeyond(size_t keep, const PoolKey& keep_key);
  void MaybeFinishDrain();

  asio::io_context& io_;
  Starter starter_;
  WarmPoolOptions options_;
  std::list<Entry> entries_;
  std::list<PoolKey> recent_keys_;  // most recently used first
  uint64_t next_id_ = 1;
  size_t discarding_ = 0;
  bool draining_ = false;
  std::vector<std::function<void()>> drain_waiters_;
  uint64_t started_ = 0;
  uint64_t claimed_ = 0;
  uint64_t discarded_ = 0;
};

}  // namespace ptybox::backend
