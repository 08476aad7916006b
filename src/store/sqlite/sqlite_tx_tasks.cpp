// SqliteTx: pipelines, tasks, attempts and events.
#include <algorithm>

#include "store/sqlite/sqlite_tx.h"
#include "store/shared_sql.h"
#include "store/store_error.h"

namespace cp {
namespace {

const sql::Dialect kDialect{"", " IN (SELECT value FROM json_each(?))"};

}  // namespace

// ---------------------------------------------------------------- pipelines

Status SqliteTx::insert_pipeline(const Pipeline& p) {
  return insert("INSERT INTO pipelines (id, project_group, doc, created_at) VALUES (?, ?, ?, ?)",
                {p.id, p.project_group, encode_row(p), p.created_at}, "pipeline", p.id);
}

Result<std::optional<Pipeline>> SqliteTx::get_pipeline(const std::string& id) {
  return query_doc<Pipeline>("SELECT doc FROM pipelines WHERE id = ?", {id}, "pipelines");
}

// -------------------------------------------------------------------- tasks

Status SqliteTx::insert_task(const Task& t) {
  noted_task(t);
  return insert(
      "INSERT INTO tasks (id, pipeline_id, project_group, resource_group, assigned_cluster, state, created_at, "
      "updated_at, doc) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
      {t.id, t.pipeline_id, t.project_group, t.resource_group, t.assigned_cluster, enum_name(t.state), t.created_at,
       t.updated_at, encode_row(t)},
      "task", t.id);
}

Status SqliteTx::update_task(const Task& t) {
  noted_task(t);
  // SQLite rewrites every index that holds a column the UPDATE sets, changed
  // or not. A task's pipeline, project group, resource group and creation
  // time are set once, so the common update sets only what moves and leaves
  // three of the eight indices alone (tasks_created, tasks_pipeline,
  // tasks_group_created). Should one of those have changed after all, it
  // matches no row and the whole row is written below.
  CP_ASSIGN(std::int64_t n,
            modify("UPDATE tasks SET assigned_cluster = ?, state = ?, updated_at = ?, doc = ? "
                   "WHERE id = ? AND pipeline_id = ? AND project_group = ? AND resource_group = ? AND created_at = ?",
                   {t.assigned_cluster, enum_name(t.state), t.updated_at, encode_row(t), t.id, t.pipeline_id,
                    t.project_group, t.resource_group, t.created_at}));
  if (n == 1) return {};
  return modify_one(
      "UPDATE tasks SET pipeline_id = ?, project_group = ?, resource_group = ?, assigned_cluster = ?, state = ?, "
      "created_at = ?, updated_at = ?, doc = ? WHERE id = ?",
      {t.pipeline_id, t.project_group, t.resource_group, t.assigned_cluster, enum_name(t.state), t.created_at,
       t.updated_at, encode_row(t), t.id},
      "task", t.id);
}

Result<std::optional<Task>> SqliteTx::get_task(const std::string& id) {
  return query_doc<Task>("SELECT doc FROM tasks WHERE id = ?", {id}, "tasks");
}

Result<TaskPage> SqliteTx::list_tasks(const TaskQuery& q) {
  CP_ASSIGN(auto plan, sql::plan_task_list(q, kDialect));
  std::vector<Task> rows;
  for (const auto& select : plan.selects) {
    CP_ASSIGN(auto part, query_docs<Task>(select.text, select.args, "tasks"));
    std::move(part.begin(), part.end(), std::back_inserter(rows));
  }
  return sql::merge_task_page(std::move(rows), plan.limit);
}

Result<std::vector<Task>> SqliteTx::tasks_in_states(const std::set<TaskState>& states) {
  if (states.empty()) return std::vector<Task>();
  auto select = sql::tasks_in_states(states, kDialect);
  return query_docs<Task>(select.text, select.args, "tasks");
}

Result<std::vector<Task>> SqliteTx::tasks_of_pipeline(const std::string& pipeline_id) {
  return query_docs<Task>("SELECT doc FROM tasks WHERE pipeline_id = ? ORDER BY created_at, id", {pipeline_id},
                          "tasks");
}

Result<std::vector<std::tuple<std::string, TaskState, std::int64_t>>> SqliteTx::count_tasks() {
  std::vector<std::tuple<std::string, TaskState, std::int64_t>> counts;
  CP_TRY(query("SELECT resource_group, state, COUNT(*) FROM tasks GROUP BY resource_group, state "
               "ORDER BY resource_group, state",
               {}, [&](const sqlite::Statement& row) -> Status {
                 CP_ASSIGN(TaskState state, enum_from_name<TaskState>(row.column_text(1), "tasks"));
                 counts.emplace_back(row.column_text(0), state, row.column_int64(2));
                 return {};
               }));
  return counts;
}

// ----------------------------------------------------------------- attempts

Status SqliteTx::insert_attempt(const Attempt& a) {
  noted_attempt(a);
  return insert("INSERT INTO attempts (id, task_id, cluster_id, state, number, doc) VALUES (?, ?, ?, ?, ?, ?)",
                {a.id, a.task_id, a.cluster_id, enum_name(a.state), a.number, encode_row(a)}, "attempt", a.id);
}

Status SqliteTx::update_attempt(const Attempt& a) {
  noted_attempt(a);
  return modify_one("UPDATE attempts SET task_id = ?, cluster_id = ?, state = ?, number = ?, doc = ? WHERE id = ?",
                    {a.task_id, a.cluster_id, enum_name(a.state), a.number, encode_row(a), a.id}, "attempt", a.id);
}

Result<std::optional<Attempt>> SqliteTx::get_attempt(const std::string& id) {
  return query_doc<Attempt>("SELECT doc FROM attempts WHERE id = ?", {id}, "attempts");
}

Result<std::vector<Attempt>> SqliteTx::attempts_of_task(const std::string& task_id) {
  return query_docs<Attempt>("SELECT doc FROM attempts WHERE task_id = ? ORDER BY number", {task_id}, "attempts");
}

Result<std::vector<Attempt>> SqliteTx::active_attempts(const std::string& cluster_id) {
  auto select = sql::active_attempts(cluster_id, kDialect);
  return query_docs<Attempt>(select.text, select.args, "attempts");
}

// ------------------------------------------------------------------- events

Result<std::int64_t> SqliteTx::append_event(const Event& e) {
  // max+1 is safe here: write() began with BEGIN IMMEDIATE, so this
  // transaction is the only writer until it commits, and ids increase in
  // commit order, which is what readers polling with after_id rely on.
  std::int64_t id = 0;
  CP_TRY(query("SELECT COALESCE(MAX(id), 0) + 1 FROM events", {}, [&](const sqlite::Statement& row) -> Status {
    id = row.column_int64(0);
    return {};
  }));
  Event row = e;
  row.id = id;
  CP_TRY(exec("INSERT INTO events (id, at, object_kind, object_id, type, doc) VALUES (?, ?, ?, ?, ?, ?)",
              {id, row.at, row.object_kind, row.object_id, row.type, encode_row(row)}));
  return id;
}

// ------------------------------------------------- shared SQL (SqlTx)

namespace {
class SqliteRow final : public SqlTx::Row {
 public:
  explicit SqliteRow(const sqlite::Statement& s) : s_(s) {}
  std::string text(int col) const override { return s_.column_text(col); }
  std::int64_t int64(int col) const override { return s_.column_int64(col); }

 private:
  const sqlite::Statement& s_;
};
}  // namespace

Result<std::int64_t> SqliteTx::run_modify(const sql::Statement& s) { return modify(s.text, s.args); }

Status SqliteTx::run_query(const sql::Statement& s, const SqlRowFn& on_row) {
  return query(s.text, s.args, [&](const sqlite::Statement& row) -> Status { return on_row(SqliteRow(row)); });
}

const sql::Dialect& SqliteTx::dialect() const { return kDialect; }

// ---------------------------------------------------------------- retention

Status SqliteTx::delete_task(const std::string& id) {
  CP_ASSIGN(auto task, get_task(id));
  if (!task) return errors::not_found("task", id);
  noted_deleted_task(id);  // its attempts are finished ones, never live: not noted
  for (const auto& del : sql::delete_task(*task)) CP_TRY(exec(del.text, del.args));
  return {};
}

}  // namespace cp
