#include "store/postgres/postgres_store.h"

#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <optional>
#include <thread>

#include "common/ids.h"
#include "common/log.h"
#include "store/postgres/postgres_tx.h"
#include "store/store_error.h"

namespace cp {
namespace {

Error invalid_url(const std::string& display, const std::string& why) {
  Error e{"invalid_store_url", 400, "invalid store URL \"" + display + "\": " + why,
          "无效的存储 URL \"" + display + "\"：" + why, {}};
  e.details["url"] = display;
  return e;
}

// The URI with the password of its user part and of a password= parameter
// replaced by "***"; `secrets` collects what was hidden.
std::string redact(std::string_view url, std::vector<std::string>* secrets = nullptr) {
  std::string out(url);
  auto scheme = out.find("://");
  if (scheme != std::string::npos) {
    auto start = scheme + 3;
    auto authority_end = out.find_first_of("/?", start);
    if (authority_end == std::string::npos) authority_end = out.size();
    auto at = out.rfind('@', authority_end);
    if (at != std::string::npos && at >= start) {
      auto colon = out.find(':', start);
      if (colon != std::string::npos && colon < at) {
        if (secrets != nullptr) secrets->push_back(out.substr(colon + 1, at - colon - 1));
        out.replace(colon + 1, at - colon - 1, "***");
      }
    }
  }
  for (std::size_t pos = out.find('?'); pos != std::string::npos; pos = out.find('&', pos + 1)) {
    constexpr std::string_view kKey = "password=";
    if (out.compare(pos + 1, kKey.size(), kKey) != 0) continue;
    auto value = pos + 1 + kKey.size();
    auto end = std::min(out.find('&', value), out.size());
    if (secrets != nullptr) secrets->push_back(out.substr(value, end - value));
    out.replace(value, end - value, "***");
  }
  return out;
}

// Transactions of this thread that are open, per store: a nested write() or
// read() would wait for a second pooled connection while holding the first
// (and deadlock on its own row locks), so it is a CHECK failure instead.
thread_local std::vector<const void*> tls_open_stores;

void check_not_inside(const void* store) {
  CP_CHECK(std::find(tls_open_stores.begin(), tls_open_stores.end(), store) == tls_open_stores.end(),
           "Store::write/read/migrate called inside a transaction body on the same thread (would deadlock)");
}

class InsideMark {
 public:
  explicit InsideMark(const void* store) {
    check_not_inside(store);
    tls_open_stores.push_back(store);
  }
  ~InsideMark() { tls_open_stores.pop_back(); }
  InsideMark(const InsideMark&) = delete;
  InsideMark& operator=(const InsideMark&) = delete;
};

}  // namespace

Result<PostgresOptions> parse_postgres_url(std::string_view url) {
  std::vector<std::string> secrets;
  const std::string display = redact(url, &secrets);
  if (!url.starts_with("postgresql://") && !url.starts_with("postgres://")) {
    return invalid_url(display, "expected postgresql://user@host:port/database");
  }
  PostgresOptions options;
  auto q = url.find('?');
  std::string conninfo(url.substr(0, q));
  std::string_view query = q == std::string_view::npos ? std::string_view() : url.substr(q + 1);
  std::string kept;  // the parameters that are libpq's
  while (!query.empty()) {
    auto amp = query.find('&');
    std::string_view pair = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    // Cubeplane's own parameters: a count from 1 to 100.
    auto count = [&](std::string_view name, int& out, std::string_view of) -> std::optional<Error> {
      std::string_view value = pair.substr(name.size() + 1);
      int n = 0;
      auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
      if (ec != std::errc() || end != value.data() + value.size() || n < 1 || n > 100) {
        return invalid_url(display, std::string(name) + " must be a number of " + std::string(of) + " from 1 to 100");
      }
      out = n;
      return std::nullopt;
    };
    if (pair.starts_with("pool=")) {
      if (auto e = count("pool", options.pool_size, "connections")) return *e;
    } else if (pair.starts_with("group_commits=")) {
      if (auto e = count("group_commits", options.group_commits, "transactions")) return *e;
    } else if (!pair.empty()) {
      kept += kept.empty() ? "?" : "&";
      kept += pair;
    }
  }
  if (options.group_commits > options.pool_size) {
    return invalid_url(display, "group_commits must not exceed pool (" + std::to_string(options.pool_size) + ")");
  }
  options.conninfo = conninfo + kept;
  options.display = redact(options.conninfo);

  // Let libpq judge the rest now, so that a typo is a 400 at start-up
  // rather than a connection failure.
  char* message = nullptr;
  PQconninfoOption* parsed = PQconninfoParse(options.conninfo.c_str(), &message);
  if (parsed == nullptr) {
    std::string why = message != nullptr ? message : "not a libpq connection URI";
    PQfreemem(message);
    while (!why.empty() && why.back() == '\n') why.pop_back();
    for (const auto& secret : secrets) {
      for (auto pos = why.find(secret); !secret.empty() && pos != std::string::npos; pos = why.find(secret)) {
        why.replace(pos, secret.size(), "***");
      }
    }
    return invalid_url(display, why);
  }
  PQconninfoFree(parsed);
  return options;
}

PostgresStore::PostgresStore(const PostgresOptions& options)
    : options_(options),
      pool_(
          [conninfo = options.conninfo, display = options.display] { return pg::Connection::open(conninfo, display); },
          options.pool_size),
      queue_(options.group_commits > 0
                 ? options.group_commits
                 : std::max(1, std::min(PostgresOptions::kDefaultGroupCommits, options.pool_size / 2))),
      origin_(new_id("w", options.clock->now_ms())) {}

PostgresStore::~PostgresStore() {
  {
    std::lock_guard lock(follow_mu_);
    follow_stop_ = true;
  }
  follow_cv_.notify_all();
  if (follower_.joinable()) follower_.join();
}

// ------------------------------------------------- other writers' changes
//
// A notice: the writer's origin on the first line, then one line per row,
// "t <task id>", "a <attempt id>" or "c <cluster id>". Ids hold no spaces
// or newlines (they are made by new_id, or validated names).

std::vector<std::string> PostgresStore::change_notices(const std::string& origin, const ChangedRows& rows) {
  std::vector<std::string> out;
  std::string cur;
  auto add = [&](char kind, const std::string& id) {
    if (cur.empty()) cur = origin + "\n";
    cur += kind;
    cur += ' ';
    cur += id;
    cur += '\n';
    if (cur.size() >= kNotifyBytes - 300) out.push_back(std::move(cur)), cur.clear();
  };
  for (const auto& id : rows.tasks) add('t', id);
  for (const auto& id : rows.attempts) add('a', id);
  for (const auto& id : rows.clusters) add('c', id);
  if (!cur.empty()) out.push_back(std::move(cur));
  return out;
}

bool PostgresStore::parse_change_notice(std::string_view notice, const std::string& own_origin, ChangedRows& rows) {
  const auto first = notice.find('\n');
  if (first == std::string_view::npos || notice.substr(0, first) == own_origin) return false;
  std::size_t at = first + 1;
  while (at < notice.size()) {
    auto end = notice.find('\n', at);
    if (end == std::string_view::npos) end = notice.size();
    const std::string_view line = notice.substr(at, end - at);
    at = end + 1;
    if (line.size() < 3 || line[1] != ' ') continue;
    std::string id(line.substr(2));
    switch (line[0]) {
      case 't': rows.tasks.push_back(std::move(id)); break;
      case 'a': rows.attempts.push_back(std::move(id)); break;
      case 'c': rows.clusters.push_back(std::move(id)); break;
      default: break;
    }
  }
  return true;
}

Status PostgresStore::notify_changes(pg::Connection& conn, const ChangedRows& rows) {
  for (auto& notice : change_notices(origin_, rows)) {
    CP_TRY(conn.defer("SELECT pg_notify(?, ?)", {std::string(kChangesChannel), std::move(notice)}));
  }
  return {};
}

void PostgresStore::follow_other_writers(ChangesHeard heard) {
  std::lock_guard lock(follow_mu_);
  if (follower_.joinable()) return;
  heard_ = std::move(heard);
  follower_ = std::thread([this] { follow_loop(); });
}

void PostgresStore::follow_loop() {
  Millis backoff = 100;
  auto wait = [&](Millis ms) {
    std::unique_lock lock(follow_mu_);
    return !follow_cv_.wait_for(lock, std::chrono::milliseconds(ms), [&] { return follow_stop_; });
  };
  auto stopped = [&] {
    std::lock_guard lock(follow_mu_);
    return follow_stop_;
  };
  bool warned = false;
  while (!stopped()) {
    auto conn = pg::Connection::open(options_.conninfo, options_.display);
    Status listening = conn.ok() ? (*conn)->execute(std::string("LISTEN ") + kChangesChannel) : Status(conn.error());
    if (!listening.ok()) {
      if (!warned) spdlog::warn("store: cannot follow other servers' writes: {}", listening.error().message);
      warned = true;
      if (!wait(backoff)) return;
      backoff = std::min<Millis>(backoff * 2, 5000);
      continue;
    }
    if (warned) spdlog::info("store: following other servers' writes again");
    warned = false;
    backoff = 100;
    // Whatever committed while nobody listened is unknown: readers read
    // everything again, once the LISTEN above is in force.
    changes_.lost_track();
    if (heard_) heard_(ChangedRows{});
    PGconn* raw = (*conn)->raw();
    while (!stopped()) {
      pollfd fd{PQsocket(raw), POLLIN, 0};
      const int ready = ::poll(&fd, 1, 200);
      if (ready < 0 && errno != EINTR) break;
      if (PQconsumeInput(raw) == 0 || PQstatus(raw) != CONNECTION_OK) break;
      ChangedRows heard;
      while (PGnotify* n = PQnotifies(raw)) {
        parse_change_notice(n->extra != nullptr ? std::string_view(n->extra) : std::string_view(), origin_, heard);
        PQfreemem(n);
      }
      if (heard.tasks.empty() && heard.attempts.empty() && heard.clusters.empty()) continue;
      std::sort(heard.clusters.begin(), heard.clusters.end());
      heard.clusters.erase(std::unique(heard.clusters.begin(), heard.clusters.end()), heard.clusters.end());
      ChangedRows published;
      published.tasks = heard.tasks;
      published.attempts = heard.attempts;
      changes_.publish(std::move(published));
      if (heard_) heard_(heard);
    }
    if (!stopped()) spdlog::warn("store: lost the connection that follows other servers' writes; reconnecting");
  }
}

Result<std::unique_ptr<PostgresStore>> PostgresStore::open(const PostgresOptions& options) {
  CP_CHECK(options.pool_size >= 1, "PostgresOptions::pool_size must be at least 1");
  std::unique_ptr<PostgresStore> store(new PostgresStore(options));
  {
    CP_ASSIGN(auto first, store->pool_.acquire());
  }
  return store;
}

Status PostgresStore::write(const std::function<Status(Tx&)>& body) { return run(TxKind::write, body); }

Status PostgresStore::write_shared(const std::function<Status(Tx&)>& body) {
  check_not_inside(this);
  WriteQueue::Pending me;
  me.body = &body;
  // Led by another writer (empty), or leading everything queued so far
  // while fewer than group_commits groups are committing.
  const std::vector<WriteQueue::Pending*> group = queue_.join(me);
  if (!group.empty()) {
    commit_group(group);
    if (group.size() > 1) {
      groups_.fetch_add(1, std::memory_order_relaxed);
      grouped_writes_.fetch_add(static_cast<std::int64_t>(group.size()), std::memory_order_relaxed);
    }
    queue_.finish(group, me);
  }
  if (me.thrown) std::rethrow_exception(me.thrown);
  return me.result;
}

void PostgresStore::commit_group(const std::vector<WriteQueue::Pending*>& group) {
  if (group.size() == 1) {
    WriteQueue::Pending& w = *group.front();
    try {
      w.result = run(TxKind::write, *w.body);
    } catch (...) {
      w.thrown = std::current_exception();
    }
    return;
  }
  InsideMark mark(this);
  // One body's failure must undo only its own writes; a savepoint per body
  // would do it, but costs (a subtransaction each, and a round trip to send
  // its writes before RELEASE, so that their errors are known to be its
  // own). Most bodies succeed, and most that fail do so before writing (a
  // refused submit fails at its checks). So a group first runs without
  // savepoints, its held writes going out with the next body's first read
  // or with COMMIT. When a body fails after writing, or a statement fails
  // (whose, of the writes sent together, is not known), the transaction is
  // rolled back and the group runs again, each body behind a savepoint.
  bool savepoints = false;
  bool again = false;  // the run without savepoints cannot keep every outcome
  PostgresTx::SharedReads shared;
  auto run_group = [&](pg::Connection& conn) -> Status {
    // Behind savepoints, a body rolled back to its own may have read a row
    // it wrote: nothing is shared then.
    shared = PostgresTx::SharedReads{savepoints, {}};
    for (auto* w : group) {
      w->result = Status();
      w->thrown = nullptr;
      w->changed = ChangedRows();
      if (savepoints) CP_TRY(conn.execute("SAVEPOINT cp_write"));
      bool wrote = false;
      {
        PostgresTx tx(conn, true, &shared);
        try {
          w->result = (*w->body)(tx);
          if (w->result.ok()) w->result = tx.send_held();  // with the next body's read, or COMMIT
        } catch (...) {
          w->thrown = std::current_exception();
        }
        wrote = tx.wrote();
        w->changed = tx.take_changed();
      }
      const bool failed = !w->result.ok() || w->thrown;
      // A conflict or a lost connection: the group runs again (transaction()).
      if (conn.retry() != pg::Retry::no) {
        return failed && !w->thrown ? w->result : store_error(503, "a grouped write was cut off; the group runs again");
      }
      if (savepoints) {
        if (!failed) {
          // Its writes go now, so that an error among them is its own.
          Status released = conn.execute("RELEASE SAVEPOINT cp_write");
          if (released.ok()) continue;
          if (conn.retry() != pg::Retry::no) return released;
          w->result = released;
        }
        conn.cancel_pending();  // its own, unsent: SAVEPOINT sent everything before
        CP_TRY(conn.execute("ROLLBACK TO SAVEPOINT cp_write"));
        CP_TRY(conn.execute("RELEASE SAVEPOINT cp_write"));
        continue;
      }
      if (conn.broken() || conn.transaction_failed() || (failed && wrote)) {
        again = true;
        return store_error(500, "a grouped write failed after writing: the group runs again with savepoints");
      }
    }
    ChangedRows all;
    for (auto* w : group) {
      all.tasks.insert(all.tasks.end(), w->changed.tasks.begin(), w->changed.tasks.end());
      all.attempts.insert(all.attempts.end(), w->changed.attempts.begin(), w->changed.attempts.end());
      all.clusters.insert(all.clusters.end(), w->changed.clusters.begin(), w->changed.clusters.end());
    }
    return notify_changes(conn, all);
  };
  Ending ending;
  Status committed = transaction(TxKind::write, run_group, &ending);
  // Without savepoints, any failure that is not the connection's or a
  // conflict's (which transaction() retried already) was one body's: held
  // writes that failed at COMMIT, or a body that wrote and then failed.
  if (!committed.ok() && (again || (ending.retry == pg::Retry::no && !ending.commit_unknown))) {
    savepoints = true;
    committed = transaction(TxKind::write, run_group, &ending);
  }
  // Before any caller returns, whether or not they committed (see run()).
  for (auto* w : group) changes_.publish(std::move(w->changed));
  if (committed.ok()) return;
  // Nothing committed: a body that failed on its own keeps its error, the
  // others get the transaction's.
  for (auto* w : group) {
    if (w->result.ok() && !w->thrown) w->result = committed;
  }
}

Status PostgresStore::read(const std::function<Status(Tx&)>& body) { return run(TxKind::read, body); }

Status PostgresStore::run(TxKind kind, const std::function<Status(Tx&)>& body) {
  InsideMark mark(this);
  ChangedRows changed;
  Status status = transaction(kind, [&](pg::Connection& conn) -> Status {
    PostgresTx tx(conn, kind == TxKind::write);
    Status run = body(tx);
    if (run.ok()) run = tx.send_held();  // rows of hold_writes() not sent yet
    ChangedRows noted = tx.take_changed();
    if (run.ok() && kind == TxKind::write) run = notify_changes(conn, noted);
    changed.tasks.insert(changed.tasks.end(), noted.tasks.begin(), noted.tasks.end());
    changed.attempts.insert(changed.attempts.end(), noted.attempts.begin(), noted.attempts.end());
    if (noted.writer != 0) changed.writer = noted.writer;
    return run;
  });
  // Whether or not it committed (a COMMIT whose connection was lost may
  // have): a reader of the journal only reads these rows again.
  if (kind == TxKind::write) changes_.publish(std::move(changed));
  return status;
}

Status PostgresStore::transaction(TxKind kind, const std::function<Status(pg::Connection&)>& body,
                                  Ending* ending) {
  CP_ASSIGN(auto lease, pool_.acquire());
  pg::Connection& conn = *lease;
  struct CountRoundTrips {
    const pg::Connection& conn;
    std::atomic<std::int64_t>& total;
    std::uint64_t at_start = conn.round_trips();
    ~CountRoundTrips() {
      total.fetch_add(static_cast<std::int64_t>(conn.round_trips() - at_start), std::memory_order_relaxed);
    }
  } count{conn, round_trips_};
  Gate gate = Gate::shared;
  for (int attempt = 0;; ++attempt) {
    conn.clear_retry();
    // A connection the server dropped while it sat in the pool shows up
    // here or at BEGIN; either way the body has not run yet.
    Status status = conn.broken() ? conn.reconnect() : Status();
    if (status.ok()) status = transaction_once(conn, kind, gate, body, ending);
    if (status.ok()) return status;
    pg::Retry why = conn.retry();
    if (ending != nullptr) ending->retry = why;
    if (why == pg::Retry::no || attempt == kRetries) return status;
    if (why == pg::Retry::conflict) {
      gate = Gate::exclusive;  // see the header: the next run cannot collide again
    } else {
      std::this_thread::sleep_for(options_.reconnect_backoff * (attempt + 1));
    }
  }
}

Status PostgresStore::transaction_once(pg::Connection& conn, TxKind kind, Gate gate,
                                       const std::function<Status(pg::Connection&)>& body, Ending* ending) {
  // BEGIN and, for a write, the gates, sent with the body's first statement
  // (pg::Connection::begin_with_next): no round trip of their own. LOCK
  // takes no snapshot, so a SERIALIZABLE transaction's snapshot comes after
  // the lock: with the gate held exclusively, it sees every writer that went
  // before.
  std::vector<std::string> begin;
  switch (kind) {
    case TxKind::read:
      begin = {"BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"};
      break;
    case TxKind::write:
      // And event_gate, shared by writers: a read that follows the event
      // log waits for the writers in flight (PostgresTx::append_event).
      begin = {"BEGIN ISOLATION LEVEL SERIALIZABLE",
               gate == Gate::shared ? "LOCK TABLE schema_migrations IN ROW SHARE MODE"
                                    : "LOCK TABLE schema_migrations IN EXCLUSIVE MODE",
               "LOCK TABLE event_gate IN SHARE MODE"};
      break;
    case TxKind::migrate:
      // READ COMMITTED, so that what runs after the lock sees what another
      // migrating process committed while we waited for it.
      begin = {"BEGIN", "SELECT pg_advisory_xact_lock(" + std::to_string(pg::kMigrationLockKey) + ")"};
      break;
  }
  // Rolls back unless COMMIT ended the transaction, whether the body
  // returned an error, a statement failed (the LOCK after BEGIN included),
  // or the body threw. Statements never sent (a BEGIN, deferred writes) are
  // forgotten.
  struct RollbackUnlessCommitted {
    pg::Connection& conn;
    ~RollbackUnlessCommitted() {
      conn.cancel_pending();
      if (conn.in_transaction() && !conn.broken()) (void)conn.execute("ROLLBACK");
    }
  } guard{conn};

  conn.begin_with_next(std::move(begin));
  CP_TRY(body(conn));
  // A body may have turned a failed statement into its own success. The
  // server has rolled the transaction back by then, and COMMIT would say
  // "ROLLBACK" without an error: report it instead (and retry when the
  // failure was a conflict or a lost connection).
  if (conn.broken() || conn.transaction_failed()) {
    return store_error(conn.retry() == pg::Retry::no ? 500 : 503,
                       "a statement failed inside the transaction and the body went on; rolled back");
  }
  Status committed = conn.execute("COMMIT");
  if (!committed.ok() && conn.retry() == pg::Retry::lost) {
    // The server may have committed before the connection went: running
    // the body again could do it twice. Say so instead of guessing.
    conn.clear_retry();
    if (ending != nullptr) ending->commit_unknown = true;
    Error e = store_error(503, "lost the connection to PostgreSQL during COMMIT; the transaction may or may not "
                               "have been committed");
    e.details["backend"] = "postgresql";
    return e;
  }
  return committed;
}

Status PostgresStore::migrate() {
  InsideMark mark(this);
  int current = 0;
  CP_TRY(transaction(TxKind::migrate, [&](pg::Connection& conn) -> Status {
    // Under the migration lock: two servers starting together would
    // otherwise race on CREATE TABLE IF NOT EXISTS (a unique violation in
    // the catalog, not a no-op).
    CP_TRY(conn.execute(kSchemaMigrationsDdl));
    CP_ASSIGN(auto rows, conn.query("SELECT COALESCE(MAX(version), 0) FROM schema_migrations", {}));
    current = static_cast<int>(rows.int64(0, 0));
    return {};
  }));
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

Status PostgresStore::apply(const Migration& m) {
  return transaction(TxKind::migrate, [&](pg::Connection& conn) -> Status {
    // Checked again under the lock: another server may have applied it
    // since we read the version.
    CP_ASSIGN(auto applied, conn.query("SELECT 1 FROM schema_migrations WHERE version = ?", {std::int64_t{m.version}}));
    if (applied.size() > 0) return {};
    CP_TRY(conn.execute(m.sql));
    if (!m.postgresql_after.empty()) CP_TRY(conn.execute(m.postgresql_after));
    CP_TRY(conn.query("INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)",
                      {std::int64_t{m.version}, options_.clock->now_ms()}));
    return {};
  });
}

int PostgresStore::schema_version() {
  InsideMark mark(this);
  auto lease = pool_.acquire();
  if (!lease.ok()) return -1;
  pg::Connection& conn = **lease;
  if (conn.broken() && !conn.reconnect().ok()) return -1;
  // Before the first migrate() there is no table yet: version 0.
  auto exists = conn.query("SELECT to_regclass('schema_migrations') IS NOT NULL", {});
  if (!exists.ok()) return -1;
  if (exists->text(0, 0) != "t") return 0;
  auto version = conn.query("SELECT COALESCE(MAX(version), 0) FROM schema_migrations", {});
  return version.ok() ? static_cast<int>(version->int64(0, 0)) : -1;
}

}  // namespace cp
