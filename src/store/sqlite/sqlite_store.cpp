#include "store/sqlite/sqlite_store.h"

#include <chrono>

#include "store/sqlite/sqlite_tx.h"
#include "store/sqlite/wal_batching_vfs.h"
#include "store/store_error.h"

namespace cp {
namespace {

Error invalid_url(std::string_view url, const std::string& why) {
  Error e{"invalid_store_url", 400, "invalid store URL \"" + std::string(url) + "\": " + why,
          "无效的存储 URL \"" + std::string(url) + "\"：" + why, {}};
  e.details["url"] = url;
  return e;
}

// The store whose transaction the calling thread is in, if any.
thread_local const void* t_in_transaction = nullptr;

// Marks the calling thread as inside a transaction of `store` while it lives.
class InTransaction {
 public:
  explicit InTransaction(const void* store) : previous_(t_in_transaction) { t_in_transaction = store; }
  ~InTransaction() { t_in_transaction = previous_; }
  InTransaction(const InTransaction&) = delete;
  InTransaction& operator=(const InTransaction&) = delete;

 private:
  const void* previous_;
};

// PRAGMAs every connection needs, before anything else: even these wait for
// a lock held by another process instead of failing at once.
Status set_busy_timeout(sqlite::Connection& conn, int ms) {
  return conn.execute("PRAGMA busy_timeout = " + std::to_string(ms));
}

}  // namespace

Result<SqliteOptions> parse_sqlite_url(std::string_view url) {
  constexpr std::string_view kMemory = "sqlite::memory:";
  constexpr std::string_view kFilePrefix = "sqlite://";  // followed by an absolute path

  auto q = url.find('?');
  std::string_view base = url.substr(0, q);
  std::string_view query = q == std::string_view::npos ? std::string_view() : url.substr(q + 1);

  SqliteOptions options;
  if (base == kMemory) {
    options.path = ":memory:";
  } else if (base.starts_with(kFilePrefix) && base.size() > kFilePrefix.size() + 1 &&
             base[kFilePrefix.size()] == '/' && base.back() != '/') {
    options.path = std::string(base.substr(kFilePrefix.size()));
  } else {
    return invalid_url(url, "expected sqlite:///absolute/path/to/db or sqlite::memory:");
  }

  while (!query.empty()) {
    auto amp = query.find('&');
    std::string_view pair = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    auto eq = pair.find('=');
    std::string_view key = pair.substr(0, eq);
    std::string_view value = eq == std::string_view::npos ? std::string_view() : pair.substr(eq + 1);
    if (key == "synchronous" && value == "normal") {
      options.synchronous = SqliteSynchronous::normal;
    } else if (key == "synchronous" && value == "full") {
      options.synchronous = SqliteSynchronous::full;
    } else if (key == "synchronous") {
      return invalid_url(url, "synchronous must be normal or full");
    } else {
      return invalid_url(url, "unknown option \"" + std::string(key) + "\" (known: synchronous)");
    }
  }
  return options;
}

Result<std::unique_ptr<SqliteStore>> SqliteStore::open(const SqliteOptions& options) {
  // NOMUTEX: SQLite's own per-connection mutex would only repeat ours.
  int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX;
  // The writer appends each commit to the WAL in one write (wal_batching_vfs.h).
  const char* vfs = options.path == ":memory:" ? nullptr : sqlite::wal_batching_vfs();
  CP_ASSIGN(auto conn, sqlite::Connection::open(options.path, flags, vfs));

  // Before anything else, so that even the pragmas below wait for a lock
  // held by another process instead of failing at once.
  CP_TRY(set_busy_timeout(*conn, options.busy_timeout_ms));

  // WAL: readers do not block the writer nor it them, and a commit appends
  // to the log instead of rewriting pages. An in-memory database has no file
  // to log to and answers "memory"; a file that cannot do WAL (some network
  // filesystems) is refused rather than silently run with a rollback journal.
  {
    CP_ASSIGN(auto stmt, conn->prepare("PRAGMA journal_mode = WAL"));
    CP_ASSIGN(bool row, stmt.step());
    std::string mode = row ? stmt.column_text(0) : "";
    if (options.path != ":memory:" && mode != "wal") {
      return store_error(503, "SQLite database \"" + options.path + "\" cannot use WAL journal mode (got \"" +
                                  mode + "\"); is it on a network filesystem?");
    }
  }
  // See the header: NORMAL survives process crashes, FULL also power loss.
  CP_TRY(conn->execute(options.synchronous == SqliteSynchronous::full ? "PRAGMA synchronous = FULL"
                                                                      : "PRAGMA synchronous = NORMAL"));
  // Off by default in SQLite, per connection; the schema relies on it.
  CP_TRY(conn->execute("PRAGMA foreign_keys = ON"));
  // A task row touches nine indices (tasks_* in migrations.cpp): with
  // SQLite's default 2 MiB of page cache, a busy writer reads back the
  // pages it just wrote. At most this much memory, used as needed.
  CP_TRY(conn->execute("PRAGMA cache_size = " + std::to_string(-kWriterCacheKib)));
  // When group commit runs its bodies behind savepoints (commit_group: after
  // a body failed having written), every page a body changes first has its
  // old content kept in a sub-journal. SQLite keeps that journal in memory
  // only up to 64 KiB and then spills it to a new temporary file (a temp-dir
  // probe, open, unlink, and a pwrite per page: 26 pwrites a submitted task,
  // when every group used savepoints). In memory it stays: it lives only
  // until the group commits, and a crash loses nothing that the WAL does not
  // already say.
  CP_TRY(conn->execute("PRAGMA temp_store = MEMORY"));

  std::vector<std::unique_ptr<sqlite::Connection>> readers;
  if (options.path != ":memory:") {
    for (int i = 0; i < kReaders; ++i) {
      CP_ASSIGN(auto reader, sqlite::Connection::open(options.path, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX));
      CP_TRY(set_busy_timeout(*reader, options.busy_timeout_ms));
      CP_TRY(reader->execute("PRAGMA cache_size = " + std::to_string(-kReaderCacheKib)));
      readers.push_back(std::move(reader));
    }
  }
  auto store = std::unique_ptr<SqliteStore>(new SqliteStore(std::move(conn), std::move(readers), options));
  // Checkpoints (copying the WAL back into the database, with an fsync)
  // every checkpoint_pages pages instead of SQLite's 1,000, so that a page
  // written by many commits in between is copied once, and on a thread of
  // their own, not in a commit. Its WAL hook takes the place of SQLite's
  // automatic checkpoint; an in-memory database has no log.
  if (options.path != ":memory:") {
    sqlite::WalCheckpointer::Options ckpt;
    ckpt.path = options.path;
    ckpt.pages = options.checkpoint_pages;
    ckpt.backstop_pages = 2 * options.checkpoint_pages;
    ckpt.synchronous_full = options.synchronous == SqliteSynchronous::full;
    CP_ASSIGN(store->checkpointer_, sqlite::WalCheckpointer::start(ckpt, *store->conn_));
  }
  return store;
}

SqliteStore::SqliteStore(std::unique_ptr<sqlite::Connection> conn,
                         std::vector<std::unique_ptr<sqlite::Connection>> readers, SqliteOptions options)
    : conn_(std::move(conn)), options_(std::move(options)), readers_(std::move(readers)) {
  for (auto& r : readers_) free_readers_.push_back(r.get());
}

void SqliteStore::check_not_nested(const char* what) const {
  if (t_in_transaction == this) {
    std::fprintf(stderr, "Store::%s called inside a transaction body on the same thread\n", what);
  }
  CP_CHECK(t_in_transaction != this, "nested transaction (would deadlock or see another snapshot)");
}

SqliteStore::~SqliteStore() {
  checkpointer_.reset();  // unhooks the writer before anything else it runs
  std::lock_guard lock(mu_);
  // Cheap, and keeps the query planner's statistics fresh across restarts.
  (void)conn_->execute("PRAGMA optimize");
}

Status SqliteStore::write(const std::function<Status(Tx&)>& body) {
  check_not_nested("write");
  WriteQueue::Pending me;
  me.body = &body;
  // Led by another writer (empty), or leading everything queued so far.
  const std::vector<WriteQueue::Pending*> group = queue_.join(me);
  if (!group.empty()) {
    {
      std::lock_guard store_lock(mu_);
      InTransaction mark(this);
      const auto start = std::chrono::steady_clock::now();
      const std::int64_t cpu_start = thread_cpu_ns();
      commit_group(group);
      const auto took = std::chrono::steady_clock::now() - start;
      writer_cpu_ns_.fetch_add(thread_cpu_ns() - cpu_start, std::memory_order_relaxed);
      groups_.fetch_add(1, std::memory_order_relaxed);
      grouped_writes_.fetch_add(static_cast<std::int64_t>(group.size()), std::memory_order_relaxed);
      writer_busy_ns_.fetch_add(std::chrono::duration_cast<std::chrono::nanoseconds>(took).count(),
                                std::memory_order_relaxed);
    }
    queue_.finish(group, me);
  }
  if (me.thrown) std::rethrow_exception(me.thrown);
  return me.result;
}

void SqliteStore::commit_group(const std::vector<WriteQueue::Pending*>& group) {
  // One body's error must undo only its own writes. A savepoint per body
  // does that, but costs: SQLite copies every page a body first touches
  // into the savepoint's journal, besides the SAVEPOINT and RELEASE. Most
  // bodies succeed, and most that fail do so before writing (a refused
  // submit fails at its checks). So a group first runs without savepoints:
  // a body that fails having changed no row leaves nothing to undo. Only
  // when one fails after changing rows is the transaction rolled back and
  // the group run again, each body behind a savepoint. A single write needs
  // none: its error rolls back everything.
  bool savepoints = false;
  bool undo_needed = false;  // a body failed after changing rows, without a savepoint
  std::unordered_set<std::string> earlier_tasks;  // written by the bodies before (Tx::wrote_task)
  auto run_group = [&]() -> Status {
    earlier_tasks.clear();
    for (auto* w : group) {
      w->result = Status();
      w->thrown = nullptr;
      w->changed = ChangedRows();
      if (savepoints) CP_TRY(conn_->execute("SAVEPOINT cp_write"));
      const std::int64_t changes_before = conn_->total_changes();
      try {
        SqliteTx tx(*conn_, earlier_tasks);
        w->result = (*w->body)(tx);
        w->changed = tx.take_changed();
      } catch (...) {
        w->thrown = std::current_exception();
      }
      const bool failed = !w->result.ok() || w->thrown;
      // A busy database fails the whole group: it runs again from BEGIN.
      if (failed && conn_->saw_busy()) return w->thrown ? store_error(503, "database busy") : w->result;
      if (group.size() == 1) return failed ? (w->thrown ? store_error(500, "write body threw") : w->result) : Status();
      if (failed && savepoints) CP_TRY(conn_->execute("ROLLBACK TO cp_write"));
      if (savepoints) CP_TRY(conn_->execute("RELEASE cp_write"));
      if (failed && !savepoints && conn_->total_changes() != changes_before) {
        undo_needed = true;
        return store_error(500, "a grouped write failed after changing rows: the group runs again with savepoints");
      }
      // Rolled back or not: a later body may not take the journal's word for them.
      earlier_tasks.insert(w->changed.tasks.begin(), w->changed.tasks.end());
    }
    return {};
  };
  Status committed = transaction(*conn_, TxKind::write, run_group);
  if (undo_needed) {
    savepoints = true;
    undo_needed = false;
    committed = transaction(*conn_, TxKind::write, run_group);
  }
  // Before any caller returns, so that whoever reads the journal after a
  // write() finds that write's rows in it. Published whether or not they
  // committed: a reader only reads those rows again, and for a COMMIT whose
  // outcome is unknown that is what it must do.
  for (auto* w : group) changes_.publish(std::move(w->changed));
  if (committed.ok()) return;
  // The transaction did not commit: no body's writes were kept. A body that
  // failed on its own keeps its error; the others get the transaction's.
  for (auto* w : group) {
    if (w->result.ok() && !w->thrown) w->result = committed;
  }
}

SqliteStore::GroupStats SqliteStore::group_stats() const {
  return {groups_.load(std::memory_order_relaxed), grouped_writes_.load(std::memory_order_relaxed),
          static_cast<double>(writer_busy_ns_.load(std::memory_order_relaxed)) / 1e9,
          static_cast<double>(writer_cpu_ns_.load(std::memory_order_relaxed)) / 1e9};
}

sqlite::WalCheckpointer::Stats SqliteStore::checkpoint_stats() const {
  return checkpointer_ ? checkpointer_->stats() : sqlite::WalCheckpointer::Stats{};
}

Status SqliteStore::read(const std::function<Status(Tx&)>& body) {
  check_not_nested("read");
  auto run_on = [&](sqlite::Connection& conn) {
    InTransaction mark(this);
    return transaction(conn, TxKind::read, [&]() -> Status {
      SqliteTx tx(conn, false);
      return body(tx);
    });
  };
  if (readers_.empty()) {
    std::lock_guard lock(mu_);
    return run_on(*conn_);
  }
  sqlite::Connection* reader = nullptr;
  {
    std::unique_lock lock(readers_mu_);
    readers_cv_.wait(lock, [&] { return !free_readers_.empty(); });
    reader = free_readers_.back();
    free_readers_.pop_back();
  }
  struct GiveBack {
    SqliteStore& store;
    sqlite::Connection* reader;
    ~GiveBack() {
      {
        std::lock_guard lock(store.readers_mu_);
        store.free_readers_.push_back(reader);
      }
      store.readers_cv_.notify_one();
    }
  } give_back{*this, reader};
  return run_on(*reader);
}

Status SqliteStore::transaction(sqlite::Connection& conn, TxKind kind, const std::function<Status()>& body) {
  Status result;
  for (int attempt = 0; attempt <= kBusyRetries; ++attempt) {
    conn.clear_busy();
    result = transaction_once(conn, kind, body);
    // Only a busy database is worth another run: anything else would fail
    // the same way again.
    if (result.ok() || !conn.saw_busy()) return result;
  }
  return result;
}

Status SqliteStore::transaction_once(sqlite::Connection& conn, TxKind kind, const std::function<Status()>& body) {
  // IMMEDIATE takes the write lock up front. A deferred transaction that
  // reads and then writes would fail with SQLITE_BUSY_SNAPSHOT at its first
  // write whenever another connection committed in between, after the body
  // had already done work; taking the lock first makes the body run once.
  CP_TRY(conn.execute(kind == TxKind::write ? "BEGIN IMMEDIATE" : "BEGIN"));

  // Rolls back unless COMMIT succeeded, whether the body returned an error,
  // COMMIT failed, or the body threw.
  struct RollbackUnlessCommitted {
    sqlite::Connection& conn;
    ~RollbackUnlessCommitted() {
      if (conn.in_transaction()) (void)conn.execute("ROLLBACK");
    }
  } guard{conn};

  CP_TRY(body());
  return conn.execute("COMMIT");
}

Status SqliteStore::migrate() {
  check_not_nested("migrate");
  std::lock_guard lock(mu_);
  InTransaction mark(this);

  CP_TRY(conn_->execute(kSchemaMigrationsDdl));
  CP_ASSIGN(int current, read_schema_version());
  if (current > latest_schema_version()) {
    return store_error(500, "the database schema is at version " + std::to_string(current) +
                                ", newer than this build of cubeplane knows (" +
                                std::to_string(latest_schema_version()) + "); run a newer cubeplane");
  }
  for (const Migration& m : migrations()) {
    if (m.version > current) CP_TRY(apply(m));
  }
  return {};
}

Status SqliteStore::apply(const Migration& m) {
  return transaction(*conn_, TxKind::write, [&]() -> Status {
    // Checked again under the write lock: another process sharing the file
    // may have applied it since we read the version.
    {
      CP_ASSIGN(auto stmt, conn_->prepare("SELECT 1 FROM schema_migrations WHERE version = ?"));
      CP_TRY(stmt.bind({std::int64_t{m.version}}));
      CP_ASSIGN(bool applied, stmt.step());
      if (applied) return {};
    }
    CP_TRY(conn_->execute_script(m.sql));
    CP_ASSIGN(auto insert, conn_->prepare("INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)"));
    CP_TRY(insert.bind({std::int64_t{m.version}, options_.clock->now_ms()}));
    return insert.run();
  });
}

Result<int> SqliteStore::read_schema_version() {
  CP_ASSIGN(auto stmt, conn_->prepare("SELECT COALESCE(MAX(version), 0) FROM schema_migrations"));
  CP_ASSIGN(bool row, stmt.step());
  return row ? static_cast<int>(stmt.column_int64(0)) : 0;
}

int SqliteStore::schema_version() {
  check_not_nested("schema_version");
  std::lock_guard lock(mu_);
  {
    // Before the first migrate() there is no table yet: version 0.
    auto stmt = conn_->prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'");
    if (!stmt.ok()) return -1;
    auto row = stmt->step();
    if (!row.ok()) return -1;
    if (!row.value()) return 0;
  }
  auto version = read_schema_version();
  return version.ok() ? version.value() : -1;
}

}  // namespace cp
