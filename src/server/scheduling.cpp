// The scheduling cycle and the liveness sweep.
//
//   read tx:  snapshot (clusters, nodes, groups, classes, running work) + queue
//   decide(): pure, in src/sched
//   write tx: re-check each placement against the store (task still Queued,
//             quota, GPU indices free) and create its attempt; record reasons
//
// Cycles are serialized by schedule_mu_, and only cycles create attempts, so
// a re-check in the write transaction sees every placement made before it.
#include <set>

#include <spdlog/spdlog.h>

#include "sched/admission.h"
#include "sched/scheduler.h"
#include "server/control_plane.h"
#include "server/internal.h"

namespace cp {

using internal::make_event;

namespace {

const std::set<TaskState> kHolding = {TaskState::Admitted, TaskState::Dispatched, TaskState::Running,
                                      TaskState::Preempting};

bool same_reasons(const std::vector<PendingReason>& a, const std::vector<PendingReason>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a[i].code != b[i].code || a[i].message != b[i].message) return false;
  }
  return true;
}

struct Loaded {
  sched::Snapshot snapshot;
  std::vector<sched::QueuedTask> queue;
};

Status load(Tx& tx, Loaded& out) {
  auto& s = out.snapshot;
  CP_ASSIGN(s.clusters, tx.list_clusters());
  CP_ASSIGN(s.nodes, tx.list_nodes(""));
  CP_ASSIGN(s.resource_groups, tx.list_resource_groups());
  CP_ASSIGN(s.priority_classes, tx.list_priority_classes());
  std::map<std::string, bool> preemptible;
  for (const auto& pc : s.priority_classes) preemptible[pc.name] = pc.preemptible;

  CP_ASSIGN(auto holding, tx.tasks_in_states(kHolding));
  std::map<std::string, const Task*> by_id;
  for (const auto& t : holding) by_id[t.id] = &t;
  CP_ASSIGN(auto attempts, tx.active_attempts(""));
  for (const auto& a : attempts) {
    sched::RunningWork w;
    w.task_id = a.task_id;
    w.attempt_id = a.id;
    w.cluster_id = a.cluster_id;
    w.per_replica = a.resources;
    w.placements = a.placements;
    w.started_at = a.started_at;
    if (auto it = by_id.find(a.task_id); it != by_id.end()) {
      w.resource_group = it->second->resource_group;
      w.project_group = it->second->project_group;
      w.priority = it->second->priority;
      auto pit = preemptible.find(it->second->priority_class);
      w.preemptible = pit == preemptible.end() ? true : pit->second;
    }
    s.running.push_back(std::move(w));
  }

  CP_ASSIGN(auto queued, tx.tasks_in_states({TaskState::Queued}));
  std::map<std::string, TaskState> dep_state;
  for (const auto& t : queued) {
    for (const auto& d : t.depends_on) {
      if (dep_state.count(d)) continue;
      CP_ASSIGN(auto dt, tx.get_task(d));
      dep_state[d] = dt ? dt->state : TaskState::Cancelled;
    }
  }
  for (auto& t : queued) {
    if (t.cancel_requested) continue;
    sched::QueuedTask q;
    for (const auto& d : t.depends_on) {
      if (dep_state[d] != TaskState::Succeeded) q.unfinished_dependencies.push_back(d);
    }
    q.task = std::move(t);
    out.queue.push_back(std::move(q));
  }
  return {};
}

// Re-checks a placement inside the write transaction. Returns a reason when
// it no longer holds (then the task simply waits for the next cycle).
Result<std::optional<std::string>> recheck(Tx& tx, const Task& t, const sched::Placement& pl,
                                           const std::vector<Attempt>& active,
                                           const std::map<std::string, std::string>& group_of) {
  if (t.state != TaskState::Queued || t.cancel_requested) return std::optional<std::string>("task is no longer queued");
  CP_ASSIGN(auto rg, tx.get_resource_group(t.resource_group));
  if (!rg) return std::optional<std::string>("resource group is gone");
  Resources used;
  std::map<std::string, std::set<int>> gpus_in_use;  // node -> indices
  for (const auto& a : active) {
    auto g = group_of.find(a.task_id);
    if (g != group_of.end() && g->second == t.resource_group) used += internal::attempt_total(a);
    if (a.cluster_id != pl.cluster_id) continue;
    for (const auto& rp : a.placements) {
      for (int i : rp.gpu_indices) gpus_in_use[rp.node].insert(i);
    }
  }
  Resources asked = pl.per_replica.times(static_cast<std::int64_t>(pl.placements.size()));
  for (const auto& [res, amount] : asked.amounts()) {
    auto limit = sched::quota_limit(*rg, res);  // the rule decide() applied
    if (limit && used.get(res) + amount > *limit) {
      return std::optional<std::string>("quota for " + res + " changed since the snapshot");
    }
  }
  for (const auto& rp : pl.placements) {
    for (int i : rp.gpu_indices) {
      if (!gpus_in_use[rp.node].insert(i).second) {
        return std::optional<std::string>("GPU " + std::to_string(i) + " on " + rp.node + " was taken");
      }
    }
  }
  return std::optional<std::string>();
}

}  // namespace

Status ControlPlane::schedule_once() {
  std::lock_guard cycle(schedule_mu_);
  Millis now = clock_.now_ms();
  Loaded loaded;
  CP_TRY(store_.read([&](Tx& tx) { return load(tx, loaded); }));
  if (loaded.queue.empty()) return {};
  sched::Plan plan = sched::decide(loaded.snapshot, loaded.queue, now);

  std::set<std::string> clusters_with_work;
  CP_TRY(store_.write([&](Tx& tx) -> Status {
    CP_ASSIGN(auto active, tx.active_attempts(""));
    CP_ASSIGN(auto holding, tx.tasks_in_states(kHolding));
    std::map<std::string, std::string> group_of;
    for (const auto& t : holding) group_of[t.id] = t.resource_group;

    for (const auto& pl : plan.placements) {
      CP_ASSIGN(auto t, tx.get_task(pl.task_id));
      if (!t) continue;
      CP_ASSIGN(auto why_not, recheck(tx, *t, pl, active, group_of));
      if (why_not) {
        spdlog::info("placement of {} dropped at apply: {}", t->id, *why_not);
        continue;
      }
      Attempt a;
      a.number = t->attempts + 1;
      a.id = t->id + "." + std::to_string(a.number);
      a.task_id = t->id;
      a.epoch = a.number;
      a.cluster_id = pl.cluster_id;
      a.placements = pl.placements;
      a.resources = pl.per_replica;
      a.state = AttemptState::Dispatched;
      a.created_at = now;
      a.lease_renewed_at = now;
      CP_TRY(tx.insert_attempt(a));
      t->attempts = a.number;
      t->current_attempt = a.id;
      t->assigned_cluster = pl.cluster_id;
      json::object data;
      data["attempt"] = a.id;
      json::array nodes;
      for (const auto& rp : pl.placements) nodes.push_back(json::string(rp.node));
      data["nodes"] = std::move(nodes);
      CP_TRY(internal::transition(tx, *t, TaskState::Dispatched, now, "scheduler",
                                  "placed on " + pl.cluster_id + "/" + pl.placements.front().node, std::move(data)));
      active.push_back(a);
      group_of[t->id] = t->resource_group;
      clusters_with_work.insert(pl.cluster_id);
    }
    for (const auto& pending : plan.pending) {
      CP_ASSIGN(auto t, tx.get_task(pending.task_id));
      if (!t || t->state != TaskState::Queued || same_reasons(t->reasons, pending.reasons)) continue;
      t->reasons = pending.reasons;
      t->updated_at = now;
      CP_TRY(tx.update_task(*t));
    }
    return {};
  }));
  for (const auto& c : clusters_with_work) cluster_signal(c).notify();
  return {};
}

Status ControlPlane::check_liveness() {
  Millis now = clock_.now_ms();
  bool requeued = false;
  CP_TRY(store_.write([&](Tx& tx) -> Status {
    CP_ASSIGN(auto clusters, tx.list_clusters());
    for (auto& c : clusters) {
      bool silent = c.last_contact != 0 && now - c.last_contact > config_.lost_after_s * 1000;
      if (!silent || c.state == ClusterState::offline) continue;
      std::string from = boost::describe::enum_to_string(c.state, "?");
      c.state = ClusterState::offline;
      c.state_reason = "unreachable";
      c.state_message = "no sync from the agent since " + format_time(c.last_contact);
      c.updated_at = now;
      CP_TRY(tx.update_cluster(c));
      CP_ASSIGN(auto eid, tx.append_event(make_event(now, "system", "cluster", c.id, "cluster.state", from, "offline",
                                                    c.state_message)));
      (void)eid;
      // Its attempts are Lost. The agent fenced itself at lease_ttl - margin,
      // before this point (lost_after >= lease_ttl), so the new attempts that
      // the requeued tasks get cannot overlap the old ones.
      CP_ASSIGN(auto active, tx.active_attempts(c.id));
      for (auto& a : active) {
        a.state = AttemptState::Lost;
        a.stop_reason = "lost";
        a.message = "cluster " + c.id + " unreachable";
        a.finished_at = now;
        CP_TRY(tx.update_attempt(a));
        CP_ASSIGN(auto aid, tx.append_event(make_event(now, "system", "attempt", a.id, "attempt.state", "", "Lost",
                                                      a.message)));
        (void)aid;
        CP_ASSIGN(auto t, tx.get_task(a.task_id));
        if (!t || t->current_attempt != a.id || is_terminal(t->state)) continue;
        if (t->cancel_requested) {
          CP_TRY(internal::transition(tx, *t, TaskState::Cancelled, now, "system", a.message));
          continue;
        }
        CP_TRY(internal::transition(tx, *t, TaskState::Lost, now, "system", a.message));
        t->reasons = {PendingReason{"requeued_after_loss",
                                    "attempt " + std::to_string(a.number) + " was lost with cluster " + c.id +
                                        "; waiting for a new placement",
                                    "第 " + std::to_string(a.number) + " 次尝试随集群 " + c.id +
                                        " 失联而丢失；等待重新调度",
                                    {}}};
        CP_TRY(internal::transition(tx, *t, TaskState::Queued, now, "system", "requeued after loss"));
        requeued = true;
      }
    }
    return {};
  }));
  if (requeued) wake_scheduler();
  return {};
}

}  // namespace cp
