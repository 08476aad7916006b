// A thin RAII layer over the SQLite C API: one connection, its cache of
// prepared statements, and the translation of SQLite result codes into
// cp::Error. Nothing here is thread-safe: SqliteStore serializes every use of
// a Connection under its mutex.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <variant>
#include <vector>

#include "common/result.h"

namespace cp::sqlite {

// A bound parameter. Every column we write is TEXT or an integer.
using SqlValue = std::variant<std::int64_t, std::string>;

// Any flavour of SQLITE_BUSY or SQLITE_LOCKED: another connection holds the
// lock. Worth retrying the whole transaction.
bool is_busy(int rc);

// The extended SQLite result code an Error was made from, 0 if none.
int sqlite_code(const Error& e);

class Connection;

// A prepared statement checked out for one use. Destroying it resets the
// statement and clears its bindings, and gives a cached one back to the
// cache, so a statement never stays mid-step past the call that used it.
class Statement {
 public:
  Statement(Statement&& other) noexcept;
  Statement& operator=(Statement&&) = delete;
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  ~Statement();

  // Binds args to ?1, ?2, ... in order. Values are copied (SQLITE_TRANSIENT).
  Status bind(const std::vector<SqlValue>& args);
  // One step: true when a row is ready, false when done.
  Result<bool> step();
  // Steps to the end; for statements that return no rows.
  Status run();

  std::int64_t column_int64(int col) const;
  std::string column_text(int col) const;

 private:
  friend class Connection;
  Statement(Connection* conn, sqlite3_stmt* stmt, bool* in_use);

  Connection* conn_;
  sqlite3_stmt* stmt_;
  bool* in_use_;  // the cache slot's flag; nullptr for a one-shot statement we finalize
};

class Connection {
 public:
  // flags and vfs as for sqlite3_open_v2 (nullptr: the default VFS).
  // Errors are store_error 503.
  static Result<std::unique_ptr<Connection>> open(const std::string& filename, int flags,
                                                  const char* vfs = nullptr);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // A statement for `sql`, prepared once per SQL text and then reused. If
  // the same text is already in use (a nested query) or the cache is full,
  // a one-shot statement is prepared instead.
  Result<Statement> prepare(std::string_view sql);
  // Prepare, bind nothing, run: BEGIN, COMMIT, pragmas that return nothing.
  Status execute(std::string_view sql);
  // Runs text holding several statements, without parameters (migrations).
  Status execute_script(std::string_view sql);

  // True while a transaction is open. SQLite ends a transaction by itself
  // after some errors (disk full, I/O, some busy cases), so callers ask
  // before issuing ROLLBACK.
  bool in_transaction() const { return sqlite3_get_autocommit(db_) == 0; }
  // Rows changed by the last INSERT, UPDATE or DELETE.
  std::int64_t changes() const { return sqlite3_changes64(db_); }
  // Rows changed by every INSERT, UPDATE or DELETE that completed on this
  // connection (a failed statement undoes its own and counts none).
  std::int64_t total_changes() const { return sqlite3_total_changes64(db_); }
  // The handle itself, for the few calls this class does not wrap (the WAL
  // hook and checkpoints, wal_checkpointer.h).
  sqlite3* handle() const { return db_; }

  // Whether some call failed with SQLITE_BUSY/LOCKED since clear_busy(). A
  // transaction body may turn that error into its own, so the store asks
  // this instead of inspecting the body's result.
  bool saw_busy() const { return saw_busy_; }
  void clear_busy() { saw_busy_ = false; }

  // store_error for `rc` with SQLite's message; remembers busy-ness.
  Error error(int rc, std::string_view sql);

 private:
  explicit Connection(sqlite3* db) : db_(db) {}

  struct Cached {
    sqlite3_stmt* stmt = nullptr;
    bool in_use = false;
  };
  // Distinct SQL texts are few (the list_tasks filters make the most); the
  // cap only keeps a pathological caller from growing it without bound.
  static constexpr std::size_t kMaxCached = 256;

  sqlite3* db_;
  // unique_ptr: a Statement points at its slot's in_use flag, so slots must
  // not move when the map rehashes.
  std::unordered_map<std::string, std::unique_ptr<Cached>> cache_;
  bool saw_busy_ = false;
};

}  // namespace cp::sqlite
