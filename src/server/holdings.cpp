#include "server/holdings.h"

#include <algorithm>

#include "server/internal.h"
#include "server/warm_schedule.h"

namespace cp::internal {

namespace {

// The bound of cycle_state.cpp: an absurd GPU count reported by an agent is
// not turned into that many indices.
constexpr std::int64_t kMaxGpuIndices = 4096;

}  // namespace

Result<std::unique_ptr<Holdings>> Holdings::load(Tx& tx, const LiveWork& live,
                                                 const std::vector<sched::Placement>& placements) {
  std::unique_ptr<Holdings> h(new Holdings());
  CP_ASSIGN(h->groups_, tx.list_resource_groups());
  h->quota_.emplace(h->groups_);
  CP_ASSIGN(auto classes, tx.list_priority_classes());
  h->preemptible_ = preemptible_classes(classes);
  CP_ASSIGN(auto clusters, tx.list_clusters());
  for (const auto& c : clusters) h->pool_of_[c.id] = c.storage_pool;
  // Every node the plan places on, read in one statement per cluster.
  std::map<std::string, std::vector<std::string>> names_by_cluster;
  for (const auto& pl : placements) {
    for (const auto& rp : pl.placements) {
      auto [use, added] = h->use_[pl.cluster_id].try_emplace(rp.node);  // charged below
      if (added) names_by_cluster[pl.cluster_id].push_back(rp.node);
    }
  }
  for (const auto& [cluster, names] : names_by_cluster) {
    CP_ASSIGN(auto nodes, tx.get_nodes(cluster, names));
    for (auto& n : nodes) {
      NodeKey key{n.cluster_id, n.name};
      h->nodes_.emplace(std::move(key), std::move(n));
    }
  }

  // What the active attempts hold, as the live work keeps it: per group,
  // and on the nodes the plan places on.
  for (const auto& [group, used] : live.group_use()) h->quota_->add(group, used);
  for (auto& [cluster, nodes] : h->use_) {
    for (auto& [name, use] : nodes) {
      if (const LiveWork::NodeUse* held = live.node_use(cluster, name)) use = *held;
    }
  }
  // An active attempt of a task in another state should not exist; still
  // charge it to its task's group rather than let it hold quota unseen.
  std::map<std::string, std::string> group_of;  // of tasks that are not live, read here
  for (const auto& id : live.ungrouped_attempts()) {
    const Attempt* a = live.attempt(id);
    if (a == nullptr) continue;
    auto g = group_of.find(a->task_id);
    if (g == group_of.end()) {
      CP_ASSIGN(auto t, tx.get_task(a->task_id));
      g = group_of.emplace(a->task_id, t ? t->resource_group : std::string()).first;
    }
    if (!g->second.empty()) h->quota_->add(g->second, a->resources, attempt_replicas(*a));
  }
  return h;
}

void Holdings::charge(const Attempt& a, const std::string& resource_group) {
  if (!resource_group.empty()) quota_->add(resource_group, a.resources, attempt_replicas(a));
  auto cluster = use_.find(a.cluster_id);
  if (cluster == use_.end()) return;  // no placement of the plan is on this cluster
  for (const auto& rp : a.placements) {
    auto use = cluster->second.find(rp.node);
    if (use == cluster->second.end()) continue;  // nor on this node
    use->second.used.add(a.resources);
    use->second.gpus.insert(rp.gpu_indices.begin(), rp.gpu_indices.end());
  }
}

std::optional<std::string> Holdings::recheck(const Task& t, const sched::Placement& pl) const {
  if (t.state != TaskState::Queued || t.cancel_requested) return "task is no longer queued";
  if (pl.placements.empty()) return "placement without replicas";
  if (auto why = recheck_pool(t, pl)) return why;
  if (auto why = recheck_quota(t, pl)) return why;
  return recheck_nodes(pl);
}

std::optional<std::string> Holdings::recheck_pool(const Task& t, const sched::Placement& pl) const {
  if (t.storage_pool.empty()) return std::nullopt;
  auto c = pool_of_.find(pl.cluster_id);
  if (c == pool_of_.end()) return "cluster " + pl.cluster_id + " is gone";
  if (c->second != t.storage_pool) {
    return "cluster " + pl.cluster_id + " is in storage pool " + c->second + ", the task is bound to " +
           t.storage_pool;
  }
  return std::nullopt;
}

std::optional<std::string> Holdings::recheck_quota(const Task& t, const sched::Placement& pl) const {
  const ResourceGroup* rg = quota_->group(t.resource_group);
  if (rg == nullptr) return "resource group " + t.resource_group + " is gone";
  // Borrowed capacity must be reclaimable: only preemptible work borrows
  // (the rule decide() applied; an unknown class counts as preemptible).
  auto pc = preemptible_.find(t.priority_class);
  bool may_borrow = pc == preemptible_.end() || pc->second;
  auto refused = quota_->check(*rg, pl.per_replica, static_cast<int>(pl.placements.size()), may_borrow);
  if (refused.empty()) return std::nullopt;
  std::string why = "quota changed since the snapshot: " + refused.front().message;
  for (std::size_t i = 1; i < refused.size(); ++i) why += "; " + refused[i].message;
  return why;
}

std::optional<std::string> Holdings::recheck_nodes(const sched::Placement& pl) const {
  // What the placement asks of each node, and which GPU indices.
  std::map<std::string, sched::Tally> asked;
  std::map<std::string, std::set<int>> indices;
  for (const auto& rp : pl.placements) {
    asked[rp.node].add(pl.per_replica);
    for (int i : rp.gpu_indices) {
      if (!indices[rp.node].insert(i).second) {
        return "GPU " + std::to_string(i) + " on " + rp.node + " is given to two replicas";
      }
    }
  }
  static const NodeUse kIdle;
  for (const auto& [name, want] : asked) {
    NodeKey key{pl.cluster_id, name};
    auto n = nodes_.find(key);
    if (n == nodes_.end()) return "node " + pl.cluster_id + "/" + name + " is gone";
    const Node& node = n->second;
    if (!node.ready) return "node " + pl.cluster_id + "/" + name + " is no longer ready";
    const NodeUse* found = nullptr;
    if (auto c = use_.find(pl.cluster_id); c != use_.end()) {
      if (auto u = c->second.find(name); u != c->second.end()) found = &u->second;
    }
    const NodeUse& use = found != nullptr ? *found : kIdle;

    for (const auto& [resource, amount] : want.amounts()) {
      if (amount <= 0 || resource.starts_with(kGpuPrefix)) continue;
      if (static_cast<sched::Wide>(node.allocatable.get(resource)) - use.used.get(resource) < amount) {
        return "node " + pl.cluster_id + "/" + name + " has no room for " + resource + " any more";
      }
    }
    if (want.gpus() > 0 && static_cast<sched::Wide>(node.allocatable.gpus()) - use.used.gpus() < want.gpus()) {
      return "node " + pl.cluster_id + "/" + name + " has too few free GPUs now";
    }

    std::set<int> exists;
    if (node.gpus.empty()) {
      for (std::int64_t i = 0; i < std::min<std::int64_t>(node.allocatable.gpus(), kMaxGpuIndices); ++i) {
        exists.insert(static_cast<int>(i));
      }
    } else {
      for (const auto& g : node.gpus) exists.insert(g.index);
    }
    for (int i : indices[name]) {
      if (!exists.contains(i)) return "GPU " + std::to_string(i) + " on " + name + " is gone";
      if (use.gpus.contains(i)) return "GPU " + std::to_string(i) + " on " + name + " was taken";
    }
  }
  return std::nullopt;
}

}  // namespace cp::internal
