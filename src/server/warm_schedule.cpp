#include "server/warm_schedule.h"

#include <algorithm>
#include <set>
#include <tuple>
#include <unordered_set>

namespace cp {

namespace {

const std::set<TaskState> kHolding = {TaskState::Admitted, TaskState::Dispatched, TaskState::Running,
                                      TaskState::Preempting};

// What the scheduler reads of a cluster: everything but the fields every
// agent sync rewrites (contact, credential, agent), which it never looks at.
json::value cluster_key(Cluster c) {
  c.last_contact = 0;
  c.credential_expires_at = 0;
  c.agent_instance.clear();
  c.agent_seq = 0;
  c.agent_version.clear();
  c.created_at = c.updated_at = 0;
  return to_json(c);
}

// Likewise for a node: not its host facts, drift, measured GPU use or time.
std::string node_key(Node n) {
  n.updated_at = 0;
  n.facts = HostFacts{};
  n.drift.clear();
  for (auto& g : n.gpus) {
    g.memory_used = 0;
    g.utilization = 0;
  }
  return dump(to_json(n));
}

std::string node_id(const Node& n) { return n.cluster_id + "/" + n.name; }

std::string meta_key(const sched::Snapshot& meta) {
  json::array out;
  json::array clusters;
  for (const auto& c : meta.clusters) clusters.push_back(cluster_key(c));
  out.push_back(std::move(clusters));
  json::array groups;
  for (const auto& g : meta.resource_groups) groups.push_back(to_json(g));
  out.push_back(std::move(groups));
  json::array classes;
  for (const auto& pc : meta.priority_classes) classes.push_back(to_json(pc));
  out.push_back(std::move(classes));
  out.push_back(json::array{meta.config.fair_share, meta.config.reservations_per_group, meta.config.max_victims});
  return dump(json::value(std::move(out)));
}

bool same_placements(const std::vector<ReplicaPlacement>& a, const std::vector<ReplicaPlacement>& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](const ReplicaPlacement& x, const ReplicaPlacement& y) {
    return x.replica == y.replica && x.node == y.node && x.gpu_indices == y.gpu_indices;
  });
}

bool same_work(const sched::RunningWork& a, const sched::RunningWork& b) {
  return std::tie(a.task_id, a.attempt_id, a.resource_group, a.project_group, a.user, a.cluster_id, a.priority,
                  a.preemptible, a.checkpoint, a.stopping, a.started_at) ==
             std::tie(b.task_id, b.attempt_id, b.resource_group, b.project_group, b.user, b.cluster_id, b.priority,
                      b.preemptible, b.checkpoint, b.stopping, b.started_at) &&
         a.per_replica == b.per_replica && same_placements(a.placements, b.placements);
}

}  // namespace

std::map<std::string, bool> preemptible_classes(const std::vector<PriorityClass>& classes) {
  std::map<std::string, bool> out;
  for (const auto& pc : classes) out[pc.name] = pc.preemptible;
  return out;
}

sched::RunningWork running_work_of(const Attempt& a, const LiveWork& live,
                                   const std::map<std::string, bool>& preemptible) {
  sched::RunningWork w;
  w.task_id = a.task_id;
  w.attempt_id = a.id;
  w.cluster_id = a.cluster_id;
  w.per_replica = a.resources;  // stored per replica (see scheduling.cpp, place())
  w.placements = a.placements;
  w.started_at = a.started_at;
  w.stopping = a.state == AttemptState::Stopping;
  const Task* tp = live.task(a.task_id);
  if (tp != nullptr && kHolding.contains(tp->state)) {
    const Task& t = *tp;
    w.resource_group = t.resource_group;
    w.project_group = t.project_group;
    w.user = t.user;
    w.priority = t.priority;
    w.checkpoint = t.step.checkpoint;
    auto pit = preemptible.find(t.priority_class);
    w.preemptible = pit == preemptible.end() ? true : pit->second;
    // Told to stop already (preempted, or cancelled and in its grace): what
    // it holds is freed soon; it is never chosen as a victim again.
    w.stopping = w.stopping || t.state == TaskState::Preempting || t.cancel_requested;
  }
  if (a.state == AttemptState::Unknown) {
    // Its cluster is silent (unknown_attempts.h): it holds what it was given
    // until its end is known, which no stop order can hasten, so it is
    // neither a victim nor work about to free its room.
    w.preemptible = false;
    w.stopping = false;
  }
  return w;
}

Status SchedulerNodes::refresh(Tx& tx, const FleetNodes::Marks& marks, const std::vector<Cluster>& clusters,
                               Millis now) {
  const bool full = !loaded_ || now - full_at_ >= kFullReadEveryMs || now < full_at_;
  loaded_ = false;  // until this refresh succeeds
  auto& changed = changed_;
  std::set<std::string, std::less<>> present;
  std::vector<const Cluster*> stale;
  for (const auto& c : clusters) {
    present.insert(c.id);
    auto it = clusters_.find(c.id);
    if (full || it == clusters_.end() || it->second.gen != FleetNodes::gen_of(marks, c.id)) stale.push_back(&c);
  }
  for (auto it = clusters_.begin(); it != clusters_.end();) {
    if (present.contains(it->first)) {
      ++it;
      continue;
    }
    changed.insert(it->first);  // deleted: its nodes go
    it = clusters_.erase(it);
  }
  if (full) {
    // One statement for the whole fleet.
    CP_ASSIGN(auto all, tx.list_nodes(""));
    clusters_.clear();
    for (const Cluster* c : stale) clusters_[c->id].gen = FleetNodes::gen_of(marks, c->id);
    for (auto& n : all) {
      auto it = clusters_.find(n.cluster_id);
      if (it != clusters_.end()) it->second.nodes.push_back(std::move(n));
    }
  } else {
    for (const Cluster* c : stale) {
      CP_ASSIGN(auto nodes, tx.list_nodes(c->id));
      clusters_[c->id] = Entry{FleetNodes::gen_of(marks, c->id), std::move(nodes)};
    }
  }
  for (const Cluster* c : stale) changed.insert(c->id);
  if (full) full_at_ = now;
  loaded_ = true;
  return {};
}

std::vector<Node> SchedulerNodes::all() const {
  std::vector<Node> out;
  for (const auto& [id, e] : clusters_) out.insert(out.end(), e.nodes.begin(), e.nodes.end());
  return out;
}

const std::vector<Node>& SchedulerNodes::of(const std::string& cluster) const {
  static const std::vector<Node> kNone;
  auto it = clusters_.find(cluster);
  return it == clusters_.end() ? kNone : it->second.nodes;
}

sched::Scheduler& WarmSchedule::sync(sched::Snapshot meta, SchedulerNodes& nodes, LiveWork& live) {
  meta.nodes.clear();
  meta.running.clear();
  LiveWork::Touched touched = live.take_touched();
  const std::set<std::string> changed = nodes.take_changed();
  std::string key = meta_key(meta);
  if (!sched_ || touched.everything || key != meta_key_) {
    meta_key_ = std::move(key);
    build(std::move(meta), nodes, live);
    return *sched_;
  }
  for (const auto& cluster : changed) sync_nodes(cluster, nodes.of(cluster));
  // Every attempt whose row, or whose task's row, was read again: its work
  // as the scheduler holds it is compared with what it is now.
  std::unordered_set<std::string> ids(touched.attempts.begin(), touched.attempts.end());
  for (const auto& task_id : touched.tasks) {
    if (auto it = attempts_of_task_.find(task_id); it != attempts_of_task_.end()) {
      ids.insert(it->second.begin(), it->second.end());
    }
    if (const Task* t = live.task(task_id); t != nullptr && !t->current_attempt.empty()) {
      ids.insert(t->current_attempt);
    }
  }
  std::vector<std::string> sorted(ids.begin(), ids.end());
  std::sort(sorted.begin(), sorted.end());  // the same deltas in the same order for the same changes
  for (const auto& id : sorted) sync_work(id, live);
  return *sched_;
}

void WarmSchedule::build(sched::Snapshot meta, const SchedulerNodes& nodes, const LiveWork& live) {
  preemptible_ = preemptible_classes(meta.priority_classes);
  meta.nodes = nodes.all();
  node_docs_.clear();
  for (const auto& n : meta.nodes) node_docs_[n.cluster_id][n.name] = node_key(n);
  works_.clear();
  attempts_of_task_.clear();
  // In the order the store lists them (cluster, id), as the cold path did.
  for (const Attempt* a : live.attempts()) {
    sched::RunningWork w = running_work_of(*a, live, preemptible_);
    attempts_of_task_[w.task_id].push_back(w.attempt_id);
    meta.running.push_back(w);
    works_.emplace(a->id, std::move(w));
  }
  sched_ = std::make_unique<sched::Scheduler>(std::move(meta));
  stats_.builds++;
}

void WarmSchedule::sync_nodes(const std::string& cluster, const std::vector<Node>& nodes) {
  auto& docs = node_docs_[cluster];
  std::unordered_set<std::string_view> present;
  present.reserve(nodes.size());
  for (const auto& n : nodes) {
    present.insert(n.name);
    std::string doc = node_key(n);
    auto it = docs.find(n.name);
    if (it != docs.end() && it->second == doc) continue;
    docs.insert_or_assign(n.name, std::move(doc));
    sched_->update_node(n);
    stats_.node_deltas++;
  }
  for (auto it = docs.begin(); it != docs.end();) {
    if (present.contains(it->first)) {
      ++it;
      continue;
    }
    sched_->remove_node(cluster, it->first);
    stats_.node_deltas++;
    it = docs.erase(it);
  }
  if (docs.empty()) node_docs_.erase(cluster);
}

void WarmSchedule::sync_work(const std::string& attempt_id, const LiveWork& live) {
  auto known = works_.find(attempt_id);
  const Attempt* a = live.attempt(attempt_id);
  if (a == nullptr) {
    if (known == works_.end()) return;
    auto& of_task = attempts_of_task_[known->second.task_id];
    std::erase(of_task, attempt_id);
    if (of_task.empty()) attempts_of_task_.erase(known->second.task_id);
    sched_->end(attempt_id);
    works_.erase(known);
    stats_.work_deltas++;
    return;
  }
  sched::RunningWork w = running_work_of(*a, live, preemptible_);
  if (known != works_.end() && same_work(known->second, w)) return;
  if (known == works_.end()) attempts_of_task_[w.task_id].push_back(attempt_id);
  works_.insert_or_assign(attempt_id, w);
  sched_->start(std::move(w));
  stats_.work_deltas++;
}

std::string WarmSchedule::differences(const sched::Snapshot& meta, const LiveWork& live) const {
  if (!sched_) return "";
  const sched::Snapshot kept = sched_->snapshot();
  std::string out;
  auto note = [&](const std::string& what) {
    if (out.size() < 2000) out += (out.empty() ? "" : "; ") + what;
  };
  if (meta_key(kept) != meta_key(meta)) note("clusters, groups, classes or config differ");
  std::map<std::string, std::string> nodes_now, nodes_kept;
  for (const auto& n : meta.nodes) nodes_now[node_id(n)] = node_key(n);
  for (const auto& n : kept.nodes) nodes_kept[node_id(n)] = node_key(n);
  for (const auto& [id, doc] : nodes_now) {
    auto it = nodes_kept.find(id);
    if (it == nodes_kept.end()) note("node " + id + " missing");
    else if (it->second != doc) note("node " + id + " differs");
  }
  for (const auto& [id, doc] : nodes_kept) {
    if (!nodes_now.contains(id)) note("node " + id + " kept but gone");
  }
  const auto preemptible = preemptible_classes(meta.priority_classes);
  std::map<std::string, sched::RunningWork> now;
  live.for_each_attempt([&](const Attempt& a) { now.emplace(a.id, running_work_of(a, live, preemptible)); });
  std::map<std::string, const sched::RunningWork*> held;
  for (const auto& w : kept.running) held.emplace(w.attempt_id, &w);
  for (const auto& [id, w] : now) {
    auto it = held.find(id);
    if (it == held.end()) note("work " + id + " missing");
    else if (!same_work(*it->second, w)) note("work " + id + " differs");
  }
  for (const auto& [id, w] : held) {
    if (!now.contains(id)) note("work " + id + " kept but gone");
  }
  return out;
}

}  // namespace cp
