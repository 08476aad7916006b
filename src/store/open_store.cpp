// The one place that maps a store URL to a backend.
#include "store/postgres/postgres_store.h"
#include "store/sqlite/sqlite_store.h"
#include "store/store.h"

namespace cp {

Result<std::unique_ptr<Store>> open_store(const std::string& url) {
  if (url.starts_with("sqlite:")) {
    CP_ASSIGN(SqliteOptions options, parse_sqlite_url(url));
    CP_ASSIGN(auto store, SqliteStore::open(options));
    return std::unique_ptr<Store>(std::move(store));
  }
  if (url.starts_with("postgresql://") || url.starts_with("postgres://")) {
    CP_ASSIGN(PostgresOptions options, parse_postgres_url(url));
    CP_ASSIGN(auto store, PostgresStore::open(options));
    return std::unique_ptr<Store>(std::move(store));
  }
  Error e{"invalid_store_url", 400,
          "invalid store URL: expected sqlite:///absolute/path/to/db, sqlite::memory: or postgresql://...",
          "无效的存储 URL：应为 sqlite:///绝对路径、sqlite::memory: 或 postgresql://...", {}};
  return e;
}

}  // namespace cp
