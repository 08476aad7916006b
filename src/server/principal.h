// Who is calling, and what authenticate() remembers about it.
//
// PrincipalCache: every API request is authenticated, twice for a change
// (the handler, then the audit log). Reading the token, its user and every
// project group (for the caller's roles) is a store transaction of its own,
// about an eighth of a submit's cost (docs/benchmarks.md "Write path"). The
// cache keeps the answer by token hash for a short time:
// - a change made through this server to users, tokens or project groups
//   clears it at once (clear(), called after the change commits), and an
//   answer read before such a change is not kept (generation());
// - a token's own expiry is checked on every use, cached or not;
// - anything else (a change by another process sharing the database) is
//   seen after at most `ttl_ms`.
// Refusals are never cached: a token that becomes valid works at once.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include "common/clock.h"
#include "model/types.h"

namespace cp {

struct Principal {
  enum class Kind { user, agent };
  Kind kind = Kind::user;
  std::string user;  // user name, or "agent:<cluster>"
  PlatformRole role = PlatformRole::viewer;
  std::map<std::string, ProjectRole> project_roles;  // project group -> role
  std::string cluster_id;                            // agents only

  bool is_admin() const { return kind == Kind::user && role == PlatformRole::admin; }
  bool can_read_all() const { return is_admin() || (kind == Kind::user && role == PlatformRole::viewer); }
  bool can_read_project(const std::string& pg) const;
  bool can_submit_to(const std::string& pg) const;  // admin, or project admin/member
  bool can_admin_project(const std::string& pg) const;
};

class PrincipalCache {
 public:
  static constexpr Millis kDefaultTtlMs = 2000;
  static constexpr std::size_t kDefaultCapacity = 4096;

  explicit PrincipalCache(Millis ttl_ms = kDefaultTtlMs, std::size_t capacity = kDefaultCapacity)
      : ttl_ms_(ttl_ms), capacity_(capacity) {}

  // Taken before reading the store; put() keeps the answer only if no
  // clear() came in between.
  std::uint64_t generation() const;
  // The principal of a token hash, if held, fresh, and the token unexpired
  // at `now` (an expired one is dropped: the caller reads the store, which
  // says why it is refused).
  std::optional<Principal> get(const std::string& token_hash, Millis now);
  // `token_expires_at`: 0 for a token that never expires.
  void put(const std::string& token_hash, const Principal& p, Millis token_expires_at, std::uint64_t generation,
           Millis now);
  // Forgets everything (after a change to users, tokens or project groups).
  void clear();
  std::size_t size() const;

 private:
  struct Entry {
    Principal principal;
    Millis token_expires_at = 0;
    Millis cached_at = 0;
  };
  const Millis ttl_ms_;
  const std::size_t capacity_;
  mutable std::mutex mu_;
  std::uint64_t generation_ = 0;
  std::unordered_map<std::string, Entry> entries_;
};

}  // namespace cp
