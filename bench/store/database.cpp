#include "database.h"

#include <libpq-fe.h>
#include <sqlite3.h>
#include <sys/stat.h>

#include <cstdio>

#include "store/postgres/pg_connection.h"
#include "store/postgres/postgres_store.h"
#include "store/row_codec.h"
#include "store/sqlite/sqlite_store.h"
#include "store/store_error.h"

namespace cp::bench {

Status Database::copy_batch(const Batch&) { return store_error(500, "bulk load is for PostgreSQL only"); }
Status Database::finish_copy() { return {}; }

namespace {

std::string human_bytes(std::int64_t n) {
  char buf[32];
  const double v = static_cast<double>(n);
  if (n >= (std::int64_t{1} << 30)) std::snprintf(buf, sizeof buf, "%.2f GiB", v / (1 << 30));
  else if (n >= (1 << 20)) std::snprintf(buf, sizeof buf, "%.1f MiB", v / (1 << 20));
  else std::snprintf(buf, sizeof buf, "%.1f KiB", v / 1024);
  return buf;
}

std::int64_t file_size(const std::string& path) {
  struct stat st{};
  return ::stat(path.c_str(), &st) == 0 ? static_cast<std::int64_t>(st.st_size) : 0;
}

// ------------------------------------------------------------------ SQLite

class SqliteDatabase final : public Database {
 public:
  static Result<std::unique_ptr<Database>> open(const std::string& url) {
    CP_ASSIGN(auto options, parse_sqlite_url(url));
    sqlite3* db = nullptr;
    if (sqlite3_open_v2(options.path.c_str(), &db, SQLITE_OPEN_READWRITE, nullptr) != SQLITE_OK) {
      std::string msg = db ? sqlite3_errmsg(db) : "out of memory";
      sqlite3_close(db);
      return store_error(503, "cannot open " + options.path + ": " + msg);
    }
    sqlite3_busy_timeout(db, 60'000);
    return std::unique_ptr<Database>(new SqliteDatabase(db, options.path));
  }
  ~SqliteDatabase() override { sqlite3_close(db_); }

  std::string backend() const override { return "sqlite"; }

  Status analyze() override { return exec("ANALYZE"); }

  Result<std::string> explain(const sql::Statement& s) override {
    std::string out;
    CP_TRY(query("EXPLAIN QUERY PLAN " + s.text, s.args, [&](sqlite3_stmt* st) {
      out += "  ";
      out += reinterpret_cast<const char*>(sqlite3_column_text(st, 3));
      out += '\n';
    }));
    return out;
  }

  Result<std::int64_t> count(const std::string& table) override {
    std::int64_t n = 0;
    CP_TRY(query("SELECT COUNT(*) FROM " + table, {}, [&](sqlite3_stmt* st) { n = sqlite3_column_int64(st, 0); }));
    return n;
  }

  Result<std::int64_t> total_bytes() override { return file_size(path_) + file_size(path_ + "-wal"); }

  Result<std::vector<std::string>> sizes(bool per_table) override {
    std::vector<std::string> lines;
    std::int64_t pages = 0, page_size = 0, free_pages = 0;
    CP_TRY(query("PRAGMA page_count", {}, [&](sqlite3_stmt* st) { pages = sqlite3_column_int64(st, 0); }));
    CP_TRY(query("PRAGMA page_size", {}, [&](sqlite3_stmt* st) { page_size = sqlite3_column_int64(st, 0); }));
    CP_TRY(query("PRAGMA freelist_count", {}, [&](sqlite3_stmt* st) { free_pages = sqlite3_column_int64(st, 0); }));
    lines.push_back("file " + path_ + ": " + human_bytes(file_size(path_)) + " (" + std::to_string(pages) +
                    " pages of " + std::to_string(page_size) + " bytes, " + std::to_string(free_pages) +
                    " free), WAL " + human_bytes(file_size(path_ + "-wal")));
    if (per_table) {
      // dbstat reads every page: slow on a large file, hence optional.
      auto st = query("SELECT name, SUM(pgsize) FROM dbstat GROUP BY name ORDER BY 2 DESC", {}, [&](sqlite3_stmt* s) {
        lines.push_back("  " + std::string(reinterpret_cast<const char*>(sqlite3_column_text(s, 0))) + ": " +
                        human_bytes(sqlite3_column_int64(s, 1)));
      });
      if (!st.ok()) lines.push_back("  (per-table sizes unavailable: " + st.error().message + ")");
    }
    return lines;
  }

 private:
  SqliteDatabase(sqlite3* db, std::string path) : db_(db), path_(std::move(path)) {}

  Status exec(const std::string& text) {
    char* err = nullptr;
    if (sqlite3_exec(db_, text.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
      std::string msg = err ? err : "?";
      sqlite3_free(err);
      return store_error(500, "SQLite: " + msg + " in " + text);
    }
    return {};
  }

  template <class F>
  Status query(const std::string& text, const sql::Values& args, F on_row) {
    sqlite3_stmt* st = nullptr;
    if (sqlite3_prepare_v2(db_, text.c_str(), static_cast<int>(text.size()), &st, nullptr) != SQLITE_OK) {
      return store_error(500, std::string("SQLite: ") + sqlite3_errmsg(db_) + " in " + text);
    }
    int i = 1;
    for (const auto& a : args) {
      if (const auto* n = std::get_if<std::int64_t>(&a)) sqlite3_bind_int64(st, i++, *n);
      else {
        const auto& s = std::get<std::string>(a);
        sqlite3_bind_text(st, i++, s.data(), static_cast<int>(s.size()), SQLITE_TRANSIENT);
      }
    }
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) on_row(st);
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE) return store_error(500, std::string("SQLite: ") + sqlite3_errmsg(db_) + " in " + text);
    return {};
  }

  sqlite3* db_;
  std::string path_;
};

// -------------------------------------------------------------- PostgreSQL

using PgResult = std::unique_ptr<PGresult, decltype(&PQclear)>;

// COPY's text format: backslash, tab, newline and carriage return escaped.
void copy_field(std::string& out, std::string_view v) {
  for (char c : v) {
    switch (c) {
      case '\\': out += "\\\\"; break;
      case '\t': out += "\\t"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      default: out += c;
    }
  }
}

class PostgresDatabase final : public Database {
 public:
  static Result<std::unique_ptr<Database>> open(const std::string& url) {
    CP_ASSIGN(auto options, parse_postgres_url(url));
    PGconn* conn = PQconnectdb(options.conninfo.c_str());
    if (PQstatus(conn) != CONNECTION_OK) {
      std::string msg = PQerrorMessage(conn);
      PQfinish(conn);
      return store_error(503, "cannot connect to " + options.display + ": " + msg);
    }
    return std::unique_ptr<Database>(new PostgresDatabase(conn));
  }
  ~PostgresDatabase() override { PQfinish(conn_); }

  std::string backend() const override { return "postgresql"; }

  Status analyze() override { return exec("ANALYZE"); }

  Result<std::string> explain(const sql::Statement& s) override {
    std::string out;
    CP_TRY(query("EXPLAIN (ANALYZE, BUFFERS) " + pg::number_placeholders(s.text), s.args, [&](const PGresult* r) {
      for (int i = 0; i < PQntuples(r); ++i) {
        out += "  ";
        out += PQgetvalue(r, i, 0);
        out += '\n';
      }
    }));
    return out;
  }

  Result<std::int64_t> count(const std::string& table) override {
    std::int64_t n = 0;
    CP_TRY(query("SELECT COUNT(*) FROM " + table, {}, [&](const PGresult* r) { n = std::stoll(PQgetvalue(r, 0, 0)); }));
    return n;
  }

  Result<std::int64_t> total_bytes() override {
    std::int64_t n = 0;
    CP_TRY(query("SELECT pg_database_size(current_database())", {},
                 [&](const PGresult* r) { n = std::stoll(PQgetvalue(r, 0, 0)); }));
    return n;
  }

  Result<std::vector<std::string>> sizes(bool) override {
    std::vector<std::string> lines;
    CP_ASSIGN(auto total, total_bytes());
    lines.push_back("database: " + human_bytes(total));
    CP_TRY(query("SELECT c.relname, pg_relation_size(c.oid), c.relkind FROM pg_class c "
                 "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'public' "
                 "AND c.relkind IN ('r', 'i') ORDER BY 2 DESC",
                 {}, [&](const PGresult* r) {
                   for (int i = 0; i < PQntuples(r); ++i) {
                     const std::int64_t bytes = std::stoll(PQgetvalue(r, i, 1));
                     if (bytes < (1 << 20)) continue;
                     lines.push_back(std::string("  ") + PQgetvalue(r, i, 0) +
                                     (PQgetvalue(r, i, 2)[0] == 'i' ? " (index)" : "") + ": " + human_bytes(bytes));
                   }
                 }));
    CP_TRY(query("SELECT c.relname, pg_total_relation_size(c.oid) - pg_relation_size(c.oid) - pg_indexes_size(c.oid) "
                 "FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                 "WHERE n.nspname = 'public' AND c.relkind = 'r' ORDER BY 2 DESC",
                 {}, [&](const PGresult* r) {
                   for (int i = 0; i < PQntuples(r); ++i) {
                     const std::int64_t bytes = std::stoll(PQgetvalue(r, i, 1));
                     if (bytes >= (1 << 20)) {
                       lines.push_back(std::string("  ") + PQgetvalue(r, i, 0) + " (TOAST): " + human_bytes(bytes));
                     }
                   }
                 }));
    return lines;
  }

  Result<std::vector<int>> server_pids() override {
    std::vector<int> pids;
    CP_TRY(query("SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() "
                 "AND backend_type = 'client backend'",
                 {}, [&](const PGresult* r) {
                   for (int i = 0; i < PQntuples(r); ++i) pids.push_back(std::stoi(PQgetvalue(r, i, 0)));
                 }));
    return pids;
  }

  Status copy_batch(const Batch& b) override {
    CP_TRY(exec("BEGIN"));
    if (!staged_) {
      // Per session; ON COMMIT DELETE ROWS empties it at every commit.
      CP_TRY(exec("CREATE TEMP TABLE usage_stage (LIKE usage_daily, month BIGINT NOT NULL) ON COMMIT DELETE ROWS"));
      staged_ = true;
    }
    std::string buf;
    auto flush = [&](bool last) -> Status {
      if (!last && buf.size() < (std::size_t{4} << 20)) return {};
      if (!buf.empty() && PQputCopyData(conn_, buf.data(), static_cast<int>(buf.size())) != 1) {
        return store_error(503, std::string("PostgreSQL COPY: ") + PQerrorMessage(conn_));
      }
      buf.clear();
      return {};
    };
    auto field = [&](std::string_view v, char end) {
      copy_field(buf, v);
      buf += end;
    };
    auto number = [&](std::int64_t v, char end) {
      buf += std::to_string(v);
      buf += end;
    };

    CP_TRY(copy_begin("COPY tasks (id, pipeline_id, project_group, resource_group, assigned_cluster, state, "
                      "created_at, updated_at, doc) FROM STDIN"));
    for (const auto& t : b.tasks) {
      field(t.id, '\t');
      field(t.pipeline_id, '\t');
      field(t.project_group, '\t');
      field(t.resource_group, '\t');
      field(t.assigned_cluster, '\t');
      field(enum_name(t.state), '\t');
      number(t.created_at, '\t');
      number(t.updated_at, '\t');
      field(encode_row(t), '\n');
      CP_TRY(flush(false));
    }
    CP_TRY(flush(true));
    CP_TRY(copy_end());

    CP_TRY(copy_begin("COPY attempts (id, task_id, cluster_id, state, number, doc) FROM STDIN"));
    for (const auto& a : b.attempts) {
      field(a.id, '\t');
      field(a.task_id, '\t');
      field(a.cluster_id, '\t');
      field(enum_name(a.state), '\t');
      number(a.number, '\t');
      field(encode_row(a), '\n');
      CP_TRY(flush(false));
    }
    CP_TRY(flush(true));
    CP_TRY(copy_end());

    CP_TRY(copy_begin("COPY events (id, at, object_kind, object_id, type, doc) FROM STDIN"));
    for (const auto& te : b.events) {
      Event row = te.event;  // as PostgresTx::append_event: the id goes into the document too
      row.id = ++last_event_id_;
      number(row.id, '\t');
      number(row.at, '\t');
      field(row.object_kind, '\t');
      field(row.object_id, '\t');
      field(row.type, '\t');
      field(encode_row(row), '\n');
      CP_TRY(flush(false));
    }
    CP_TRY(flush(true));
    CP_TRY(copy_end());

    CP_TRY(copy_begin("COPY usage_stage (day, project_group, resource_group, cluster_id, user_name, gpu_type, outcome, "
                      "attempts, gpu_ms, cpu_core_ms, memory_mib_s, month) FROM STDIN"));
    for (const auto& te : b.events) {
      for (const auto& r : te.usage) {
        number(r.day, '\t');
        field(r.project_group, '\t');
        field(r.resource_group, '\t');
        field(r.cluster, '\t');
        field(r.user, '\t');
        field(r.gpu_type, '\t');
        field(r.outcome, '\t');
        number(r.attempts, '\t');
        number(r.gpu_ms, '\t');
        number(r.cpu_core_ms, '\t');
        number(r.memory_mib_s, '\t');
        number(month_start(r.day), '\n');
        CP_TRY(flush(false));
      }
    }
    CP_TRY(flush(true));
    CP_TRY(copy_end());
    // add_usage's upserts (shared_sql.cpp), over the batch's rows summed by key.
    for (const auto& [table, period] : {std::pair<std::string, std::string>{"usage_daily", "day"},
                                        std::pair<std::string, std::string>{"usage_monthly", "month"}}) {
      const std::string key = period + ", project_group, resource_group, cluster_id, user_name, gpu_type, outcome";
      CP_TRY(exec("INSERT INTO " + table + " (" + key + ", attempts, gpu_ms, cpu_core_ms, memory_mib_s) SELECT " +
                  key + ", SUM(attempts), SUM(gpu_ms), SUM(cpu_core_ms), SUM(memory_mib_s) FROM usage_stage GROUP BY " +
                  key + " ON CONFLICT (" + key + ") DO UPDATE SET attempts = " + table +
                  ".attempts + excluded.attempts, gpu_ms = " + table + ".gpu_ms + excluded.gpu_ms, cpu_core_ms = " +
                  table + ".cpu_core_ms + excluded.cpu_core_ms, memory_mib_s = " + table +
                  ".memory_mib_s + excluded.memory_mib_s"));
    }
    return exec("COMMIT");
  }

  Status finish_copy() override {
    if (last_event_id_ == 0) return {};
    return exec("SELECT setval('events_id_seq', " + std::to_string(last_event_id_) + ")");
  }

 private:
  explicit PostgresDatabase(PGconn* conn) : conn_(conn) {}

  Error failed(const PGresult* r, const std::string& what) {
    std::string msg = r ? PQresultErrorMessage(r) : "";
    if (msg.empty()) msg = PQerrorMessage(conn_);
    return store_error(500, "PostgreSQL: " + msg + " in " + what.substr(0, 200));
  }

  Status exec(const std::string& text) {
    PgResult r(PQexec(conn_, text.c_str()), &PQclear);
    auto st = PQresultStatus(r.get());
    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) return failed(r.get(), text);
    return {};
  }

  template <class F>
  Status query(const std::string& text, const sql::Values& args, F on_rows) {
    std::vector<std::string> texts;
    for (const auto& a : args) {
      if (const auto* n = std::get_if<std::int64_t>(&a)) texts.push_back(std::to_string(*n));
      else texts.push_back(std::get<std::string>(a));
    }
    std::vector<const char*> values;
    for (const auto& t : texts) values.push_back(t.c_str());
    PgResult r(PQexecParams(conn_, text.c_str(), static_cast<int>(values.size()), nullptr, values.data(), nullptr,
                            nullptr, 0),
               &PQclear);
    auto st = PQresultStatus(r.get());
    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) return failed(r.get(), text);
    on_rows(r.get());
    return {};
  }

  Status copy_begin(const std::string& text) {
    PgResult r(PQexec(conn_, text.c_str()), &PQclear);
    if (PQresultStatus(r.get()) != PGRES_COPY_IN) return failed(r.get(), text);
    return {};
  }

  Status copy_end() {
    if (PQputCopyEnd(conn_, nullptr) != 1) return store_error(503, std::string("PostgreSQL COPY: ") + PQerrorMessage(conn_));
    PgResult r(PQgetResult(conn_), &PQclear);
    const bool ok = PQresultStatus(r.get()) == PGRES_COMMAND_OK;
    Error e = ok ? Error{} : failed(r.get(), "COPY");
    while (PGresult* rest = PQgetResult(conn_)) PQclear(rest);
    if (!ok) return e;
    return {};
  }

  PGconn* conn_;
  bool staged_ = false;
  std::int64_t last_event_id_ = 0;
};

}  // namespace

Result<std::unique_ptr<Database>> Database::open(const std::string& url) {
  if (url.starts_with("sqlite:")) return SqliteDatabase::open(url);
  if (url.starts_with("postgresql://") || url.starts_with("postgres://")) return PostgresDatabase::open(url);
  return store_error(400, "unknown store URL");
}

}  // namespace cp::bench
