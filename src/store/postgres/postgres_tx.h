// PostgresTx: the Tx of PostgresStore, alive for one transaction body. The
// store has already run BEGIN (and passed the writer gate) on a pooled
// connection; this class only reads and writes rows. Methods are split like
// SqliteTx's: postgres_tx.cpp (settings, users, clusters, nodes, groups) and
// postgres_tx_tasks.cpp (pipelines, tasks, attempts, events).
//
// The SQL follows sqlite_tx*.cpp statement for statement, with three
// differences, each for the same observable behaviour:
// - Text is ordered and compared with COLLATE "C" (bytes, as SQLite's
//   BINARY), whatever collation the database was created with.
// - A statement that fails aborts a PostgreSQL transaction, where SQLite's
//   goes on. So the expected failures are asked instead of provoked: INSERT
//   ... ON CONFLICT DO NOTHING and "no row inserted" means already_exists;
//   rows that name a cluster are inserted only WHERE EXISTS that cluster.
// - Event ids come from a sequence. Writers hold a shared lock on
//   event_gate to commit, and a read that lists events first waits for them
//   (append_event, list_events).
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <optional>
#include <unordered_map>
#include <vector>

#include "store/postgres/pg_connection.h"
#include "store/row_codec.h"
#include "store/sql_tx.h"
#include "store/store.h"

namespace cp {

namespace pg {
// Advisory lock key (pg_advisory_xact_lock) of migrations, per database: "cp_migra".
inline constexpr std::int64_t kMigrationLockKey = 0x63705f6d69677261;
}  // namespace pg

class PostgresTx final : public SqlTx {
 public:
  // Reads that the bodies of one group commit share (PostgresStore::
  // commit_group): a project group, resource group or priority class read
  // once in the transaction is the same row for every later body, whose
  // snapshot it is. Off once a body writes one of them.
  struct SharedReads {
    bool off = false;
    std::unordered_map<std::string, std::optional<std::string>> specs;  // "table\0name" -> spec, or none
  };

  // Constructed right after BEGIN, before the body sends anything.
  PostgresTx(pg::Connection& conn, bool writable, SharedReads* shared = nullptr)
      : conn_(conn), writable_(writable), calls_at_begin_(conn.calls()), shared_(shared) {}

  Result<std::optional<std::string>> get_meta(const std::string& key) override;
  Result<Millis> store_time_ms() override;
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
  Result<std::vector<Event>> list_events(const EventQuery& q) override;

  // From here on, plain INSERTs and the held rows go to the server with the
  // body's next read or with COMMIT, in one round trip (pg::Connection::defer).
  void hold_writes() override { holding_ = writable_; }
  // Passes what hold_writes() held back on to the connection: one INSERT of
  // the attempts, one UPDATE of the tasks (sent at once: it must find every
  // task), one INSERT of the events. Every statement of this Tx calls it
  // first, so rows reach the server in the order they were written;
  // PostgresStore calls it before COMMIT.
  Status send_held();
  // Whether the body wrote anything, sent or held: a grouped write that
  // fails after writing leaves rows that only a savepoint could undo
  // (PostgresStore::commit_group).
  bool wrote() const {
    return wrote_ || !held_attempts_.empty() || !held_tasks_.empty() || !held_events_.empty();
  }


  Status delete_task(const std::string& id) override;

 protected:
  Result<std::int64_t> run_modify(const sql::Statement& s) override;
  Status run_insert(const sql::Statement& s, std::string_view kind, const std::string& key) override;
  Status run_insert_unique(const sql::Statement& s, std::string_view kind, const std::string& key) override {
    return insert(s.text, s.args, kind, key);
  }
  Status run_query(const sql::Statement& s, const SqlRowFn& on_row) override;
  const sql::Dialect& dialect() const override;

 private:
  using Args = std::vector<pg::SqlValue>;
  // One row of a result: the columns by index.
  struct Row {
    const pg::Rows& rows;
    int index;
    std::string text(int col) const { return rows.text(index, col); }
    std::int64_t int64(int col) const { return rows.int64(index, col); }
  };
  using RowFn = std::function<Status(const Row&)>;

  // INSERT, UPDATE or DELETE; returns the number of rows it changed. The one
  // door for writes, so a write inside read() is refused here.
  Result<std::int64_t> modify(std::string_view sql, const Args& args);
  Status exec(std::string_view sql, const Args& args);  // modify(), count not needed
  // An INSERT ... ON CONFLICT DO NOTHING: no row inserted means the object
  // exists already, 409 already_exists naming `kind` and `key`. Holding
  // writes, it is deferred without its ON CONFLICT clause: the unique
  // violation then fails the transaction with the same error.
  Status insert(std::string_view sql, const Args& args, std::string_view kind, const std::string& key);
  // An UPDATE or DELETE of one object by key: 404 not_found if there is none.
  Status modify_one(std::string_view sql, const Args& args, std::string_view kind, const std::string& key);
  // Calls on_row for every row of a SELECT.
  Status query(std::string_view sql, const Args& args, const RowFn& on_row);
  // An INSERT of a row that belongs to `cluster_id`, written as INSERT ...
  // SELECT ... WHERE EXISTS (the cluster) ON CONFLICT DO NOTHING: when no
  // row went in, already_exists if `exists_sql` finds `key`, else not_found
  // for the cluster.
  Status insert_for_cluster(std::string_view sql, const Args& args, std::string_view exists_sql,
                            std::string_view kind, const std::string& key, const std::string& cluster_id);

  // SELECTs whose first column is a JSON document of T (see row_codec.h).
  template <class T>
  Result<std::vector<T>> query_docs(std::string_view sql, const Args& args, std::string_view table) {
    std::vector<T> out;
    CP_TRY(query(sql, args, [&](const Row& row) -> Status {
      CP_ASSIGN(T value, decode_row<T>(row.text(0), table));
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

  pg::Connection& conn_;
  bool writable_;
  std::uint64_t calls_at_begin_;  // conn_.calls() when the body began
  bool wrote_ = false;            // a write was sent or deferred (wrote())
  SharedReads* shared_;           // nullptr: a transaction of its own
  // hold_writes(): rows not sent yet, in the order they were written; a
  // task's later update replaces its earlier one (held_task_at_).
  bool holding_ = false;
  std::vector<Attempt> held_attempts_;
  std::vector<Task> held_tasks_;
  std::unordered_map<std::string, std::size_t> held_task_at_;
  std::vector<Event> held_events_;
};

}  // namespace cp
