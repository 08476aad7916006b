#include "harness.h"

#include <algorithm>

namespace cp::sched::testing {

Resources res(std::string_view spec) { return Resources::parse_or_die(spec); }

ClusterBuilder& ClusterBuilder::node(const std::string& name, std::string_view resources, Labels labels) {
  Node n;
  n.cluster_id = get().id;
  n.name = name;
  n.labels = std::move(labels);
  n.capacity = res(resources);
  n.allocatable = n.capacity;
  fleet_->snapshot.nodes.push_back(std::move(n));
  return *this;
}

ClusterBuilder& ClusterBuilder::devices(const std::string& model, const std::vector<int>& indices) {
  CP_CHECK(!fleet_->snapshot.nodes.empty(), "devices() before any node()");
  Node& n = fleet_->snapshot.nodes.back();
  for (int i : indices) n.gpus.push_back(GpuDevice{i, "uuid-" + n.name + "-" + std::to_string(i), model, 0, 0, 0});
  return *this;
}

ClusterBuilder& ClusterBuilder::labels(Labels labels) {
  get().labels = std::move(labels);
  return *this;
}

ClusterBuilder& ClusterBuilder::storage_pool(const std::string& pool) {
  get().storage_pool = pool;
  return *this;
}

ClusterBuilder& ClusterBuilder::state(ClusterState state, const std::string& reason, const std::string& message) {
  Cluster& c = get();
  c.state = state;
  c.state_reason = reason;
  c.state_message = message;
  return *this;
}

Cluster& ClusterBuilder::get() { return fleet_->snapshot.clusters[index_]; }

ClusterBuilder Fleet::cluster(const std::string& id, Labels labels) {
  auto& cs = snapshot.clusters;
  for (std::size_t i = 0; i < cs.size(); ++i) {
    if (cs[i].id == id) return ClusterBuilder(*this, i);
  }
  Cluster c;
  c.id = id;
  c.display_name = id;
  c.labels = std::move(labels);
  c.state = ClusterState::online;
  c.state_reason = "";
  cs.push_back(std::move(c));
  return ClusterBuilder(*this, cs.size() - 1);
}

Node& Fleet::node(std::string_view cluster, std::string_view name) {
  for (auto& n : snapshot.nodes) {
    if (n.cluster_id == cluster && n.name == name) return n;
  }
  CP_CHECK(false, "Fleet::node: no such node");
  std::abort();
}

ResourceGroup& Fleet::group(const std::string& name, std::string_view quota, std::vector<std::string> clusters,
                            PlacementPolicy placement) {
  ResourceGroup g;
  g.name = name;
  g.clusters = std::move(clusters);
  g.placement = placement;
  std::size_t pos = 0;
  while (pos < quota.size()) {
    std::size_t comma = std::min(quota.find(',', pos), quota.size());
    std::string_view item = quota.substr(pos, comma - pos);
    pos = comma + 1;
    std::size_t colon = item.rfind(':');
    CP_CHECK(colon != std::string_view::npos, "quota spec item without ':'");
    std::string resource(item.substr(0, colon));
    auto amount = parse_quantity(resource, item.substr(colon + 1));
    CP_CHECK(amount.ok(), "bad quota amount");
    g.quota[resource] = QuotaEntry{*amount, std::nullopt};
  }
  snapshot.resource_groups.push_back(std::move(g));
  return snapshot.resource_groups.back();
}

void Fleet::borrow(const std::string& group, const std::string& resource, std::string_view max,
                   const std::string& cohort) {
  for (auto& g : snapshot.resource_groups) {
    if (g.name != group) continue;
    auto amount = parse_quantity(resource, max);
    CP_CHECK(amount.ok(), "bad max amount");
    g.quota[resource].max = *amount;
    g.cohort = cohort;
    return;
  }
  CP_CHECK(false, "Fleet::borrow: no such group");
}

void Fleet::priority_classes(std::int64_t urgent_after_s) {
  PriorityClass batch;
  batch.name = "batch";
  batch.value = 100;
  PriorityClass urgent;
  urgent.name = "urgent";
  urgent.value = 1000;
  urgent.preemptible = false;
  urgent.may_preempt = true;
  urgent.preempt_after_s = urgent_after_s;
  PriorityClass inference;
  inference.name = "inference-high";
  inference.value = 2000;
  inference.preemptible = false;
  snapshot.priority_classes = {batch, urgent, inference};
}

RunningWork& Fleet::running(const std::string& task_id, const std::string& group, const std::string& cluster,
                            std::string_view per_replica, std::vector<ReplicaPlacement> placements) {
  RunningWork w;
  w.task_id = task_id;
  w.attempt_id = task_id + ".1";
  w.resource_group = group;
  w.cluster_id = cluster;
  w.per_replica = res(per_replica);
  for (std::size_t i = 0; i < placements.size(); ++i) placements[i].replica = static_cast<int>(i);
  w.placements = std::move(placements);
  w.started_at = kT0;
  w.priority = 100;
  w.project_group = "pg-" + group;
  w.user = "alice";
  snapshot.running.push_back(std::move(w));
  return snapshot.running.back();
}

TaskBuilder& TaskBuilder::queued_at(Millis t) {
  get().queued_at = t;
  return *this;
}

TaskBuilder& TaskBuilder::created_at(Millis t) {
  get().created_at = t;
  return *this;
}

TaskBuilder& TaskBuilder::pinned(const std::string& cluster) {
  get().cluster = cluster;
  return *this;
}

TaskBuilder& TaskBuilder::storage_pool(const std::string& pool) {
  get().storage_pool = pool;
  return *this;
}

TaskBuilder& TaskBuilder::cluster_selector(Labels selector) {
  get().cluster_selector = std::move(selector);
  return *this;
}

TaskBuilder& TaskBuilder::waiting_for(std::vector<std::string> task_ids) {
  (*tasks_)[index_].unfinished_dependencies = std::move(task_ids);
  return *this;
}

TaskBuilder& TaskBuilder::priority_class(const std::string& name, int value) {
  get().priority_class = name;
  get().priority = value;
  return *this;
}

TaskBuilder& TaskBuilder::owner(const std::string& project_group, const std::string& user) {
  get().project_group = project_group;
  get().user = user;
  return *this;
}

TaskBuilder& TaskBuilder::fallback(std::int64_t after_s, std::string_view per_replica) {
  get().step.fallbacks.push_back(StepShape{after_s, res(per_replica)});
  return *this;
}

Task& TaskBuilder::get() { return (*tasks_)[index_].task; }

TaskBuilder Queue::task(const std::string& id, const std::string& group, std::string_view per_replica, int replicas,
                        int priority) {
  QueuedTask q;
  Task& t = q.task;
  t.id = id;
  t.pipeline_id = "p-" + id;
  t.name = "step";
  t.resource_group = group;
  t.priority = priority;
  t.user = "alice";
  t.project_group = "pg-" + group;
  t.step.name = "step";
  t.step.command = {"true"};
  t.step.resources = res(per_replica);
  t.step.replicas = replicas;
  t.created_at = kT0;
  t.queued_at = kT0;
  tasks.push_back(std::move(q));
  return TaskBuilder(tasks, tasks.size() - 1);
}

const Placement* placement_of(const Plan& plan, std::string_view task_id) {
  for (const auto& p : plan.placements) {
    if (p.task_id == task_id) return &p;
  }
  return nullptr;
}

const Pending* pending_of(const Plan& plan, std::string_view task_id) {
  for (const auto& p : plan.pending) {
    if (p.task_id == task_id) return &p;
  }
  return nullptr;
}

std::vector<std::string> placed(const Plan& plan) {
  std::vector<std::string> out;
  for (const auto& p : plan.placements) out.push_back(p.task_id);
  return out;
}

std::string reason_code(const Plan& plan, std::string_view task_id) {
  if (placement_of(plan, task_id)) return "(placed)";
  const Pending* p = pending_of(plan, task_id);
  if (p == nullptr) return "(absent)";
  if (p->reasons.empty()) return "(no reason)";
  return p->reasons.front().code;
}

const PendingReason& reason(const Plan& plan, std::string_view task_id) {
  static const PendingReason kNone{"(none)", "", "", {}};
  const Pending* p = pending_of(plan, task_id);
  if (p == nullptr || p->reasons.empty()) {
    ADD_FAILURE() << "task " << task_id << " has no pending reason";
    return kNone;
  }
  return p->reasons.front();
}

std::vector<std::string> nodes_of(const Plan& plan, std::string_view task_id) {
  std::vector<std::string> out;
  if (const Placement* p = placement_of(plan, task_id)) {
    for (const auto& r : p->placements) out.push_back(r.node);
  }
  return out;
}

std::string describe(const Plan& plan) {
  std::string s;
  for (const auto& p : plan.placements) {
    s += "place " + p.task_id + " on " + p.cluster_id + " [" + p.per_replica.to_string() + "] shape " +
         std::to_string(p.shape) + (p.borrowing ? " borrowing" : "") + ":";
    for (const auto& r : p.placements) {
      s += " #" + std::to_string(r.replica) + "=" + r.node + "(";
      for (int g : r.gpu_indices) s += std::to_string(g) + ",";
      s += ")";
    }
    s += "\n";
  }
  for (const auto& p : plan.preemptions) {
    s += "preempt " + p.attempt_id + " (" + p.task_id + " on " + p.cluster_id + ") for " + p.preemptor + " [" + p.kind +
         "]: " + p.message + "\n";
  }
  for (const auto& p : plan.pending) {
    s += "pending " + p.task_id + ":";
    for (const auto& r : p.reasons) {
      s += " {" + r.code + " | " + r.message + " | " + r.message_zh + " | " + dump(r.details) + "}";
    }
    s += "\n";
  }
  return s;
}

}  // namespace cp::sched::testing
