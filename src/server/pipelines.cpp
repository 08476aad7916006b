// Pipelines and tasks as users see them: submit, list, inspect, cancel,
// explain, logs, events and usage.
#include <algorithm>
#include <set>

#include "common/ids.h"
#include "model/documents.h"
#include "server/control_plane.h"
#include "server/internal.h"

namespace cp {

using internal::forbidden_for;
using internal::make_event;
using internal::unknown_reference;

namespace {

Error not_visible(const std::string& kind, const std::string& id) { return errors::not_found(kind, id); }

// A bare "gpu/any" request is resolved at placement; cpu and memory fall back
// to the resource group's defaults (a LimitRange, in Kubernetes terms).
void apply_defaults(Resources& r, const ResourceGroup& rg) {
  for (auto name : {kCpu, kMemory}) {
    if (r.get(name) == 0 && rg.default_request.get(name) > 0) r.set(name, rg.default_request.get(name));
  }
}

// Every shape a step may run in gets the defaults: a fallback inherits the
// step's omissions as it inherits the rest.
void apply_defaults(Step& step, const ResourceGroup& rg) {
  apply_defaults(step.resources, rg);
  for (auto& shape : step.fallbacks) apply_defaults(shape.resources, rg);
}

// The group's per-task maximum, on the whole gang of one shape; `path` is
// where that shape's resources are written.
Status check_task_maximum(const Resources& per_replica, int replicas, const ResourceGroup& rg,
                          const std::string& path) {
  Resources total = per_replica.times(replicas);
  for (const auto& name : total.exceeding(rg.max_per_task)) {
    if (rg.max_per_task.get(name) == 0) continue;  // only named maxima apply
    Error e = errors::invalid(path + "." + name,
                              "asks " + format_quantity(name, total.get(name)) + " but resource group " + rg.name +
                                  " allows at most " + format_quantity(name, rg.max_per_task.get(name)) + " per task",
                              "申请 " + format_quantity(name, total.get(name)) + "，但资源组 " + rg.name +
                                  " 每个任务最多 " + format_quantity(name, rg.max_per_task.get(name)));
    e.code = "exceeds_task_maximum";
    return e;
  }
  return {};
}

// Each shape must fit: a fallback past the maximum could never be placed.
Status check_task_maximum(const Step& step, const ResourceGroup& rg, const std::string& path) {
  if (rg.max_per_task.empty()) return {};
  CP_TRY(check_task_maximum(step.resources, step.replicas, rg, path + ".resources"));
  for (std::size_t j = 0; j < step.fallbacks.size(); ++j) {
    CP_TRY(check_task_maximum(step.fallbacks[j].resources, step.replicas, rg,
                              path + ".fallbacks[" + std::to_string(j) + "].resources"));
  }
  return {};
}

Status check_idempotency_key(const std::string& key) {
  constexpr std::size_t kMaxKey = 255;
  const bool printable = std::all_of(key.begin(), key.end(), [](char c) { return c >= 0x20 && c <= 0x7e; });
  if (!key.empty() && key.size() <= kMaxKey && printable) return {};
  return errors::invalid("Idempotency-Key", "must be 1 to 255 printable ASCII characters",
                         "须为 1 到 255 个可打印的 ASCII 字符");
}

// What an earlier submit under the key answered, if this one sent the same
// body; else 422: the client sent another request under a key it used.
Result<ControlPlane::SubmitAnswer> replay(const IdempotencyRecord& stored, const std::string& request_hash) {
  if (stored.request_hash != request_hash) {
    Error e = errors::conflict("Idempotency-Key \"" + stored.key +
                                   "\" was used by an earlier submit with another body; a new request needs a new key",
                               "幂等键 \"" + stored.key + "\" 已被请求体不同的先前提交使用；新的请求需要新的键");
    e.code = "idempotency_key_reused";
    e.status = 422;
    e.details["idempotency_key"] = stored.key;
    return e;
  }
  CP_ASSIGN(auto body, parse_json(stored.response));
  if (!body.is_object()) {
    return errors::internal("the stored answer of idempotency key " + stored.key + " is not an object");
  }
  return ControlPlane::SubmitAnswer{std::move(body.as_object()), stored.status, true};
}

}  // namespace

Result<json::object> ControlPlane::submit_pipeline(const Principal& p, const json::value& doc, bool dry_run,
                                                   const AuditEntry* audit) {
  CP_ASSIGN(auto answer, submit(p, doc, SubmitRequest{.dry_run = dry_run, .audit = audit}));
  return std::move(answer.body);
}

Result<ControlPlane::SubmitAnswer> ControlPlane::submit(const Principal& p, const json::value& doc,
                                                        const SubmitRequest& request) {
  const bool dry_run = request.dry_run;
  const AuditEntry* audit = request.audit;
  if (request.idempotency_key) CP_TRY(check_idempotency_key(*request.idempotency_key));
  // A dry run creates nothing that a retry could repeat: its key is neither
  // looked up nor kept.
  const std::string* key = request.idempotency_key && !dry_run ? &*request.idempotency_key : nullptr;
  if (p.kind != Principal::Kind::user) return forbidden_for(p, "submit pipelines", "提交流水线");
  CP_ASSIGN(auto pipeline, pipeline_from_document(doc));
  if (pipeline.project_group.empty()) {
    return errors::invalid("metadata.project_group", "is required", "必填");
  }
  if (static_cast<std::int64_t>(pipeline.steps.size()) > config_.max_tasks_per_pipeline) {
    return errors::invalid("spec.steps", "at most " + std::to_string(config_.max_tasks_per_pipeline) + " steps",
                           "最多 " + std::to_string(config_.max_tasks_per_pipeline) + " 个步骤");
  }
  Millis now = clock_.now_ms();
  pipeline.id = new_id("p", now);
  pipeline.submitted_by = p.user;
  pipeline.created_at = now;
  json::array task_list;
  // What a submit that is not a dry run answers. Built inside the write
  // (the one writer's time) only when its audit row needs it as `after`,
  // and then answered as it is.
  auto answer_of = [&] {
    json::object a;
    a["pipeline"] = to_json(pipeline);
    a["tasks"] = task_list;
    return a;
  };
  std::optional<json::object> answer;
  std::optional<IdempotencyRecord> seen;  // the key's row, when an earlier submit stored it

  const Pipeline submitted = pipeline;
  // Shared: the body reads only through tx (PostgreSQL may commit it with
  // other submits queued at the same time).
  Status written = store_.write_shared([&](Tx& tx) -> Status {
    // Store::write runs the body again after a conflict or a busy database:
    // each run starts from the pipeline as submitted, and the answer names
    // only the tasks of the run that committed.
    pipeline = submitted;
    task_list.clear();
    answer.reset();
    seen.reset();
    // Every write below either succeeds or fails the submit: PostgreSQL may
    // send them all with COMMIT, in one round trip.
    tx.hold_writes();
    if (key != nullptr) {
      // Before the checks: a retry gets the first answer even where they
      // would refuse it now (its user since removed from the group, say).
      CP_ASSIGN(seen, tx.get_idempotency(p.user, *key));
      if (seen) return {};  // nothing to write: answered by replay() below
    }
    CP_ASSIGN(auto pg, tx.get_project_group(pipeline.project_group));
    if (!pg) return unknown_reference("metadata.project_group", "project group", pipeline.project_group);
    if (!p.can_submit_to(pg->name)) {
      return forbidden_for(p, "submit into project group " + pg->name, "向项目组 " + pg->name + " 提交任务");
    }
    if (pipeline.resource_group.empty()) pipeline.resource_group = pg->default_resource_group;
    if (pipeline.resource_group.empty()) {
      return errors::invalid("spec.resource_group",
                             "is required: project group " + pg->name + " has no default resource group",
                             "必填：项目组 " + pg->name + " 没有默认资源组");
    }
    CP_ASSIGN(auto rg, tx.get_resource_group(pipeline.resource_group));
    if (!rg) return unknown_reference("spec.resource_group", "resource group", pipeline.resource_group);
    if (!pg->allows_resource_group(rg->name)) {
      Error e = errors::forbidden("project group " + pg->name + " may not use resource group " + rg->name,
                                  "项目组 " + pg->name + " 无权使用资源组 " + rg->name);
      e.code = "resource_group_not_allowed";
      return e;
    }
    CP_ASSIGN(auto refusal, internal::approval_refusal(tx, *pg, rg->name, p, now));
    if (refusal) return *refusal;
    for (const auto& [k, v] : rg->required_labels) {
      auto it = pipeline.labels.find(k);
      if (it == pipeline.labels.end() || it->second != v) {
        Error e = errors::invalid("metadata.labels", "resource group " + rg->name + " requires label " + k + "=" + v,
                                  "资源组 " + rg->name + " 要求标签 " + k + "=" + v);
        e.code = "missing_required_label";
        return e;
      }
    }
    int priority = 0;
    if (!pipeline.priority.empty()) {
      CP_ASSIGN(auto pc, tx.get_priority_class(pipeline.priority));
      if (!pc) return unknown_reference("spec.priority", "priority class", pipeline.priority);
      priority = pc->value;
    }
    if (!pipeline.cluster.empty()) {
      CP_ASSIGN(auto c, tx.get_cluster(pipeline.cluster));
      if (!c) return unknown_reference("spec.cluster", "cluster", pipeline.cluster);
      if (std::find(rg->clusters.begin(), rg->clusters.end(), pipeline.cluster) == rg->clusters.end()) {
        return errors::invalid("spec.cluster", "cluster " + pipeline.cluster + " is not in resource group " + rg->name,
                               "集群 " + pipeline.cluster + " 不属于资源组 " + rg->name);
      }
    }
    for (std::size_t i = 0; i < pipeline.steps.size(); ++i) {
      auto& step = pipeline.steps[i];
      apply_defaults(step, *rg);
      CP_TRY(check_task_maximum(step, *rg, "spec.steps[" + std::to_string(i) + "]"));
    }
    if (dry_run) {
      // Every check above has passed; what would be created, without ids.
      task_list.clear();
      for (auto idx : topological_order(pipeline.steps)) {
        json::object item;
        item["name"] = pipeline.steps[idx].name;
        item["state"] = "Queued";
        item["resources"] = to_json(pipeline.steps[idx].resources);
        task_list.push_back(std::move(item));
      }
      return {};
    }
    CP_TRY(tx.insert_pipeline(pipeline));
    std::map<std::string, std::string> id_of_step;
    for (auto idx : topological_order(pipeline.steps)) id_of_step[pipeline.steps[idx].name] = new_id("t", now);
    for (auto idx : topological_order(pipeline.steps)) {
      const auto& step = pipeline.steps[idx];
      Task t;
      t.id = id_of_step[step.name];
      t.pipeline_id = pipeline.id;
      t.name = step.name;
      t.project_group = pg->name;
      t.resource_group = rg->name;
      t.priority_class = pipeline.priority;
      t.priority = priority;
      t.user = p.user;
      t.step = step;
      for (const auto& d : step.depends_on) t.depends_on.push_back(id_of_step[d]);
      t.cluster_selector = pipeline.cluster_selector;
      t.cluster = pipeline.cluster;
      t.state = TaskState::Queued;
      t.created_at = t.updated_at = t.queued_at = now;
      CP_TRY(tx.insert_task(t));
      json::object data;
      data["pipeline_id"] = pipeline.id;
      data["project_group"] = t.project_group;
      data["resource_group"] = t.resource_group;
      CP_ASSIGN(auto eid, tx.append_event(make_event(now, p.user, "task", t.id, "task.state", "", "Queued",
                                                    "submitted", data)));
      (void)eid;
      json::object item;
      item["id"] = t.id;
      item["name"] = t.name;
      item["state"] = "Queued";
      task_list.push_back(std::move(item));
    }
    if (audit != nullptr || key != nullptr) answer = answer_of();
    if (audit != nullptr) {
      // Committed with the tasks or not at all: no accepted submit lacks
      // its row, and none waits for a second commit.
      AuditEntry e = *audit;
      e.at = now;
      e.id = new_id("audit", now);
      e.after = *answer;
      redact_secrets(e.after);
      CP_TRY(tx.append_audit(e));
    }
    if (key != nullptr) {
      // With the pipeline or not at all: a retry finds either both or
      // neither. Only accepted submits get here; a refused one keeps no key.
      CP_TRY(tx.insert_idempotency(
          IdempotencyRecord{p.user, *key, request.request_hash, 201, json::serialize(*answer), now}));
    }
    return {};
  });
  if (!written.ok()) {
    // Another submit under the key committed after this one's snapshot was
    // taken (PostgreSQL: concurrent transactions), and the key's unique row
    // refused this one's insert: nothing of it was kept, and the other's
    // answer is this one's too.
    if (key == nullptr || written.error().code != "already_exists") return written.error();
    std::optional<IdempotencyRecord> stored;
    CP_TRY(store_.read([&](Tx& tx) -> Status {
      CP_ASSIGN(stored, tx.get_idempotency(p.user, *key));
      return {};
    }));
    if (!stored) return written.error();
    return replay(*stored, request.request_hash);
  }
  if (seen) return replay(*seen, request.request_hash);
  if (!dry_run) {
    if (audit != nullptr) audit_with_changes_.fetch_add(1, std::memory_order_relaxed);
    wake_scheduler();
    return SubmitAnswer{answer ? std::move(*answer) : answer_of(), 201, false};
  }
  json::object out;
  out["dry_run"] = true;
  out["pipeline"] = to_json(pipeline);
  out["tasks"] = std::move(task_list);
  return SubmitAnswer{std::move(out), 200, false};
}

Result<json::object> ControlPlane::get_pipeline(const Principal& p, const std::string& id) {
  json::object out;
  CP_TRY(store_.read([&](Tx& tx) -> Status {
    CP_ASSIGN(auto pl, tx.get_pipeline(id));
    if (!pl || !p.can_read_project(pl->project_group)) return not_visible("pipeline", id);
    CP_ASSIGN(auto tasks, tx.tasks_of_pipeline(id));
    out["pipeline"] = to_json(*pl);
    out["tasks"] = to_json(tasks);
    return {};
  }));
  return out;
}

Result<TaskPage> ControlPlane::list_tasks(const Principal& p, TaskQuery q) {
  if (p.kind != Principal::Kind::user) return forbidden_for(p, "list tasks", "查看任务");
  if (!p.can_read_all()) {
    std::set<std::string> visible;
    for (const auto& [pg, role] : p.project_roles) visible.insert(pg);
    q.project_groups = visible;
  }
  TaskPage page;
  CP_TRY(store_.read([&](Tx& tx) -> Status {
    CP_ASSIGN(page, tx.list_tasks(q));
    return {};
  }));
  return page;
}

Result<json::object> ControlPlane::get_task(const Principal& p, const std::string& id) {
  json::object out;
  CP_TRY(store_.read([&](Tx& tx) -> Status {
    CP_ASSIGN(auto t, tx.get_task(id));
    if (!t || !p.can_read_project(t->project_group)) return not_visible("task", id);
    CP_ASSIGN(auto attempts, tx.attempts_of_task(id));
    out = to_json(*t).as_object();
    out["attempts"] = to_json(attempts);
    return {};
  }));
  return out;
}

Result<Task> ControlPlane::cancel_task(const Principal& p, const std::string& id) {
  Millis now = clock_.now_ms();
  Task out;
  std::string notify_cluster;
  CP_TRY(store_.write([&](Tx& tx) -> Status {
    CP_ASSIGN(auto t, tx.get_task(id));
    if (!t || !p.can_read_project(t->project_group)) return not_visible("task", id);
    if (!(p.can_submit_to(t->project_group) && (t->user == p.user || p.can_admin_project(t->project_group)))) {
      return forbidden_for(p, "cancel task " + id, "取消任务 " + id);
    }
    if (is_terminal(t->state)) {
      Error e = errors::conflict("task " + id + " already ended as " + boost::describe::enum_to_string(t->state, "?"),
                                 "任务 " + id + " 已结束（" + boost::describe::enum_to_string(t->state, "?") + "）");
      e.code = "already_finished";
      return e;
    }
    t->cancel_requested = true;
    if (t->state == TaskState::Queued || t->state == TaskState::Lost || t->current_attempt.empty()) {
      t->reasons = {PendingReason{"cancelled", "cancelled by " + p.user, "已被 " + p.user + " 取消", {}}};
      CP_TRY(internal::transition(tx, *t, TaskState::Cancelled, now, p.user, "cancelled by " + p.user));
      CP_TRY(internal::cancel_dependents(tx, *t, now, p.user));
    } else {
      CP_ASSIGN(auto a, tx.get_attempt(t->current_attempt));
      CP_CHECK(a.has_value(), "task without its current attempt");
      std::string how = "the agent stops attempt " + a->id;
      if (a->state == AttemptState::Unknown) {
        // Its cluster is silent: it stays Unknown, told to stop once its
        // agent is back (resume_unknown), or ends when an admin confirms it
        // lost (server/unknown_attempts.h).
        a->stop_reason = "cancel";
        CP_TRY(tx.update_attempt(*a));
        how = "attempt " + a->id + " is Unknown: stopped once its agent is back, or ended when it is confirmed lost";
      } else if (!is_terminal(a->state) && a->state != AttemptState::Stopping) {
        a->state = AttemptState::Stopping;
        a->stop_reason = "cancel";
        CP_TRY(tx.update_attempt(*a));
        notify_cluster = a->cluster_id;
      }
      t->updated_at = now;
      CP_TRY(tx.update_task(*t));
      CP_ASSIGN(auto eid, tx.append_event(make_event(now, p.user, "task", id, "task.cancel_requested", "", "",
                                                    "cancel requested; " + how)));
      (void)eid;
    }
    out = *t;
    return {};
  }));
  if (!notify_cluster.empty()) cluster_signal(notify_cluster).notify();
  return out;
}

Result<json::object> ControlPlane::explain_task(const Principal& p, const std::string& id) {
  json::object out;
  CP_TRY(store_.read([&](Tx& tx) -> Status {
    CP_ASSIGN(auto t, tx.get_task(id));
    if (!t || !p.can_read_project(t->project_group)) return not_visible("task", id);
    CP_ASSIGN(auto attempts, tx.attempts_of_task(id));
    std::string state = boost::describe::enum_to_string(t->state, "?");
    std::string summary, summary_zh;
    if (t->state == TaskState::Queued) {
      if (t->reasons.empty()) {
        summary = "Queued: waiting for the next scheduling cycle";
        summary_zh = "排队中：等待下一轮调度";
      } else {
        summary = "Queued: " + t->reasons.front().message;
        summary_zh = "排队中：" + t->reasons.front().message_zh;
      }
    } else if (!attempts.empty()) {
      const auto& a = attempts.back();
      std::string where = a.cluster_id;
      if (!a.placements.empty()) where += "/" + a.placements.front().node;
      summary = state + " on " + where + " (attempt " + std::to_string(a.number) + ")";
      summary_zh = state + "，位于 " + where + "（第 " + std::to_string(a.number) + " 次尝试）";
      if (t->exit_code) {
        summary += ", exit code " + std::to_string(*t->exit_code);
        summary_zh += "，退出码 " + std::to_string(*t->exit_code);
      }
      if (a.state == AttemptState::Unknown && !t->reasons.empty()) {
        summary += "; " + t->reasons.front().message;
        summary_zh += "；" + t->reasons.front().message_zh;
      }
    } else {
      summary = summary_zh = state;
      if (!t->reasons.empty()) {
        summary += ": " + t->reasons.front().message;
        summary_zh += "：" + t->reasons.front().message_zh;
      }
    }
    out["task_id"] = t->id;
    out["state"] = state;
    out["reasons"] = to_json(t->reasons);
    out["attempts"] = to_json(attempts);
    out["summary"] = summary;
    out["summary_zh"] = summary_zh;
    return {};
  }));
  return out;
}

Result<LogRead> ControlPlane::read_logs(const Principal& p, const std::string& task_id, int attempt_number,
                                        std::int64_t offset) {
  std::optional<Attempt> attempt;
  CP_TRY(store_.read([&](Tx& tx) -> Status {
    CP_ASSIGN(auto t, tx.get_task(task_id));
    if (!t || !p.can_read_project(t->project_group)) return not_visible("task", task_id);
    int n = attempt_number > 0 ? attempt_number : t->attempts;
    if (n <= 0) return {};
    CP_ASSIGN(attempt, tx.get_attempt(task_id + "." + std::to_string(n)));
    if (!attempt) return errors::not_found("attempt", task_id + "." + std::to_string(n));
    return {};
  }));
  LogRead out;
  out.next_offset = offset;
  if (!attempt) return out;  // not started yet
  out.attempt_id = attempt->id;
  // Chunks are keyed by their byte offset; a resent chunk overwrites its key,
  // and overlapping chunks contribute only bytes not yet seen.
  std::string prefix = log_prefix(task_id, attempt->id) + "r0/";
  std::string after;
  while (true) {
    CP_ASSIGN(auto infos, objects_.list(prefix, after, 1000));
    for (const auto& info : infos) {
      std::int64_t chunk_off = std::stoll(info.key.substr(prefix.size()));
      if (chunk_off + info.size <= out.next_offset) continue;
      if (chunk_off > out.next_offset) break;  // a gap: that chunk has not arrived yet
      CP_ASSIGN(auto data, objects_.get(info.key));
      if (!data) continue;
      std::int64_t skip = out.next_offset - chunk_off;
      if (skip < static_cast<std::int64_t>(data->size())) {
        out.data.append(*data, static_cast<std::size_t>(skip));
        out.next_offset = chunk_off + static_cast<std::int64_t>(data->size());
      }
      if (static_cast<std::int64_t>(out.data.size()) >= config_.log_chunk_max_bytes) return out;
    }
    if (infos.size() < 1000) break;
    after = infos.back().key;
  }
  // The agent ships an attempt's last output right after the sync that
  // reports its end, so a reader is told "finished" only once the attempt
  // has been over for a moment (server time of the terminal report).
  constexpr Millis kLastLogsGraceMs = 3000;
  out.finished = is_terminal(attempt->state) && clock_.now_ms() - attempt->lease_renewed_at >= kLastLogsGraceMs;
  return out;
}

Result<std::vector<Event>> ControlPlane::list_events(const Principal& p, const EventQuery& q) {
  if (!p.can_read_all()) return forbidden_for(p, "read the event log", "查看事件日志");
  std::vector<Event> out;
  CP_TRY(store_.read([&](Tx& tx) -> Status {
    CP_ASSIGN(out, tx.list_events(q));
    return {};
  }));
  return out;
}

}  // namespace cp
