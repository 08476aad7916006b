// One `cubeplane server` per store, until several can share one (issue 42:
// a leader elected in PostgreSQL). Two servers on one database would both
// schedule and both judge liveness, and could start a task twice; so the
// second refuses to start, with a clear message.
//
//   sqlite:///path/db    an exclusive flock(2) on /path/db.server-lock
//   sqlite::memory:      nothing to share
//   postgresql://...     pg_try_advisory_lock on a connection of its own,
//                        held for the life of the process
//
// The kernel drops a flock, and PostgreSQL an advisory lock, when the
// process dies (kill -9 included), so a restart never waits on its own
// predecessor. A frozen server keeps its lock: the second is refused.
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
// holds the store after `wait_ms` (a server killed just now: PostgreSQL
// ends its session a moment later); 503 when PostgreSQL cannot be reached.
Result<std::unique_ptr<ServerLock>> lock_store_for_server(const std::string& store_url, int wait_ms = 10'000);

}  // namespace cp
