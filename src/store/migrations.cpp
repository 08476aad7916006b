#include "store/migrations.h"

#include <array>

namespace cp {
namespace {

// Version 1: every table of the data model.
//
// Each table keeps the model struct whole in `doc` (or `spec`); the other
// columns are copies for WHERE, ORDER BY and indices (see row_codec.h).
// Exceptions, on purpose:
// - nodes.label_overrides and nodes.maintenance are admin-owned and live only
//   in their columns, so that an agent's upsert of the node (the doc) can
//   never overwrite them.
// - events.id is assigned by the store as max(id)+1 inside the write
//   transaction, which needs no AUTOINCREMENT/SERIAL and so stays portable.
// Column names avoid words PostgreSQL reserves ("user" -> user_name).
constexpr std::string_view kV1 = R"sql(
CREATE TABLE meta (
  key TEXT PRIMARY KEY,
  value TEXT NOT NULL
);

CREATE TABLE users (
  name TEXT PRIMARY KEY,
  doc TEXT NOT NULL,
  created_at BIGINT NOT NULL
);

CREATE TABLE api_tokens (
  id TEXT PRIMARY KEY,
  hash TEXT NOT NULL,
  user_name TEXT NOT NULL,
  doc TEXT NOT NULL,
  created_at BIGINT NOT NULL
);
CREATE UNIQUE INDEX api_tokens_hash ON api_tokens (hash);
CREATE INDEX api_tokens_user ON api_tokens (user_name, created_at);

CREATE TABLE clusters (
  id TEXT PRIMARY KEY,
  doc TEXT NOT NULL,
  created_at BIGINT NOT NULL,
  updated_at BIGINT NOT NULL
);

CREATE TABLE bootstrap_tokens (
  hash TEXT PRIMARY KEY,
  cluster_id TEXT NOT NULL REFERENCES clusters (id),
  created_at BIGINT NOT NULL,
  expires_at BIGINT NOT NULL
);
CREATE INDEX bootstrap_tokens_cluster ON bootstrap_tokens (cluster_id);

CREATE TABLE agent_credentials (
  hash TEXT PRIMARY KEY,
  cluster_id TEXT NOT NULL REFERENCES clusters (id),
  created_at BIGINT NOT NULL,
  expires_at BIGINT NOT NULL
);
CREATE INDEX agent_credentials_cluster ON agent_credentials (cluster_id, expires_at);

CREATE TABLE nodes (
  cluster_id TEXT NOT NULL REFERENCES clusters (id),
  name TEXT NOT NULL,
  doc TEXT NOT NULL,
  label_overrides TEXT NOT NULL,
  maintenance INTEGER NOT NULL,
  updated_at BIGINT NOT NULL,
  PRIMARY KEY (cluster_id, name)
);

CREATE TABLE resource_groups (
  name TEXT PRIMARY KEY,
  spec TEXT NOT NULL,
  created_at BIGINT NOT NULL,
  updated_at BIGINT NOT NULL
);

CREATE TABLE project_groups (
  name TEXT PRIMARY KEY,
  spec TEXT NOT NULL,
  created_at BIGINT NOT NULL,
  updated_at BIGINT NOT NULL
);

CREATE TABLE priority_classes (
  name TEXT PRIMARY KEY,
  spec TEXT NOT NULL,
  created_at BIGINT NOT NULL,
  updated_at BIGINT NOT NULL
);

CREATE TABLE pipelines (
  id TEXT PRIMARY KEY,
  project_group TEXT NOT NULL,
  doc TEXT NOT NULL,
  created_at BIGINT NOT NULL
);

CREATE TABLE tasks (
  id TEXT PRIMARY KEY,
  pipeline_id TEXT NOT NULL,
  project_group TEXT NOT NULL,
  resource_group TEXT NOT NULL,
  assigned_cluster TEXT NOT NULL,
  state TEXT NOT NULL,
  created_at BIGINT NOT NULL,
  updated_at BIGINT NOT NULL,
  doc TEXT NOT NULL
);
CREATE INDEX tasks_project_group_state ON tasks (project_group, state, created_at);
CREATE INDEX tasks_state ON tasks (state, created_at);
CREATE INDEX tasks_created ON tasks (created_at, id);
CREATE INDEX tasks_resource_group_state ON tasks (resource_group, state);
CREATE INDEX tasks_cluster_state ON tasks (assigned_cluster, state);
CREATE INDEX tasks_pipeline ON tasks (pipeline_id);

CREATE TABLE attempts (
  id TEXT PRIMARY KEY,
  task_id TEXT NOT NULL,
  cluster_id TEXT NOT NULL,
  state TEXT NOT NULL,
  number INTEGER NOT NULL,
  doc TEXT NOT NULL
);
CREATE INDEX attempts_task ON attempts (task_id);
CREATE INDEX attempts_cluster_state ON attempts (cluster_id, state);

CREATE TABLE events (
  id BIGINT PRIMARY KEY,
  at BIGINT NOT NULL,
  object_kind TEXT NOT NULL,
  object_id TEXT NOT NULL,
  type TEXT NOT NULL,
  doc TEXT NOT NULL
);
CREATE INDEX events_at ON events (at);
CREATE INDEX events_object ON events (object_kind, object_id, id);
)sql";

constexpr std::array<Migration, 1> kMigrations{{
    {1, "initial schema", kV1},
}};

}  // namespace

std::span<const Migration> migrations() { return kMigrations; }

int latest_schema_version() { return kMigrations.back().version; }

}  // namespace cp
