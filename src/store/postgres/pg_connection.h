// A thin RAII layer over libpq: one connection, its prepared statements, the
// result of a command, and the translation of SQLSTATEs into cp::Error.
// Nothing here is thread-safe: a Connection is used by one transaction at a
// time, which the pool (pg_pool.h) guarantees.
#pragma once

#include <libpq-fe.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <variant>
#include <vector>

#include "common/result.h"

namespace cp::pg {

// A bound parameter. Every column we write is TEXT or an integer.
using SqlValue = std::variant<std::int64_t, std::string>;

// The SQLSTATE an Error was made from ("" if none), e.g. "23505".
std::string sqlstate(const Error& e);

// "?" placeholders, as in the SQLite backend's SQL, numbered the way
// PostgreSQL wants them ("$1", "$2", ...). Quoted text is left alone.
std::string number_placeholders(std::string_view sql);

// Why the last failed call is worth running the transaction again for.
enum class Retry {
  no,
  conflict,  // serialization failure (40001) or deadlock (40P01): the server rolled us back
  lost,      // the connection is gone (server restart, pg_terminate_backend, network)
};

// The rows of a command that succeeded.
class Rows {
 public:
  explicit Rows(PGresult* result) : result_(result, &PQclear) {}
  int size() const { return PQntuples(result_.get()); }
  // Rows changed by an INSERT, UPDATE or DELETE.
  std::int64_t affected() const;
  std::string text(int row, int col) const;
  std::int64_t int64(int row, int col) const;

 private:
  std::unique_ptr<PGresult, decltype(&PQclear)> result_;
};

class Connection {
 public:
  // `conninfo` is a libpq URI; `display` is the same with any password
  // hidden, for messages. Errors are store_error 503.
  static Result<std::unique_ptr<Connection>> open(const std::string& conninfo, const std::string& display);
  // idle_in_transaction_session_timeout of every session (configure()).
  static constexpr int kIdleInTransactionTimeoutMs = 10'000;
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // One statement with parameters, prepared once per SQL text on this
  // connection and reused. SQL uses "?" placeholders (number_placeholders).
  Result<Rows> query(std::string_view sql, const std::vector<SqlValue>& args);
  // Text without parameters, possibly several statements (BEGIN, migrations).
  Status execute(std::string_view sql);
  // How many query() and execute() calls this connection has made: a caller
  // compares two readings to know whether anything was sent in between.
  std::uint64_t calls() const { return calls_; }

  // Opens a transaction with `statements` (BEGIN and the LOCKs that go with
  // it), sent in the same round trip as the next query() or execute()
  // instead of one of their own. A COMMIT or ROLLBACK with nothing sent in
  // between is not sent either: there is nothing to end.
  void begin_with_next(const std::vector<std::string>& statements);
  // A write whose outcome nobody reads before COMMIT: sent after whatever is
  // pending, in the same round trip (pipeline mode) as the next query() or
  // execute() (COMMIT, typically). Its error, if any, is that later call's,
  // and nothing after it runs, COMMIT included: the server has aborted the
  // transaction. A unique violation (23505) is already_exists naming `kind`
  // and `key`, or the key PostgreSQL names when `key` is ""; `kind` "" keeps
  // the server's error. Fails at once only if the statement cannot be bound.
  Status defer(std::string_view sql, const std::vector<SqlValue>& args, std::string_view kind = {},
               std::string key = {});
  // Forgets what begin_with_next() and defer() left unsent.
  void cancel_pending() {
    pending_.clear();
    begin_pending_ = 0;
  }
  // Exchanges with the server so far: a command alone, or a pipeline of
  // pending statements and the call that sent them.
  std::uint64_t round_trips() const { return round_trips_; }

  // The libpq connection, for what this class does not wrap (LISTEN's
  // notifications: PostgresStore::follow_loop).
  PGconn* raw() { return conn_; }
  // Whether the connection is gone; reconnect() brings it back.
  bool broken() const { return PQstatus(conn_) != CONNECTION_OK; }
  // Reconnects with the same parameters. Prepared statements die with the
  // old session, so the cache is emptied.
  Status reconnect();
  // True while a transaction block is open (or failed and not yet ended).
  bool in_transaction() const;
  // True when a statement failed inside the open transaction: the server
  // has rolled it back and refuses everything until ROLLBACK.
  bool transaction_failed() const { return PQtransactionStatus(conn_) == PQTRANS_INERROR; }

  // The reason to retry that the last failing call left, Retry::no when it
  // (or nothing) failed for another reason. A transaction body may turn an
  // error into its own, so the store asks this instead of the body's result.
  Retry retry() const { return retry_; }
  void clear_retry() { retry_ = Retry::no; }

 private:
  Connection(PGconn* conn, std::string display) : conn_(conn), display_(std::move(display)) {}
  // Session settings that every connection needs; after open and reconnect.
  Status configure();
  // store_error for a failed command (`result` may be null: no reply at all).
  Error error(const PGresult* result, std::string_view sql);
  // The prepared statement's name for `sql` and these parameter types,
  // preparing it on first use; "" when the cache is full (use PQexecParams).
  Result<std::string> prepared(std::string_view sql, const std::vector<SqlValue>& args);
  // A statement ready to send: prepared as `name`, or else sent as `text`
  // with its parameters; and, for a deferred write, what its unique
  // violation means (defer()).
  struct Bound {
    std::string sql;  // as the caller wrote it, for messages
    std::string name;
    std::string text;
    std::vector<Oid> types;
    std::vector<std::string> values;
    std::string kind, key;
    std::vector<const char*> c_values() const;  // for libpq, valid while `values` lives
  };
  Result<Bound> bind(std::string_view sql, const std::vector<SqlValue>& args);
  bool send(const Bound& b);
  // The pending statements and then `last` (when not null, moved from) in
  // pipeline mode: one round trip. The rows of `last`, or the first error.
  Result<Rows> send_pending_with(Bound* last);
  // The error of a pending statement that failed (`result` null: no reply).
  Error failed(const PGresult* result, const Bound& b);

  // Distinct SQL texts are few (the list_tasks filters make the most); the
  // cap only keeps a pathological caller from growing it without bound.
  static constexpr std::size_t kMaxPrepared = 256;
  // Deferred statements sent at most in one pipeline (defer()).
  static constexpr std::size_t kMaxPending = 256;

  PGconn* conn_;
  std::string display_;
  std::unordered_map<std::string, std::string> prepared_;  // sql + types -> statement name
  int next_statement_ = 0;
  std::uint64_t calls_ = 0;
  std::uint64_t round_trips_ = 0;
  std::vector<Bound> pending_;     // begin_with_next(), then defer()
  std::size_t begin_pending_ = 0;  // how many of pending_ open the transaction
  Retry retry_ = Retry::no;
};

}  // namespace cp::pg
