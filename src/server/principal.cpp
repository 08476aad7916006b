#include "server/principal.h"

namespace cp {

std::uint64_t PrincipalCache::generation() const {
  std::lock_guard lock(mu_);
  return generation_;
}

std::optional<Principal> PrincipalCache::get(const std::string& token_hash, Millis now) {
  std::lock_guard lock(mu_);
  auto it = entries_.find(token_hash);
  if (it == entries_.end()) return std::nullopt;
  const Entry& e = it->second;
  const bool stale = now - e.cached_at >= ttl_ms_ || now < e.cached_at;  // a clock set back: read again
  const bool expired = e.token_expires_at != 0 && e.token_expires_at <= now;
  if (stale || expired) {
    entries_.erase(it);
    return std::nullopt;
  }
  return e.principal;
}

void PrincipalCache::put(const std::string& token_hash, const Principal& p, Millis token_expires_at,
                         std::uint64_t generation, Millis now) {
  std::lock_guard lock(mu_);
  if (generation != generation_) return;  // read before a change: not kept
  // Bounded: a flood of distinct tokens (all valid, or they would not get
  // here) starts the cache over rather than growing it.
  if (entries_.size() >= capacity_ && !entries_.contains(token_hash)) entries_.clear();
  entries_[token_hash] = Entry{p, token_expires_at, now};
}

void PrincipalCache::clear() {
  std::lock_guard lock(mu_);
  ++generation_;
  entries_.clear();
}

std::size_t PrincipalCache::size() const {
  std::lock_guard lock(mu_);
  return entries_.size();
}

}  // namespace cp
