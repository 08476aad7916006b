#include "sched/cycle_state.h"

#include <algorithm>
#include <limits>
#include <tuple>

namespace cp::sched {

void Tally::add(const Resources& r, std::int64_t times) {
  for (const auto& [name, amount] : r.amounts()) {
    auto it = amounts_.find(name);
    if (it == amounts_.end()) it = amounts_.emplace(name, 0).first;
    it->second += static_cast<Wide>(amount) * times;
  }
}

Wide Tally::get(std::string_view name) const {
  auto it = amounts_.find(name);
  return it == amounts_.end() ? 0 : it->second;
}

Wide Tally::gpus() const {
  Wide n = 0;
  for (auto it = amounts_.lower_bound(kGpuPrefix); it != amounts_.end() && it->first.starts_with(kGpuPrefix); ++it) {
    n += it->second;
  }
  return n;
}

void NodeLoad::add(const Resources& per_replica, const std::vector<int>& gpu_indices) {
  used.add(per_replica);
  gpus_taken.insert(gpu_indices.begin(), gpu_indices.end());
}

std::int64_t narrow(Wide v) {
  constexpr auto kMax = std::numeric_limits<std::int64_t>::max();
  constexpr auto kMin = std::numeric_limits<std::int64_t>::min();
  if (v > kMax) return kMax;
  if (v < kMin) return kMin;
  return static_cast<std::int64_t>(v);
}

bool NodeView::offers_gpu_type(std::string_view type) const {
  auto label = labels.find(std::string(kLabelGpuType));
  if (label != labels.end() && label->second == type) return true;
  for (const auto& g : node->gpus) {
    if (g.model == type) return true;
  }
  if (label == labels.end() && node->gpus.empty()) {
    return node->allocatable.get(std::string(kGpuPrefix) + std::string(type)) > 0;
  }
  return false;
}

namespace {

constexpr std::int64_t kMaxGpuIndices = 4096;

NodeView view_of(const Node& node) {
  NodeView v;
  v.node = &node;
  v.labels = node.effective_labels();
  v.maintenance = node.in_maintenance();
  if (auto it = v.labels.find(std::string(kLabelGpuType)); it != v.labels.end() && !it->second.empty()) {
    v.gpu_type = it->second;
  } else if (!node.gpus.empty() && !node.gpus.front().model.empty()) {
    v.gpu_type = node.gpus.front().model;
  } else {
    v.gpu_type = node.allocatable.gpu_type();
  }
  v.gpu_capacity = v.gpu_type.empty() ? 0 : node.allocatable.get(std::string(kGpuPrefix) + v.gpu_type);
  if (v.gpu_capacity == 0) v.gpu_capacity = node.allocatable.gpus();
  if (node.gpus.empty()) {
    // Bounded: an agent reporting an absurd GPU count must not make the
    // scheduler allocate it; past the bound, free_gpus() is limited by indices.
    for (std::int64_t i = 0; i < std::min<std::int64_t>(v.gpu_capacity, kMaxGpuIndices); ++i) {
      v.gpu_indices.push_back(static_cast<int>(i));
    }
  } else {
    for (const auto& g : node.gpus) v.gpu_indices.push_back(g.index);
    std::sort(v.gpu_indices.begin(), v.gpu_indices.end());
    v.gpu_indices.erase(std::unique(v.gpu_indices.begin(), v.gpu_indices.end()), v.gpu_indices.end());
  }
  return v;
}

}  // namespace

CycleState::CycleState(const Snapshot& snapshot) {
  for (const auto& c : snapshot.clusters) clusters_.emplace(c.id, &c);
  for (const auto& g : snapshot.resource_groups) groups_.emplace(g.name, &g);

  std::vector<const Node*> nodes;
  for (const auto& n : snapshot.nodes) {
    if (clusters_.contains(n.cluster_id)) nodes.push_back(&n);
  }
  std::stable_sort(nodes.begin(), nodes.end(), [](const Node* a, const Node* b) {
    return std::tie(a->cluster_id, a->name) < std::tie(b->cluster_id, b->name);
  });
  // A node reported twice would be counted twice; keep one.
  nodes.erase(
      std::unique(nodes.begin(), nodes.end(),
                  [](const Node* a, const Node* b) { return a->cluster_id == b->cluster_id && a->name == b->name; }),
      nodes.end());
  nodes_.reserve(nodes.size());
  for (const Node* n : nodes) nodes_.push_back(view_of(*n));
  loads_.resize(nodes_.size());

  for (const auto& w : snapshot.running) charge(w.resource_group, w.cluster_id, w.placements, w.per_replica);
}

const Cluster* CycleState::cluster(std::string_view id) const {
  auto it = clusters_.find(id);
  return it == clusters_.end() ? nullptr : it->second;
}

const ResourceGroup* CycleState::group(std::string_view name) const {
  auto it = groups_.find(name);
  return it == groups_.end() ? nullptr : it->second;
}

std::vector<std::size_t> CycleState::nodes_of(std::string_view cluster_id) const {
  auto first = std::lower_bound(nodes_.begin(), nodes_.end(), cluster_id,
                                [](const NodeView& n, std::string_view c) { return n.cluster_id() < c; });
  std::vector<std::size_t> out;
  for (auto it = first; it != nodes_.end() && it->cluster_id() == cluster_id; ++it) {
    out.push_back(static_cast<std::size_t>(it - nodes_.begin()));
  }
  return out;
}

const Tally& CycleState::group_used(std::string_view group) const {
  auto it = group_used_.find(group);
  return it == group_used_.end() ? empty_ : it->second;
}

std::optional<std::size_t> CycleState::node_index(std::string_view cluster_id, std::string_view name) const {
  auto it = std::lower_bound(nodes_.begin(), nodes_.end(), std::pair(cluster_id, name),
                             [](const NodeView& n, const std::pair<std::string_view, std::string_view>& key) {
                               return std::pair<std::string_view, std::string_view>(n.cluster_id(), n.name()) < key;
                             });
  if (it == nodes_.end() || it->cluster_id() != cluster_id || it->name() != name) return std::nullopt;
  return static_cast<std::size_t>(it - nodes_.begin());
}

void CycleState::commit(std::string_view group, const Placement& placement) {
  charge(group, placement.cluster_id, placement.placements, placement.per_replica);
}

void CycleState::charge(std::string_view group, std::string_view cluster_id,
                        const std::vector<ReplicaPlacement>& placements, const Resources& per_replica) {
  auto g = group_used_.find(group);
  if (g == group_used_.end()) g = group_used_.emplace(std::string(group), Tally{}).first;
  g->second.add(per_replica, static_cast<std::int64_t>(placements.size()));
  for (const auto& p : placements) {
    // Work on a node the snapshot no longer lists still counts against its
    // group's quota; there is just no node to charge.
    auto i = node_index(cluster_id, p.node);
    if (!i) continue;
    loads_[*i].add(per_replica, p.gpu_indices);
  }
}

}  // namespace cp::sched
