#include "store/sqlite/sqlite_connection.h"

#include "store/store_error.h"

namespace cp::sqlite {
namespace {

// 503 when the database cannot serve us right now but may later (another
// writer holds the lock, the disk is full or failing, the file cannot be
// opened or is read-only); 500 for the rest, which retrying cannot fix:
// constraint violations, SQL errors, corruption, misuse.
int http_status_for(int rc) {
  switch (rc & 0xFF) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
    case SQLITE_IOERR:
    case SQLITE_FULL:
    case SQLITE_CANTOPEN:
    case SQLITE_READONLY:
    case SQLITE_NOMEM:
    case SQLITE_PROTOCOL:
      return 503;
    default:
      return 500;
  }
}

}  // namespace

bool is_busy(int rc) { return (rc & 0xFF) == SQLITE_BUSY || (rc & 0xFF) == SQLITE_LOCKED; }

int sqlite_code(const Error& e) {
  auto it = e.details.find("sqlite_code");
  if (it == e.details.end() || !it->value().is_int64()) return 0;
  return static_cast<int>(it->value().get_int64());
}

// ---------------------------------------------------------------- Statement

Statement::Statement(Connection* conn, sqlite3_stmt* stmt, bool* in_use) : conn_(conn), stmt_(stmt), in_use_(in_use) {}

Statement::Statement(Statement&& other) noexcept : conn_(other.conn_), stmt_(other.stmt_), in_use_(other.in_use_) {
  other.stmt_ = nullptr;
  other.in_use_ = nullptr;
}

Statement::~Statement() {
  if (stmt_ == nullptr) return;
  if (in_use_ != nullptr) {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
    *in_use_ = false;
  } else {
    sqlite3_finalize(stmt_);
  }
}

Status Statement::bind(const std::vector<SqlValue>& args) {
  for (std::size_t i = 0; i < args.size(); ++i) {
    int index = static_cast<int>(i) + 1;
    int rc = std::visit(
        [&](const auto& v) {
          if constexpr (std::is_same_v<std::decay_t<decltype(v)>, std::int64_t>) {
            return sqlite3_bind_int64(stmt_, index, v);
          } else {
            return sqlite3_bind_text64(stmt_, index, v.data(), v.size(), SQLITE_TRANSIENT, SQLITE_UTF8);
          }
        },
        args[i]);
    if (rc != SQLITE_OK) return conn_->error(rc, sqlite3_sql(stmt_));
  }
  return {};
}

Result<bool> Statement::step() {
  int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  return conn_->error(rc, sqlite3_sql(stmt_));
}

Status Statement::run() {
  while (true) {
    CP_ASSIGN(bool row, step());
    if (!row) return {};
  }
}

std::int64_t Statement::column_int64(int col) const { return sqlite3_column_int64(stmt_, col); }

std::string Statement::column_text(int col) const {
  const unsigned char* text = sqlite3_column_text(stmt_, col);
  if (text == nullptr) return {};
  // column_bytes after column_text: the size of the text just converted.
  return std::string(reinterpret_cast<const char*>(text), static_cast<std::size_t>(sqlite3_column_bytes(stmt_, col)));
}

// --------------------------------------------------------------- Connection

Result<std::unique_ptr<Connection>> Connection::open(const std::string& filename, int flags, const char* vfs) {
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(filename.c_str(), &db, flags, vfs);
  if (rc != SQLITE_OK) {
    // Even a failed open usually returns a handle that holds the message.
    std::string message = db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
    sqlite3_close_v2(db);
    Error e = store_error(503, "cannot open SQLite database \"" + filename + "\": " + message);
    e.details["sqlite_code"] = rc;
    return e;
  }
  // Extended codes tell a UNIQUE violation from a FOREIGN KEY one.
  sqlite3_extended_result_codes(db, 1);
  return std::unique_ptr<Connection>(new Connection(db));
}

Connection::~Connection() {
  for (auto& [sql, slot] : cache_) sqlite3_finalize(slot->stmt);
  // Closing the last connection checkpoints the WAL into the main file.
  sqlite3_close_v2(db_);
}

Error Connection::error(int rc, std::string_view sql) {
  if (is_busy(rc)) saw_busy_ = true;
  Error e = store_error(http_status_for(rc), std::string("SQLite: ") + sqlite3_errmsg(db_));
  e.details["backend"] = "sqlite";
  e.details["sqlite_code"] = rc;
  e.details["sqlite_error"] = sqlite3_errstr(rc);
  e.details["statement"] = sql.substr(0, 200);
  return e;
}

Result<Statement> Connection::prepare(std::string_view sql) {
  auto it = cache_.find(std::string(sql));
  if (it != cache_.end() && !it->second->in_use) {
    it->second->in_use = true;
    return Statement(this, it->second->stmt, &it->second->in_use);
  }
  bool cacheable = it == cache_.end() && cache_.size() < kMaxCached;
  sqlite3_stmt* stmt = nullptr;
  const char* tail = nullptr;
  int rc = sqlite3_prepare_v3(db_, sql.data(), static_cast<int>(sql.size()), cacheable ? SQLITE_PREPARE_PERSISTENT : 0,
                              &stmt, &tail);
  if (rc != SQLITE_OK) return error(rc, sql);
  // One statement per prepare; a second one would silently never run.
  std::string_view rest(tail, static_cast<std::size_t>(sql.data() + sql.size() - tail));
  CP_CHECK(stmt != nullptr && rest.find_first_not_of(" \t\n;") == std::string_view::npos,
           "prepare() takes exactly one SQL statement");
  if (!cacheable) return Statement(this, stmt, nullptr);
  auto slot = std::make_unique<Cached>();
  slot->stmt = stmt;
  slot->in_use = true;
  bool* in_use = &slot->in_use;
  cache_.emplace(std::string(sql), std::move(slot));
  return Statement(this, stmt, in_use);
}

Status Connection::execute(std::string_view sql) {
  CP_ASSIGN(auto stmt, prepare(sql));
  return stmt.run();
}

Status Connection::execute_script(std::string_view sql) {
  std::string text(sql);  // sqlite3_exec wants a NUL-terminated string
  char* message = nullptr;
  int rc = sqlite3_exec(db_, text.c_str(), nullptr, nullptr, &message);
  if (rc == SQLITE_OK) return {};
  sqlite3_free(message);  // the same text is still available from sqlite3_errmsg
  return error(rc, sql);
}

}  // namespace cp::sqlite
