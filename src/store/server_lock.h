// One `cubeplane server` per SQLite store. Several servers share a
// PostgreSQL store and elect a leader there (server/beacon.h); an SQLite
// database has no such election, and two servers on it would both schedule
// and both judge liveness, and could start a task twice; so the second
// refuses to start, with a clear message.
//
//   sqlite:///path/db    an exclusive flock(2) on /path/db.server-lock
//   sqlite::memory:      nothing to share
//   postgresql://...     nothing to hold (the URL is checked)
//
// The kernel drops a flock when the process dies (kill -9 included), so a
// restart never waits on its own predecessor. A frozen server keeps its
// lock: the second is refused.
#pragma once

#include <memory>
#include <string>

#include "common/result.h"

namespace cp {

class ServerLock {
 public:
  virtual ~ServerLock() = default;
};

// Error 409 `store_in_use` (English and Chinese) when another server still
// holds the SQLite store after `wait_ms`; 400 for a malformed URL.
Result<std::unique_ptr<ServerLock>> lock_store_for_server(const std::string& store_url, int wait_ms = 10'000);

}  // namespace cp
