#include "server/internal.h"

#include <cstdlib>
#include <set>

namespace cp::internal {

Event make_event(Millis at, std::string actor, std::string object_kind, std::string object_id, std::string type,
                 std::string from, std::string to, std::string message, json::object data) {
  Event e;
  e.at = at;
  e.actor = std::move(actor);
  e.object_kind = std::move(object_kind);
  e.object_id = std::move(object_id);
  e.type = std::move(type);
  e.from = std::move(from);
  e.to = std::move(to);
  e.message = std::move(message);
  e.data = std::move(data);
  return e;
}

Status transition(Tx& tx, Task& task, TaskState to, Millis now, const std::string& actor, const std::string& message,
                  json::object data) {
  TaskState from = task.state;
  CP_CHECK(can_transition(from, to), "illegal task transition");
  task.state = to;
  task.updated_at = now;
  if (to == TaskState::Queued) {
    task.queued_at = now;
    task.assigned_cluster.clear();
  }
  if (to == TaskState::Running && task.started_at == 0) task.started_at = now;
  if (is_terminal(to)) task.finished_at = now;
  if (to != TaskState::Queued) task.reasons.clear();
  CP_TRY(tx.update_task(task));
  auto ev = make_event(now, actor, "task", task.id, "task.state", boost::describe::enum_to_string(from, "?"),
                       boost::describe::enum_to_string(to, "?"), message, std::move(data));
  ev.data["pipeline_id"] = task.pipeline_id;
  ev.data["project_group"] = task.project_group;
  ev.data["resource_group"] = task.resource_group;
  if (!task.assigned_cluster.empty()) ev.data["cluster"] = task.assigned_cluster;
  CP_ASSIGN(auto id, tx.append_event(ev));
  (void)id;
  return {};
}

Status bind_storage_pool(Tx& tx, Task& task, const std::string& cluster_id) {
  if (!task.storage_pool.empty()) return {};
  CP_ASSIGN(auto c, tx.get_cluster(cluster_id));
  if (c) task.storage_pool = c->storage_pool;
  return {};
}

Status cancel_dependents(Tx& tx, const Task& failed, Millis now, const std::string& actor) {
  CP_ASSIGN(auto tasks, tx.tasks_of_pipeline(failed.pipeline_id));
  std::set<std::string> dead{failed.id};
  // Tasks come in any order; repeat until no new dependent is found (the DAG
  // is at most 1000 steps, so this stays small).
  bool changed = true;
  while (changed) {
    changed = false;
    for (auto& t : tasks) {
      if (dead.count(t.id) || is_terminal(t.state)) continue;
      for (const auto& dep : t.depends_on) {
        if (dead.count(dep)) {
          dead.insert(t.id);
          t.reasons = {PendingReason{"upstream_failed", "an upstream task did not succeed: " + dep,
                                     "上游任务未成功：" + dep, {}}};
          CP_TRY(transition(tx, t, TaskState::Cancelled, now, actor, "upstream task " + dep + " did not succeed"));
          changed = true;
          break;
        }
      }
    }
  }
  return {};
}

std::int64_t attempt_replicas(const Attempt& a) {
  return static_cast<std::int64_t>(std::max<std::size_t>(1, a.placements.size()));
}

Resources attempt_total(const Attempt& a) { return a.resources.times(attempt_replicas(a)); }

Result<std::map<std::string, Resources>> used_by_resource_group(Tx& tx) {
  CP_ASSIGN(auto holding, tx.tasks_in_states({TaskState::Dispatched, TaskState::Running, TaskState::Preempting}));
  std::map<std::string, std::string> group_of;
  for (const auto& t : holding) group_of[t.id] = t.resource_group;
  CP_ASSIGN(auto attempts, tx.active_attempts(""));
  std::map<std::string, Resources> used;
  for (const auto& a : attempts) used[group_of[a.task_id]] += attempt_total(a);
  return used;
}

// Products of bytes and milliseconds overflow 64 bits (2 TiB for a day).
__extension__ using Wide = __int128;

std::vector<UsageRow> usage_of(const Task& task, const Attempt& a) {
  std::vector<UsageRow> rows;
  if (a.started_at == 0 || a.finished_at <= a.started_at) return rows;
  const Resources total = attempt_total(a);
  const auto gpus = static_cast<Wide>(total.gpus());
  const auto cpu_milli = static_cast<Wide>(total.cpu_milli());
  const auto memory_bytes = static_cast<Wide>(total.memory_bytes());
  for (Millis s = a.started_at; s < a.finished_at;) {
    const Millis day = day_start(s);
    const Millis e = std::min(a.finished_at, day + kDayMs);
    const auto ms = static_cast<Wide>(e - s);
    UsageRow r;
    r.day = day;
    r.project_group = task.project_group;
    r.resource_group = task.resource_group;
    r.cluster = a.cluster_id;
    r.user = task.user;
    r.gpu_type = total.gpus() > 0 ? total.gpu_type() : "";
    r.outcome = boost::describe::enum_to_string(a.state, "?");
    r.attempts = s == a.started_at ? 1 : 0;
    r.gpu_ms = static_cast<std::int64_t>(gpus * ms);
    r.cpu_core_ms = static_cast<std::int64_t>(cpu_milli * ms / 1000);
    r.memory_mib_s = static_cast<std::int64_t>(memory_bytes * ms / (Wide{1 << 20} * 1000));
    rows.push_back(std::move(r));
    s = e;
  }
  return rows;
}

Status record_usage(Tx& tx, const Task& task, const Attempt& a) {
  auto rows = usage_of(task, a);
  if (rows.empty()) return {};
  return tx.add_usage(rows);
}

std::vector<ClusterSample> history_rows(const std::string& cluster, Millis at,
                                        const std::function<void(ClusterSample&)>& fill) {
  std::vector<ClusterSample> rows;
  for (auto w : kHistoryWidths) {
    ClusterSample s;
    s.cluster = cluster;
    s.width_s = w;
    const Millis width_ms = w * 1000;
    s.bucket = at - ((at % width_ms) + width_ms) % width_ms;
    fill(s);
    rows.push_back(std::move(s));
  }
  return rows;
}

Event attempt_end_event(Millis now, const std::string& actor, const Task* task, const Attempt& a,
                        const std::string& message) {
  json::object data;
  if (task) {
    json::object u;
    u["task_id"] = task->id;
    u["project_group"] = task->project_group;
    u["resource_group"] = task->resource_group;
    u["user"] = task->user;
    u["cluster"] = a.cluster_id;
    u["started_at"] = a.started_at;
    u["finished_at"] = a.finished_at;
    u["resources"] = to_json(a.resources);
    u["replicas"] = attempt_replicas(a);
    data["usage"] = std::move(u);
  }
  return make_event(now, actor, "attempt", a.id, "attempt.state", "", boost::describe::enum_to_string(a.state, "?"),
                    message, std::move(data));
}

std::optional<std::pair<Task, Attempt>> usage_source(const Event& e) {
  const auto* u = e.data.if_contains("usage");
  if (!u || !u->is_object()) return std::nullopt;
  const auto& o = u->as_object();
  auto text = [&](const char* k) -> std::string {
    const auto* v = o.if_contains(k);
    return v && v->is_string() ? std::string(v->as_string()) : std::string();
  };
  auto number = [&](const char* k) -> std::int64_t {
    const auto* v = o.if_contains(k);
    return v && v->is_int64() ? v->as_int64() : 0;
  };
  Task t;
  t.id = text("task_id");
  t.project_group = text("project_group");
  t.resource_group = text("resource_group");
  t.user = text("user");
  Attempt a;
  a.id = e.object_id;
  a.task_id = t.id;
  a.cluster_id = text("cluster");
  a.started_at = number("started_at");
  a.finished_at = number("finished_at");
  const auto* r = o.if_contains("resources");
  if (!r || !from_json(*r, a.resources).ok()) return std::nullopt;
  a.placements.resize(static_cast<std::size_t>(std::clamp<std::int64_t>(number("replicas"), 1, 100000)));
  AttemptState state{};
  if (!boost::describe::enum_from_string(e.to.c_str(), state)) return std::nullopt;
  a.state = state;
  return std::pair{std::move(t), std::move(a)};
}

// Measured use goes to its step's row of the day the attempt ended; the
// step is named with its pipeline's name, which stays the same from one
// submission of a pipeline to the next.
Status record_measured_use(Tx& tx, const Task& task, const Attempt& a) {
  if (a.use.samples() == 0 || a.finished_at == 0) return {};
  CP_ASSIGN(auto pipeline, tx.get_pipeline(task.pipeline_id));
  ResourceUseRow row;
  row.day = day_start(a.finished_at);
  row.project_group = task.project_group;
  row.step = (pipeline ? pipeline->name : task.pipeline_id) + "/" + task.name;
  row.attempts = 1;
  row.request = a.resources;
  row.request_at = a.finished_at;
  row.use = a.use;
  return tx.add_resource_use(row);
}

Status record_attempt_end(Tx& tx, const Task* task, const Attempt& a, Millis now, const std::string& actor,
                          const std::string& message) {
  CP_ASSIGN(auto eid, tx.append_event(attempt_end_event(now, actor, task, a, message)));
  (void)eid;
  if (task) CP_TRY(record_usage(tx, *task, a));
  if (task) CP_TRY(record_measured_use(tx, *task, a));
  const bool failed = a.state == AttemptState::Failed || a.state == AttemptState::Lost;
  if (!failed && a.state != AttemptState::Succeeded) return {};
  return tx.add_cluster_samples(history_rows(a.cluster_id, a.finished_at, [&](ClusterSample& s) {
    s.finished = 1;
    s.failed = failed ? 1 : 0;
  }));
}

Error unknown_reference(const std::string& field, const std::string& kind, const std::string& name) {
  Error e{"unknown_reference", 400, field + ": " + kind + " \"" + name + "\" does not exist",
          field + "：" + kind + " \"" + name + "\" 不存在", {}};
  e.details["field"] = field;
  e.details["kind"] = kind;
  e.details["name"] = name;
  return e;
}

Error forbidden_for(const Principal& p, const std::string& what_en, const std::string& what_zh) {
  Error e = errors::forbidden("user \"" + p.user + "\" may not " + what_en, "用户 \"" + p.user + "\" 无权" + what_zh);
  e.details["user"] = p.user;
  return e;
}

namespace {

// The same devices, whatever their live figures (server/live_inventory.h).
bool same_devices(const std::vector<GpuDevice>& a, const std::vector<GpuDevice>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a[i].index != b[i].index || a[i].uuid != b[i].uuid || a[i].model != b[i].model ||
        a[i].memory_total != b[i].memory_total) {
      return false;
    }
  }
  return true;
}

}  // namespace

bool same_report(const Node& stored, const Node& reported) {
  if (std::llabs(stored.facts.clock_offset_ms - reported.facts.clock_offset_ms) > kClockSlackMs) return false;
  HostFacts a = stored.facts, b = reported.facts;
  a.clock_offset_ms = b.clock_offset_ms = 0;
  return stored.labels == reported.labels && stored.capacity == reported.capacity &&
         stored.allocatable == reported.allocatable && stored.ready == reported.ready &&
         stored.not_ready_reason == reported.not_ready_reason && to_json(a) == to_json(b) &&
         same_devices(stored.gpus, reported.gpus) && to_json(stored.drift) == to_json(reported.drift);
}

}  // namespace cp::internal
