#include "store/postgres/pg_pool.h"

namespace cp::pg {

Result<Pool::Lease> Pool::acquire() {
  std::unique_lock lock(mu_);
  ++waiting_;
  freed_.wait(lock, [&] { return !idle_.empty() || open_ < size_; });
  --waiting_;
  if (!idle_.empty()) {
    auto conn = std::move(idle_.back());
    idle_.pop_back();
    return Lease(this, std::move(conn));
  }
  // Open a new one outside the lock (it takes a round trip or a timeout),
  // holding its place in open_ so that no more than size_ get opened.
  ++open_;
  lock.unlock();
  auto conn = connect_();
  if (!conn.ok()) {
    lock.lock();
    --open_;
    freed_.notify_one();
    return conn.error();
  }
  return Lease(this, std::move(conn).value());
}

void Pool::give_back(std::unique_ptr<Connection> conn) {
  std::lock_guard lock(mu_);
  // A broken connection (its reconnect failed too) is dropped; the next
  // caller opens a fresh one in its place. So is one still inside a
  // transaction, which the store never leaves (closing it rolls back).
  if (conn->broken() || conn->in_transaction()) {
    conn.reset();
    --open_;
  } else {
    idle_.push_back(std::move(conn));
  }
  freed_.notify_one();
}

Pool::Stats Pool::stats() const {
  std::lock_guard lock(mu_);
  return Stats{open_, open_ - static_cast<int>(idle_.size()), waiting_};
}

}  // namespace cp::pg
