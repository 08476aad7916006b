// Stage 3, feasibility: which clusters, then which nodes, could take one
// replica of the task. Each filter that rejects something records why, so a
// task left pending can say what stood in its way, counted per cause
// (Nomad's feasible.go).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sched/cycle_state.h"
#include "sched/request.h"

namespace cp::sched {

// ------------------------------------------------------------- clusters

// Clusters of the group, each counted once under the filter that dropped it.
struct ClusterCounts {
  std::int64_t total = 0;
  std::int64_t not_pinned = 0;
  std::int64_t selector_mismatch = 0;
  std::int64_t other_pool = 0;  // not in the storage pool the task is bound to
  std::int64_t offline = 0;
};

// The storage-pool filter of a task bound to a pool (Task::storage_pool):
// what it kept out and what the pool itself offers.
struct PoolFilter {
  std::string pool;
  std::vector<std::string> excluded;        // in other pools (or never registered), ascending id
  std::vector<std::string> pool_clusters;   // of the pool, past the pin and selector, ascending id
  std::int64_t pool_offline = 0;            // of those, offline, draining or never registered
};

// The reasons are shared (Reasons::Shared): one answer serves every task of
// a group (or of a pin, pool and selector) in a cycle, and each waiting task
// lists them.
struct ClusterFeasibility {
  std::vector<std::string> usable;  // ascending id
  // The same as ranks (CycleState::ranks_of), worked out once by
  // feasible_clusters for the fits of every task that shares this answer.
  std::optional<CycleState::ClusterRanks> usable_ranks;
  // One kReasonClusterOffline per cluster the task could otherwise use that
  // is offline, draining, or has never registered.
  std::vector<Reasons::Shared> offline;
  // When nothing is usable and no cluster is offline: why (kReasonNoCluster).
  std::optional<PendingReason> none;
  // A task bound to a storage pool (kReasonStoragePool): always when nothing
  // is usable (the reason it waits, first), else only when the pool kept
  // some cluster out (a note after the fit's reasons). Null otherwise.
  Reasons::Shared pool;
};

// Filters, in this order: in the group, the pinned cluster, the cluster
// selector, the storage pool the task is bound to, then state. The task's own
// constraints come before state so that a task is never told about an outage
// of a cluster it would not use anyway: clusters of other pools are not
// considered at all (their outages are not its news, and it never runs there).
ClusterFeasibility feasible_clusters(const CycleState& state, const ResourceGroup& group, const Task& task);

// ---------------------------------------------------------------- nodes

// Why a node cannot take a replica. The order is the order of the filters:
// properties of the node first (they do not change within a cycle), then free
// capacity (it shrinks as tasks are placed).
enum class NodeMisfit {
  kNotReady,
  kMaintenance,
  kSelectorMismatch,
  kGpuTypeMismatch,
  kInsufficientCpu,
  kInsufficientMemory,
  kInsufficientGpu,
  kInsufficientOther,
};
inline constexpr std::size_t kNodeMisfitCount = 8;
// The key in PendingReason::details: "not_ready", "insufficient_gpu", ...
std::string_view misfit_key(NodeMisfit m);

// Free GPUs: fewer of the count (gpu_capacity minus GPUs in use or held) and
// of the device indices nobody holds (less the held GPUs, which have none).
Wide free_gpus(const NodeView& node, const NodeLoad& load, LoadMode mode = LoadMode::kAll);

// Whether one replica of `request` has room in these free cpu, memory and
// GPUs, by counts alone: a bound for what-ifs that free work by its figures
// before any fit (work stopping, victims node by node).
inline bool counts_fit(const Request& request, Wide cpu, Wide memory, Wide gpus) {
  return (request.cpu <= 0 || cpu >= request.cpu) && (request.memory <= 0 || memory >= request.memory) &&
         (!request.wants_gpus() || gpus >= request.gpus);
}
// The `n` lowest device indices nobody holds; fewer if there are not enough.
std::vector<int> lowest_free_gpus(const NodeView& node, const NodeLoad& load, std::int64_t n,
                                  LoadMode mode = LoadMode::kAll);

// The first filter the node fails for one replica, given its load; nullopt
// when it fits.
std::optional<NodeMisfit> node_misfit(const NodeView& node, const NodeLoad& load, const ResourceGroup& group,
                                      const Request& request, LoadMode mode = LoadMode::kAll);
// node_misfit's first filters alone: those of what the node is (kNotReady
// to kGpuTypeMismatch), which no load changes.
std::optional<NodeMisfit> static_misfit(const NodeView& node, const ResourceGroup& group, const Request& request);

struct NodeCounts {
  std::int64_t total = 0;
  std::array<std::int64_t, kNodeMisfitCount> misfits{};  // by NodeMisfit
  std::int64_t fit = 0;
  std::int64_t& operator[](NodeMisfit m) { return misfits[static_cast<std::size_t>(m)]; }
  std::int64_t operator[](NodeMisfit m) const { return misfits[static_cast<std::size_t>(m)]; }
  bool operator==(const NodeCounts&) const = default;
};

struct NodeFeasibility {
  std::vector<std::size_t> fit;  // node indices, ascending (cluster id, name)
  NodeCounts counts;             // every node counted once, under its first failing filter
};

// `loads`: the cycle's own (the CycleState) or a what-if overlay. With
// `count` false only `fit` is wanted: a GPU request then looks only at the
// nodes that offer its type (the same `fit`, fewer nodes to look at).
NodeFeasibility feasible_nodes(const CycleState& state, const LoadView& loads, const std::vector<std::string>& clusters,
                               const ResourceGroup& group, const Request& request, bool count = true);

// The node could take a replica if nothing ran on it: Ready, not in
// maintenance, matching, and with enough allocatable.
bool statically_fits(const NodeView& node, const ResourceGroup& group, const Request& request);

}  // namespace cp::sched
