// WalCheckpointer: copies a WAL database's log back into the database file
// from a thread and a connection of its own, so that the writer never does.
//
// SQLite checkpoints in the connection whose COMMIT takes the log past
// wal_autocheckpoint pages: that commit copies every page of the log into
// the database and syncs it, with the write lock held and the whole group
// commit waiting (on the 2-core VM of docs/benchmarks.md, about a quarter
// of the writer's busy time went to it). Here the writer's commits only
// report the log's size (sqlite3_wal_hook). Past `pages` this thread runs a
// PASSIVE checkpoint, which takes no lock a writer or reader needs: the
// writer goes on appending meanwhile, and restarts the log from its start
// at the next transaction after a checkpoint that copied it all. Should the
// log still reach `backstop_pages` (the thread cannot keep up, or a reader
// pins old frames), the writer checkpoints as SQLite would have.
//
// Durability is unchanged: a checkpoint only copies committed pages, and a
// crash at any point of one leaves the log to be replayed.
#pragma once

#include <sqlite3.h>

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "common/result.h"
#include "store/sqlite/sqlite_connection.h"

namespace cp::sqlite {

class WalCheckpointer {
 public:
  struct Options {
    std::string path;         // the database file
    int pages = 10'000;       // log size that wakes the thread
    int backstop_pages = 20'000;  // log size at which the writer checkpoints itself
    bool synchronous_full = false;  // the store's synchronous setting, for the checkpoint's syncs
  };
  struct Stats {
    std::int64_t background = 0;  // checkpoints run by the thread
    std::int64_t by_writer = 0;   // backstop checkpoints in a commit
    std::int64_t failed = 0;      // checkpoints that returned an error (retried at the next wake)
    bool pending = false;         // the thread has been woken and not finished yet
  };

  // Opens the thread's connection and hooks `writer`'s commits. The writer
  // must outlive this object; destroying it unhooks the writer first.
  static Result<std::unique_ptr<WalCheckpointer>> start(const Options& options, Connection& writer);
  ~WalCheckpointer();
  WalCheckpointer(const WalCheckpointer&) = delete;
  WalCheckpointer& operator=(const WalCheckpointer&) = delete;

  Stats stats() const;

 private:
  WalCheckpointer(Options options, Connection& writer, std::unique_ptr<Connection> own);
  // sqlite3_wal_hook: on the writer's thread, after each commit.
  static int on_commit(void* self, sqlite3* db, const char* name, int pages);
  void run();

  Options options_;
  Connection& writer_;
  std::unique_ptr<Connection> own_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool due_ = false;      // woken, not started yet
  bool running_ = false;  // checkpointing now
  int backfilled_ = 0;    // frames of the log the last checkpoint copied
  bool stop_ = false;
  Stats stats_;
  std::thread thread_;  // last: started once everything above exists
};

}  // namespace cp::sqlite
