// PostgresTx: the shared helpers, and settings, users, tokens, clusters,
// agent credentials, nodes and the named specs (groups, priority classes).
#include "store/postgres/postgres_tx.h"

#include "store/store_error.h"

namespace cp {
namespace {

// The WHERE EXISTS guards make a row for an unknown cluster insert nothing;
// only a cluster deleted by a transaction that committed in between gets as
// far as the foreign key. Either way it is the caller's not_found, as in
// SQLite (here the transaction is over, though: the server aborted it).
Status unknown_cluster_as_not_found(Status status, const std::string& cluster_id) {
  if (!status.ok() && pg::sqlstate(status.error()) == "23503") return errors::not_found("cluster", cluster_id);
  return status;
}

}  // namespace

// ------------------------------------------------------------------ helpers

Result<std::int64_t> PostgresTx::modify(std::string_view sql, const Args& args) {
  if (!writable_) {
    // A bug in the caller, but one that must not corrupt anything: refuse.
    return store_error(500, "write attempted inside Store::read(): " + std::string(sql.substr(0, 60)));
  }
  CP_TRY(send_held());
  wrote_ = true;
  CP_ASSIGN(auto rows, conn_.query(sql, args));
  return rows.affected();
}

Status PostgresTx::exec(std::string_view sql, const Args& args) {
  CP_TRY(modify(sql, args));
  return {};
}

Status PostgresTx::insert(std::string_view sql, const Args& args, std::string_view kind, const std::string& key) {
  if (holding_) {
    constexpr std::string_view kOnConflict = " ON CONFLICT DO NOTHING";
    CP_CHECK(sql.ends_with(kOnConflict), "PostgresTx::insert wants an INSERT ... ON CONFLICT DO NOTHING");
    CP_TRY(send_held());
    wrote_ = true;
    return conn_.defer(sql.substr(0, sql.size() - kOnConflict.size()), args, kind, key);
  }
  CP_ASSIGN(std::int64_t inserted, modify(sql, args));
  if (inserted == 0) return errors::already_exists(std::string(kind), key);
  return {};
}

Status PostgresTx::modify_one(std::string_view sql, const Args& args, std::string_view kind,
                              const std::string& key) {
  CP_ASSIGN(std::int64_t changed, modify(sql, args));
  if (changed == 0) return errors::not_found(std::string(kind), key);
  return {};
}

Status PostgresTx::query(std::string_view sql, const Args& args, const RowFn& on_row) {
  CP_TRY(send_held());
  CP_ASSIGN(auto rows, conn_.query(sql, args));
  for (int i = 0; i < rows.size(); ++i) CP_TRY(on_row(Row{rows, i}));
  return {};
}

Status PostgresTx::insert_for_cluster(std::string_view sql, const Args& args, std::string_view exists_sql,
                                      std::string_view kind, const std::string& key, const std::string& cluster_id) {
  auto inserted = modify(sql, args);
  if (!inserted.ok()) return unknown_cluster_as_not_found(inserted.error(), cluster_id);
  if (inserted.value() > 0) return {};
  // Which of the two stopped it, in SQLite's order: the key is checked
  // before the foreign key.
  CP_ASSIGN(auto existing, conn_.query(exists_sql, {key}));
  if (existing.size() > 0) return errors::already_exists(std::string(kind), key);
  return errors::not_found("cluster", cluster_id);
}

// --------------------------------------------------------------------- meta

Result<Millis> PostgresTx::store_time_ms() {
  Millis now = 0;
  // clock_timestamp(), not now(): the time of this statement, not of BEGIN.
  CP_TRY(query("SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint", {}, [&](const Row& row) -> Status {
    now = row.int64(0);
    return {};
  }));
  return now;
}

Result<std::optional<std::string>> PostgresTx::get_meta(const std::string& key) {
  std::optional<std::string> value;
  CP_TRY(query("SELECT value FROM meta WHERE key = ?", {key}, [&](const Row& row) -> Status {
    value = row.text(0);
    return {};
  }));
  return value;
}

Status PostgresTx::set_meta(const std::string& key, const std::string& value) {
  return exec("INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
              {key, value});
}

// ---------------------------------------------------------- users and tokens

Status PostgresTx::upsert_user(const User& u) {
  return exec(
      "INSERT INTO users (name, doc, created_at) VALUES (?, ?, ?) "
      "ON CONFLICT (name) DO UPDATE SET doc = excluded.doc, created_at = excluded.created_at",
      {u.name, encode_row(u), u.created_at});
}

Result<std::optional<User>> PostgresTx::get_user(const std::string& name) {
  return query_doc<User>("SELECT doc FROM users WHERE name = ?", {name}, "users");
}

Result<std::vector<User>> PostgresTx::list_users() {
  return query_docs<User>("SELECT doc FROM users ORDER BY name COLLATE \"C\"", {}, "users");
}

Status PostgresTx::insert_token(const ApiToken& t) {
  // No conflict target: a clash on the id or on the unique hash is the same 409.
  return insert(
      "INSERT INTO api_tokens (id, hash, user_name, doc, created_at) VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
      {t.id, t.hash, t.user, encode_row(t), t.created_at}, "api token", t.id);
}

Result<std::optional<ApiToken>> PostgresTx::find_token_by_hash(const std::string& hash) {
  return query_doc<ApiToken>("SELECT doc FROM api_tokens WHERE hash = ?", {hash}, "api_tokens");
}

Result<std::vector<ApiToken>> PostgresTx::list_tokens(const std::string& user) {
  return query_docs<ApiToken>(
      "SELECT doc FROM api_tokens WHERE user_name = ? ORDER BY created_at, id COLLATE \"C\"", {user}, "api_tokens");
}

Status PostgresTx::delete_token(const std::string& id) {
  return modify_one("DELETE FROM api_tokens WHERE id = ?", {id}, "api token", id);
}

// ----------------------------------------------------------------- clusters

Status PostgresTx::insert_cluster(const Cluster& c) {
  return insert("INSERT INTO clusters (id, doc, created_at, updated_at) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING",
                {c.id, encode_row(c), c.created_at, c.updated_at}, "cluster", c.id);
}

Status PostgresTx::update_cluster(const Cluster& c) {
  return modify_one("UPDATE clusters SET doc = ?, created_at = ?, updated_at = ? WHERE id = ?",
                    {encode_row(c), c.created_at, c.updated_at, c.id}, "cluster", c.id);
}

Result<std::optional<Cluster>> PostgresTx::get_cluster(const std::string& id) {
  return query_doc<Cluster>("SELECT doc FROM clusters WHERE id = ?", {id}, "clusters");
}

Result<std::vector<Cluster>> PostgresTx::list_clusters() {
  return query_docs<Cluster>("SELECT doc FROM clusters ORDER BY id COLLATE \"C\"", {}, "clusters");
}

Status PostgresTx::delete_cluster(const std::string& id) {
  // Children first: their foreign keys forbid the other order. Attempts and
  // events that name the cluster stay; they are history.
  CP_TRY(exec("DELETE FROM nodes WHERE cluster_id = ?", {id}));
  CP_TRY(exec("DELETE FROM bootstrap_tokens WHERE cluster_id = ?", {id}));
  CP_TRY(exec("DELETE FROM agent_credentials WHERE cluster_id = ?", {id}));
  return modify_one("DELETE FROM clusters WHERE id = ?", {id}, "cluster", id);
}

// ------------------------------------- bootstrap tokens, agent credentials

Status PostgresTx::insert_bootstrap_token(const std::string& hash, const std::string& cluster_id, Millis created_at,
                                          Millis expires_at) {
  return insert_for_cluster(
      "INSERT INTO bootstrap_tokens (hash, cluster_id, created_at, expires_at) SELECT ?, ?, ?, ? "
      "WHERE EXISTS (SELECT 1 FROM clusters WHERE id = ?) ON CONFLICT DO NOTHING",
      {hash, cluster_id, created_at, expires_at, cluster_id}, "SELECT 1 FROM bootstrap_tokens WHERE hash = ?",
      "bootstrap token", hash, cluster_id);
}

Result<std::optional<std::string>> PostgresTx::consume_bootstrap_token(const std::string& hash, Millis now) {
  // One statement does SQLite's select-then-delete: an unexpired token goes
  // and names its cluster; an expired one stays and, like an unknown or a
  // used one, looks like nothing to the caller. Two agents racing with the
  // same token: the second waits for the first's row lock and, once that
  // committed, is rolled back (40001) and retried, and then finds nothing.
  if (!writable_) return store_error(500, "write attempted inside Store::read(): consume_bootstrap_token");
  std::optional<std::string> cluster_id;
  CP_TRY(query("DELETE FROM bootstrap_tokens WHERE hash = ? AND expires_at > ? RETURNING cluster_id", {hash, now},
               [&](const Row& row) -> Status {
                 cluster_id = row.text(0);
                 return {};
               }));
  return cluster_id;
}

Status PostgresTx::insert_agent_credential(const AgentCredential& c) {
  return insert_for_cluster(
      "INSERT INTO agent_credentials (hash, cluster_id, created_at, expires_at) SELECT ?, ?, ?, ? "
      "WHERE EXISTS (SELECT 1 FROM clusters WHERE id = ?) ON CONFLICT DO NOTHING",
      {c.hash, c.cluster_id, c.created_at, c.expires_at, c.cluster_id},
      "SELECT 1 FROM agent_credentials WHERE hash = ?", "agent credential", c.hash, c.cluster_id);
}

Result<std::optional<AgentCredential>> PostgresTx::find_agent_credential(const std::string& hash) {
  std::optional<AgentCredential> found;
  CP_TRY(query("SELECT hash, cluster_id, created_at, expires_at FROM agent_credentials WHERE hash = ?", {hash},
               [&](const Row& row) -> Status {
                 found = AgentCredential{row.text(0), row.text(1), row.int64(2), row.int64(3)};
                 return {};
               }));
  return found;
}

Status PostgresTx::delete_agent_credentials_before(const std::string& cluster_id, Millis expires_before) {
  return exec("DELETE FROM agent_credentials WHERE cluster_id = ? AND expires_at < ?", {cluster_id, expires_before});
}

// -------------------------------------------------------------------- nodes

Status PostgresTx::upsert_node(const Node& n) {
  // The doc carries what the agent reports. label_overrides and maintenance
  // go to their own columns, taken from `n` only when the row is new: on a
  // conflict the UPDATE leaves them alone, so an agent's sync can never undo
  // an admin's decision. Nothing inserted or updated: the cluster is unknown.
  Node reported = n;
  reported.label_overrides.clear();
  reported.maintenance = false;
  return unknown_cluster_as_not_found(modify_one(
      "INSERT INTO nodes (cluster_id, name, doc, label_overrides, maintenance, updated_at) "
      "SELECT ?, ?, ?, ?, ?, ? WHERE EXISTS (SELECT 1 FROM clusters WHERE id = ?) "
      "ON CONFLICT (cluster_id, name) DO UPDATE SET doc = excluded.doc, updated_at = excluded.updated_at",
      {n.cluster_id, n.name, encode_row(reported), encode_row(n.label_overrides), std::int64_t{n.maintenance ? 1 : 0},
       n.updated_at, n.cluster_id},
      "cluster", n.cluster_id), n.cluster_id);
}

Status PostgresTx::set_node_admin(const std::string& cluster_id, const std::string& name, const Labels& overrides,
                                  bool maintenance) {
  return modify_one("UPDATE nodes SET label_overrides = ?, maintenance = ? WHERE cluster_id = ? AND name = ?",
                    {encode_row(overrides), std::int64_t{maintenance ? 1 : 0}, cluster_id, name}, "node",
                    cluster_id + "/" + name);
}

Result<std::vector<Node>> PostgresTx::query_nodes(std::string_view sql, const Args& args) {
  std::vector<Node> nodes;
  CP_TRY(query(sql, args, [&](const Row& row) -> Status {
    CP_ASSIGN(Node node, decode_row<Node>(row.text(0), "nodes"));
    CP_ASSIGN(node.label_overrides, decode_row<Labels>(row.text(1), "nodes"));
    node.maintenance = row.int64(2) != 0;
    nodes.push_back(std::move(node));
    return {};
  }));
  return nodes;
}

Result<std::optional<Node>> PostgresTx::get_node(const std::string& cluster_id, const std::string& name) {
  CP_ASSIGN(auto nodes, query_nodes("SELECT doc, label_overrides, maintenance FROM nodes "
                                    "WHERE cluster_id = ? AND name = ?",
                                    {cluster_id, name}));
  if (nodes.empty()) return std::optional<Node>();
  return std::optional<Node>(std::move(nodes.front()));
}

Result<std::vector<Node>> PostgresTx::list_nodes(const std::string& cluster_id) {
  if (cluster_id.empty()) {
    return query_nodes(
        "SELECT doc, label_overrides, maintenance FROM nodes ORDER BY cluster_id COLLATE \"C\", name COLLATE \"C\"",
        {});
  }
  return query_nodes(
      "SELECT doc, label_overrides, maintenance FROM nodes WHERE cluster_id = ? ORDER BY name COLLATE \"C\"",
      {cluster_id});
}

Status PostgresTx::delete_node(const std::string& cluster_id, const std::string& name) {
  return modify_one("DELETE FROM nodes WHERE cluster_id = ? AND name = ?", {cluster_id, name}, "node",
                    cluster_id + "/" + name);
}

// ------------------------------------------------ groups, priority classes

// `table` is always one of our literals below, never input, so building the
// SQL text from it is safe; each table still gets its own prepared statement.
template <class T>
Status PostgresTx::upsert_spec(std::string_view table, const T& value, Millis created_at, Millis updated_at) {
  std::string sql = "INSERT INTO " + std::string(table) +
                    " (name, spec, created_at, updated_at) VALUES (?, ?, ?, ?) ON CONFLICT (name) DO UPDATE SET "
                    "spec = excluded.spec, created_at = excluded.created_at, updated_at = excluded.updated_at";
  if (shared_ != nullptr) shared_->off = true;  // read again from here on: this transaction changed them
  return exec(sql, {value.name, encode_row(value), created_at, updated_at});
}

template <class T>
Result<std::optional<T>> PostgresTx::get_spec(std::string_view table, const std::string& name) {
  std::string sql = "SELECT spec FROM " + std::string(table) + " WHERE name = ?";
  if (shared_ == nullptr || shared_->off) return query_doc<T>(sql, {name}, table);
  // The group's transaction read it already: its snapshot gives the same row.
  std::string key = std::string(table) + '\0' + name;
  auto it = shared_->specs.find(key);
  if (it == shared_->specs.end()) {
    std::optional<std::string> text;
    CP_TRY(query(sql, {name}, [&](const Row& row) -> Status {
      text = row.text(0);
      return {};
    }));
    it = shared_->specs.emplace(std::move(key), std::move(text)).first;
  }
  if (!it->second) return std::optional<T>();
  CP_ASSIGN(T value, decode_row<T>(*it->second, table));
  return std::optional<T>(std::move(value));
}

template <class T>
Result<std::vector<T>> PostgresTx::list_specs(std::string_view table) {
  return query_docs<T>("SELECT spec FROM " + std::string(table) + " ORDER BY name COLLATE \"C\"", {}, table);
}

Status PostgresTx::delete_spec(std::string_view table, std::string_view kind, const std::string& name) {
  if (shared_ != nullptr) shared_->off = true;
  return modify_one("DELETE FROM " + std::string(table) + " WHERE name = ?", {name}, kind, name);
}

Status PostgresTx::upsert_resource_group(const ResourceGroup& rg) {
  return upsert_spec("resource_groups", rg, rg.created_at, rg.updated_at);
}
Result<std::optional<ResourceGroup>> PostgresTx::get_resource_group(const std::string& name) {
  return get_spec<ResourceGroup>("resource_groups", name);
}
Result<std::vector<ResourceGroup>> PostgresTx::list_resource_groups() {
  return list_specs<ResourceGroup>("resource_groups");
}
Status PostgresTx::delete_resource_group(const std::string& name) {
  return delete_spec("resource_groups", "resource group", name);
}

Status PostgresTx::upsert_project_group(const ProjectGroup& pg) {
  return upsert_spec("project_groups", pg, pg.created_at, pg.updated_at);
}
Result<std::optional<ProjectGroup>> PostgresTx::get_project_group(const std::string& name) {
  return get_spec<ProjectGroup>("project_groups", name);
}
Result<std::vector<ProjectGroup>> PostgresTx::list_project_groups() {
  return list_specs<ProjectGroup>("project_groups");
}
Status PostgresTx::delete_project_group(const std::string& name) {
  return delete_spec("project_groups", "project group", name);
}

// A priority class has no updated_at of its own; the column repeats created_at.
Status PostgresTx::upsert_priority_class(const PriorityClass& pc) {
  return upsert_spec("priority_classes", pc, pc.created_at, pc.created_at);
}
Result<std::optional<PriorityClass>> PostgresTx::get_priority_class(const std::string& name) {
  return get_spec<PriorityClass>("priority_classes", name);
}
Result<std::vector<PriorityClass>> PostgresTx::list_priority_classes() {
  return list_specs<PriorityClass>("priority_classes");
}
Status PostgresTx::delete_priority_class(const std::string& name) {
  return delete_spec("priority_classes", "priority class", name);
}

}  // namespace cp
