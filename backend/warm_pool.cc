#include "backend/warm_pool.h"

#include <algorithm>
#include <asio/post.hpp>

#include "common/log.h"

namespace ptybox::backend {

PoolKey PoolKeyOf(const SpawnSpec& spec) {
  return PoolKey{spec.policy, spec.cwd, spec.env, spec.rows, spec.columns};
}

SpawnSpec PoolSpecOf(const SpawnSpec& spec) {
  SpawnSpec pooled;
  pooled.policy = spec.policy;
  pooled.cwd = spec.cwd;
  pooled.env = spec.env;
  pooled.rows = spec.rows;
  pooled.columns = spec.columns;
  return pooled;
}

WarmPool::WarmPool(asio::io_context& io, Starter starter, WarmPoolOptions options)
    : io_(io), starter_(std::move(starter)), options_(std::move(options)) {}

WarmPool::Iterator WarmPool::Find(uint64_t id) {
  return std::ranges::find_if(entries_, [id](const Entry& e) { return e.id == id; });
}

std::shared_ptr<PooledShell> WarmPool::Claim(const SpawnSpec& spec) {
  if (draining_ || !policy::IsConfined(spec.policy.mode)) return nullptr;
  const PoolKey key = PoolKeyOf(spec);
  std::shared_ptr<PooledShell> claimed;
  for (auto it = entries_.begin(); it != entries_.end();) {
    auto next = std::next(it);
    if (it->key == key) {
      // Still starting: left for a later open; this one never waits for it.
      if (it->ready) {
        const bool usable = it->shell->Pristine() && it->shell->Matches(spec);
        if (usable && !claimed) {
          claimed = std::move(it->shell);
          if (it->expiry) asio::post(io_, [timer = std::move(it->expiry)] {});
          entries_.erase(it);
          ++claimed_;
        } else if (!usable) {
          Discard(it, "it is no longer pristine or its launch inputs changed");
        }
      }
    }
    it = next;
  }
  DiscardStale(key);
  if (claimed) Touch(key);
  // The daemon's session limit counts pooled shells too: an open near it ends the oldest.
  while (options_.headroom && !entries_.empty() && options_.headroom() < entries_.size()) {
    Discard(entries_.begin(), "the daemon's session limit needs the room");
  }
  return claimed;
}

void WarmPool::DiscardStale(const PoolKey& key) {
  for (auto it = entries_.begin(); it != entries_.end();) {
    auto next = std::next(it);
    if (it->key.policy.workspace_root == key.policy.workspace_root &&
        it->key.policy.mode == key.policy.mode && !(it->key.policy == key.policy)) {
      // The same workspace and mode now resolve to another policy: that shell is stale.
      Discard(it, "the policy of its workspace changed");
    }
    it = next;
  }
}

void WarmPool::Refill(const SpawnSpec& spec) {
  if (draining_) return;
  // What a client passes in `env` belongs to its session alone: copied into a pooled shell it
  // would outlive that session (until claimed by an identical open or expired), so an open with
  // its own environment is never pooled and refills nothing.
  if (!spec.env.empty()) return;
  const PoolKey key = PoolKeyOf(spec);
  DiscardStale(key);
  // Confined shells only: a danger-full-access session shares the host, so it is always started
  // for its own open.
  const auto want = policy::IsConfined(spec.policy.mode)
                        ? static_cast<size_t>(std::max<int64_t>(0, spec.policy.limits.warm_shells))
                        : size_t{0};
  size_t have = 0;
  for (auto it = entries_.begin(); it != entries_.end();) {
    auto next = std::next(it);
    if (it->key == key) {
      if (have >= want) {
        Discard(it, "limits.warmShells is lower now");
      } else {
        ++have;
      }
    }
    it = next;
  }
  if (want == 0) {
    std::erase(recent_keys_, key);
    return;
  }
  Touch(key);
  EvictKeysBeyond(options_.max_keys, key);
  std::weak_ptr<WarmPool> weak = weak_from_this();
  while (have < want) {
    const size_t pooled = entries_.size() + discarding_;
    if (options_.headroom && options_.headroom() <= pooled) {
      LogDebug("warm pool: not refilled, the daemon's session limit leaves no room");
      return;
    }
    const uint64_t id = next_id_++;
    entries_.push_back(Entry{id, key, nullptr, false, nullptr});
    asio::io_context& io = io_;
    std::shared_ptr<PooledShell> shell = starter_(PoolSpecOf(spec), [weak, id, &io](bool ok) {
      asio::post(io, [weak, id, ok] {
        if (std::shared_ptr<WarmPool> self = weak.lock()) self->OnSettled(id, ok);
      });
    });
    Iterator entry = Find(id);
    if (!shell) {
      if (entry != entries_.end()) entries_.erase(entry);
      return;
    }
    if (entry != entries_.end()) entry->shell = std::move(shell);
    ++have;
    ++started_;
  }
}

void WarmPool::OnSettled(uint64_t id, bool ok) {
  Iterator entry = Find(id);
  if (entry == entries_.end()) return;  // discarded meanwhile: its Discard awaits the end
  if (!ok) {
    // A failed start has already ended its processes.
    LogInfo("warm pool: a pre-started shell failed to start; the next open starts its own");
    entries_.erase(entry);
    MaybeFinishDrain();
    return;
  }
  entry->ready = true;
  entry->expiry = std::make_unique<asio::steady_timer>(io_, options_.idle);
  std::weak_ptr<WarmPool> weak = weak_from_this();
  entry->expiry->async_wait([weak, id](const std::error_code& ec) {
    if (ec) return;
    std::shared_ptr<WarmPool> self = weak.lock();
    if (!self) return;
    Iterator expired = self->Find(id);
    if (expired != self->entries_.end()) self->Discard(expired, "it stayed unclaimed (idle)");
  });
}

void WarmPool::Discard(Iterator entry, const std::string& reason) {
  std::shared_ptr<PooledShell> shell = std::move(entry->shell);
  // A timer is destroyed on a later turn, never inside its own handler.
  if (entry->expiry) asio::post(io_, [timer = std::move(entry->expiry)] {});
  entries_.erase(entry);
  ++discarded_;
  if (shell) End(std::move(shell), reason);
}

void WarmPool::DiscardClaimed(std::shared_ptr<PooledShell> shell, const std::string& reason) {
  ++discarded_;
  End(std::move(shell), reason);
}

void WarmPool::End(std::shared_ptr<PooledShell> shell, const std::string& reason) {
  LogDebug("warm pool: discarding a pooled shell: " + reason);
  ++discarding_;
  std::weak_ptr<WarmPool> weak = weak_from_this();
  shell->Discard(reason, [weak] {
    if (std::shared_ptr<WarmPool> self = weak.lock()) {
      --self->discarding_;
      self->MaybeFinishDrain();
    }
  });
}

void WarmPool::Touch(const PoolKey& key) {
  std::erase(recent_keys_, key);
  recent_keys_.push_front(key);
}

void WarmPool::EvictKeysBeyond(size_t keep, const PoolKey& keep_key) {
  while (recent_keys_.size() > keep) {
    PoolKey oldest = recent_keys_.back();
    recent_keys_.pop_back();
    if (oldest == keep_key) continue;
    for (auto it = entries_.begin(); it != entries_.end();) {
      auto next = std::next(it);
      if (it->key == oldest) Discard(it, "its launch key was the least recently used");
      it = next;
    }
  }
}

void WarmPool::Drain(std::function<void()> done) {
  draining_ = true;
  drain_waiters_.push_back(std::move(done));
  while (!entries_.empty()) Discard(entries_.begin(), "the daemon is shutting down");
  recent_keys_.clear();
  MaybeFinishDrain();
}

void WarmPool::MaybeFinishDrain() {
  if (!draining_ || !entries_.empty() || discarding_ != 0 || drain_waiters_.empty()) return;
  std::vector<std::function<void()>> waiters;
  waiters.swap(drain_waiters_);
  for (auto& waiter : waiters) asio::post(io_, std::move(waiter));
}

WarmPool::Counters WarmPool::counters() const {
  Counters c;
  for (const Entry& e : entries_) (e.ready ? c.ready : c.starting)++;
  c.discarding = discarding_;
  c.started = started_;
  c.claimed = claimed_;
  c.discarded = discarded_;
  return c;
}

}  // namespace ptybox::backend
