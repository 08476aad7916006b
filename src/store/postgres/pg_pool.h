// A fixed-size pool of connections. A transaction takes one connection for
// its whole life and gives it back at the end; when all `size` are taken,
// the next caller waits. Connections are opened on demand, so an idle server
// holds one, and one that broke is closed on return and replaced later.
#pragma once

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "store/postgres/pg_connection.h"

namespace cp::pg {

class Pool {
 public:
  using Connect = std::function<Result<std::unique_ptr<Connection>>()>;

  Pool(Connect connect, int size) : connect_(std::move(connect)), size_(size) {}
  Pool(const Pool&) = delete;
  Pool& operator=(const Pool&) = delete;

  // A connection checked out of the pool; destroying it gives it back.
  class Lease {
   public:
    Lease(Lease&& other) noexcept : pool_(other.pool_), conn_(std::move(other.conn_)) { other.pool_ = nullptr; }
    Lease& operator=(Lease&&) = delete;
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    ~Lease() {
      if (pool_ != nullptr) pool_->give_back(std::move(conn_));
    }
    Connection& operator*() const { return *conn_; }
    Connection* operator->() const { return conn_.get(); }

   private:
    friend class Pool;
    Lease(Pool* pool, std::unique_ptr<Connection> conn) : pool_(pool), conn_(std::move(conn)) {}
    Pool* pool_;
    std::unique_ptr<Connection> conn_;
  };

  // Waits for an idle connection, or opens one while fewer than `size` are
  // open. Fails (503) only when a new connection cannot be opened.
  Result<Lease> acquire();

  struct Stats {
    int open = 0;     // connections that exist, idle or taken
    int in_use = 0;   // taken by a transaction
    int waiting = 0;  // callers waiting for one
  };
  Stats stats() const;
  int size() const { return size_; }

 private:
  void give_back(std::unique_ptr<Connection> conn);

  Connect connect_;
  const int size_;
  mutable std::mutex mu_;
  std::condition_variable freed_;
  std::vector<std::unique_ptr<Connection>> idle_;
  int open_ = 0;  // idle_ + leased + being opened
  int waiting_ = 0;
};

}  // namespace cp::pg
