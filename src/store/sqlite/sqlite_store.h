// SqliteStore: the embedded metadata store (DESIGN.md "single machine").
//
// One connection for writes, under a mutex: a SQLite connection is one
// transaction at a time, and SQLite has one writer at a time anyway. Reads
// of a database file go to a small pool of read-only connections instead
// (WAL lets readers run beside the writer, each on its own snapshot), so a
// scheduling cycle reading the live state, or a task list, never holds up a
// submit. An in-memory database exists only in its one connection, which
// then serves reads too.
//
// Group commit: write()s that arrive while another is running queue up, and
// the next one to get the connection runs the whole queue in one
// transaction, each body inside its own SAVEPOINT (a body that fails rolls
// back to it, alone), then commits once. Each caller gets its own body's
// result (or the COMMIT's error) when the group has committed. Bodies run in
// order of arrival, on the thread of whichever caller leads the group, as if
// one after the other; a busy database runs the whole group again. Under
// concurrent submits this shares the WAL pages and the commit between many
// transactions (docs/benchmarks.md "Write path").
//
// Durability: WAL journal with synchronous=NORMAL by default. A commit is
// then durable across a crash of the process (kill -9 included), which is the
// failure DESIGN.md asks us to survive; only a power loss or kernel crash may
// drop the last few commits (never corrupt the file). `?synchronous=full`
// makes every commit wait for fsync of the WAL and survive power loss too, at
// the price of one fsync per transaction.
#pragma once

#include <atomic>
#include <condition_variable>
#include <exception>
#include <vector>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "common/clock.h"
#include "store/migrations.h"
#include "store/sqlite/sqlite_connection.h"
#include "store/sqlite/wal_checkpointer.h"
#include "store/store.h"
#include "store/write_queue.h"

namespace cp {

enum class SqliteSynchronous { normal, full };

struct SqliteOptions {
  std::string path;  // a file path, or ":memory:" for a private in-memory database
  SqliteSynchronous synchronous = SqliteSynchronous::normal;
  const Clock* clock = &SystemClock::instance();  // stamps schema_migrations.applied_at
  // How long one statement waits for another connection's lock before
  // SQLITE_BUSY. Not in the URL: only tests want anything but the default.
  int busy_timeout_ms = 5000;
  // WAL pages that wake the background checkpoint (wal_checkpointer.h); the
  // writer checkpoints itself at twice as many. Tests make it small.
  int checkpoint_pages = 10'000;
};

// "sqlite:///abs/path/to/db[?synchronous=normal|full]" or "sqlite::memory:".
// Anything else is 400 "invalid_store_url".
Result<SqliteOptions> parse_sqlite_url(std::string_view url);

class SqliteStore final : public Store {
 public:
  static Result<std::unique_ptr<SqliteStore>> open(const SqliteOptions& options);
  ~SqliteStore() override;

  Status migrate() override;
  Status write(const std::function<Status(Tx&)>& body) override;
  Status read(const std::function<Status(Tx&)>& body) override;
  int schema_version() override;  // -1 if the database cannot be read
  std::string backend() const override { return "sqlite"; }
  ChangeJournal* changes() override { return &changes_; }

  // Group commit so far (for the benchmark): transactions, the write()s
  // they carried, the seconds the writer spent running them, and of those
  // the seconds its thread was on a CPU (the rest it waited: for a core,
  // or for the disk).
  struct GroupStats {
    std::int64_t groups = 0;
    std::int64_t writes = 0;
    double busy_s = 0;
    double busy_cpu_s = 0;
  };
  GroupStats group_stats() const;
  // Checkpoints of the WAL so far: by the background thread, by the writer
  // (the log outgrew the thread). None for an in-memory database.
  sqlite::WalCheckpointer::Stats checkpoint_stats() const;
  // write()s waiting for the group being committed to end (for tests).
  std::size_t queued_writes() const { return queue_.queued(); }

  // A busy database (another process holds the write lock past the busy
  // timeout) gets the whole transaction body run again, this many times.
  static constexpr int kBusyRetries = 5;
  // Read-only connections of a database file.
  static constexpr int kReaders = 4;
  // Page cache, at most, of the writer and of each reader (KiB).
  static constexpr int kWriterCacheKib = 64 * 1024;
  static constexpr int kReaderCacheKib = 16 * 1024;

 private:
  enum class TxKind { read, write };

  SqliteStore(std::unique_ptr<sqlite::Connection> conn, std::vector<std::unique_ptr<sqlite::Connection>> readers,
              SqliteOptions options);
  // CHECK-fails when the calling thread is inside a transaction of this
  // store: a nested write() would deadlock, a nested read() see another
  // snapshot than its caller.
  void check_not_nested(const char* what) const;
  // BEGIN [IMMEDIATE] ... COMMIT around `body` on `conn`, rolled back if it
  // fails or throws, retried while the database is busy. Caller owns `conn`
  // (holds mu_ for conn_, or took a reader from the pool).
  static Status transaction(sqlite::Connection& conn, TxKind kind, const std::function<Status()>& body);
  static Status transaction_once(sqlite::Connection& conn, TxKind kind, const std::function<Status()>& body);
  // Runs one migration unless a concurrent migrate() got there first.
  Status apply(const Migration& m);
  Result<int> read_schema_version();

  // Runs `group` in one transaction (caller holds mu_ and leads the group).
  void commit_group(const std::vector<WriteQueue::Pending*>& group);

  std::unique_ptr<sqlite::Connection> conn_;  // the writer (and the reader of :memory:)
  SqliteOptions options_;
  std::mutex mu_;  // owns conn_
  // Read-only connections for read(), none for :memory:.
  std::vector<std::unique_ptr<sqlite::Connection>> readers_;
  std::mutex readers_mu_;
  std::condition_variable readers_cv_;
  std::vector<sqlite::Connection*> free_readers_;
  // The queue of group commit: one leader at a time (one writer).
  WriteQueue queue_{1};
  std::atomic<std::int64_t> groups_{0};
  std::atomic<std::int64_t> grouped_writes_{0};
  std::atomic<std::int64_t> writer_busy_ns_{0};
  std::atomic<std::int64_t> writer_cpu_ns_{0};
  ChangeJournal changes_;
  // Checkpoints the WAL of a database file from a thread of its own.
  std::unique_ptr<sqlite::WalCheckpointer> checkpointer_;
};

}  // namespace cp
