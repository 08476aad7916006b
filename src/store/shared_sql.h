// SQL that every backend runs the same way, built here once. Both backends
// take "?" placeholders and the same value type (int64 or text); the few
// differences between them are the Dialect's.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "common/result.h"
#include "store/store.h"

namespace cp::sql {

using Value = std::variant<std::int64_t, std::string>;
using Values = std::vector<Value>;

struct Statement {
  std::string text;
  Values args;
};

struct Dialect {
  // Appended to text columns in ORDER BY and comparisons so that text sorts
  // as bytes: "" for SQLite (BINARY is its default), " COLLATE \"C\"" for
  // PostgreSQL, whose default collation follows the locale.
  std::string_view bytewise;
  // "column" followed by this matches the strings of one parameter, a JSON
  // array of them (sql::by_ids).
  std::string_view in_json_array;
};

inline constexpr std::size_t kMaxPageSize = 1000;

// list_tasks, planned as SELECTs of `doc` (today always one) whose rows
// merge_task_page orders and cuts to a page. A query that names several
// project groups or states is split into one walk per combination, so that
// each reads an index range of (project_group, state, created_at, id)
// backwards and stops after a page, instead of sorting every matching task;
// the walks read only (created_at, id) from their indices, and one outer
// SELECT reads the documents of the page's newest ids among them.
struct TaskListPlan {
  std::vector<Statement> selects;  // empty: nothing can match
  int limit = 100;
};
Result<TaskListPlan> plan_task_list(const TaskQuery& q, const Dialect& d);
TaskPage merge_task_page(std::vector<Task> rows, int limit);

// SELECT doc FROM tasks WHERE state IN (...) ORDER BY created_at, id
Statement tasks_in_states(const std::set<TaskState>& states, const Dialect& d);

// Attempts in a state that is not terminal, of one cluster or ("") all.
Statement active_attempts(const std::string& cluster_id, const Dialect& d);

// The ledger. A row is added to its day in usage_daily and to its month in
// usage_monthly (two upserts, in the caller's transaction); the grouped sums
// read whole months from usage_monthly and the days around them from
// usage_daily.
std::vector<Statement> add_usage(const UsageRow& row);
Result<Statement> usage_totals(const UsageQuery& q, const Dialect& d);
// The group columns of a usage_totals result, in order, for decoding: the
// sums follow them (attempts, gpu_ms, cpu_core_ms, memory_mib_s).
std::vector<std::string> usage_result_columns(const UsageQuery& q);
// The text field of a UsageRow by its column name (not "day").
std::string& usage_field(UsageRow& row, std::string_view name);

// Retention.
Statement finished_tasks_before(Millis before, int limit);
Statement delete_events_before(Millis before, int limit);
// A task's attempts, the events about it and them, the task, and its
// pipeline when this was the pipeline's last task.
std::vector<Statement> delete_task(const Task& task);

// "SELECT doc FROM table WHERE id <in the JSON array of ids>": one text for
// any number of ids, so that PostgreSQL prepares it once.
Statement by_ids(std::string_view table, std::span<const std::string> ids, const Dialect& d);
// (doc, label_overrides, maintenance) of the named nodes of one cluster, by
// name in bytes order (Tx::get_nodes), as by_ids matches its ids.
Statement nodes_by_name(const std::string& cluster_id, std::span<const std::string> names, const Dialect& d);
inline constexpr std::size_t kMaxIdsAStatement = 1000;
// The attempts in `state` of these clusters (at most kMaxIdsAStatement), by
// cluster and id, as by_ids matches its ids (Tx::attempts_in_state).
Statement attempts_in_state(AttemptState state, std::span<const std::string> cluster_ids, const Dialect& d);

// " AND column IN (?, ?, ...)" with one placeholder per value.
void append_in(Statement& s, std::string_view column, const std::vector<std::string>& values);

}  // namespace cp::sql
