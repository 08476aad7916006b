// The schema, as an ordered list of versioned migrations shared by every
// backend. A store applies the ones missing from schema_migrations, each in
// its own transaction, oldest first.
//
// The SQL is deliberately plain so that SQLite and PostgreSQL both run it
// unchanged: TEXT, BIGINT and INTEGER columns; times are BIGINT milliseconds
// since the epoch; documents are JSON in TEXT; no AUTOINCREMENT, no SERIAL,
// no JSON operators, no "IF NOT EXISTS" inside a migration. Where PostgreSQL
// needs something the portable subset cannot say, it runs `postgresql_after`
// as well, in the same transaction; keep that rare and additive (it may add
// to the shared tables, never reshape them).
//
// Never edit a migration that has been released; append a new one.
#pragma once

#include <span>
#include <string_view>

namespace cp {

struct Migration {
  int version;  // 1, 2, 3, ... without gaps
  std::string_view description;
  std::string_view sql;  // one or more statements separated by ';', run by every backend
  // PostgreSQL only, run right after `sql`; empty for most migrations.
  std::string_view postgresql_after = {};
};

// Created before any migration runs; it records which ones have.
inline constexpr std::string_view kSchemaMigrationsDdl =
    "CREATE TABLE IF NOT EXISTS schema_migrations ("
    " version INTEGER PRIMARY KEY,"
    " applied_at BIGINT NOT NULL)";

std::span<const Migration> migrations();
int latest_schema_version();

}  // namespace cp
