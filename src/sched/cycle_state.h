// The fleet as one cycle sees it: the snapshot indexed for lookups, and what
// is in use on every node and by every resource group. "In use" is the
// running work of the snapshot plus what this cycle has already placed, so a
// task placed early in the cycle is charged before the next one is tried.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "sched/scheduler.h"

namespace cp::sched {

// Sums over many replicas and tasks need more than 64 bits: each validated
// amount is at most 2^53 and a gang has up to 1024 replicas.
__extension__ typedef __int128 Wide;

// Resource amounts that cannot overflow. Absent names are 0.
class Tally {
 public:
  void add(const Resources& r, std::int64_t times = 1);
  Wide get(std::string_view name) const;
  // Every "gpu/<type>" entry together.
  Wide gpus() const;

 private:
  std::map<std::string, Wide, std::less<>> amounts_;
};

// An int64 for messages and JSON details; clamps what cannot happen with
// validated input rather than wrapping.
std::int64_t narrow(Wide v);

// What is in use on one node: resources and GPU device indices.
struct NodeLoad {
  Tally used;
  std::set<int> gpus_taken;

  void add(const Resources& per_replica, const std::vector<int>& gpu_indices);
};

// A node with what the scheduler derives from it once per cycle.
struct NodeView {
  const Node* node = nullptr;
  Labels labels;  // effective labels (admin overrides applied)
  bool maintenance = false;
  // The node's GPU type: label gpu-type, else the first device's model, else
  // the first "gpu/<type>" of allocatable; "" for a node without GPUs.
  std::string gpu_type;
  // Schedulable GPUs: allocatable "gpu/<gpu_type>", else every gpu/* entry.
  std::int64_t gpu_capacity = 0;
  // Device indices, ascending: node.gpus[].index, or 0..gpu_capacity-1 when
  // the agent reported no devices.
  std::vector<int> gpu_indices;

  const std::string& cluster_id() const { return node->cluster_id; }
  const std::string& name() const { return node->name; }
  bool has_gpus() const { return gpu_capacity > 0 || !node->gpus.empty(); }
  // Label gpu-type=T, or a device of model T; a node that says nothing about
  // its type but lists "gpu/T" as allocatable counts too.
  bool offers_gpu_type(std::string_view type) const;
};

class CycleState {
 public:
  explicit CycleState(const Snapshot& snapshot);
  CycleState(const CycleState&) = delete;
  CycleState& operator=(const CycleState&) = delete;

  const Cluster* cluster(std::string_view id) const;
  const ResourceGroup* group(std::string_view name) const;

  // All nodes of known clusters, sorted by (cluster id, node name); a node's
  // position here is its index everywhere in the cycle.
  const std::vector<NodeView>& nodes() const { return nodes_; }
  // Indices of a cluster's nodes, ascending (so by name).
  std::vector<std::size_t> nodes_of(std::string_view cluster_id) const;

  const NodeLoad& load(std::size_t node) const { return loads_[node]; }
  // What a resource group holds: per_replica x replicas of its running work
  // and of this cycle's placements.
  const Tally& group_used(std::string_view group) const;

  // Charges a placement to its group and its nodes.
  void commit(std::string_view group, const Placement& placement);

 private:
  std::optional<std::size_t> node_index(std::string_view cluster_id, std::string_view name) const;
  void charge(std::string_view group, std::string_view cluster_id, const std::vector<ReplicaPlacement>& placements,
              const Resources& per_replica);

  std::map<std::string, const Cluster*, std::less<>> clusters_;
  std::map<std::string, const ResourceGroup*, std::less<>> groups_;
  std::vector<NodeView> nodes_;
  std::vector<NodeLoad> loads_;
  std::map<std::string, Tally, std::less<>> group_used_;
  Tally empty_;
};

}  // namespace cp::sched
