#include "store/postgres/pg_connection.h"

#include <charconv>
#include <optional>

#include "store/store_error.h"

namespace cp::pg {
namespace {

// From catalog/pg_type_d.h, which is a server header: the parameter types we bind.
constexpr Oid kInt8Oid = 20;
constexpr Oid kTextOid = 25;

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

// The connection is gone when the server says it is going away (admin or
// crash shutdown, cannot connect now) or the socket broke (class 08).
bool is_connection_loss(std::string_view state) {
  return state.starts_with("08") || state == "57P01" || state == "57P02" || state == "57P03";
}

// 503 when the database cannot serve us right now but may later (connection
// lost, rolled back by a concurrent writer, out of disk or memory or
// connections, shutting down, a read-only standby after a failover); 500 for
// the rest, which retrying cannot fix: constraint violations, SQL errors,
// missing tables, corruption.
int http_status_for(std::string_view state, bool gone) {
  if (gone) return 503;
  for (std::string_view klass : {"08", "40", "53", "57", "58"}) {
    if (state.starts_with(klass)) return 503;
  }
  if (state == "55P03" || state == "25006") return 503;  // lock not available; read-only server
  return 500;
}

// libpq prints NOTICEs ("relation already exists, skipping") to stderr by
// default; they are expected and say nothing to an operator.
void ignore_notice(void*, const char*) {}

std::vector<Oid> param_types(const std::vector<SqlValue>& args) {
  std::vector<Oid> types;
  types.reserve(args.size());
  for (const auto& a : args) types.push_back(std::holds_alternative<std::int64_t>(a) ? kInt8Oid : kTextOid);
  return types;
}

}  // namespace

std::string sqlstate(const Error& e) {
  auto it = e.details.find("sqlstate");
  if (it == e.details.end() || !it->value().is_string()) return {};
  return std::string(it->value().get_string());
}

std::string number_placeholders(std::string_view sql) {
  std::string out;
  out.reserve(sql.size() + 16);
  int next = 0;
  char quote = 0;  // inside '...' or "..." when set
  for (char c : sql) {
    if (quote != 0) {
      if (c == quote) quote = 0;  // a doubled quote closes and reopens: same result
      out += c;
    } else if (c == '\'' || c == '"') {
      quote = c;
      out += c;
    } else if (c == '?') {
      out += '$';
      out += std::to_string(++next);
    } else {
      out += c;
    }
  }
  return out;
}

// --------------------------------------------------------------------- Rows

std::int64_t Rows::affected() const {
  std::string_view text = PQcmdTuples(result_.get());
  std::int64_t n = 0;
  std::from_chars(text.data(), text.data() + text.size(), n);
  return n;
}

std::string Rows::text(int row, int col) const {
  return std::string(PQgetvalue(result_.get(), row, col),
                     static_cast<std::size_t>(PQgetlength(result_.get(), row, col)));
}

std::int64_t Rows::int64(int row, int col) const {
  const char* text = PQgetvalue(result_.get(), row, col);
  std::int64_t n = 0;
  std::from_chars(text, text + PQgetlength(result_.get(), row, col), n);
  return n;
}

// --------------------------------------------------------------- Connection

Result<std::unique_ptr<Connection>> Connection::open(const std::string& conninfo, const std::string& display) {
  // Entries before dbname are defaults the URL may override; entries after
  // it win over the URL. The documents are UTF-8 whatever the client locale.
  const char* keywords[] = {"connect_timeout", "dbname", "fallback_application_name", "client_encoding", nullptr};
  const char* values[] = {"10", conninfo.c_str(), "cubeplane", "UTF8", nullptr};
  PGconn* conn = PQconnectdbParams(keywords, values, /*expand_dbname=*/1);
  if (conn == nullptr) return store_error(503, "cannot connect to PostgreSQL at " + display + ": out of memory");
  if (PQstatus(conn) != CONNECTION_OK) {
    std::string message = trim(PQerrorMessage(conn));
    PQfinish(conn);
    Error e = store_error(503, "cannot connect to PostgreSQL at " + display + ": " + message);
    e.details["backend"] = "postgresql";
    return e;
  }
  PQsetNoticeProcessor(conn, ignore_notice, nullptr);
  std::unique_ptr<Connection> c(new Connection(conn, display));
  CP_TRY(c->configure());
  return c;
}

Connection::~Connection() { PQfinish(conn_); }

Status Connection::configure() {
  // A commit must survive a crash of PostgreSQL itself (DESIGN.md). Only
  // "off" gives that up; other values (local, remote_write, remote_apply)
  // are at least as strong and are the operator's choice.
  std::unique_ptr<PGresult, decltype(&PQclear)> shown(PQexec(conn_, "SHOW synchronous_commit"), &PQclear);
  if (PQresultStatus(shown.get()) != PGRES_TUPLES_OK) return error(shown.get(), "SHOW synchronous_commit");
  if (std::string_view(PQgetvalue(shown.get(), 0, 0)) == "off") CP_TRY(execute("SET synchronous_commit = on"));
  // A process frozen inside a transaction (SIGSTOP, a VM paused, a
  // debugger) holds its locks, and writers queue behind it: every server on
  // the database would hang with it, the followers that should take over
  // included. PostgreSQL ends such a session after this long; a Cubeplane
  // transaction never waits on anything but the database between its
  // statements. An operator's own setting (in the URL's options or the
  // role) is kept.
  std::unique_ptr<PGresult, decltype(&PQclear)> idle(PQexec(conn_, "SHOW idle_in_transaction_session_timeout"),
                                                     &PQclear);
  if (PQresultStatus(idle.get()) != PGRES_TUPLES_OK) return error(idle.get(), "SHOW idle_in_transaction_session_timeout");
  if (std::string_view(PQgetvalue(idle.get(), 0, 0)) == "0") {
    return execute("SET idle_in_transaction_session_timeout = " + std::to_string(kIdleInTransactionTimeoutMs));
  }
  return {};
}

Status Connection::reconnect() {
  prepared_.clear();
  cancel_pending();
  PQreset(conn_);
  // A new session starts outside pipeline mode; make sure libpq agrees.
  if (PQpipelineStatus(conn_) != PQ_PIPELINE_OFF) (void)PQexitPipelineMode(conn_);
  if (PQstatus(conn_) != CONNECTION_OK) {
    Error e = store_error(503, "cannot reconnect to PostgreSQL at " + display_ + ": " + trim(PQerrorMessage(conn_)));
    e.details["backend"] = "postgresql";
    retry_ = Retry::lost;
    return e;
  }
  PQsetNoticeProcessor(conn_, ignore_notice, nullptr);
  return configure();
}

bool Connection::in_transaction() const {
  auto status = PQtransactionStatus(conn_);
  return status == PQTRANS_INTRANS || status == PQTRANS_INERROR;
}

Error Connection::error(const PGresult* result, std::string_view sql) {
  std::string state;
  std::string message;
  if (result != nullptr) {
    if (const char* s = PQresultErrorField(result, PG_DIAG_SQLSTATE)) state = s;
    if (const char* m = PQresultErrorField(result, PG_DIAG_MESSAGE_PRIMARY)) message = m;
  }
  if (message.empty()) message = trim(PQerrorMessage(conn_));
  if (message.empty()) message = "no reply from the server";
  bool gone = broken() || is_connection_loss(state);
  if (state == "40001" || state == "40P01") {
    retry_ = Retry::conflict;
  } else if (gone) {
    retry_ = Retry::lost;
  }
  Error e = store_error(http_status_for(state, gone), "PostgreSQL: " + message);
  e.details["backend"] = "postgresql";
  e.details["sqlstate"] = state;
  e.details["statement"] = sql.substr(0, 200);
  return e;
}

Result<std::string> Connection::prepared(std::string_view sql, const std::vector<SqlValue>& args) {
  // The same text with other parameter types is another statement.
  std::string key(sql);
  key += '\0';
  for (const auto& a : args) key += std::holds_alternative<std::int64_t>(a) ? 'i' : 't';
  if (auto it = prepared_.find(key); it != prepared_.end()) return it->second;
  if (prepared_.size() >= kMaxPrepared) return std::string();

  std::string name = "cp_" + std::to_string(++next_statement_);
  auto types = param_types(args);
  std::unique_ptr<PGresult, decltype(&PQclear)> result(
      PQprepare(conn_, name.c_str(), number_placeholders(sql).c_str(), static_cast<int>(types.size()), types.data()),
      &PQclear);
  if (PQresultStatus(result.get()) != PGRES_COMMAND_OK) return error(result.get(), sql);
  prepared_.emplace(std::move(key), name);
  return name;
}

Result<Connection::Bound> Connection::bind(std::string_view sql, const std::vector<SqlValue>& args) {
  Bound b;
  b.sql = sql;
  b.values.reserve(args.size());
  for (const auto& a : args) {
    if (const auto* n = std::get_if<std::int64_t>(&a)) {
      b.values.push_back(std::to_string(*n));
    } else {
      const auto& s = std::get<std::string>(a);
      // libpq sends C strings, and PostgreSQL text cannot hold NUL anyway.
      if (s.find('\0') != std::string::npos) {
        return store_error(500, "PostgreSQL cannot store text containing a NUL character");
      }
      b.values.push_back(s);
    }
  }
  CP_ASSIGN(b.name, prepared(sql, args));
  if (b.name.empty()) {
    b.text = number_placeholders(sql);
    b.types = param_types(args);
  }
  return b;
}

std::vector<const char*> Connection::Bound::c_values() const {
  std::vector<const char*> out;
  out.reserve(values.size());
  for (const auto& v : values) out.push_back(v.c_str());
  return out;
}

bool Connection::send(const Bound& b) {
  const std::vector<const char*> values = b.c_values();
  const int n = static_cast<int>(values.size());
  if (!b.name.empty()) return PQsendQueryPrepared(conn_, b.name.c_str(), n, values.data(), nullptr, nullptr, 0) == 1;
  return PQsendQueryParams(conn_, b.text.c_str(), n, b.types.data(), values.data(), nullptr, nullptr, 0) == 1;
}

Result<Rows> Connection::query(std::string_view sql, const std::vector<SqlValue>& args) {
  ++calls_;
  CP_ASSIGN(Bound b, bind(sql, args));
  if (!pending_.empty()) return send_pending_with(&b);
  ++round_trips_;
  const std::vector<const char*> values = b.c_values();
  const int n = static_cast<int>(values.size());
  PGresult* raw = b.name.empty()
                      ? PQexecParams(conn_, b.text.c_str(), n, b.types.data(), values.data(), nullptr, nullptr, 0)
                      : PQexecPrepared(conn_, b.name.c_str(), n, values.data(), nullptr, nullptr, 0);
  Rows rows(raw);
  auto status = PQresultStatus(raw);
  if (raw == nullptr || (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK)) return error(raw, sql);
  return rows;
}

void Connection::begin_with_next(const std::vector<std::string>& statements) {
  cancel_pending();
  for (const auto& text : statements) {
    Bound b;
    b.sql = text;
    b.text = text;
    pending_.push_back(std::move(b));
  }
  begin_pending_ = pending_.size();
}

Status Connection::defer(std::string_view sql, const std::vector<SqlValue>& args, std::string_view kind,
                         std::string key) {
  CP_ASSIGN(Bound b, bind(sql, args));
  b.kind = kind;
  b.key = std::move(key);
  pending_.push_back(std::move(b));
  // The server answers a pipeline only as it reads it, and libpq sends all
  // of it before reading any answer: past a few hundred statements the
  // answers could fill the socket both ways. Send what is pending now.
  if (pending_.size() >= kMaxPending) CP_TRY(send_pending_with(nullptr));
  return {};
}

Error Connection::failed(const PGresult* result, const Bound& b) {
  Error e = error(result, b.sql);
  if (b.kind.empty() || sqlstate(e) != "23505") return e;
  std::string key = b.key;
  if (key.empty() && result != nullptr) {
    // "Key (id)=(t-1.1) already exists."
    const char* field = PQresultErrorField(result, PG_DIAG_MESSAGE_DETAIL);
    std::string_view detail = field != nullptr ? field : "";
    auto open = detail.find(")=(");
    auto close = detail.rfind(')');
    if (open != std::string_view::npos && close != std::string_view::npos && close > open + 3) {
      key = detail.substr(open + 3, close - open - 3);
    }
  }
  return errors::already_exists(b.kind, key);
}

Result<Rows> Connection::send_pending_with(Bound* last) {
  std::vector<Bound> pending;
  pending.swap(pending_);
  begin_pending_ = 0;
  if (last != nullptr) pending.push_back(std::move(*last));
  ++round_trips_;
  if (PQenterPipelineMode(conn_) != 1) return error(nullptr, "entering pipeline mode");
  bool sent = true;
  for (const auto& b : pending) sent = sent && send(b);
  sent = sent && PQpipelineSync(conn_) == 1;
  // Each command's result and a null after it; then the sync. A command
  // after a failed one comes back PGRES_PIPELINE_ABORTED. No reply at all
  // (a lost connection) ends the reading: the connection is broken then.
  std::optional<Error> first_error;
  std::unique_ptr<PGresult, decltype(&PQclear)> result_of_last(nullptr, &PQclear);
  if (!sent) first_error = error(nullptr, pending.back().sql);
  for (std::size_t i = 0; sent && i < pending.size(); ++i) {
    std::unique_ptr<PGresult, decltype(&PQclear)> r(PQgetResult(conn_), &PQclear);
    if (r == nullptr) {
      if (!first_error) first_error = failed(nullptr, pending[i]);
      sent = false;
      break;
    }
    if (PQresultStatus(r.get()) == PGRES_FATAL_ERROR && !first_error) first_error = failed(r.get(), pending[i]);
    while (PGresult* more = PQgetResult(conn_)) PQclear(more);  // to the null that ends this command
    if (i + 1 == pending.size()) result_of_last = std::move(r);
  }
  if (sent) {
    std::unique_ptr<PGresult, decltype(&PQclear)> sync(PQgetResult(conn_), &PQclear);
    if ((sync == nullptr || PQresultStatus(sync.get()) != PGRES_PIPELINE_SYNC) && !first_error) {
      first_error = error(sync.get(), pending.back().sql);
    }
  }
  if (PQexitPipelineMode(conn_) != 1) {
    // Results left unread (a send failed half-way): the session's state is
    // unknown, so start a new one, and let the store run the body again.
    if (!first_error) first_error = error(nullptr, "leaving pipeline mode");
    (void)reconnect();
    retry_ = Retry::lost;
  }
  if (first_error) return *first_error;
  if (last == nullptr) return Rows(nullptr);
  auto status = PQresultStatus(result_of_last.get());
  if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) return error(result_of_last.get(), pending.back().sql);
  return Rows(result_of_last.release());
}

Status Connection::execute(std::string_view sql) {
  ++calls_;
  const bool deferred = pending_.size() > begin_pending_;
  if (sql == "ROLLBACK" || (sql == "COMMIT" && !deferred)) {
    // Deferred writes die unsent; with BEGIN itself unsent there is no
    // transaction to end at all.
    const bool begun = begin_pending_ == 0;
    cancel_pending();
    if (!begun) return {};
  }
  if (!pending_.empty()) {
    if (sql == "COMMIT") {
      Bound commit;
      commit.sql = commit.text = sql;
      CP_TRY(send_pending_with(&commit));
      return {};
    }
    // Text that may hold several statements cannot go in a pipeline: the
    // deferred writes go first, in a round trip of their own.
    if (deferred) CP_TRY(send_pending_with(nullptr));
  }
  ++round_trips_;
  std::string text;
  for (const auto& b : pending_) text += b.text + "; ";  // BEGIN and its LOCKs, not sent yet
  cancel_pending();
  text += sql;  // PQexec wants a NUL-terminated string
  std::unique_ptr<PGresult, decltype(&PQclear)> result(PQexec(conn_, text.c_str()), &PQclear);
  auto status = PQresultStatus(result.get());
  if (result == nullptr ||
      (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK && status != PGRES_EMPTY_QUERY)) {
    return error(result.get(), sql);
  }
  return {};
}

}  // namespace cp::pg
