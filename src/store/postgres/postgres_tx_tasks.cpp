// PostgresTx: pipelines, tasks, attempts and events.
#include <algorithm>

#include "store/postgres/postgres_tx.h"
#include "store/store_error.h"
#include "store/task_cursor.h"

namespace cp {
namespace {

constexpr int kMaxPageSize = 1000;

// " AND column IN (?, ?, ...)" with one parameter per value.
void append_in(std::string& sql, std::vector<pg::SqlValue>& args, std::string_view column,
               const std::vector<std::string>& values) {
  sql += " AND ";
  sql += column;
  sql += " IN (";
  for (std::size_t i = 0; i < values.size(); ++i) {
    sql += i == 0 ? "?" : ", ?";
    args.emplace_back(values[i]);
  }
  sql += ")";
}

std::vector<std::string> state_names(const std::set<TaskState>& states) {
  std::vector<std::string> names;
  for (TaskState s : states) names.push_back(enum_name(s));
  return names;
}

// Derived from the enum, so that a state added later is counted as live
// unless is_terminal() says otherwise.
const std::vector<std::string>& live_attempt_states() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    boost::mp11::mp_for_each<boost::describe::describe_enumerators<AttemptState>>([&](auto d) {
      if (!is_terminal(d.value)) out.emplace_back(d.name);
    });
    return out;
  }();
  return names;
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
  return insert(
      "INSERT INTO tasks (id, pipeline_id, project_group, resource_group, assigned_cluster, state, created_at, "
      "updated_at, doc) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
      {t.id, t.pipeline_id, t.project_group, t.resource_group, t.assigned_cluster, enum_name(t.state), t.created_at,
       t.updated_at, encode_row(t)},
      "task", t.id);
}

Status PostgresTx::update_task(const Task& t) {
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
  // A bad cursor is the client's error whatever else the query says.
  std::optional<TaskCursor> after;
  if (!q.cursor.empty()) {
    CP_ASSIGN(after, decode_task_cursor(q.cursor));
  }
  TaskPage page;
  // A visibility set that is present but empty: the caller may see nothing.
  if (q.project_groups && q.project_groups->empty()) return page;
  const int limit = std::clamp(q.limit, 1, kMaxPageSize);

  std::string sql = "SELECT doc FROM tasks WHERE 1 = 1";
  Args args;
  auto equals = [&](std::string_view column, const std::string& value) {
    if (value.empty()) return;
    sql += " AND ";
    sql += column;
    sql += " = ?";
    args.emplace_back(value);
  };
  if (!q.states.empty()) append_in(sql, args, "state", state_names(q.states));
  if (q.project_groups) {
    append_in(sql, args, "project_group", std::vector<std::string>(q.project_groups->begin(), q.project_groups->end()));
  }
  equals("project_group", q.project_group);
  equals("resource_group", q.resource_group);
  equals("assigned_cluster", q.cluster);
  equals("pipeline_id", q.pipeline_id);
  if (after) {
    // Strictly after the cursor in (created_at DESC, id DESC): the ids break
    // ties between tasks created in the same millisecond, compared as bytes
    // like the ORDER BY. The first term lets the (created_at, id) index
    // start at the cursor.
    sql += " AND created_at <= ? AND (created_at < ? OR id COLLATE \"C\" < ?)";
    args.emplace_back(after->created_at);
    args.emplace_back(after->created_at);
    args.emplace_back(after->id);
  }
  // One row more than asked tells whether there is a next page.
  sql += " ORDER BY created_at DESC, id COLLATE \"C\" DESC LIMIT ?";
  args.emplace_back(std::int64_t{limit} + 1);

  CP_ASSIGN(page.items, query_docs<Task>(sql, args, "tasks"));
  if (page.items.size() > static_cast<std::size_t>(limit)) {
    page.items.pop_back();
    page.next_cursor = encode_task_cursor({page.items.back().created_at, page.items.back().id});
  }
  return page;
}

Result<std::vector<Task>> PostgresTx::tasks_in_states(const std::set<TaskState>& states) {
  if (states.empty()) return std::vector<Task>();
  std::string sql = "SELECT doc FROM tasks WHERE 1 = 1";
  Args args;
  append_in(sql, args, "state", state_names(states));
  sql += " ORDER BY created_at, id COLLATE \"C\"";
  return query_docs<Task>(sql, args, "tasks");
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
  return insert(
      "INSERT INTO attempts (id, task_id, cluster_id, state, number, doc) VALUES (?, ?, ?, ?, ?, ?) "
      "ON CONFLICT DO NOTHING",
      {a.id, a.task_id, a.cluster_id, enum_name(a.state), a.number, encode_row(a)}, "attempt", a.id);
}

Status PostgresTx::update_attempt(const Attempt& a) {
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
  std::string sql = "SELECT doc FROM attempts WHERE 1 = 1";
  Args args;
  if (!cluster_id.empty()) {
    sql += " AND cluster_id = ?";
    args.emplace_back(cluster_id);
  }
  append_in(sql, args, "state", live_attempt_states());
  sql += " ORDER BY cluster_id COLLATE \"C\", id COLLATE \"C\"";
  return query_docs<Attempt>(sql, args, "attempts");
}

// ------------------------------------------------------------------- events

Result<std::int64_t> PostgresTx::append_event(const Event& e) {
  // Readers poll with after_id, so ids must become visible in increasing
  // order. Writers run concurrently here, and a sequence alone hands out
  // ids in the order they are asked for, not in commit order:
  //
  //   A: nextval -> 5 ..................... COMMIT
  //   B:       nextval -> 6 ... COMMIT
  //   reader:                         sees 6, polls after 6: 5 is never seen
  //
  // So the id is taken under a transaction-scoped lock that the server
  // releases only at COMMIT or ROLLBACK: whoever takes it next gets a
  // greater id and commits later. The lock is held from a transaction's
  // first event to its end, which serializes writers only over that tail.
  if (!writable_) return store_error(500, "write attempted inside Store::read(): append_event");
  if (!holds_event_lock_) {
    CP_TRY(conn_.query("SELECT pg_advisory_xact_lock(?)", {pg::kEventLockKey}));
    holds_event_lock_ = true;
  }
  CP_ASSIGN(auto next, conn_.query("SELECT nextval('events_id_seq')", {}));
  Event row = e;
  row.id = next.int64(0, 0);
  CP_TRY(exec("INSERT INTO events (id, at, object_kind, object_id, type, doc) VALUES (?, ?, ?, ?, ?, ?)",
              {row.id, row.at, row.object_kind, row.object_id, row.type, encode_row(row)}));
  return row.id;
}

Result<std::vector<Event>> PostgresTx::list_events(const EventQuery& q) {
  std::string sql = "SELECT doc FROM events WHERE id > ?";
  Args args{q.after_id};
  if (!q.object_kind.empty()) {
    sql += " AND object_kind = ?";
    args.emplace_back(q.object_kind);
  }
  if (!q.object_id.empty()) {
    sql += " AND object_id = ?";
    args.emplace_back(q.object_id);
  }
  sql += " ORDER BY id LIMIT ?";
  args.emplace_back(std::int64_t{std::clamp(q.limit, 1, kMaxPageSize)});
  return query_docs<Event>(sql, args, "events");
}

}  // namespace cp
