#include "server/unknown_attempts.h"

#include <algorithm>

#include "server/control_plane.h"
#include "server/internal.h"

namespace cp {

using internal::make_event;

namespace internal {

bool fenced_by_agent(ExecutorKind executor) { return executor == ExecutorKind::local; }

std::string job_check(ExecutorKind executor) {
  switch (executor) {
    case ExecutorKind::slurm: return "squeue";
    case ExecutorKind::kubernetes: return "kubectl get pods";
    case ExecutorKind::local: break;
  }
  return "ps";
}

Result<bool> end_lost(Tx& tx, Attempt& a, const Cluster& c, Millis now, const std::string& actor,
                      const std::string& message) {
  a.state = AttemptState::Lost;
  a.stop_reason = "lost";
  a.message = message;
  a.finished_at = now;
  CP_TRY(tx.update_attempt(a));
  CP_ASSIGN(auto t, tx.get_task(a.task_id));
  CP_TRY(record_attempt_end(tx, t ? &*t : nullptr, a, now, actor, a.message));
  if (!t || t->current_attempt != a.id || is_terminal(t->state)) return false;
  if (t->cancel_requested) {
    CP_TRY(transition(tx, *t, TaskState::Cancelled, now, actor, a.message));
    return false;
  }
  // Bound to the lost cluster's storage pool in this same transaction: its
  // checkpoints and data are there, so it requeues only onto clusters of
  // that pool (DESIGN.md, fencing), never elsewhere. A task bound before (a
  // checkpointing one) keeps the pool it was bound to.
  if (t->storage_pool.empty()) t->storage_pool = c.storage_pool;
  CP_TRY(transition(tx, *t, TaskState::Lost, now, actor, a.message));
  json::object rd;
  rd["cluster"] = c.id;
  rd["storage_pool"] = t->storage_pool;
  t->reasons = {PendingReason{"requeued_after_loss",
                              "attempt " + std::to_string(a.number) + " was lost with cluster " + c.id +
                                  "; waiting for a new placement in storage pool " + t->storage_pool,
                              "第 " + std::to_string(a.number) + " 次尝试随集群 " + c.id + " 失联而丢失；等待在存储池 " +
                                  t->storage_pool + " 中重新调度",
                              std::move(rd)}};
  CP_TRY(transition(tx, *t, TaskState::Queued, now, actor, "requeued after loss"));
  return true;
}

Status mark_unknown(Tx& tx, Attempt& a, const Cluster& c, Millis now) {
  const std::string from = boost::describe::enum_to_string(a.state, "?");
  const std::string n = std::to_string(a.number);
  const std::string since = format_time(c.last_contact);
  const std::string confirm = "cubeplane clusters confirm-lost " + c.id;
  a.state = AttemptState::Unknown;
  a.message = "cluster " + c.id + " silent since " + since + ": whether attempt " + n +
              " still runs is unknown; it is rerun only when the agent reports its end, or after a platform admin "
              "confirms it is gone: " + confirm;
  CP_TRY(tx.update_attempt(a));
  json::object data;
  data["cluster"] = c.id;
  data["task"] = a.task_id;
  CP_ASSIGN(auto eid, tx.append_event(make_event(now, "system", "attempt", a.id, "attempt.state", from, "Unknown",
                                                a.message, std::move(data))));
  (void)eid;
  CP_ASSIGN(auto t, tx.get_task(a.task_id));
  if (!t || t->current_attempt != a.id || is_terminal(t->state)) return {};
  json::object rd;
  rd["cluster"] = c.id;
  rd["attempt"] = a.id;
  rd["since"] = c.last_contact;
  t->reasons = {PendingReason{"attempt_unknown",
                              "cluster " + c.id + " silent since " + since + ": attempt " + n +
                                  " may still run there; it is not rerun until its agent reports its end or a "
                                  "platform admin confirms it is gone (" + confirm + ")",
                              "集群 " + c.id + " 自 " + since + " 起失联：第 " + n +
                                  " 次尝试可能仍在运行；在其 agent 报告结束或平台管理员确认其已不存在（" + confirm +
                                  "）之前不会重新运行",
                              std::move(rd)}};
  t->updated_at = now;
  return tx.update_task(*t);
}

Status resume_unknown(Tx& tx, Attempt& a, Millis now, const std::string& actor) {
  // What it was before (mark_unknown kept these as they were).
  if (!a.stop_reason.empty()) {
    a.state = AttemptState::Stopping;
  } else {
    a.state = a.started_at != 0 ? AttemptState::Running : AttemptState::Dispatched;
  }
  const std::string to = boost::describe::enum_to_string(a.state, "?");
  a.message.clear();  // it said why it was Unknown
  CP_ASSIGN(auto eid, tx.append_event(make_event(now, actor, "attempt", a.id, "attempt.state", "Unknown", to,
                                                "attempt " + std::to_string(a.number) +
                                                    " reported again by its agent: " + to)));
  (void)eid;
  CP_ASSIGN(auto t, tx.get_task(a.task_id));
  if (!t) return {};
  const auto unknown = std::erase_if(t->reasons, [](const PendingReason& r) { return r.code == "attempt_unknown"; });
  if (unknown == 0) return {};
  t->updated_at = now;
  return tx.update_task(*t);
}

}  // namespace internal

Result<json::object> ControlPlane::confirm_lost(const Principal& p, const std::string& cluster_id) {
  if (!p.is_admin()) {
    return internal::forbidden_for(p, "confirm the attempts of cluster " + cluster_id + " lost (platform admins only)",
                                   "确认集群 " + cluster_id + " 的尝试已丢失（仅平台管理员）");
  }
  const Millis now = clock_.now_ms();
  json::array confirmed;
  std::string pool;
  std::int64_t requeued = 0;
  CP_TRY(store_.write([&](Tx& tx) -> Status {
    confirmed.clear();
    requeued = 0;
    CP_ASSIGN(auto c, tx.get_cluster(cluster_id));
    if (!c) return errors::not_found("cluster", cluster_id);
    if (c->state != ClusterState::offline) {
      const std::string state = boost::describe::enum_to_string(c->state, "?");
      Error e = errors::conflict("cluster " + cluster_id + " is " + state +
                                     ": its agent reports its attempts itself; confirm-lost is only for an offline "
                                     "cluster",
                                 "集群 " + cluster_id + " 当前为 " + state +
                                     "：其 agent 会自行报告各尝试的状态；confirm-lost 只用于离线集群");
      e.code = "cluster_not_offline";
      e.details["cluster"] = cluster_id;
      e.details["state"] = state;
      return e;
    }
    pool = c->storage_pool;
    CP_ASSIGN(auto unknown, tx.attempts_in_state(AttemptState::Unknown, {cluster_id}));
    for (auto& a : unknown) {
      CP_ASSIGN(bool back, internal::end_lost(tx, a, *c, now, p.user,
                                              "attempt " + std::to_string(a.number) + " confirmed lost by " + p.user +
                                                  " (cluster " + cluster_id + " offline)"));
      requeued += back ? 1 : 0;
      confirmed.push_back(json::object{{"attempt", a.id}, {"task", a.task_id}, {"requeued", back}});
    }
    return {};
  }));
  if (requeued > 0) wake_scheduler();
  const std::string n = std::to_string(confirmed.size()), back = std::to_string(requeued);
  json::object out;
  out["cluster"] = cluster_id;
  if (confirmed.empty()) {
    out["message"] = "nothing confirmed: cluster " + cluster_id + " has no attempt in state Unknown";
    out["message_zh"] = "没有可确认的尝试：集群 " + cluster_id + " 没有状态为 Unknown 的尝试";
  } else {
    out["message"] = n + " attempt(s) of cluster " + cluster_id + " confirmed lost; " + back +
                     " task(s) requeued in storage pool " + pool;
    out["message_zh"] = "已确认集群 " + cluster_id + " 的 " + n + " 个尝试丢失；" + back + " 个任务在存储池 " + pool +
                        " 中重新排队";
  }
  out["confirmed"] = std::move(confirmed);
  return out;
}

Result<std::map<std::string, std::int64_t>> ControlPlane::unknown_attempt_counts(
    const std::vector<std::string>& cluster_ids) {
  std::map<std::string, std::int64_t> out;
  CP_TRY(store_.read([&](Tx& tx) -> Status {
    out.clear();
    CP_ASSIGN(auto unknown, tx.attempts_in_state(AttemptState::Unknown, cluster_ids));
    for (const auto& a : unknown) ++out[a.cluster_id];
    return {};
  }));
  return out;
}

}  // namespace cp
