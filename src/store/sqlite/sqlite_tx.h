// SqliteTx: the Tx of SqliteStore, alive for one transaction body. The store
// has already run BEGIN and holds its mutex; this class only reads and writes
// rows. Methods are split by concept over sqlite_tx.cpp (settings, users,
// clusters, nodes, groups) and sqlite_tx_tasks.cpp (pipelines, tasks,
// attempts, events).
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "store/row_codec.h"
#include "store/sqlite/sqlite_connection.h"
#include "store/sql_tx.h"
#include "store/store.h"

namespace cp {

class SqliteTx final : public SqlTx {
 public:
  SqliteTx(sqlite::Connection& conn, bool writable) : conn_(conn), writable_(writable) {}
  // A body of a group commit: `earlier`, the tasks the bodies before it wrote.
  SqliteTx(sqlite::Connection& conn, const std::unordered_set<std::string>& earlier)
      : conn_(conn), writable_(true) {
    set_earlier_tasks(&earlier);
  }
  bool journal_is_current() const override { return writable_; }

  Result<std::optional<std::string>> get_meta(const std::string& key) override;
  Status set_meta(const std::string& key, const std::string& value) override;

  Status upsert_user(const User& u) override;
  Result<std::optional<User>> get_user(const std::string& name) override;
  Result<std::vector<User>> list_users() override;
  Status insert_token(const ApiToken& t) override;
  Result<std::optional<ApiToken>> find_token_by_hash(const std::string& hash) override;
  Result<std::vector<ApiToken>> list_tokens(const std::string& user) override;
  Status delete_token(const std::string& id) override;

  Status insert_cluster(const Cluster& c) override;
  Status update_cluster(const Cluster& c) override;
  Result<std::optional<Cluster>> get_cluster(const std::string& id) override;
  Result<std::vector<Cluster>> list_clusters() override;
  Status delete_cluster(const std::string& id) override;

  Status insert_bootstrap_token(const std::string& hash, const std::string& cluster_id, Millis created_at,
                                Millis expires_at) override;
  Result<std::optional<std::string>> consume_bootstrap_token(const std::string& hash, Millis now) override;
  Status insert_agent_credential(const AgentCredential& c) override;
  Result<std::optional<AgentCredential>> find_agent_credential(const std::string& hash) override;
  Status delete_agent_credentials_before(const std::string& cluster_id, Millis expires_before) override;

  Status upsert_node(const Node& n) override;
  Status set_node_admin(const std::string& cluster_id, const std::string& name, const Labels& overrides,
                        bool maintenance) override;
  Result<std::optional<Node>> get_node(const std::string& cluster_id, const std::string& name) override;
  Result<std::vector<Node>> list_nodes(const std::string& cluster_id) override;
  Status delete_node(const std::string& cluster_id, const std::string& name) override;

  Status upsert_resource_group(const ResourceGroup& rg) override;
  Result<std::optional<ResourceGroup>> get_resource_group(const std::string& name) override;
  Result<std::vector<ResourceGroup>> list_resource_groups() override;
  Status delete_resource_group(const std::string& name) override;
  Status upsert_project_group(const ProjectGroup& pg) override;
  Result<std::optional<ProjectGroup>> get_project_group(const std::string& name) override;
  Result<std::vector<ProjectGroup>> list_project_groups() override;
  Status delete_project_group(const std::string& name) override;
  Status upsert_priority_class(const PriorityClass& pc) override;
  Result<std::optional<PriorityClass>> get_priority_class(const std::string& name) override;
  Result<std::vector<PriorityClass>> list_priority_classes() override;
  Status delete_priority_class(const std::string& name) override;

  Status insert_pipeline(const Pipeline& p) override;
  Result<std::optional<Pipeline>> get_pipeline(const std::string& id) override;
  Status insert_task(const Task& t) override;
  Status update_task(const Task& t) override;
  Result<std::optional<Task>> get_task(const std::string& id) override;
  Result<TaskPage> list_tasks(const TaskQuery& q) override;
  Result<std::vector<Task>> tasks_in_states(const std::set<TaskState>& states) override;
  Result<std::vector<Task>> tasks_of_pipeline(const std::string& pipeline_id) override;
  Result<std::vector<std::tuple<std::string, TaskState, std::int64_t>>> count_tasks() override;

  Status insert_attempt(const Attempt& a) override;
  Status update_attempt(const Attempt& a) override;
  Result<std::optional<Attempt>> get_attempt(const std::string& id) override;
  Result<std::vector<Attempt>> attempts_of_task(const std::string& task_id) override;
  Result<std::vector<Attempt>> active_attempts(const std::string& cluster_id) override;

  Result<std::int64_t> append_event(const Event& e) override;


  Status delete_task(const std::string& id) override;

 protected:
  Result<std::int64_t> run_modify(const sql::Statement& s) override;
  Status run_query(const sql::Statement& s, const SqlRowFn& on_row) override;
  const sql::Dialect& dialect() const override;

 private:
  using Args = std::vector<sqlite::SqlValue>;
  using RowFn = std::function<Status(const sqlite::Statement&)>;

  // INSERT, UPDATE or DELETE; returns the number of rows it changed. The one
  // door for writes, so a write inside read() is refused here.
  Result<std::int64_t> modify(std::string_view sql, const Args& args);
  Status exec(std::string_view sql, const Args& args);  // modify(), count not needed
  // An INSERT whose primary key or unique index clash means the object
  // exists already: 409 already_exists naming `kind` and `key`.
  Status insert(std::string_view sql, const Args& args, std::string_view kind, const std::string& key);
  // An UPDATE or DELETE of one object by key: 404 not_found if there is none.
  Status modify_one(std::string_view sql, const Args& args, std::string_view kind, const std::string& key);
  // Calls on_row for every row of a SELECT.
  Status query(std::string_view sql, const Args& args, const RowFn& on_row);

  // SELECTs whose first column is a JSON document of T (see row_codec.h).
  template <class T>
  Result<std::vector<T>> query_docs(std::string_view sql, const Args& args, std::string_view table) {
    std::vector<T> out;
    CP_TRY(query(sql, args, [&](const sqlite::Statement& row) -> Status {
      CP_ASSIGN(T value, decode_row<T>(row.column_text(0), table));
      out.push_back(std::move(value));
      return {};
    }));
    return out;
  }
  template <class T>
  Result<std::optional<T>> query_doc(std::string_view sql, const Args& args, std::string_view table) {
    CP_ASSIGN(auto all, query_docs<T>(sql, args, table));
    if (all.empty()) return std::optional<T>();
    return std::optional<T>(std::move(all.front()));
  }

  // Resource groups, project groups and priority classes share one shape:
  // (name, spec, created_at, updated_at) in the table `table`.
  template <class T>
  Status upsert_spec(std::string_view table, const T& value, Millis created_at, Millis updated_at);
  template <class T>
  Result<std::optional<T>> get_spec(std::string_view table, const std::string& name);
  template <class T>
  Result<std::vector<T>> list_specs(std::string_view table);
  Status delete_spec(std::string_view table, std::string_view kind, const std::string& name);

  // Node rows keep the admin-owned fields in their own columns.
  Result<std::vector<Node>> query_nodes(std::string_view sql, const Args& args);

  sqlite::Connection& conn_;
  bool writable_;
};

}  // namespace cp
