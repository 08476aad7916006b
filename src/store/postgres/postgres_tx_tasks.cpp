// PostgresTx: pipelines, tasks, attempts and events.
#include <algorithm>
#include <set>

#include "store/postgres/postgres_tx.h"
#include "store/shared_sql.h"
#include "store/store_error.h"

namespace cp {
namespace {

// = ANY of an array built once (an InitPlan): an index scan with array keys.
const sql::Dialect kDialect{" COLLATE \"C\"", " = ANY(ARRAY(SELECT json_array_elements_text(CAST(? AS json))))"};

// An event's document is encoded with id 0 and opens with it; the INSERT
// puts the id from the sequence in its place: '{"id":' || n || ',' ||
// substr(doc, 9) (append_event, send_held).
constexpr std::string_view kIdZero = "{\"id\":0,";
static_assert(kIdZero.size() == 8, "substr(doc, 9) starts right after it");
// One event, its id taken from the sequence inside the INSERT and put into
// the document in place of the 0 (append_event, send_held).
constexpr std::string_view kInsertOneEvent =
    "INSERT INTO events (id, at, object_kind, object_id, type, doc) "
    "SELECT n, ?, ?, ?, ?, '{\"id\":' || n || ',' || substr(?, 9) "
    "FROM (SELECT nextval('events_id_seq') AS n) AS next";

// The id of the first of `held` that `returned` (a RETURNING id) lacks, ""
// when every one came back.
template <class T>
std::string first_missing(const pg::Rows& returned, const std::vector<T>& held) {
  std::set<std::string> ids;
  for (int i = 0; i < returned.size(); ++i) ids.insert(returned.text(i, 0));
  for (const auto& row : held) {
    if (!ids.contains(row.id)) return row.id;
  }
  return "";
}

}  // namespace

// ---------------------------------------------------------------- pipelines

Status PostgresTx::insert_pipeline(const Pipeline& p) {
  return insert(
      "INSERT INTO pipelines (id, project_group, doc, created_at) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING",
      {p.id, p.project_group, encode_row(p), p.created_at}, "pipeline", p.id);
}

Result<std::optional<Pipeline>> PostgresTx::get_pipeline(const std::string& id) {
  return query_doc<Pipeline>("SELECT doc FROM pipelines WHERE id = ?", {id}, "pipelines");
}

// -------------------------------------------------------------------- tasks

Status PostgresTx::insert_task(const Task& t) {
  noted_task(t);
  return insert(
      "INSERT INTO tasks (id, pipeline_id, project_group, resource_group, assigned_cluster, state, created_at, "
      "updated_at, doc) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
      {t.id, t.pipeline_id, t.project_group, t.resource_group, t.assigned_cluster, enum_name(t.state), t.created_at,
       t.updated_at, encode_row(t)},
      "task", t.id);
}

Status PostgresTx::update_task(const Task& t) {
  noted_task(t);
  if (holding_) {
    auto [at, added] = held_task_at_.emplace(t.id, held_tasks_.size());
    if (added) {
      held_tasks_.push_back(t);
    } else {
      held_tasks_[at->second] = t;
    }
    return {};
  }
  return modify_one(
      "UPDATE tasks SET pipeline_id = ?, project_group = ?, resource_group = ?, assigned_cluster = ?, state = ?, "
      "created_at = ?, updated_at = ?, doc = ? WHERE id = ?",
      {t.pipeline_id, t.project_group, t.resource_group, t.assigned_cluster, enum_name(t.state), t.created_at,
       t.updated_at, encode_row(t), t.id},
      "task", t.id);
}

Result<std::optional<Task>> PostgresTx::get_task(const std::string& id) {
  return query_doc<Task>("SELECT doc FROM tasks WHERE id = ?", {id}, "tasks");
}

Result<TaskPage> PostgresTx::list_tasks(const TaskQuery& q) {
  CP_ASSIGN(auto plan, sql::plan_task_list(q, kDialect));
  std::vector<Task> rows;
  for (const auto& select : plan.selects) {
    CP_ASSIGN(auto part, query_docs<Task>(select.text, select.args, "tasks"));
    std::move(part.begin(), part.end(), std::back_inserter(rows));
  }
  return sql::merge_task_page(std::move(rows), plan.limit);
}

Result<std::vector<Task>> PostgresTx::tasks_in_states(const std::set<TaskState>& states) {
  if (states.empty()) return std::vector<Task>();
  auto select = sql::tasks_in_states(states, kDialect);
  return query_docs<Task>(select.text, select.args, "tasks");
}

Result<std::vector<Task>> PostgresTx::tasks_of_pipeline(const std::string& pipeline_id) {
  return query_docs<Task>("SELECT doc FROM tasks WHERE pipeline_id = ? ORDER BY created_at, id COLLATE \"C\"",
                          {pipeline_id}, "tasks");
}

Result<std::vector<std::tuple<std::string, TaskState, std::int64_t>>> PostgresTx::count_tasks() {
  std::vector<std::tuple<std::string, TaskState, std::int64_t>> counts;
  CP_TRY(query("SELECT resource_group, state, COUNT(*) FROM tasks GROUP BY resource_group, state "
               "ORDER BY resource_group COLLATE \"C\", state COLLATE \"C\"",
               {}, [&](const Row& row) -> Status {
                 CP_ASSIGN(TaskState state, enum_from_name<TaskState>(row.text(1), "tasks"));
                 counts.emplace_back(row.text(0), state, row.int64(2));
                 return {};
               }));
  return counts;
}

// ----------------------------------------------------------------- attempts

Status PostgresTx::insert_attempt(const Attempt& a) {
  noted_attempt(a);
  if (holding_) {
    held_attempts_.push_back(a);
    return {};
  }
  return insert(
      "INSERT INTO attempts (id, task_id, cluster_id, state, number, doc) VALUES (?, ?, ?, ?, ?, ?) "
      "ON CONFLICT DO NOTHING",
      {a.id, a.task_id, a.cluster_id, enum_name(a.state), a.number, encode_row(a)}, "attempt", a.id);
}

Status PostgresTx::update_attempt(const Attempt& a) {
  noted_attempt(a);
  return modify_one("UPDATE attempts SET task_id = ?, cluster_id = ?, state = ?, number = ?, doc = ? WHERE id = ?",
                    {a.task_id, a.cluster_id, enum_name(a.state), a.number, encode_row(a), a.id}, "attempt", a.id);
}

Result<std::optional<Attempt>> PostgresTx::get_attempt(const std::string& id) {
  return query_doc<Attempt>("SELECT doc FROM attempts WHERE id = ?", {id}, "attempts");
}

Result<std::vector<Attempt>> PostgresTx::attempts_of_task(const std::string& task_id) {
  return query_docs<Attempt>("SELECT doc FROM attempts WHERE task_id = ? ORDER BY number", {task_id}, "attempts");
}

Result<std::vector<Attempt>> PostgresTx::active_attempts(const std::string& cluster_id) {
  auto select = sql::active_attempts(cluster_id, kDialect);
  return query_docs<Attempt>(select.text, select.args, "attempts");
}

// ------------------------------------------------------------------- events

Result<std::int64_t> PostgresTx::append_event(const Event& e) {
  // Readers follow the log with after_id, so no event may become visible
  // after one with a greater id. A sequence hands out ids in the order they
  // are asked for, not in commit order:
  //
  //   A: nextval -> 5 ..................... COMMIT
  //   B:       nextval -> 6 ... COMMIT
  //   reader:                         sees 6, polls after 6: 5 is never seen
  //
  // So every write transaction locks event_gate IN SHARE MODE with its
  // BEGIN (PostgresStore::transaction_once) and holds it to COMMIT or
  // ROLLBACK. Writers share that mode and run side by side; a read that
  // lists events first locks the gate IN ROW EXCLUSIVE MODE, which waits
  // for every writer that may hold an id (list_events). Before, an exclusive
  // lock taken here made writers flush their commits one at a time.
  if (!writable_) return store_error(500, "write attempted inside Store::read(): append_event");
  if (holding_) {
    held_events_.push_back(e);
    return std::int64_t{0};
  }
  wrote_ = true;
  Event row = e;
  row.id = 0;
  std::string doc = encode_row(row);
  // One round trip instead of two: the id comes from the sequence inside
  // the INSERT, and goes into the document in place of the 0 it was
  // encoded with (the document opens with it: {"id":0,...).
  if (doc.starts_with(kIdZero)) {
    static const std::string returning_id = std::string(kInsertOneEvent) + " RETURNING id";
    CP_ASSIGN(auto inserted, conn_.query(returning_id, {row.at, row.object_kind, row.object_id, row.type, doc}));
    return inserted.int64(0, 0);
  }
  CP_ASSIGN(auto next, conn_.query("SELECT nextval('events_id_seq')", {}));
  row.id = next.int64(0, 0);
  CP_TRY(exec("INSERT INTO events (id, at, object_kind, object_id, type, doc) VALUES (?, ?, ?, ?, ?, ?)",
              {row.id, row.at, row.object_kind, row.object_id, row.type, encode_row(row)}));
  return row.id;
}

Status PostgresTx::send_held() {
  if (!held_attempts_.empty() || !held_tasks_.empty() || !held_events_.empty()) wrote_ = true;
  if (!held_attempts_.empty()) {
    json::array rows;
    rows.reserve(held_attempts_.size());
    for (const auto& a : held_attempts_) {
      rows.push_back(json::object{{"id", a.id},
                                  {"task_id", a.task_id},
                                  {"cluster_id", a.cluster_id},
                                  {"state", enum_name(a.state)},
                                  {"number", a.number},
                                  {"doc", encode_row(a)}});
    }
    held_attempts_.clear();
    // An id that exists, or one held twice: a unique violation that names it.
    CP_TRY(conn_.defer("INSERT INTO attempts (id, task_id, cluster_id, state, number, doc) "
                       "SELECT id, task_id, cluster_id, state, number, doc FROM json_to_recordset(CAST(? AS json)) "
                       "AS x(id text, task_id text, cluster_id text, state text, number bigint, doc text)",
                       {json::serialize(rows)}, "attempt"));
  }
  if (!held_tasks_.empty()) {
    json::array rows;
    rows.reserve(held_tasks_.size());
    for (const auto& t : held_tasks_) {
      rows.push_back(json::object{{"id", t.id},
                                  {"pipeline_id", t.pipeline_id},
                                  {"project_group", t.project_group},
                                  {"resource_group", t.resource_group},
                                  {"assigned_cluster", t.assigned_cluster},
                                  {"state", enum_name(t.state)},
                                  {"created_at", t.created_at},
                                  {"updated_at", t.updated_at},
                                  {"doc", encode_row(t)}});
    }
    CP_ASSIGN(auto updated,
              conn_.query("UPDATE tasks AS t SET pipeline_id = x.pipeline_id, project_group = x.project_group, "
                          "resource_group = x.resource_group, assigned_cluster = x.assigned_cluster, state = x.state, "
                          "created_at = x.created_at, updated_at = x.updated_at, doc = x.doc "
                          "FROM json_to_recordset(CAST(? AS json)) AS x(id text, pipeline_id text, project_group "
                          "text, resource_group text, assigned_cluster text, state text, created_at bigint, "
                          "updated_at bigint, doc text) WHERE t.id = x.id RETURNING t.id",
                          {json::serialize(rows)}));
    if (updated.size() != static_cast<int>(held_tasks_.size())) {
      return errors::not_found("task", first_missing(updated, held_tasks_));
    }
    held_tasks_.clear();
    held_task_at_.clear();
  }
  if (held_events_.size() == 1) {
    // One event (a submit's): the plain INSERT of append_event.
    Event row = held_events_.front();
    held_events_.clear();
    row.id = 0;
    std::string doc = encode_row(row);
    if (!doc.starts_with(kIdZero)) return store_error(500, "an event document does not open with its id");
    CP_TRY(conn_.defer(kInsertOneEvent, {row.at, row.object_kind, row.object_id, row.type, std::move(doc)}));
  } else if (!held_events_.empty()) {
    json::array rows;
    rows.reserve(held_events_.size());
    for (const auto& e : held_events_) {
      Event row = e;
      row.id = 0;
      std::string doc = encode_row(row);
      if (!doc.starts_with(kIdZero)) return store_error(500, "an event document does not open with its id");
      rows.push_back(json::object{{"at", row.at},
                                  {"object_kind", row.object_kind},
                                  {"object_id", row.object_id},
                                  {"type", row.type},
                                  {"doc", std::move(doc)}});
    }
    held_events_.clear();
    // Ids in the order the events were written: the innermost SELECT orders
    // the rows, the one around it takes nextval row by row in that order,
    // and the id goes into each document in place of the 0 (append_event).
    CP_TRY(conn_.defer(
        "INSERT INTO events (id, at, object_kind, object_id, type, doc) "
        "SELECT n, at, object_kind, object_id, type, '{\"id\":' || n || ',' || substr(doc, 9) FROM ("
        "SELECT nextval('events_id_seq') AS n, e.* FROM ("
        "SELECT x.* FROM ROWS FROM (json_to_recordset(CAST(? AS json)) "
        "AS (at bigint, object_kind text, object_id text, type text, doc text)) "
        "WITH ORDINALITY AS x(at, object_kind, object_id, type, doc, ord) ORDER BY x.ord) AS e) AS z",
        {json::serialize(rows)}));
  }
  return {};
}

Result<std::vector<Event>> PostgresTx::list_events(const EventQuery& q) {
  // A read that lists events before anything else waits here for the
  // writers that hold event ids (append_event), and makes new ones wait for
  // its COMMIT. LOCK takes no snapshot, so the one the SELECT takes sees
  // every id handed out before it: a reader that continues after the last
  // id it got misses nothing. A read whose snapshot was taken earlier (it
  // ran another statement first) cannot be helped: it lists what its
  // snapshot has, as does a write (the usage rebuild), whose SERIALIZABLE
  // isolation covers what it reads.
  if (!writable_ && conn_.calls() == calls_at_begin_) {
    CP_TRY(conn_.execute("LOCK TABLE event_gate IN ROW EXCLUSIVE MODE"));
  }
  return SqlTx::list_events(q);
}

// ------------------------------------------------- shared SQL (SqlTx)

namespace {
class PgRow final : public SqlTx::Row {
 public:
  PgRow(const pg::Rows& rows, int index) : rows_(rows), index_(index) {}
  std::string text(int col) const override { return rows_.text(index_, col); }
  std::int64_t int64(int col) const override { return rows_.int64(index_, col); }

 private:
  const pg::Rows& rows_;
  int index_;
};
}  // namespace

Result<std::int64_t> PostgresTx::run_modify(const sql::Statement& s) { return modify(s.text, s.args); }

Status PostgresTx::run_insert(const sql::Statement& s, std::string_view kind, const std::string& key) {
  if (!holding_) return SqlTx::run_insert(s, kind, key);
  CP_TRY(send_held());
  wrote_ = true;
  return conn_.defer(s.text, s.args, kind, key);
}

Status PostgresTx::run_query(const sql::Statement& s, const SqlRowFn& on_row) {
  return query(s.text, s.args, [&](const Row& row) -> Status { return on_row(PgRow(row.rows, row.index)); });
}

const sql::Dialect& PostgresTx::dialect() const { return kDialect; }

// ---------------------------------------------------------------- retention

Status PostgresTx::delete_task(const std::string& id) {
  CP_ASSIGN(auto task, get_task(id));
  if (!task) return errors::not_found("task", id);
  noted_deleted_task(id);  // its attempts are finished ones, never live: not noted
  for (const auto& del : sql::delete_task(*task)) CP_TRY(exec(del.text, del.args));
  return {};
}

}  // namespace cp
