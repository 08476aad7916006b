#include "sched/feasible.h"

#include <algorithm>

#include "sched/reasons.h"

namespace cp::sched {
namespace {

bool labels_match(const Labels& selector, const Labels& labels) {
  for (const auto& [k, v] : selector) {
    auto it = labels.find(k);
    if (it == labels.end() || it->second != v) return false;
  }
  return true;
}

bool accepts_work(ClusterState s) { return s == ClusterState::online || s == ClusterState::degraded; }

}  // namespace

ClusterFeasibility feasible_clusters(const CycleState& state, const ResourceGroup& group, const Task& task) {
  ClusterFeasibility out;
  const std::vector<std::string>& ids = state.clusters_of(group);

  if (!task.cluster.empty() && !std::binary_search(ids.begin(), ids.end(), task.cluster)) {
    out.none = reasons::pinned_outside_group(task.cluster, group.name, ids);
    return out;
  }
  ClusterCounts counts;
  counts.total = static_cast<std::int64_t>(ids.size());
  const bool bound = !task.storage_pool.empty();
  PoolFilter pool;
  pool.pool = task.storage_pool;
  for (const auto& id : ids) {
    if (!task.cluster.empty() && id != task.cluster) {
      ++counts.not_pinned;
      continue;
    }
    const Cluster* c = state.cluster(id);
    // A cluster the group names but that never registered has no labels yet;
    // it is reported as offline rather than as a selector mismatch.
    if (c != nullptr && !labels_match(task.cluster_selector, c->labels)) {
      ++counts.selector_mismatch;
      continue;
    }
    // Bound to a pool: a cluster of another pool is not considered, and one
    // never registered is not either (nothing says which pool it is in).
    if (bound && (c == nullptr || c->storage_pool != task.storage_pool)) {
      ++counts.other_pool;
      pool.excluded.push_back(id);
      continue;
    }
    if (bound) pool.pool_clusters.push_back(id);
    if (c == nullptr || !accepts_work(c->state)) {
      ++counts.offline;
      if (bound) ++pool.pool_offline;
      out.offline.push_back(Reasons::make(reasons::cluster_offline(id, c)));
      continue;
    }
    out.usable.push_back(id);
  }
  out.usable_ranks = state.ranks_of(out.usable);
  if (bound && (out.usable.empty() || counts.other_pool > 0)) {
    out.pool = Reasons::make(
        reasons::storage_pool(pool, group.name, counts, static_cast<std::int64_t>(out.usable.size())));
  } else if (out.usable.empty() && out.offline.empty()) {
    out.none = reasons::no_cluster(group.name, task.cluster, task.cluster_selector, counts);
  }
  return out;
}

std::string_view misfit_key(NodeMisfit m) {
  switch (m) {
    case NodeMisfit::kNotReady: return "not_ready";
    case NodeMisfit::kMaintenance: return "maintenance";
    case NodeMisfit::kSelectorMismatch: return "selector_mismatch";
    case NodeMisfit::kGpuTypeMismatch: return "gpu_type_mismatch";
    case NodeMisfit::kInsufficientCpu: return "insufficient_cpu";
    case NodeMisfit::kInsufficientMemory: return "insufficient_memory";
    case NodeMisfit::kInsufficientGpu: return "insufficient_gpu";
    case NodeMisfit::kInsufficientOther: return "insufficient_other";
  }
  return "unknown";
}

Wide free_gpus(const NodeView& node, const NodeLoad& load, LoadMode mode) {
  Wide by_count = static_cast<Wide>(node.gpu_capacity) - gpus_in_use(load, mode);
  auto indices = static_cast<Wide>(node.gpu_index_count);
  Wide by_index = indices;
  if (mode != LoadMode::kDrained && !load.gpus_taken.empty()) {
    if (node.dense_gpu_indices) {
      by_index = indices - static_cast<Wide>(load.gpus_taken.count_below(static_cast<int>(indices)));
    } else {
      by_index = 0;
      for (int i : node.gpu_indices) {
        if (!load.gpus_taken.contains(i)) ++by_index;
      }
    }
  }
  // Held GPUs have no indices yet; they are taken from the free ones.
  if (mode != LoadMode::kNoHolds) by_index -= load.held_gpus;
  return std::min(by_count, by_index);
}

std::vector<int> lowest_free_gpus(const NodeView& node, const NodeLoad& load, std::int64_t n, LoadMode mode) {
  std::vector<int> out;
  for (int i : node.gpu_indices) {
    if (static_cast<std::int64_t>(out.size()) >= n) break;
    if (mode == LoadMode::kDrained || !load.gpus_taken.contains(i)) out.push_back(i);
  }
  return out;
}

namespace {

static_assert(static_cast<int>(NodeMisfit::kGpuTypeMismatch) == 3,
              "CycleState::StaticNodes::dropped counts the filters up to kGpuTypeMismatch");

// node_misfit in two, inlined into it (asked of every node a walk looks
// at), into static_misfit, and into feasible_nodes' count.
inline std::optional<NodeMisfit> static_misfit_of(const NodeView& node, const ResourceGroup& group,
                                                  const Request& request) {
  if (!node.ready) return NodeMisfit::kNotReady;
  if (node.maintenance) return NodeMisfit::kMaintenance;
  if (!group.node_selector.empty() && !labels_match(group.node_selector, node.labels())) {
    return NodeMisfit::kSelectorMismatch;
  }
  if (request.wants_gpus()) {
    bool type_ok =
        request.any_gpu() ? node.has_gpus() : node.offers_gpu_type(request.gpu_type, request.gpu_type_id);
    if (!type_ok) return NodeMisfit::kGpuTypeMismatch;
  }
  return std::nullopt;
}

inline std::optional<NodeMisfit> load_misfit_of(const NodeView& node, const NodeLoad& load, const Request& request,
                                                LoadMode mode) {
  const Resources& alloc = node.node->allocatable;
  auto lacks = [&](std::string_view name, std::int64_t asked) {
    return static_cast<Wide>(alloc.get(name)) - in_use(load, name, mode) < asked;
  };
  if (request.cpu > 0 && static_cast<Wide>(node.alloc_cpu) - cpu_in_use(load, mode) < request.cpu) {
    return NodeMisfit::kInsufficientCpu;
  }
  if (request.memory > 0 && static_cast<Wide>(node.alloc_memory) - memory_in_use(load, mode) < request.memory) {
    return NodeMisfit::kInsufficientMemory;
  }
  if (request.wants_gpus() && free_gpus(node, load, mode) < request.gpus) return NodeMisfit::kInsufficientGpu;
  if (!request.others) return std::nullopt;
  for (const auto& [name, amount] : request.per_replica().amounts()) {
    if (name == kCpu || name == kMemory || name.starts_with(kGpuPrefix)) continue;
    if (amount > 0 && lacks(name, amount)) return NodeMisfit::kInsufficientOther;
  }
  return std::nullopt;
}

}  // namespace

std::optional<NodeMisfit> node_misfit(const NodeView& node, const NodeLoad& load, const ResourceGroup& group,
                                      const Request& request, LoadMode mode) {
  if (auto m = static_misfit_of(node, group, request)) return m;
  return load_misfit_of(node, load, request, mode);
}

std::optional<NodeMisfit> static_misfit(const NodeView& node, const ResourceGroup& group, const Request& request) {
  return static_misfit_of(node, group, request);
}

bool statically_fits(const NodeView& node, const ResourceGroup& group, const Request& request) {
  static const NodeLoad kEmpty;
  return !node_misfit(node, kEmpty, group, request).has_value();
}

NodeFeasibility feasible_nodes(const CycleState& state, const LoadView& loads, const std::vector<std::string>& clusters,
                               const ResourceGroup& group, const Request& request, bool count) {
  NodeFeasibility out;
  if (!count && request.wants_gpus()) {
    for (const auto& c : clusters) {
      for (std::size_t i : state.nodes_offering(c, request.gpu_type)) {
        if (!node_misfit(state.nodes()[i], loads.load(i), group, request, loads.mode())) out.fit.push_back(i);
      }
    }
    std::sort(out.fit.begin(), out.fit.end());
    return out;
  }
  // What the nodes are was asked once per (cluster, node selector, GPU
  // type) this cycle: only what they have free is asked here.
  for (const auto& c : clusters) {
    const CycleState::StaticNodes& known = state.static_nodes(c, group, request);
    out.counts.total += known.total;
    for (std::size_t m = 0; m < known.dropped.size(); ++m) out.counts.misfits[m] += known.dropped[m];
    for (std::size_t i : known.nodes) {
      if (auto misfit = load_misfit_of(state.nodes()[i], loads.load(i), request, loads.mode())) {
        ++out.counts[*misfit];
        continue;
      }
      ++out.counts.fit;
      out.fit.push_back(i);
    }
  }
  return out;
}

}  // namespace cp::sched
