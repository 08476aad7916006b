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
// - events.id is assigned by the store. SQLite takes max(id)+1 under its
//   single write lock. PostgreSQL runs writers concurrently, where max(id)+1
//   read from a transaction's snapshot can be stale, so it alone gives the
//   column an identity sequence (kV1Postgres) and takes ids from it under a
//   lock held to commit (postgres/postgres_tx_tasks.cpp).
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

// Version 2: indices for the hot queries at millions of tasks, and the usage
// ledger.
//
// - The task list (list_tasks) is ordered by (created_at, id) descending and
//   filtered by project group, state, resource group or cluster. Each index
//   ends in (created_at, id), so that a filter walks one range of one index
//   backwards and stops after a page. The store splits IN lists into one
//   walk per value (shared_sql.h), so these serve them too.
// - Retention finds finished tasks by (state, updated_at).
// - usage_daily is keyed by day first: a month is one range of the key.
//   usage_monthly holds the same sums per month (add_usage writes both in
//   one transaction): a month's report reads a row per key and month
//   instead of one per key and day, 3x fewer at 1 million tasks and more as
//   the ledger grows. usage_monthly_groups covers the reports by project
//   group (and cluster): read from the index alone, a month's rows already
//   in group order (docs/benchmarks.md "Store at 10 million tasks").
constexpr std::string_view kV2 = R"sql(
DROP INDEX tasks_project_group_state;
DROP INDEX tasks_state;
DROP INDEX tasks_resource_group_state;
DROP INDEX tasks_cluster_state;
CREATE INDEX tasks_group_state_created ON tasks (project_group, state, created_at, id);
CREATE INDEX tasks_group_created ON tasks (project_group, created_at, id);
CREATE INDEX tasks_state_created ON tasks (state, created_at, id);
CREATE INDEX tasks_state_updated ON tasks (state, updated_at);
CREATE INDEX tasks_resource_group_state_created ON tasks (resource_group, state, created_at, id);
CREATE INDEX tasks_cluster_state_created ON tasks (assigned_cluster, state, created_at, id);

CREATE TABLE usage_daily (
  day BIGINT NOT NULL,
  project_group TEXT NOT NULL,
  resource_group TEXT NOT NULL,
  cluster_id TEXT NOT NULL,
  user_name TEXT NOT NULL,
  gpu_type TEXT NOT NULL,
  outcome TEXT NOT NULL,
  attempts BIGINT NOT NULL,
  gpu_ms BIGINT NOT NULL,
  cpu_core_ms BIGINT NOT NULL,
  memory_mib_s BIGINT NOT NULL,
  PRIMARY KEY (day, project_group, resource_group, cluster_id, user_name, gpu_type, outcome)
);
CREATE TABLE usage_monthly (
  month BIGINT NOT NULL,
  project_group TEXT NOT NULL,
  resource_group TEXT NOT NULL,
  cluster_id TEXT NOT NULL,
  user_name TEXT NOT NULL,
  gpu_type TEXT NOT NULL,
  outcome TEXT NOT NULL,
  attempts BIGINT NOT NULL,
  gpu_ms BIGINT NOT NULL,
  cpu_core_ms BIGINT NOT NULL,
  memory_mib_s BIGINT NOT NULL,
  PRIMARY KEY (month, project_group, resource_group, cluster_id, user_name, gpu_type, outcome)
);
CREATE INDEX usage_monthly_groups ON usage_monthly (month, project_group, cluster_id, attempts, gpu_ms, cpu_core_ms,
  memory_mib_s);
)sql";

// PostgreSQL compares text by the database's locale unless told otherwise;
// the store orders and pages by bytes (COLLATE "C"), so the indices that
// serve ORDER BY ... id must be built on the "C" ordering of id.
constexpr std::string_view kV2Postgres = R"sql(
DROP INDEX tasks_created;
CREATE INDEX tasks_created ON tasks (created_at, id COLLATE "C");
DROP INDEX tasks_group_state_created;
DROP INDEX tasks_group_created;
DROP INDEX tasks_state_created;
DROP INDEX tasks_resource_group_state_created;
DROP INDEX tasks_cluster_state_created;
CREATE INDEX tasks_group_state_created ON tasks (project_group, state, created_at, id COLLATE "C");
CREATE INDEX tasks_group_created ON tasks (project_group, created_at, id COLLATE "C");
CREATE INDEX tasks_state_created ON tasks (state, created_at, id COLLATE "C");
CREATE INDEX tasks_resource_group_state_created ON tasks (resource_group, state, created_at, id COLLATE "C");
CREATE INDEX tasks_cluster_state_created ON tasks (assigned_cluster, state, created_at, id COLLATE "C");
)sql";

// The identity is added to the shared table rather than declared in it, so
// that both backends create the very same columns. BY DEFAULT: the store
// still writes the id explicitly, since the event's document carries it.
constexpr std::string_view kV1Postgres =
    "ALTER TABLE events ALTER COLUMN id ADD GENERATED BY DEFAULT AS IDENTITY (SEQUENCE NAME events_id_seq)";

// Version 3: what the platform watches about itself (model/monitoring.h).
// - cluster_samples: each cluster's history in minute, hour and day buckets
//   (the overview heatmap); every column but the key is a sum, so writers
//   only ever add. Keyed by width first: a query reads one width's range.
// - alerts: each alert whole in `doc`; is_open marks those still pending,
//   firing, or with a delivery to make, the few the alert loop reads on
//   every pass.
// - audit_log: every change made through the API (AuditEntry in `doc`),
//   read newest first, by time or by user.
// - approvals: requests to use a resource group that a project group lists
//   with `approval: required` (model/approval.h), found by their pair.
// On PostgreSQL, usage_monthly_groups (migration 2) goes: it holds the
// counters that every ledger upsert changes, so there no such update can be
// HOT, each adds an index entry, and the planner reads a month's rows from
// the table anyway (an index-only scan needs all-visible pages, which rows
// updated all month are not). At 10 million tasks it had grown to 372 MiB
// beside an 86 MiB table without serving a query. SQLite keeps it: there it
// serves the grouped month reports from the index alone.
constexpr std::string_view kV3 = R"sql(
CREATE TABLE cluster_samples (
  cluster TEXT NOT NULL,
  width_s BIGINT NOT NULL,
  bucket BIGINT NOT NULL,
  samples BIGINT NOT NULL,
  gpus_total BIGINT NOT NULL,
  gpus_allocated BIGINT NOT NULL,
  gpu_util_sum BIGINT NOT NULL,
  gpu_util_devices BIGINT NOT NULL,
  dispatched BIGINT NOT NULL,
  wait_ms BIGINT NOT NULL,
  finished BIGINT NOT NULL,
  failed BIGINT NOT NULL,
  PRIMARY KEY (width_s, bucket, cluster)
);

CREATE TABLE alerts (
  id TEXT PRIMARY KEY,
  fingerprint TEXT NOT NULL,
  state TEXT NOT NULL,
  is_open INTEGER NOT NULL,
  started_at BIGINT NOT NULL,
  updated_at BIGINT NOT NULL,
  doc TEXT NOT NULL
);
CREATE INDEX alerts_open ON alerts (is_open, started_at);
CREATE INDEX alerts_started ON alerts (started_at, id);
CREATE INDEX alerts_state_started ON alerts (state, started_at, id);
CREATE INDEX alerts_closed ON alerts (is_open, updated_at);

CREATE TABLE audit_log (
  id TEXT PRIMARY KEY,
  at BIGINT NOT NULL,
  user_name TEXT NOT NULL,
  doc TEXT NOT NULL
);
CREATE INDEX audit_at ON audit_log (at, id);
CREATE INDEX audit_user_at ON audit_log (user_name, at, id);

CREATE TABLE approvals (
  id TEXT PRIMARY KEY,
  project_group TEXT NOT NULL,
  resource_group TEXT NOT NULL,
  state TEXT NOT NULL,
  created_at BIGINT NOT NULL,
  doc TEXT NOT NULL
);
CREATE INDEX approvals_pair ON approvals (project_group, resource_group, state);
CREATE INDEX approvals_created ON approvals (created_at, id);
)sql";

constexpr std::string_view kV3Postgres = R"sql(
DROP INDEX usage_monthly_groups;
DROP INDEX alerts_started;
DROP INDEX alerts_state_started;
CREATE INDEX alerts_started ON alerts (started_at, id COLLATE "C");
CREATE INDEX alerts_state_started ON alerts (state, started_at, id COLLATE "C");
DROP INDEX audit_at;
DROP INDEX audit_user_at;
CREATE INDEX audit_at ON audit_log (at, id COLLATE "C");
CREATE INDEX audit_user_at ON audit_log (user_name, at, id COLLATE "C");
DROP INDEX approvals_created;
CREATE INDEX approvals_created ON approvals (created_at, id COLLATE "C");
)sql";

// Version 4: measured use (ResourceUseRow), merged per day, project group
// and step, read by project group over a range of days.
constexpr std::string_view kV4 = R"sql(
CREATE TABLE resource_use (
  day BIGINT NOT NULL,
  project_group TEXT NOT NULL,
  step TEXT NOT NULL,
  doc TEXT NOT NULL,
  PRIMARY KEY (day, project_group, step)
);
CREATE INDEX resource_use_group_day ON resource_use (project_group, day);
)sql";

// Version 5: a table that never holds a row. PostgreSQL's event writers and
// the readers that follow events by id lock it (store README, "Event ids");
// SQLite has one writer and never locks it.
constexpr std::string_view kV5 = R"sql(
CREATE TABLE event_gate (
  unused INTEGER
);
)sql";

// Version 6: idempotency keys of submits (IdempotencyRecord), one per user
// and key; the answer is kept as the JSON text answered. Removed by age
// (created_at) after a day.
constexpr std::string_view kV6 = R"sql(
CREATE TABLE idempotency_keys (
  user_name TEXT NOT NULL,
  idempotency_key TEXT NOT NULL,
  request_hash TEXT NOT NULL,
  status INTEGER NOT NULL,
  response TEXT NOT NULL,
  created_at BIGINT NOT NULL,
  PRIMARY KEY (user_name, idempotency_key)
);
CREATE INDEX idempotency_keys_created ON idempotency_keys (created_at);
)sql";

constexpr std::array<Migration, 6> kMigrations{{
    {1, "initial schema", kV1, kV1Postgres},
    {2, "task list indices, usage ledger", kV2, kV2Postgres},
    {3, "cluster history, alerts, audit log, approvals", kV3, kV3Postgres},
    {4, "measured use per step", kV4, ""},
    {5, "event gate (PostgreSQL: ids visible in order without serializing writers)", kV5, ""},
    {6, "idempotency keys of submits", kV6, ""},
}};

}  // namespace

std::span<const Migration> migrations() { return kMigrations; }

int latest_schema_version() { return kMigrations.back().version; }

}  // namespace cp
