#include "store/shared_sql.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <iterator>

#include <boost/describe/enum.hpp>
#include <boost/mp11/algorithm.hpp>

#include "store/row_codec.h"
#include "store/store_error.h"
#include "store/task_cursor.h"

namespace cp::sql {
namespace {

// Above this many (project group x state) combinations one SELECT with IN
// lists is cheaper than as many index walks.
constexpr std::size_t kMaxSplit = 32;

template <class Enum>
std::vector<std::string> names_where(bool (*keep)(Enum)) {
  std::vector<std::string> out;
  boost::mp11::mp_for_each<boost::describe::describe_enumerators<Enum>>([&](auto d) {
    if (keep(d.value)) out.emplace_back(d.name);
  });
  return out;
}

const std::vector<std::string>& live_attempt_states() {
  static const std::vector<std::string> names =
      names_where<AttemptState>(+[](AttemptState s) { return !is_terminal(s); });
  return names;
}

const std::vector<std::string>& finished_task_states() {
  static const std::vector<std::string> names = names_where<TaskState>(+[](TaskState s) { return is_terminal(s); });
  return names;
}

// The ledger's key columns, by the names usage_totals accepts.
struct UsageColumn {
  std::string_view name;
  std::string_view column;
};
constexpr std::array<UsageColumn, 7> kUsageColumns{{{"day", "day"},
                                                    {"project_group", "project_group"},
                                                    {"resource_group", "resource_group"},
                                                    {"cluster", "cluster_id"},
                                                    {"user", "user_name"},
                                                    {"gpu_type", "gpu_type"},
                                                    {"outcome", "outcome"}}};

const UsageColumn* usage_column(std::string_view name) {
  for (const auto& c : kUsageColumns) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

}  // namespace

namespace {

// The parameter Dialect::in_json_array matches: a JSON array of the strings.
std::string json_list(std::span<const std::string> items) {
  boost::json::array list;
  list.reserve(items.size());
  for (const auto& item : items) list.emplace_back(item);
  return boost::json::serialize(list);
}

}  // namespace

Statement by_ids(std::string_view table, std::span<const std::string> ids, const Dialect& d) {
  Statement s;
  s.text = "SELECT doc FROM ";
  s.text += table;
  s.text += " WHERE id";
  s.text += d.in_json_array;
  s.args.emplace_back(json_list(ids));
  return s;
}

Statement nodes_by_name(const std::string& cluster_id, std::span<const std::string> names, const Dialect& d) {
  Statement s{"SELECT doc, label_overrides, maintenance FROM nodes WHERE cluster_id = ? AND name", {}};
  s.text += d.in_json_array;
  s.text += " ORDER BY name";
  s.text += d.bytewise;
  s.args.emplace_back(cluster_id);
  s.args.emplace_back(json_list(names));
  return s;
}

Statement attempts_in_state(AttemptState state, std::span<const std::string> cluster_ids, const Dialect& d) {
  Statement s{"SELECT doc FROM attempts WHERE state = ? AND cluster_id", {}};
  s.text += d.in_json_array;
  s.text += " ORDER BY cluster_id";
  s.text += d.bytewise;
  s.text += ", id";
  s.text += d.bytewise;
  s.args.emplace_back(enum_name(state));
  s.args.emplace_back(json_list(cluster_ids));
  return s;
}

void append_in(Statement& s, std::string_view column, const std::vector<std::string>& values) {
  s.text += " AND ";
  s.text += column;
  s.text += " IN (";
  for (std::size_t i = 0; i < values.size(); ++i) {
    s.text += i == 0 ? "?" : ", ?";
    s.args.emplace_back(values[i]);
  }
  s.text += ")";
}

Result<TaskListPlan> plan_task_list(const TaskQuery& q, const Dialect& d) {
  // A bad cursor is the client's error whatever else the query says.
  std::optional<TaskCursor> after;
  if (!q.cursor.empty()) {
    CP_ASSIGN(after, decode_task_cursor(q.cursor));
  }
  TaskListPlan plan;
  plan.limit = std::clamp<int>(q.limit, 1, static_cast<int>(kMaxPageSize));

  // The project groups the query may return: the one it names, within the
  // visibility set when there is one. std::nullopt = any.
  std::optional<std::vector<std::string>> groups;
  if (!q.project_group.empty()) {
    if (q.project_groups && !q.project_groups->count(q.project_group)) return plan;
    groups = std::vector<std::string>{q.project_group};
  } else if (q.project_groups) {
    if (q.project_groups->empty()) return plan;
    groups = std::vector<std::string>(q.project_groups->begin(), q.project_groups->end());
  }
  std::vector<std::string> states;
  for (TaskState s : q.states) states.emplace_back(enum_name(s));

  // One walk: the rows of one index range, newest first, one more than a
  // page (that one tells whether there is a next page).
  std::vector<Statement> walks;
  auto walk = [&](const std::vector<std::string>* in_groups, const std::vector<std::string>& in_states) {
    Statement s{"FROM tasks WHERE 1 = 1", {}};
    auto equals = [&](std::string_view column, const std::string& value) {
      if (value.empty()) return;
      s.text += " AND ";
      s.text += column;
      s.text += " = ?";
      s.args.emplace_back(value);
    };
    auto in = [&](std::string_view column, const std::vector<std::string>& values) {
      if (values.size() == 1) equals(column, values.front());
      else if (!values.empty()) append_in(s, column, values);
    };
    if (in_groups) in("project_group", *in_groups);
    in("state", in_states);
    equals("resource_group", q.resource_group);
    equals("assigned_cluster", q.cluster);
    equals("pipeline_id", q.pipeline_id);
    if (after) {
      // Strictly after the cursor in (created_at DESC, id DESC): the ids
      // break ties between tasks created in the same millisecond, compared
      // as bytes like the ORDER BY. The first term lets an index on
      // (..., created_at, id) start at the cursor.
      s.text += " AND created_at <= ? AND (created_at < ? OR id";
      s.text += d.bytewise;
      s.text += " < ?)";
      s.args.emplace_back(after->created_at);
      s.args.emplace_back(after->created_at);
      s.args.emplace_back(after->id);
    }
    s.text += " ORDER BY created_at DESC, id";
    s.text += d.bytewise;
    s.text += " DESC LIMIT ?";
    s.args.emplace_back(std::int64_t{plan.limit} + 1);
    walks.push_back(std::move(s));
  };

  const std::size_t group_count = groups ? groups->size() : 1;
  const std::size_t state_count = std::max<std::size_t>(1, states.size());
  if (group_count * state_count == 1 || group_count * state_count > kMaxSplit) {
    walk(groups ? &*groups : nullptr, states);
  } else {
    std::vector<std::string> one_group(1);
    for (std::size_t g = 0; g < group_count; ++g) {
      if (groups) one_group[0] = (*groups)[g];
      if (states.empty()) {
        walk(groups ? &one_group : nullptr, {});
        continue;
      }
      for (const auto& state : states) walk(groups ? &one_group : nullptr, {state});
    }
  }
  if (walks.size() == 1) {
    walks.front().text.insert(0, "SELECT doc ");
    plan.selects.push_back(std::move(walks.front()));
    return plan;
  }
  // Several walks: one statement. Each walk reads only (created_at, id),
  // which its index holds, so it never touches the table; the page's
  // newest ids across the walks are picked in SQL, and only their documents
  // are read and sent. Sending every walk's documents instead (up to one
  // page per walk, 9 pages for a member with 3 groups and 3 states) cost a
  // round trip per walk and most of the time in decoding rows that were
  // then dropped.
  Statement s{"SELECT doc FROM tasks WHERE id IN (SELECT id FROM (", {}};
  for (std::size_t i = 0; i < walks.size(); ++i) {
    if (i > 0) s.text += " UNION ALL ";
    s.text += "SELECT created_at, id FROM (SELECT created_at, id ";
    s.text += walks[i].text;
    s.text += ") AS w" + std::to_string(i);
    std::move(walks[i].args.begin(), walks[i].args.end(), std::back_inserter(s.args));
  }
  s.text += ") AS u ORDER BY created_at DESC, id";
  s.text += d.bytewise;
  s.text += " DESC LIMIT ?)";
  s.args.emplace_back(std::int64_t{plan.limit} + 1);
  plan.selects.push_back(std::move(s));
  return plan;
}

TaskPage merge_task_page(std::vector<Task> rows, int limit) {
  // Each part is sorted; together they are not. Byte order on ids, as in SQL.
  std::sort(rows.begin(), rows.end(), [](const Task& a, const Task& b) {
    if (a.created_at != b.created_at) return a.created_at > b.created_at;
    return a.id > b.id;
  });
  TaskPage page;
  if (rows.size() > static_cast<std::size_t>(limit)) {
    rows.resize(static_cast<std::size_t>(limit));
    page.next_cursor = encode_task_cursor({rows.back().created_at, rows.back().id});
  }
  page.items = std::move(rows);
  return page;
}

Statement tasks_in_states(const std::set<TaskState>& states, const Dialect& d) {
  Statement s{"SELECT doc FROM tasks WHERE 1 = 1", {}};
  std::vector<std::string> names;
  for (TaskState st : states) names.emplace_back(enum_name(st));
  append_in(s, "state", names);
  s.text += " ORDER BY created_at, id";
  s.text += d.bytewise;
  return s;
}

Statement active_attempts(const std::string& cluster_id, const Dialect& d) {
  Statement s{"SELECT doc FROM attempts WHERE 1 = 1", {}};
  if (!cluster_id.empty()) {
    s.text += " AND cluster_id = ?";
    s.args.emplace_back(cluster_id);
  }
  append_in(s, "state", live_attempt_states());
  s.text += " ORDER BY cluster_id";
  s.text += d.bytewise;
  s.text += ", id";
  s.text += d.bytewise;
  return s;
}

namespace {

// INSERT ... ON CONFLICT DO UPDATE: SQLite 3.24+ and PostgreSQL 9.5+.
Statement upsert_usage(std::string_view table, std::string_view period_column, Millis period, const UsageRow& r) {
  std::string t(table);
  return {"INSERT INTO " + t + " (" + std::string(period_column) +
              ", project_group, resource_group, cluster_id, user_name, gpu_type, outcome, "
              "attempts, gpu_ms, cpu_core_ms, memory_mib_s) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
              "ON CONFLICT (" + std::string(period_column) +
              ", project_group, resource_group, cluster_id, user_name, gpu_type, outcome) DO UPDATE SET "
              "attempts = " + t + ".attempts + excluded.attempts, gpu_ms = " + t + ".gpu_ms + excluded.gpu_ms, "
              "cpu_core_ms = " + t + ".cpu_core_ms + excluded.cpu_core_ms, "
              "memory_mib_s = " + t + ".memory_mib_s + excluded.memory_mib_s",
          {period, r.project_group, r.resource_group, r.cluster, r.user, r.gpu_type, r.outcome, r.attempts, r.gpu_ms,
           r.cpu_core_ms, r.memory_mib_s}};
}

}  // namespace

std::vector<Statement> add_usage(const UsageRow& r) {
  return {upsert_usage("usage_daily", "day", r.day, r), upsert_usage("usage_monthly", "month", month_start(r.day), r)};
}

Result<Statement> usage_totals(const UsageQuery& q, const Dialect& d) {
  std::vector<const UsageColumn*> columns;
  for (const auto& name : q.group_by) {
    const UsageColumn* c = usage_column(name);
    if (!c) {
      return errors::invalid("group_by", "unknown usage column \"" + name + "\"", "未知的用量列 \"" + name + "\"");
    }
    if (std::find(columns.begin(), columns.end(), c) == columns.end()) columns.push_back(c);
  }
  std::string select, group, order;
  bool by_day = false;
  for (const auto* c : columns) {
    select += c->column;
    select += ", ";
    group += group.empty() ? " GROUP BY " : ", ";
    group += c->column;
    order += order.empty() ? " ORDER BY " : ", ";
    order += c->column;
    if (c->name != "day") order += d.bytewise;
    else by_day = true;
  }
  // SUM of BIGINT is NUMERIC in PostgreSQL; the cast keeps one row type.
  const std::string sums =
      "CAST(SUM(attempts) AS BIGINT), CAST(SUM(gpu_ms) AS BIGINT), CAST(SUM(cpu_core_ms) AS BIGINT), "
      "CAST(SUM(memory_mib_s) AS BIGINT)";
  // The whole months inside [from_day, to_day) come from usage_monthly, a
  // row per month instead of one per day; the days before the first and
  // after the last whole month from usage_daily. Grouped by day, it is all
  // usage_daily.
  const Millis first_month = month_start(q.from_day) == q.from_day ? q.from_day : next_month_start(month_start(q.from_day));
  const Millis end_month = month_start(q.to_day);
  if (by_day || first_month >= end_month) {
    Statement s{"SELECT " + select + sums + " FROM usage_daily WHERE day >= ? AND day < ?" + group + order,
                {q.from_day, q.to_day}};
    return s;
  }
  const std::string parts = select + "attempts, gpu_ms, cpu_core_ms, memory_mib_s";
  // One month as an equality, so that an index on (month, ...) hands its
  // rows over in the order of the next columns.
  Statement s{"SELECT " + select + sums + " FROM (SELECT " + parts + " FROM usage_monthly WHERE ", {}};
  if (next_month_start(first_month) == end_month) {
    s.text += "month = ?";
    s.args = {first_month};
  } else {
    s.text += "month >= ? AND month < ?";
    s.args = {first_month, end_month};
  }
  if (q.from_day < first_month) {
    s.text += " UNION ALL SELECT " + parts + " FROM usage_daily WHERE day >= ? AND day < ?";
    s.args.emplace_back(q.from_day);
    s.args.emplace_back(first_month);
  }
  if (end_month < q.to_day) {
    s.text += " UNION ALL SELECT " + parts + " FROM usage_daily WHERE day >= ? AND day < ?";
    s.args.emplace_back(end_month);
    s.args.emplace_back(q.to_day);
  }
  s.text += ") AS u" + group + order;
  return s;
}

std::vector<std::string> usage_result_columns(const UsageQuery& q) {
  std::vector<std::string> out;
  for (const auto& name : q.group_by) {
    if (usage_column(name) && std::find(out.begin(), out.end(), name) == out.end()) out.push_back(name);
  }
  return out;
}

std::string& usage_field(UsageRow& row, std::string_view name) {
  if (name == "project_group") return row.project_group;
  if (name == "resource_group") return row.resource_group;
  if (name == "cluster") return row.cluster;
  if (name == "user") return row.user;
  if (name == "gpu_type") return row.gpu_type;
  return row.outcome;
}

Statement finished_tasks_before(Millis before, int limit) {
  // No ORDER BY: each state's range of (state, updated_at) is walked only
  // until the batch is full.
  Statement s{"SELECT id FROM tasks WHERE updated_at < ?", {before}};
  append_in(s, "state", finished_task_states());
  s.text += " LIMIT ?";
  s.args.emplace_back(std::int64_t{std::max(1, limit)});
  return s;
}

Statement delete_events_before(Millis before, int limit) {
  return {"DELETE FROM events WHERE id IN (SELECT id FROM events WHERE at < ? ORDER BY at LIMIT ?)",
          {before, std::int64_t{std::max(1, limit)}}};
}

std::vector<Statement> delete_task(const Task& task) {
  // Attempt ids are "<task id>.<number>": the events about them are found
  // through the attempts table, before its rows go.
  return {
      {"DELETE FROM events WHERE object_kind = 'attempt' AND object_id IN (SELECT id FROM attempts WHERE task_id = ?)",
       {task.id}},
      {"DELETE FROM events WHERE object_kind = 'task' AND object_id = ?", {task.id}},
      {"DELETE FROM attempts WHERE task_id = ?", {task.id}},
      {"DELETE FROM tasks WHERE id = ?", {task.id}},
      {"DELETE FROM pipelines WHERE id = ? AND NOT EXISTS (SELECT 1 FROM tasks WHERE pipeline_id = ?)",
       {task.pipeline_id, task.pipeline_id}},
  };
}

}  // namespace cp::sql
