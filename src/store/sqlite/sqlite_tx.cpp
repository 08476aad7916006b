// SqliteTx: the shared helpers, and settings, users, tokens, clusters,
// agent credentials, nodes and the named specs (groups, priority classes).
#include "store/sqlite/sqlite_tx.h"

#include <unordered_map>

#include "store/store_error.h"

namespace cp {
namespace {

bool is_unique_violation(const Error& e) {
  int code = sqlite::sqlite_code(e);
  return code == SQLITE_CONSTRAINT_PRIMARYKEY || code == SQLITE_CONSTRAINT_UNIQUE;
}

bool is_foreign_key_violation(const Error& e) { return sqlite::sqlite_code(e) == SQLITE_CONSTRAINT_FOREIGNKEY; }

// Rows that belong to a cluster name it by a foreign key; writing one for an
// unknown cluster is the caller's not_found, not a database failure.
Status unknown_cluster_as_not_found(Status status, const std::string& cluster_id) {
  if (!status.ok() && is_foreign_key_violation(status.error())) return errors::not_found("cluster", cluster_id);
  return status;
}

}  // namespace

// ------------------------------------------------------------------ helpers

Result<std::int64_t> SqliteTx::modify(std::string_view sql, const Args& args) {
  if (!writable_) {
    // A bug in the caller, but one that must not corrupt anything: refuse.
    return store_error(500, "write attempted inside Store::read(): " + std::string(sql.substr(0, 60)));
  }
  CP_ASSIGN(auto stmt, conn_.prepare(sql));
  CP_TRY(stmt.bind(args));
  CP_TRY(stmt.run());
  return conn_.changes();
}

Status SqliteTx::exec(std::string_view sql, const Args& args) {
  CP_TRY(modify(sql, args));
  return {};
}

Status SqliteTx::insert(std::string_view sql, const Args& args, std::string_view kind, const std::string& key) {
  auto changed = modify(sql, args);
  if (!changed.ok()) {
    if (is_unique_violation(changed.error())) return errors::already_exists(std::string(kind), key);
    return changed.error();
  }
  return {};
}

Status SqliteTx::modify_one(std::string_view sql, const Args& args, std::string_view kind, const std::string& key) {
  CP_ASSIGN(std::int64_t changed, modify(sql, args));
  if (changed == 0) return errors::not_found(std::string(kind), key);
  return {};
}

Status SqliteTx::query(std::string_view sql, const Args& args, const RowFn& on_row) {
  CP_ASSIGN(auto stmt, conn_.prepare(sql));
  CP_TRY(stmt.bind(args));
  while (true) {
    CP_ASSIGN(bool row, stmt.step());
    if (!row) return {};
    CP_TRY(on_row(stmt));
  }
}

// --------------------------------------------------------------------- meta

Result<std::optional<std::string>> SqliteTx::get_meta(const std::string& key) {
  std::optional<std::string> value;
  CP_TRY(query("SELECT value FROM meta WHERE key = ?", {key}, [&](const sqlite::Statement& row) -> Status {
    value = row.column_text(0);
    return {};
  }));
  return value;
}

Status SqliteTx::set_meta(const std::string& key, const std::string& value) {
  return exec("INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
              {key, value});
}

// ---------------------------------------------------------- users and tokens

Status SqliteTx::upsert_user(const User& u) {
  return exec(
      "INSERT INTO users (name, doc, created_at) VALUES (?, ?, ?) "
      "ON CONFLICT (name) DO UPDATE SET doc = excluded.doc, created_at = excluded.created_at",
      {u.name, encode_row(u), u.created_at});
}

Result<std::optional<User>> SqliteTx::get_user(const std::string& name) {
  return query_doc<User>("SELECT doc FROM users WHERE name = ?", {name}, "users");
}

Result<std::vector<User>> SqliteTx::list_users() {
  return query_docs<User>("SELECT doc FROM users ORDER BY name", {}, "users");
}

Status SqliteTx::insert_token(const ApiToken& t) {
  return insert("INSERT INTO api_tokens (id, hash, user_name, doc, created_at) VALUES (?, ?, ?, ?, ?)",
                {t.id, t.hash, t.user, encode_row(t), t.created_at}, "api token", t.id);
}

Result<std::optional<ApiToken>> SqliteTx::find_token_by_hash(const std::string& hash) {
  return query_doc<ApiToken>("SELECT doc FROM api_tokens WHERE hash = ?", {hash}, "api_tokens");
}

Result<std::vector<ApiToken>> SqliteTx::list_tokens(const std::string& user) {
  return query_docs<ApiToken>("SELECT doc FROM api_tokens WHERE user_name = ? ORDER BY created_at, id", {user},
                              "api_tokens");
}

Status SqliteTx::delete_token(const std::string& id) {
  return modify_one("DELETE FROM api_tokens WHERE id = ?", {id}, "api token", id);
}

// ----------------------------------------------------------------- clusters

Status SqliteTx::insert_cluster(const Cluster& c) {
  return insert("INSERT INTO clusters (id, doc, created_at, updated_at) VALUES (?, ?, ?, ?)",
                {c.id, encode_row(c), c.created_at, c.updated_at}, "cluster", c.id);
}

Status SqliteTx::update_cluster(const Cluster& c) {
  return modify_one("UPDATE clusters SET doc = ?, created_at = ?, updated_at = ? WHERE id = ?",
                    {encode_row(c), c.created_at, c.updated_at, c.id}, "cluster", c.id);
}

Result<std::optional<Cluster>> SqliteTx::get_cluster(const std::string& id) {
  return query_doc<Cluster>("SELECT doc FROM clusters WHERE id = ?", {id}, "clusters");
}

Result<std::vector<Cluster>> SqliteTx::list_clusters() {
  return query_docs<Cluster>("SELECT doc FROM clusters ORDER BY id", {}, "clusters");
}

Status SqliteTx::delete_cluster(const std::string& id) {
  // Children first: their foreign keys forbid the other order. Attempts and
  // events that name the cluster stay; they are history.
  CP_TRY(exec("DELETE FROM nodes WHERE cluster_id = ?", {id}));
  CP_TRY(exec("DELETE FROM bootstrap_tokens WHERE cluster_id = ?", {id}));
  CP_TRY(exec("DELETE FROM agent_credentials WHERE cluster_id = ?", {id}));
  return modify_one("DELETE FROM clusters WHERE id = ?", {id}, "cluster", id);
}

// ------------------------------------- bootstrap tokens, agent credentials

Status SqliteTx::insert_bootstrap_token(const std::string& hash, const std::string& cluster_id, Millis created_at,
                                        Millis expires_at) {
  return unknown_cluster_as_not_found(
      insert("INSERT INTO bootstrap_tokens (hash, cluster_id, created_at, expires_at) VALUES (?, ?, ?, ?)",
             {hash, cluster_id, created_at, expires_at}, "bootstrap token", hash),
      cluster_id);
}

Result<std::optional<std::string>> SqliteTx::consume_bootstrap_token(const std::string& hash, Millis now) {
  std::optional<std::string> cluster_id;
  CP_TRY(query("SELECT cluster_id FROM bootstrap_tokens WHERE hash = ? AND expires_at > ?", {hash, now},
               [&](const sqlite::Statement& row) -> Status {
                 cluster_id = row.column_text(0);
                 return {};
               }));
  if (!cluster_id) return cluster_id;  // unknown, used, or expired: all look the same to the caller
  // One use only. Inside the caller's write transaction, so two agents
  // racing with the same token cannot both get here.
  CP_TRY(exec("DELETE FROM bootstrap_tokens WHERE hash = ?", {hash}));
  return cluster_id;
}

Status SqliteTx::insert_agent_credential(const AgentCredential& c) {
  return unknown_cluster_as_not_found(
      insert("INSERT INTO agent_credentials (hash, cluster_id, created_at, expires_at) VALUES (?, ?, ?, ?)",
             {c.hash, c.cluster_id, c.created_at, c.expires_at}, "agent credential", c.hash),
      c.cluster_id);
}

Result<std::optional<AgentCredential>> SqliteTx::find_agent_credential(const std::string& hash) {
  std::optional<AgentCredential> found;
  CP_TRY(query("SELECT hash, cluster_id, created_at, expires_at FROM agent_credentials WHERE hash = ?", {hash},
               [&](const sqlite::Statement& row) -> Status {
                 found = AgentCredential{row.column_text(0), row.column_text(1), row.column_int64(2),
                                         row.column_int64(3)};
                 return {};
               }));
  return found;
}

Status SqliteTx::delete_agent_credentials_before(const std::string& cluster_id, Millis expires_before) {
  return exec("DELETE FROM agent_credentials WHERE cluster_id = ? AND expires_at < ?", {cluster_id, expires_before});
}

// -------------------------------------------------------------------- nodes

Status SqliteTx::upsert_node(const Node& n) {
  // The doc carries what the agent reports. label_overrides and maintenance
  // go to their own columns, taken from `n` only when the row is new: on a
  // conflict the UPDATE leaves them alone, so an agent's sync can never undo
  // an admin's decision.
  Node reported = n;
  reported.label_overrides.clear();
  reported.maintenance = false;
  return unknown_cluster_as_not_found(
      exec("INSERT INTO nodes (cluster_id, name, doc, label_overrides, maintenance, updated_at) "
           "VALUES (?, ?, ?, ?, ?, ?) "
           "ON CONFLICT (cluster_id, name) DO UPDATE SET doc = excluded.doc, updated_at = excluded.updated_at",
           {n.cluster_id, n.name, encode_row(reported), encode_row(n.label_overrides),
            std::int64_t{n.maintenance ? 1 : 0}, n.updated_at}),
      n.cluster_id);
}

Status SqliteTx::set_node_admin(const std::string& cluster_id, const std::string& name, const Labels& overrides,
                                bool maintenance) {
  return modify_one("UPDATE nodes SET label_overrides = ?, maintenance = ? WHERE cluster_id = ? AND name = ?",
                    {encode_row(overrides), std::int64_t{maintenance ? 1 : 0}, cluster_id, name}, "node",
                    cluster_id + "/" + name);
}

Result<std::vector<Node>> SqliteTx::query_nodes(std::string_view sql, const Args& args) {
  std::vector<Node> nodes;
  CP_TRY(query(sql, args, [&](const sqlite::Statement& row) -> Status {
    CP_ASSIGN(Node node, decode_row<Node>(row.column_text(0), "nodes"));
    CP_ASSIGN(node.label_overrides, decode_row<Labels>(row.column_text(1), "nodes"));
    node.maintenance = row.column_int64(2) != 0;
    nodes.push_back(std::move(node));
    return {};
  }));
  return nodes;
}

Result<std::optional<Node>> SqliteTx::get_node(const std::string& cluster_id, const std::string& name) {
  CP_ASSIGN(auto nodes, query_nodes("SELECT doc, label_overrides, maintenance FROM nodes "
                                    "WHERE cluster_id = ? AND name = ?",
                                    {cluster_id, name}));
  if (nodes.empty()) return std::optional<Node>();
  return std::optional<Node>(std::move(nodes.front()));
}

Result<std::vector<Node>> SqliteTx::list_nodes(const std::string& cluster_id) {
  if (cluster_id.empty()) {
    return query_nodes("SELECT doc, label_overrides, maintenance FROM nodes ORDER BY cluster_id, name", {});
  }
  return query_nodes("SELECT doc, label_overrides, maintenance FROM nodes WHERE cluster_id = ? ORDER BY name",
                     {cluster_id});
}

Status SqliteTx::delete_node(const std::string& cluster_id, const std::string& name) {
  return modify_one("DELETE FROM nodes WHERE cluster_id = ? AND name = ?", {cluster_id, name}, "node",
                    cluster_id + "/" + name);
}

// ------------------------------------------------ groups, priority classes

// `table` is always one of our literals below, never input, so building the
// SQL text from it is safe; each table still gets its own cached statement.
template <class T>
Status SqliteTx::upsert_spec(std::string_view table, const T& value, Millis created_at, Millis updated_at) {
  std::string sql = "INSERT INTO " + std::string(table) +
                    " (name, spec, created_at, updated_at) VALUES (?, ?, ?, ?) ON CONFLICT (name) DO UPDATE SET "
                    "spec = excluded.spec, created_at = excluded.created_at, updated_at = excluded.updated_at";
  return exec(sql, {value.name, encode_row(value), created_at, updated_at});
}

namespace {

// The documents get_spec decoded last on this thread, by table and name,
// each with the stored text it came from. A submit reads its project and
// resource group, the same few rows every time: a hit costs a compare and a
// copy instead of a JSON parse (a sixth of the writer's time went to
// decoding). Only ever used when the stored text is the same.
template <class T>
std::unordered_map<std::string, std::pair<std::string, T>>& decoded_specs() {
  thread_local std::unordered_map<std::string, std::pair<std::string, T>> cache;
  return cache;
}
constexpr std::size_t kDecodedSpecsKept = 64;  // per type and thread; groups are few

}  // namespace

template <class T>
Result<std::optional<T>> SqliteTx::get_spec(std::string_view table, const std::string& name) {
  std::optional<T> out;
  CP_TRY(query("SELECT spec FROM " + std::string(table) + " WHERE name = ?", {name},
               [&](const sqlite::Statement& row) -> Status {
                 std::string text = row.column_text(0);
                 auto& cache = decoded_specs<T>();
                 std::string key(table);
                 key += '\0';
                 key += name;
                 if (auto it = cache.find(key); it != cache.end() && it->second.first == text) {
                   out = it->second.second;
                   return {};
                 }
                 CP_ASSIGN(T value, decode_row<T>(text, table));
                 if (cache.size() >= kDecodedSpecsKept) cache.clear();
                 cache.insert_or_assign(std::move(key), std::pair<std::string, T>(std::move(text), value));
                 out = std::move(value);
                 return {};
               }));
  return out;
}

template <class T>
Result<std::vector<T>> SqliteTx::list_specs(std::string_view table) {
  return query_docs<T>("SELECT spec FROM " + std::string(table) + " ORDER BY name", {}, table);
}

Status SqliteTx::delete_spec(std::string_view table, std::string_view kind, const std::string& name) {
  return modify_one("DELETE FROM " + std::string(table) + " WHERE name = ?", {name}, kind, name);
}

Status SqliteTx::upsert_resource_group(const ResourceGroup& rg) {
  return upsert_spec("resource_groups", rg, rg.created_at, rg.updated_at);
}
Result<std::optional<ResourceGroup>> SqliteTx::get_resource_group(const std::string& name) {
  return get_spec<ResourceGroup>("resource_groups", name);
}
Result<std::vector<ResourceGroup>> SqliteTx::list_resource_groups() {
  return list_specs<ResourceGroup>("resource_groups");
}
Status SqliteTx::delete_resource_group(const std::string& name) {
  return delete_spec("resource_groups", "resource group", name);
}

Status SqliteTx::upsert_project_group(const ProjectGroup& pg) {
  return upsert_spec("project_groups", pg, pg.created_at, pg.updated_at);
}
Result<std::optional<ProjectGroup>> SqliteTx::get_project_group(const std::string& name) {
  return get_spec<ProjectGroup>("project_groups", name);
}
Result<std::vector<ProjectGroup>> SqliteTx::list_project_groups() { return list_specs<ProjectGroup>("project_groups"); }
Status SqliteTx::delete_project_group(const std::string& name) {
  return delete_spec("project_groups", "project group", name);
}

// A priority class has no updated_at of its own; the column repeats created_at.
Status SqliteTx::upsert_priority_class(const PriorityClass& pc) {
  return upsert_spec("priority_classes", pc, pc.created_at, pc.created_at);
}
Result<std::optional<PriorityClass>> SqliteTx::get_priority_class(const std::string& name) {
  return get_spec<PriorityClass>("priority_classes", name);
}
Result<std::vector<PriorityClass>> SqliteTx::list_priority_classes() {
  return list_specs<PriorityClass>("priority_classes");
}
Status SqliteTx::delete_priority_class(const std::string& name) {
  return delete_spec("priority_classes", "priority class", name);
}

}  // namespace cp
