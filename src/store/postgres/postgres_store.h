// PostgresStore: the metadata store on a PostgreSQL server (DESIGN.md
// "production"), for several control-plane processes or a database that an
// operator already runs and backs up.
//
// A small pool of connections; each read() or write() takes one for the
// whole transaction, so readers run beside each other and beside writers.
//
//   read():   BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY   one snapshot
//   write():  BEGIN ISOLATION LEVEL SERIALIZABLE
//             LOCK TABLE schema_migrations IN ROW SHARE MODE    the writer gate, shared
//             LOCK TABLE event_gate IN SHARE MODE               event ids (postgres_tx.h)
//             body ... COMMIT
//   retry:    after 40001/40P01 the body runs again holding the gate
//             IN EXCLUSIVE MODE, i.e. alone among writers
//
// SERIALIZABLE because the bodies were written for SQLite, where writers run
// one at a time: a quota re-check reads a set of tasks and then admits one,
// and only SERIALIZABLE makes two of those running side by side behave as if
// they had not (REPEATABLE READ would let both pass: write skew). The price
// is that the server may roll a body back (40001) when it overlapped another
// writer. A body that keeps colliding with a busy one would otherwise starve,
// so its retry takes the gate exclusively: it waits for the writers already
// in flight, new ones queue behind it, and its snapshot is taken only after
// the lock (LOCK takes none), so nothing can overlap it any more. At most
// kRetries more runs, as for SQLite's busy retries. See src/store/README.md.
//
// Durability is the server's: with synchronous_commit on (forced on per
// session if the server has it off) and fsync on, a committed transaction
// survives a crash of PostgreSQL, of the machine, and of this process.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <string>
#include <vector>

#include "common/clock.h"
#include "store/migrations.h"
#include "store/postgres/pg_pool.h"
#include "store/store.h"
#include "store/write_queue.h"

namespace cp {

struct PostgresOptions {
  std::string conninfo;  // a libpq URI, without Cubeplane's own parameters (pool)
  std::string display;   // the same URI with any password hidden, for messages and logs
  int pool_size = 4;     // connections at most; each transaction holds one throughout
  // Groups of queued submits (Store::write_shared) committing at once, at
  // most; 0 = the default, kDefaultGroupCommits but no more than half the
  // pool. Fewer means bigger groups: fewer transactions, COMMITs and
  // fsyncs for the same submits (2 against 4 on the 2-core benchmark
  // machine: 3,300-3,600 against 2,400-2,600 tasks/s, docs/benchmarks.md).
  int group_commits = 0;
  static constexpr int kDefaultGroupCommits = 2;
  const Clock* clock = &SystemClock::instance();  // stamps schema_migrations.applied_at
  // Pause before running a body again after the connection was lost (times
  // the attempt number), so that a restarting server gets a moment.
  std::chrono::milliseconds reconnect_backoff{100};
};

// "postgresql://[user[:password]@][host][:port][/dbname][?param=value&...]"
// (or postgres://): any libpq connection URI, plus `pool=N` (1..100,
// default 4) and `group_commits=N` (1..pool), which are taken out before
// the URI goes to libpq. Anything
// libpq would refuse is 400 "invalid_store_url"; messages never show the
// password.
Result<PostgresOptions> parse_postgres_url(std::string_view url);

class PostgresStore final : public Store {
 public:
  // Connects once, so that a wrong URL or an unreachable server fails here
  // (503), not at the first request.
  static Result<std::unique_ptr<PostgresStore>> open(const PostgresOptions& options);

  Status migrate() override;
  Status write(const std::function<Status(Tx&)>& body) override;
  // Group commit: bodies queued while the leaders are busy share one
  // transaction (commit_group).
  Status write_shared(const std::function<Status(Tx&)>& body) override;
  Status read(const std::function<Status(Tx&)>& body) override;
  int schema_version() override;  // -1 if the database cannot be read
  std::string backend() const override { return "postgresql"; }
  ChangeJournal* changes() override { return &changes_; }
  // Every write that changes tasks or attempts also NOTIFYs their ids on
  // kChangesChannel (delivered by PostgreSQL only if, and once, it commits,
  // in commit order). This follows that channel on a connection of its own.
  void follow_other_writers(ChangesHeard heard) override;
  ~PostgresStore() override;
  static constexpr const char* kChangesChannel = "cubeplane_changes";
  // What one NOTIFY carries at most (PostgreSQL's limit is 8,000 bytes).
  static constexpr std::size_t kNotifyBytes = 7000;
  // The NOTIFY payloads for `rows` written by `origin` (tests).
  static std::vector<std::string> change_notices(const std::string& origin, const ChangedRows& rows);
  // The rows a notice names; false for another origin's own or a malformed one.
  static bool parse_change_notice(std::string_view notice, const std::string& own_origin, ChangedRows& rows);

  pg::Pool::Stats pool_stats() const { return pool_.stats(); }
  // Group commit so far: transactions that ran more than one write(), and
  // the writes they carried.
  struct GroupStats {
    std::int64_t groups = 0;
    std::int64_t grouped_writes = 0;
  };
  GroupStats group_stats() const {
    return {groups_.load(std::memory_order_relaxed), grouped_writes_.load(std::memory_order_relaxed)};
  }
  // write_shared() calls waiting for a leader (tests use it to form a group).
  std::size_t queued_writes() const { return queue_.queued(); }
  // Exchanges with the server by every transaction so far (pg::Connection::round_trips).
  std::int64_t round_trips() const { return round_trips_.load(std::memory_order_relaxed); }
  // Groups of submits that may commit at once (PostgresOptions::group_commits).
  int group_commits() const { return queue_.max_leaders(); }

  // A body rolled back by the server (serialization failure, deadlock) or
  // cut off by a lost connection runs again, at most this many more times.
  static constexpr int kRetries = 5;

 private:
  enum class TxKind { read, write, migrate };
  // How a write transaction passes the writer gate.
  enum class Gate { shared, exclusive };

  explicit PostgresStore(const PostgresOptions& options);
  Status run(TxKind kind, const std::function<Status(Tx&)>& body);
  // How a failed transaction() ended: the reason worth retrying that was
  // left when the retries ran out (pg::Retry::no: none), and whether COMMIT
  // was sent and its outcome is unknown (the connection went).
  struct Ending {
    pg::Retry retry = pg::Retry::no;
    bool commit_unknown = false;
  };
  // BEGIN ... COMMIT around `body` on one pooled connection, rolled back if
  // it fails or throws, run again while the failure is worth retrying.
  Status transaction(TxKind kind, const std::function<Status(pg::Connection&)>& body, Ending* ending = nullptr);
  Status transaction_once(pg::Connection& conn, TxKind kind, Gate gate,
                          const std::function<Status(pg::Connection&)>& body, Ending* ending);

  // Runs `group` (write_shared()s queued together, as SqliteStore groups
  // every write) as one transaction, with one COMMIT; each write keeps its
  // own outcome.
  void commit_group(const std::vector<WriteQueue::Pending*>& group);
  // Runs one migration unless a concurrent migrate() got there first.
  Status apply(const Migration& m);
  // NOTIFY of what a write transaction changed, sent with its COMMIT.
  Status notify_changes(pg::Connection& conn, const ChangedRows& rows);
  void follow_loop();

  PostgresOptions options_;
  pg::Pool pool_;
  ChangeJournal changes_;
  std::atomic<std::int64_t> round_trips_{0};
  // Group commit: at most group_commits groups at once (by default 2 and at
  // most half the pool's connections, so that reads still find one).
  WriteQueue queue_;
  std::atomic<std::int64_t> groups_{0};
  std::atomic<std::int64_t> grouped_writes_{0};
  // This process's mark in its notices: its own writes are in changes_ already.
  const std::string origin_;
  ChangesHeard heard_;
  std::mutex follow_mu_;
  std::condition_variable follow_cv_;
  bool follow_stop_ = false;
  std::thread follower_;
};

}  // namespace cp
