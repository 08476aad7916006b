#include "sched/cycle_state.h"

#include <algorithm>
#include <bit>
#include <limits>
#include <tuple>
#include <utility>

#include "common/result.h"
#include "sched/feasible.h"
#include "sched/free_order.h"
#include "sched/rank.h"

namespace cp::sched {

bool NodeView::offers_gpu_type(std::string_view type) const {
  for (const auto& t : gpu_types) {
    if (t == type) return true;
  }
  return false;
}

namespace {

// Label gpu-type=T, or a device of model T; a node that says nothing about
// its type but lists "gpu/T" as allocatable offers T too. Worked out once per
// cycle: the filter asks for every node and task.
std::vector<std::string_view> offered_gpu_types(const Node& node, const Labels& labels) {
  std::vector<std::string_view> out;
  auto add = [&](std::string_view t) {
    if (!t.empty() && std::find(out.begin(), out.end(), t) == out.end()) out.push_back(t);
  };
  auto label = labels.find(std::string(kLabelGpuType));
  if (label != labels.end()) add(label->second);
  for (const auto& g : node.gpus) add(g.model);
  if (label == labels.end() && node.gpus.empty()) {
    for (const auto& [name, amount] : node.allocatable.amounts()) {
      if (amount > 0 && name.starts_with(kGpuPrefix)) add(std::string_view(name).substr(kGpuPrefix.size()));
    }
  }
  return out;
}

}  // namespace

namespace {

constexpr std::int64_t kMaxGpuIndices = 4096;

// The type of the first "gpu/<type>" of allocatable (Resources::gpu_type()),
// as a view of the snapshot's key.
std::string_view first_gpu_type(const Resources& r) {
  for (const auto& [name, amount] : r.amounts()) {
    if (name.starts_with(kGpuPrefix)) return std::string_view(name).substr(kGpuPrefix.size());
  }
  return {};
}

// allocatable.get("gpu/" + type), without building the name.
std::int64_t allocatable_of_type(const Resources& r, std::string_view type) {
  for (const auto& [name, amount] : r.amounts()) {
    if (name.size() == kGpuPrefix.size() + type.size() && name.starts_with(kGpuPrefix) && name.ends_with(type)) {
      return amount;
    }
  }
  return 0;
}

NodeView view_of(const Node& node) {
  NodeView v;
  v.node = &node;
  if (!node.label_overrides.empty()) {
    v.overridden = node.effective_labels();
    v.has_overrides = true;
  }
  const Labels& labels = v.labels();
  // in_maintenance() copies the labels again: only asked when the label is there at all.
  v.maintenance = node.maintenance || (labels.contains(std::string(kLabelMaintenance)) && node.in_maintenance());
  v.gpu_types = offered_gpu_types(node, labels);
  v.alloc_cpu = node.allocatable.get(kCpu);
  v.alloc_memory = node.allocatable.get(kMemory);
  if (auto it = labels.find(std::string(kLabelGpuType)); it != labels.end() && !it->second.empty()) {
    v.gpu_type = it->second;
  } else if (!node.gpus.empty() && !node.gpus.front().model.empty()) {
    v.gpu_type = node.gpus.front().model;
  } else {
    v.gpu_type = first_gpu_type(node.allocatable);
  }
  v.gpu_capacity = v.gpu_type.empty() ? 0 : allocatable_of_type(node.allocatable, v.gpu_type);
  if (v.gpu_capacity == 0) v.gpu_capacity = node.allocatable.gpus();
  if (node.gpus.empty()) {
    // Bounded: an agent reporting an absurd GPU count must not make the
    // scheduler allocate it; past the bound, free_gpus() is limited by indices.
    const std::int64_t n = std::clamp<std::int64_t>(v.gpu_capacity, 0, kMaxGpuIndices);
    v.gpu_indices.reserve(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) {
      v.gpu_indices.push_back(static_cast<int>(i));
    }
  } else {
    v.gpu_indices.reserve(node.gpus.size());
    for (const auto& g : node.gpus) v.gpu_indices.push_back(g.index);
    std::sort(v.gpu_indices.begin(), v.gpu_indices.end());
    v.gpu_indices.erase(std::unique(v.gpu_indices.begin(), v.gpu_indices.end()), v.gpu_indices.end());
  }
  v.gpu_index_count = static_cast<std::int64_t>(v.gpu_indices.size());
  v.ready = node.ready;
  v.dense_gpu_indices = v.gpu_indices.empty() ||
                        (v.gpu_indices.front() == 0 &&
                         v.gpu_indices.back() == static_cast<int>(v.gpu_indices.size()) - 1);
  return v;
}

}  // namespace

void NodeLoad::add(const Resources& per_replica, const std::vector<int>& gpu_indices, ProjectId project) {
  const Wide gpus = used.add(per_replica);
  for (int i : gpu_indices) gpus_taken.insert(i);
  if (gpus > 0 && project != kNoProject) {
    auto it = std::find_if(gpu_holders.begin(), gpu_holders.end(), [&](const auto& h) { return h.first == project; });
    if (it == gpu_holders.end()) {
      gpu_holders.emplace_back(project, 1);
    } else {
      ++it->second;
    }
  }
}

void NodeLoad::remove(const Resources& per_replica, const std::vector<int>& gpu_indices,
                      ProjectId project) {
  used.add(per_replica, -1);
  for (int i : gpu_indices) gpus_taken.erase(i);
  auto it = std::find_if(gpu_holders.begin(), gpu_holders.end(), [&](const auto& h) { return h.first == project; });
  if (it != gpu_holders.end() && --it->second <= 0) gpu_holders.erase(it);
}

void NodeLoad::hold(const Resources& per_replica, std::int64_t times) {
  used.add(per_replica, times);
  held.add(per_replica, times);
  held_gpus += per_replica.gpus() * times;
}

Wide NodeAmounts::add(const Resources& r, std::int64_t times) {
  Wide added_gpus = 0;
  for (const auto& [name, amount] : r.amounts()) {
    Wide a = static_cast<Wide>(amount) * times;
    if (name == kCpu) {
      cpu += a;
    } else if (name == kMemory) {
      memory += a;
    } else if (name.starts_with(kGpuPrefix)) {
      gpus += a;
      added_gpus += a;
    } else {
      other.add(name, a);
    }
  }
  return added_gpus;
}

Wide NodeAmounts::get(std::string_view name) const {
  if (name == kCpu) return cpu;
  if (name == kMemory) return memory;
  return other.get(name);
}

Wide in_use(const NodeLoad& load, std::string_view name, LoadMode mode) {
  switch (mode) {
    case LoadMode::kAll: return load.used.get(name);
    case LoadMode::kNoHolds: return load.used.get(name) - load.held.get(name);
    case LoadMode::kDrained: return load.held.get(name);
  }
  return load.used.get(name);
}

bool NodeLoad::hosts_other_project(ProjectId project) const {
  for (const auto& [pg, n] : gpu_holders) {
    if (n > 0 && pg != project) return true;
  }
  return false;
}

const NodeLoad& Overlay::load(std::size_t node) const {
  auto it = changed_.find(node);
  return it == changed_.end() ? base_->load(node) : it->second;
}

NodeLoad& Overlay::edit(std::size_t node) {
  auto it = changed_.find(node);
  if (it == changed_.end()) it = changed_.emplace(node, base_->load(node)).first;
  return it->second;
}

namespace {

std::vector<const Node*> node_pointers(const Snapshot& snapshot) {
  std::vector<const Node*> out;
  out.reserve(snapshot.nodes.size());
  for (const auto& n : snapshot.nodes) out.push_back(&n);
  return out;
}

std::vector<const RunningWork*> work_pointers(const Snapshot& snapshot) {
  std::vector<const RunningWork*> out;
  out.reserve(snapshot.running.size());
  for (const auto& w : snapshot.running) out.push_back(&w);
  return out;
}

bool attempt_before(const RunningWork* a, const RunningWork* b) {
  return std::tie(a->attempt_id, a->task_id) < std::tie(b->attempt_id, b->task_id);
}

}  // namespace

CycleState::CycleState(const Snapshot& snapshot)
    : CycleState(snapshot, node_pointers(snapshot), work_pointers(snapshot)) {}

CycleState::CycleState(const Snapshot& snapshot, const std::vector<const Node*>& all_nodes,
                       std::vector<const RunningWork*> running)
    : snapshot_(&snapshot), quota_(snapshot.resource_groups) {
  for (const auto& c : snapshot.clusters) clusters_.emplace(c.id, &c);
  for (const auto& g : snapshot.resource_groups) groups_.emplace(g.name, &g);
  for (const auto& pc : snapshot.priority_classes) classes_.emplace(pc.name, &pc);

  // Nodes of known clusters in (cluster id, name) order, as a stable sort
  // would leave them: by cluster (ids in order, found by a hash), then by
  // name inside each, where the store's order usually has them already.
  for (const auto& [id, c] : clusters_) cluster_rank_.emplace(id, cluster_rank_.size());
  std::vector<std::vector<const Node*>> by_cluster(cluster_rank_.size());
  for (const Node* n : all_nodes) {
    if (auto it = cluster_rank_.find(n->cluster_id); it != cluster_rank_.end()) by_cluster[it->second].push_back(n);
  }
  std::vector<const Node*> nodes;
  nodes.reserve(all_nodes.size());
  auto by_name = [](const Node* a, const Node* b) { return a->name < b->name; };
  for (auto& members : by_cluster) {
    if (!std::is_sorted(members.begin(), members.end(), by_name)) {
      std::stable_sort(members.begin(), members.end(), by_name);
    }
    nodes.insert(nodes.end(), members.begin(), members.end());
  }
  // A node reported twice would be counted twice; keep one.
  nodes.erase(
      std::unique(nodes.begin(), nodes.end(),
                  [](const Node* a, const Node* b) { return a->cluster_id == b->cluster_id && a->name == b->name; }),
      nodes.end());
  nodes_.reserve(nodes.size());
  for (const Node* n : nodes) {
    NodeView& v = nodes_.emplace_back(view_of(*n));
    v.cluster_rank = cluster_rank_.find(n->cluster_id)->second;
    for (std::string_view type : v.gpu_types) {
      int id = gpu_type_ids_.try_emplace(type, static_cast<int>(gpu_type_ids_.size())).first->second;
      if (id < 64) v.gpu_type_bits |= std::uint64_t{1} << id;
    }
  }
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    NodeView& v = nodes_[i];
    if (auto it = gpu_type_ids_.find(v.gpu_type); !v.gpu_type.empty() && it != gpu_type_ids_.end()) {
      v.primary_type = it->second;
    }
    const bool ordered = v.primary_type >= 0 && v.primary_type < 64 && ((v.gpu_type_bits >> v.primary_type) & 1u);
    if (v.has_gpus() && !ordered) unordered_primary_.push_back(i);
  }
  loads_.resize(nodes_.size());
  kinds_ = gpu_type_ids_.size() + 2;
  bucket_changed_.assign(cluster_rank_.size() * kinds_, 0);
  node_at_.reserve(nodes_.size());
  // Nodes come cluster by cluster: a cluster's range and its lists by type
  // are found once per cluster, then appended to while its nodes last.
  std::pair<std::size_t, std::size_t>* range = nullptr;
  std::vector<std::pair<std::string_view, std::vector<std::size_t>*>> by_type;  // of the cluster at hand
  auto of_type = [&](std::string_view cluster, std::string_view type) -> std::vector<std::size_t>& {
    for (auto& [t, list] : by_type) {
      if (t == type) return *list;
    }
    return *by_type.emplace_back(type, &nodes_by_type_[{cluster, type}]).second;
  };
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    const NodeView& v = nodes_[i];
    node_at_.emplace(std::pair<std::string_view, std::string_view>(v.cluster_id(), v.name()), i);
    if (range == nullptr || v.cluster_id() != nodes_[i - 1].cluster_id()) {
      range = &node_range_.try_emplace(v.cluster_id(), i, i).first->second;
      by_type.clear();
    }
    range->second = i + 1;
    for (std::string_view type : v.gpu_types) of_type(v.cluster_id(), type).push_back(i);
    if (v.has_gpus()) of_type(v.cluster_id(), "any").push_back(i);
  }

  running_ = std::move(running);
  if (!std::is_sorted(running_.begin(), running_.end(), attempt_before)) {
    std::stable_sort(running_.begin(), running_.end(), attempt_before);
  }
  stopping_.assign(running_.size(), false);
  claimed_.assign(running_.size(), false);
  replicas_.resize(running_.size());
  running_project_.reserve(running_.size());
  for (std::size_t w = 0; w < running_.size(); ++w) {
    running_project_.push_back(project(running_[w]->project_group));
    running_by_cluster_[running_[w]->cluster_id].push_back(w);
    charge_running(w);
    if (running_[w]->stopping) mark_stopping(w);
  }
}

void CycleState::charge_running(std::size_t w) {
  const RunningWork& work = *running_[w];
  quota_.add_kept(work.resource_group, work.per_replica, static_cast<std::int64_t>(work.placements.size()),
                  work.project_group);
  replicas_[w].first = replica_nodes_.size();
  for (const auto& p : work.placements) {
    // Work on a node the snapshot no longer lists still counts against its
    // group's quota; there is just no node to charge.
    auto i = node_index(work.cluster_id, p.node);
    replica_nodes_.push_back(i);
    if (!i) continue;
    loads_[*i].add(work.per_replica, p.gpu_indices, running_project_[w]);
    loads_changed(*i);
  }
  replicas_[w].second = replica_nodes_.size();
}

CycleState::~CycleState() = default;

const Cluster* CycleState::cluster(std::string_view id) const {
  auto it = clusters_.find(id);
  return it == clusters_.end() ? nullptr : it->second;
}

const ResourceGroup* CycleState::group(std::string_view name) const {
  auto it = groups_.find(name);
  return it == groups_.end() ? nullptr : it->second;
}

const std::vector<std::string>& CycleState::clusters_of(const ResourceGroup& group) const {
  auto [it, added] = group_clusters_.try_emplace(&group);
  if (added) {
    it->second = group.clusters;
    std::sort(it->second.begin(), it->second.end());
    it->second.erase(std::unique(it->second.begin(), it->second.end()), it->second.end());
  }
  return it->second;
}

const std::vector<const ResourceGroup*>& CycleState::quota_scope_groups(const ResourceGroup& group) const {
  auto [it, added] = scope_groups_.try_emplace(&group);
  if (added) {
    if (group.cohort.empty()) {
      if (this->group(group.name) == &group) it->second.push_back(&group);
    } else {
      // Every cohort's members at once, in the snapshot's order: one pass
      // over the groups, not one per group asked about.
      if (cohort_groups_.empty()) {
        for (const ResourceGroup& g : snapshot_->resource_groups) {
          if (g.cohort.empty() || this->group(g.name) != &g) continue;  // a name twice: the first one counts
          cohort_groups_[g.cohort].push_back(&g);
        }
      }
      if (auto members = cohort_groups_.find(group.cohort); members != cohort_groups_.end()) {
        it->second = members->second;
      }
    }
  }
  return it->second;
}

const PriorityClass* CycleState::priority_class(std::string_view name) const {
  auto it = classes_.find(name);
  return it == classes_.end() ? nullptr : it->second;
}

std::ranges::iota_view<std::size_t, std::size_t> CycleState::nodes_of(std::string_view cluster_id) const {
  auto it = node_range_.find(cluster_id);
  if (it == node_range_.end()) return std::views::iota(std::size_t{0}, std::size_t{0});
  return std::views::iota(it->second.first, it->second.second);
}

std::optional<std::size_t> CycleState::node_index(std::string_view cluster_id, std::string_view name) const {
  auto it = node_at_.find(std::pair(cluster_id, name));
  if (it == node_at_.end()) return std::nullopt;
  return it->second;
}

ProjectId CycleState::project(std::string_view project_group) {
  if (project_group.empty()) return kNoProject;
  auto [it, added] = project_ids_.try_emplace(project_group, static_cast<ProjectId>(project_ids_.size()));
  // A view of the queue's string: gone with the cycle.
  if (added && in_cycle_) projects_added_.push_back(it->first);
  return it->second;
}

int CycleState::gpu_type_id(std::string_view type) const {
  auto it = gpu_type_ids_.find(type);
  return it == gpu_type_ids_.end() ? Request::kGpuTypeNowhere : it->second;
}

const std::vector<std::size_t>& CycleState::nodes_offering(std::string_view cluster_id,
                                                           std::string_view gpu_type) const {
  auto it = nodes_by_type_.find({cluster_id, gpu_type});
  return it == nodes_by_type_.end() ? none_ : it->second;
}

const std::vector<std::size_t>& CycleState::running_on(std::string_view cluster_id) const {
  auto it = running_by_cluster_.find(cluster_id);
  return it == running_by_cluster_.end() ? none_ : it->second;
}

const CycleState::WorkFacts& CycleState::read_facts(std::size_t w) const {
  if (facts_.size() < running_.size()) facts_.resize(running_.size());
  WorkFacts& f = facts_[w];
  if (f.known) return f;
  const RunningWork& work = *running_[w];
  WorkFacts out;
  out.group = group(work.resource_group);
  int gpu_entries = 0;
  for (const auto& [name, amount] : work.per_replica.amounts()) {
    if (name == kCpu) {
      out.cpu = amount;
    } else if (name == kMemory) {
      out.memory = amount;
    } else if (name.starts_with(kGpuPrefix)) {
      out.gpus += amount;
      out.gpu_type = std::string_view(name).substr(kGpuPrefix.size());
      ++gpu_entries;
    } else {
      out.plain = false;
    }
  }
  if (gpu_entries > 1) out.plain = false;
  if (!out.gpu_type.empty()) out.gpu_type_id = gpu_type_id(out.gpu_type);
  out.priority = work.priority;
  out.preemptible = work.preemptible;
  out.cluster = cluster_rank(work.cluster_id);
  out.known = true;
  f = out;
  return f;
}

void CycleState::holders_on(const std::vector<std::size_t>& nodes, std::vector<std::string_view>& out) const {
  for (std::size_t n : nodes) {
    if (auto it = node_holders_.find(n); it != node_holders_.end()) out.insert(out.end(), it->second.begin(), it->second.end());
  }
}

void CycleState::quota_holders(std::string_view group, std::vector<std::string_view>& out) const {
  if (auto it = quota_holders_.find(group); it != quota_holders_.end()) {
    out.insert(out.end(), it->second.begin(), it->second.end());
  }
}

void CycleState::changed_nodes(const Placement& placement) {
  ++changes_;
  for (const auto& p : placement.placements) {
    if (auto i = node_index(placement.cluster_id, p.node)) changed_node(*i);  // no node, nothing changed on one
  }
}

void CycleState::changed_node(std::size_t node) {
  const NodeView& v = nodes_[node];
  std::uint64_t* bucket = &bucket_changed_[v.cluster_rank * kinds_];
  if (static_cast<std::size_t>(std::popcount(v.gpu_type_bits)) == v.gpu_types.size()) {
    for (std::uint64_t bits = v.gpu_type_bits; bits != 0; bits &= bits - 1) bucket[std::countr_zero(bits)] = changes_;
  } else {
    for (std::size_t k = 0; k + 2 < kinds_; ++k) bucket[k] = changes_;  // a type numbered past 64: all of them
  }
  if (v.has_gpus()) bucket[kinds_ - 2] = changes_;
  bucket[kinds_ - 1] = changes_;
}

void CycleState::changed_quota(std::string_view group_name) { changed_quota(group(group_name)); }

void CycleState::changed_quota(const ResourceGroup* g) {
  ++changes_;
  if (g != nullptr) {
    quota_changed_[quota_scope(*g)] = changes_;
  } else {
    unscoped_change_ = changes_;
  }
}

bool CycleState::nodes_unchanged_since(std::uint64_t mark, const std::vector<std::string>& clusters,
                                       const Request& request) const {
  return nodes_unchanged_since(mark, ranks_of(clusters), request);
}

bool CycleState::nodes_unchanged_since(std::uint64_t mark, const ClusterRanks& ranks, const Request& request) const {
  std::size_t kind = kinds_ - 1;  // every node
  if (request.any_gpu()) {
    kind = kinds_ - 2;
  } else if (request.wants_gpus()) {
    if (request.gpu_type_id == Request::kGpuTypeNowhere) return true;  // no node offers it: nothing to change
    if (request.gpu_type_id < 0) return false;                          // not resolved: cannot tell
    kind = static_cast<std::size_t>(request.gpu_type_id);
  }
  for (std::size_t rank : ranks) {
    if (bucket_changed_[rank * kinds_ + kind] > mark) return false;
  }
  return true;
}

bool CycleState::quota_unchanged_since(std::uint64_t mark, const ResourceGroup& g) const {
  if (unscoped_change_ > mark) return false;
  auto it = quota_changed_.find(quota_scope(g));
  return it == quota_changed_.end() || it->second <= mark;
}

bool CycleState::quota_holds_unchanged_since(std::uint64_t mark, std::string_view group) const {
  auto it = quota_holds_changed_.find(group);
  return it == quota_holds_changed_.end() || it->second <= mark;
}

void CycleState::commit(const Task& task, const Placement& placement) {
  commit(task, group(task.resource_group), project(task.project_group), placement);
}

void CycleState::commit(const Task& task, const ResourceGroup* g, ProjectId project, const Placement& placement) {
  changed_quota(g);
  ++changes_;  // the nodes' change, as changed_nodes counts it
  const auto replicas = static_cast<std::int64_t>(placement.placements.size());
  // The shape's own resources, where they are what is charged: kept by
  // reference, not copied for the book.
  const Resources* asked = shape_resources(task.step, placement.shape);
  if (asked != nullptr && *asked == placement.per_replica) {
    quota_.add_kept(task.resource_group, *asked, replicas, task.project_group);
  } else {
    quota_.add(task.resource_group, placement.per_replica, replicas, task.project_group);
  }
  // Each replica's node looked up once: its buckets, then its load.
  for (const auto& p : placement.placements) {
    auto i = node_index(placement.cluster_id, p.node);
    if (!i) continue;
    changed_node(*i);
    changing_load(*i).add(placement.per_replica, p.gpu_indices, project);
    loads_changed(*i);
  }
}

void CycleState::hold(const Task& task, const Placement& placement) {
  changed_nodes(placement);
  hold_quota(task, placement.per_replica, static_cast<int>(placement.placements.size()));
  for (const auto& p : placement.placements) {
    auto i = node_index(placement.cluster_id, p.node);
    if (!i) continue;
    changing_load(*i).hold(placement.per_replica);
    loads_changed(*i);
    held_on(*i);
    auto& who = node_holders_[*i];
    if (std::find(who.begin(), who.end(), task.id) == who.end()) who.push_back(task.id);
  }
}

namespace {

// The positive part of need - freed, as Resources.
Resources beyond(const Tally& need, const Tally& freed) {
  Resources out;
  for (const auto& [name, amount] : need.amounts()) {
    Wide rest = amount - freed.get(name);
    if (rest > 0) out.set(name, narrow(rest));
  }
  return out;
}

}  // namespace

void CycleState::hold_over(const Task& task, const Placement& placement, const std::vector<std::size_t>& claimed) {
  changed_nodes(placement);
  std::map<std::size_t, Tally> need, freed;
  for (const auto& p : placement.placements) {
    if (auto i = node_index(placement.cluster_id, p.node)) need[*i].add(placement.per_replica);
  }
  Tally quota_need, quota_freed;
  quota_need.add(placement.per_replica, static_cast<std::int64_t>(placement.placements.size()));
  for (std::size_t w : claimed) {
    if (in_cycle_ && !claimed_[w]) claimed_list_.push_back(w);
    claimed_[w] = true;
    ++stopping_changes_;
    const RunningWork& work = *running_[w];
    if (work.resource_group == task.resource_group) {
      quota_freed.add(work.per_replica, static_cast<std::int64_t>(work.placements.size()));
    }
    if (work.cluster_id != placement.cluster_id) continue;
    for (const auto& i : running_nodes(w)) {
      if (i) freed[*i].add(work.per_replica);
    }
  }
  for (const auto& [i, n] : need) {
    Resources rest = beyond(n, freed[i]);
    held_on(i);
    auto& who = node_holders_[i];
    if (std::find(who.begin(), who.end(), task.id) == who.end()) who.push_back(task.id);
    if (!rest.empty()) {
      changing_load(i).hold(rest);
      loads_changed(i);
    }
  }
  Resources rest = beyond(quota_need, quota_freed);
  if (!rest.empty()) hold_quota(task, rest, 1);
}

void CycleState::hold_quota(const Task& task, const Resources& per_replica, int replicas) {
  changed_quota(task.resource_group);
  quota_holds_changed_[task.resource_group] = changes_;
  Resources typed = per_replica;
  typed.set(kGpuAny, 0);
  quota_.hold(task.resource_group, typed, replicas);
  auto& who = quota_holders_[task.resource_group];
  if (std::find(who.begin(), who.end(), task.id) == who.end()) who.push_back(task.id);
}

void CycleState::mark_stopping(std::size_t w) {
  if (stopping_[w] && !running_[w]->stopping) return;  // marked in this cycle already
  stopping_[w] = true;
  stopping_list_.push_back(w);
  index_stopping(stopping_list_.size() - 1);
  ++stopping_changes_;
  for (const auto& i : running_nodes(w)) {
    if (i && nodes_with_stopping_.insert(*i).second && in_cycle_) stopping_nodes_added_.push_back(*i);
  }
}

template <class Gather>
const std::vector<std::size_t>& CycleState::remembered(StoppingMemos& memos, const ResourceGroup& g,
                                                       const std::vector<std::string>& clusters, Gather gather) const {
  StoppingMemo& memo = memos[{&g, &clusters}];
  if (memo.changes == stopping_changes_ && memo.group == g.name) return memo.works;
  memo.changes = stopping_changes_;
  memo.group = g.name;
  memo.works = gather();
  return memo.works;
}

const std::vector<std::size_t>& CycleState::stopping_within(const ResourceGroup& g,
                                                            const std::vector<std::string>& clusters) const {
  // Asked by most blocked tasks of a big queue, while the answer changes
  // only as work is marked stopping or claimed: kept per (group, clusters).
  return remembered(stopping_memo_, g, clusters, [&] { return gather_stopping(g, clusters); });
}

std::vector<std::size_t> CycleState::gather_stopping(const ResourceGroup& g,
                                                     const std::vector<std::string>& clusters) const {
  std::vector<std::size_t> positions;
  auto take = [&](const std::vector<std::size_t>& more) { positions.insert(positions.end(), more.begin(), more.end()); };
  // The group's own work, through the snapshot's group of its name.
  if (auto it = stopping_by_group_.find(group(g.name)); it != stopping_by_group_.end()) take(it->second);
  for (const auto& c : clusters) {
    if (auto it = stopping_by_cluster_.find(c); it != stopping_by_cluster_.end()) take(it->second);
  }
  std::sort(positions.begin(), positions.end());
  positions.erase(std::unique(positions.begin(), positions.end()), positions.end());
  std::vector<std::size_t> out;
  for (std::size_t p : positions) {
    if (!claimed_[stopping_list_[p]]) out.push_back(stopping_list_[p]);
  }
  return out;
}

void CycleState::charge_quota(std::size_t w, std::int64_t sign) {
  const RunningWork& work = *running_[w];
  const auto replicas = sign * static_cast<std::int64_t>(work.placements.size());
  if (charges_.size() < running_.size()) charges_.resize(running_.size());
  Resolved& r = charges_[w];
  if (!r.done) {
    r.charge = quota_.resolve(work.resource_group, work.per_replica);
    r.done = true;
  }
  if (r.charge) {
    quota_.add(*r.charge, replicas);
  } else {
    quota_.add(work.resource_group, work.per_replica, replicas);
  }
}

void CycleState::take_out(std::size_t w, Overlay& overlay) {
  const RunningWork& work = *running_[w];
  take_out_quota(w);
  for (std::size_t r = 0; r < work.placements.size(); ++r) {
    if (auto i = running_nodes(w)[r]) {
      overlay.edit(*i).remove(work.per_replica, work.placements[r].gpu_indices, running_project_[w]);
    }
  }
}

void CycleState::put_back(std::size_t w, Overlay& overlay) {
  const RunningWork& work = *running_[w];
  put_back_quota(w);
  for (std::size_t r = 0; r < work.placements.size(); ++r) {
    if (auto i = running_nodes(w)[r]) {
      overlay.edit(*i).add(work.per_replica, work.placements[r].gpu_indices, running_project_[w]);
    }
  }
}

// ---- Kept between cycles.

NodeLoad& CycleState::changing_load(std::size_t node) {
  if (in_cycle_ && !load_saved_[node]) {
    load_saved_[node] = true;
    saved_loads_.emplace_back(node, loads_[node]);
  }
  return loads_[node];
}

void CycleState::held_on(std::size_t node) {
  if (!nodes_with_holds_.insert(node).second) return;
  if (holds_by_cluster_.empty()) holds_by_cluster_.resize(cluster_rank_.size());
  holds_by_cluster_[nodes_[node].cluster_rank].push_back(node);
}

namespace {

// Something is held on the node: without holds, it counts differently.
bool holds_something(const NodeLoad& l) {
  return l.held.cpu != 0 || l.held.memory != 0 || l.held.gpus != 0 || l.held_gpus != 0 ||
         !l.held.other.amounts().empty();
}

}  // namespace

void CycleState::loads_changed(std::size_t node) {
  if (!order_) return;
  order_->update(node, nodes_[node], loads_[node]);
  if (holds_something(loads_[node])) {
    held_order_->add(node, nodes_[node], loads_[node]);
  } else {
    held_order_->remove(node, nodes_[node]);
  }
}

namespace {

// The first entry of `order` with `first` at least `need`.
std::vector<FreeOrder::Entry>::const_iterator first_with(const std::vector<FreeOrder::Entry>& order, Wide need) {
  return std::lower_bound(order.begin(), order.end(), need,
                          [](const FreeOrder::Entry& e, Wide n) { return e.first < n; });
}

// What a request needs of the order it walks: GPUs in a GPU order, cpu in
// the cpu order (every node when it asks for no cpu).
Wide need_in_order(const Request& request) {
  if (request.wants_gpus()) return request.gpus;
  return request.cpu > 0 ? static_cast<Wide>(request.cpu) : std::numeric_limits<std::int64_t>::min();
}

// The first entry of `order` with `first` at least `need` that `skip` keeps
// and `fits` takes: walking up (binpack), or down (spread: the most free,
// and of equal ones the lowest node index, as the score ranks them).
template <class Skip, class Fits>
std::optional<std::size_t> walk(const std::vector<FreeOrder::Entry>& order, Wide need, bool spread, Skip skip,
                                Fits fits) {
  auto start = first_with(order, need);
  if (!spread) {
    for (auto it = start; it != order.end(); ++it) {
      if (!skip(*it) && fits(it->node)) return it->node;
    }
    return std::nullopt;
  }
  for (auto it = order.end(); it != start;) {
    --it;
    if (skip(*it) || !fits(it->node)) continue;
    std::size_t best = it->node;
    auto found = it;
    while (it != start) {
      --it;
      if (!it->same_key(*found)) break;
      if (!skip(*it) && fits(it->node)) best = it->node;
    }
    return best;
  }
  return std::nullopt;
}

}  // namespace

bool CycleState::Ordered::out_of_order(std::size_t node, const NodeLoad& load) const {
  return (mode == LoadMode::kNoHolds && holds_something(load)) || (overlay != nullptr && overlay->changed(node));
}

CycleState::Ordered CycleState::ordered(const LoadView& loads) const {
  Ordered out;
  if (&loads == this) {
    out.applies = true;
  } else if (const auto* view = dynamic_cast<const ModeView*>(&loads)) {
    out.applies = view->base() == this && view->mode() == LoadMode::kNoHolds;
    out.mode = LoadMode::kNoHolds;
  } else if (const auto* overlay = dynamic_cast<const Overlay*>(&loads)) {
    out.applies = overlay->base() == this;
    out.overlay = overlay;
  }
  return out;
}

CycleState::FewNodes CycleState::out_of_order_nodes(const Ordered& o, const ClusterRanks& ranks,
                                                    const Request& request) const {
  FewNodes out;
  // Callers have checked that a typed request's id is an ordered type (below 64).
  auto offers = [&](const NodeView& v) {
    if (!request.wants_gpus()) return true;
    if (request.any_gpu()) return v.has_gpus();
    return ((v.gpu_type_bits >> request.gpu_type_id) & 1u) != 0;
  };
  if (o.mode == LoadMode::kNoHolds && !holds_by_cluster_.empty()) {
    for (std::size_t rank : ranks) {
      for (std::size_t i : holds_by_cluster_[rank]) {
        if (offers(nodes_[i]) && holds_something(loads_[i])) out.push_back(i);
      }
    }
  }
  // An overlay's base is this state, counted with holds: the two above never meet.
  if (o.overlay != nullptr) {
    for (std::size_t i : o.overlay->changed_nodes()) {
      const NodeView& v = nodes_[i];
      if (offers(v) && std::find(ranks.begin(), ranks.end(), v.cluster_rank) != ranks.end()) out.push_back(i);
    }
  }
  return out;
}

bool CycleState::order_ready() const {
  if (!order_) {
    // Ordering every node costs some thousand fits' worth of node checks: a
    // state asked only a few times (one task, one decide()) does without.
    if (++asks_before_order_ < kAsksBeforeOrder) return false;
    order_ = std::make_unique<FreeOrder>(nodes_, loads_, cluster_rank_.size(), kinds_ - 2);
    held_order_ = std::make_unique<FreeOrder>(nodes_.size(), cluster_rank_.size(), kinds_ - 2, LoadMode::kNoHolds);
    for (std::size_t i : nodes_with_holds_) {
      if (holds_something(loads_[i])) held_order_->add(i, nodes_[i], loads_[i]);
    }
  }
  return true;
}

CycleState::ClusterRanks CycleState::ranks_of(const std::vector<std::string>& clusters) const {
  ClusterRanks ranks;
  for (const auto& id : clusters) {
    if (auto r = cluster_rank_.find(id); r != cluster_rank_.end()) ranks.push_back(r->second);
  }
  return ranks;
}

CycleState::Best CycleState::best_single(const LoadView& loads, const std::vector<std::string>& clusters,
                                         const ResourceGroup& group, const Request& request, ProjectId project,
                                         PlacementPolicy policy) const {
  return best_single(loads, ranks_of(clusters), group, request, project, policy);
}

CycleState::Best CycleState::best_single(const LoadView& loads, const ClusterRanks& ranks, const ResourceGroup& group,
                                         const Request& request, ProjectId project, PlacementPolicy policy) const {
  Best out;
  const Ordered o = ordered(loads);
  if (!o.applies || request.replicas != 1 || request.any_gpu() || !order_ready()) return out;
  const bool gpu = request.wants_gpus();
  if (gpu && (request.gpu_type_id < 0 || static_cast<std::size_t>(request.gpu_type_id) >= order_->types())) return out;
  out.applies = true;
  const bool spread = policy == PlacementPolicy::spread;
  auto fits = [&](std::size_t i) { return !node_misfit(nodes_[i], loads.load(i), group, request, o.mode); };
  // A node whose load here is not the one ordered is asked on its own below.
  auto skip = [&](const FreeOrder::Entry& e) { return o.out_of_order(e.node, loads_[e.node]); };
  // Nodes that may be the best: per cluster, the first that fits of those
  // with GPU work of no other project, and the first of all.
  FewNodes candidates;
  const Wide need = need_in_order(request);
  // The same walks over one order: skipping what `skip_here` says.
  auto walk_order = [&](const FreeOrder& order, auto skip_here) {
    for (std::size_t rank : ranks) {
      if (gpu) {
        auto other_project = [&](const FreeOrder::Entry& e) {
          return skip_here(e) || (e.holder != kNoProject && e.holder != project);
        };
        if (auto i = walk(order.single(rank, request.gpu_type_id), need, spread, other_project, fits)) {
          candidates.push_back(*i);
        }
        if (auto i = walk(order.offering(rank, request.gpu_type_id), need, spread, skip_here, fits)) {
          candidates.push_back(*i);
        }
      } else {
        if (auto i = walk(order.cpu(rank), need, spread, skip_here, fits)) candidates.push_back(*i);
      }
    }
  };
  walk_order(*order_, skip);
  if (o.mode == LoadMode::kNoHolds) {
    // Without holds, the held nodes (out of the order above) have an order
    // of their own, by what they have free without their holds.
    walk_order(*held_order_, [](const FreeOrder::Entry&) { return false; });
  } else {
    for (std::size_t i : out_of_order_nodes(o, ranks, request)) {
      if (fits(i)) candidates.push_back(i);
    }
  }
  std::optional<std::pair<Score, std::size_t>> best;
  for (std::size_t i : candidates) {
    std::pair<Score, std::size_t> ranked{score_node(policy, nodes_[i], loads.load(i), request, project, o.mode), i};
    if (!best || ranked < *best) best = ranked;
  }
  if (best) out.node = best->second;
  return out;
}

std::optional<std::vector<std::size_t>> CycleState::fitting_nodes(const LoadView& loads,
                                                                  const std::vector<std::string>& clusters,
                                                                  const ResourceGroup& group,
                                                                  const Request& request) const {
  return fitting_nodes(loads, ranks_of(clusters), group, request);
}

std::optional<std::vector<std::size_t>> CycleState::fitting_nodes(const LoadView& loads, const ClusterRanks& ranks,
                                                                  const ResourceGroup& group,
                                                                  const Request& request) const {
  const Ordered o = ordered(loads);
  if (!o.applies || !order_ready()) return std::nullopt;
  const bool gpu = request.wants_gpus();
  // The GPU orders to walk: the request's type, or for gpu/any every type.
  int first_type = 0;
  int last_type = static_cast<int>(order_->types());
  if (gpu && !request.any_gpu()) {
    if (request.gpu_type_id < 0 || static_cast<std::size_t>(request.gpu_type_id) >= order_->types()) {
      return std::nullopt;
    }
    first_type = request.gpu_type_id;
    last_type = first_type + 1;
  }
  // gpu/any: a node with GPUs of no ordered type would be missed.
  if (gpu && request.any_gpu() && !order_->orders_every_gpu_node()) return std::nullopt;
  std::vector<std::size_t> out;
  auto take = [&](std::size_t i) {
    if (!node_misfit(nodes_[i], loads.load(i), group, request, o.mode)) out.push_back(i);
  };
  const Wide need = need_in_order(request);
  auto from = [&](const std::vector<FreeOrder::Entry>& order) {
    for (auto it = first_with(order, need); it != order.end(); ++it) {
      if (!o.out_of_order(it->node, loads_[it->node])) take(it->node);
    }
  };
  for (std::size_t rank : ranks) {
    if (gpu) {
      for (int t = first_type; t < last_type; ++t) from(order_->offering(rank, t));
    } else {
      from(order_->cpu(rank));
    }
  }
  for (std::size_t i : out_of_order_nodes(o, ranks, request)) take(i);
  std::sort(out.begin(), out.end());
  // gpu/any: a node offering several types is in several orders.
  if (gpu && request.any_gpu()) out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::optional<std::vector<CycleState::TypedBest>> CycleState::best_single_per_type(
    const LoadView& loads, const std::vector<std::string>& clusters, const ResourceGroup& group,
    const Request& request, ProjectId project, PlacementPolicy policy, const TypeFilter& only) const {
  return best_single_per_type(loads, ranks_of(clusters), group, request, project, policy, only);
}

std::optional<std::vector<CycleState::TypedBest>> CycleState::best_single_per_type(
    const LoadView& loads, const ClusterRanks& ranks, const ResourceGroup& group, const Request& request,
    ProjectId project, PlacementPolicy policy, const TypeFilter& only) const {
  const Ordered o = ordered(loads);
  if (!o.applies || request.replicas != 1 || !request.any_gpu() || !order_ready()) return std::nullopt;
  // The ordered types to walk, by cycle id (each asked of `only` once).
  std::vector<char> walk_type(order_->types(), 1);
  if (only) {
    for (const auto& [name, id] : gpu_type_ids_) {
      const auto at = static_cast<std::size_t>(id);
      if (id >= 0 && at < walk_type.size()) walk_type[at] = only(name);
    }
  }
  auto wanted = [&](std::size_t i) {
    if (!only) return true;
    const int t = nodes_[i].primary_type;
    return t >= 0 && static_cast<std::size_t>(t) < walk_type.size() ? walk_type[static_cast<std::size_t>(t)] != 0
                                                                     : only(nodes_[i].gpu_type);
  };
  const bool spread = policy == PlacementPolicy::spread;
  auto fits = [&](std::size_t i) { return !node_misfit(nodes_[i], loads.load(i), group, request, o.mode); };
  auto skip = [&](const FreeOrder::Entry& e) { return o.out_of_order(e.node, loads_[e.node]); };
  // Nodes that may be an attempt's best: per cluster and type, walking that
  // type's orders over the nodes whose own type it is (as best_single does
  // for one type); then the nodes asked one by one.
  FewNodes candidates;
  const Wide need = need_in_order(request);
  // The same walks over one order: skipping what `skip_here` says.
  auto walk_order = [&](const FreeOrder& order, auto skip_here) {
    for (std::size_t rank : ranks) {
      for (std::size_t t = 0; t < order.types(); ++t) {
        if (!walk_type[t]) continue;
        auto own = [&](std::size_t i) { return nodes_[i].primary_type == static_cast<int>(t) && fits(i); };
        auto other_project = [&](const FreeOrder::Entry& e) {
          return skip_here(e) || (e.holder != kNoProject && e.holder != project);
        };
        if (auto i = walk(order.single(rank, static_cast<int>(t)), need, spread, other_project, own)) {
          candidates.push_back(*i);
        }
        if (auto i = walk(order.offering(rank, static_cast<int>(t)), need, spread, skip_here, own)) {
          candidates.push_back(*i);
        }
      }
    }
  };
  walk_order(*order_, skip);
  if (o.mode == LoadMode::kNoHolds) {
    // Without holds, the held nodes (passed over above) have an order of
    // their own, as in best_single, rather than each asked on its own.
    walk_order(*held_order_, [](const FreeOrder::Entry&) { return false; });
  } else {
    for (std::size_t i : out_of_order_nodes(o, ranks, request)) {
      if (wanted(i) && fits(i)) candidates.push_back(i);
    }
  }
  for (std::size_t i : unordered_primary_) {
    if (std::find(ranks.begin(), ranks.end(), nodes_[i].cluster_rank) != ranks.end() && wanted(i) && fits(i)) {
      candidates.push_back(i);
    }
  }
  // The best of each (cluster, type), ranked as select_gang ranks: score, then index.
  std::vector<TypedBest> out;
  std::vector<std::pair<Score, std::size_t>> ranked;
  for (std::size_t i : candidates) {
    const NodeView& v = nodes_[i];
    std::pair<Score, std::size_t> r{score_node(policy, v, loads.load(i), request, project, loads.mode()), i};
    // Same type: by cycle id where both have one (no name to compare).
    auto same_type = [&](const TypedBest& b) {
      const int t = nodes_[b.node].primary_type;
      return t >= 0 && v.primary_type >= 0 ? t == v.primary_type : b.gpu_type == v.gpu_type;
    };
    std::size_t k = 0;
    while (k < out.size() && !(out[k].cluster_rank == v.cluster_rank && same_type(out[k]))) ++k;
    if (k == out.size()) {
      out.push_back({v.cluster_rank, v.gpu_type, i});
      ranked.push_back(r);
    } else if (r < ranked[k]) {
      out[k].node = i;
      ranked[k] = r;
    }
  }
  return out;
}

const CycleState::StaticNodes& CycleState::static_nodes(std::string_view cluster, const ResourceGroup& group,
                                                        const Request& request) const {
  // What static_misfit reads: the group's node selector (a group without
  // one reads nothing of the group), whether the request wants GPUs, and
  // of which type (any, an id, or a name no node offers).
  std::string& key = static_key_;
  key.clear();
  const ResourceGroup* g = group.node_selector.empty() ? nullptr : &group;
  append_bytes(key, g);
  if (request.wants_gpus()) {
    key += request.any_gpu() ? 'a' : 't';
    const int id = request.gpu_type_id;
    append_bytes(key, id);
    if (!request.any_gpu() && (id < 0 || id >= 64)) key += request.gpu_type;
  } else {
    key += '-';
  }
  key += '\x1f';
  key += cluster;
  auto it = static_nodes_.find(std::string_view(key));
  if (it != static_nodes_.end()) return it->second;
  StaticNodes out;
  for (std::size_t i : nodes_of(cluster)) {
    ++out.total;
    if (auto m = static_misfit(nodes_[i], group, request)) {
      ++out.dropped[static_cast<std::size_t>(*m)];
    } else {
      out.nodes.push_back(i);
    }
  }
  return static_nodes_.emplace(key, std::move(out)).first->second;
}

std::vector<CycleState::Preemptible> CycleState::sorted_preemptible(const std::vector<std::size_t>& works) const {
  std::vector<Preemptible> out;
  for (std::size_t w : works) {
    const WorkFacts& f = facts(w);
    if (!f.preemptible) continue;
    std::uint32_t node = Preemptible::kNotOneNode;
    const auto nodes = running_nodes(w);
    if (!nodes.empty() && std::all_of(nodes.begin(), nodes.end(), [&](const auto& i) { return i == nodes.front(); }) &&
        nodes.front() && *nodes.front() < Preemptible::kNotOneNode) {
      node = static_cast<std::uint32_t>(*nodes.front());
    }
    out.push_back({f.priority, f.cluster, f.group, w, node});
  }
  std::sort(out.begin(), out.end(), [](const Preemptible& a, const Preemptible& b) {
    return std::tie(a.priority, a.work) < std::tie(b.priority, b.work);
  });
  return out;
}

std::span<const CycleState::Preemptible> CycleState::preemptible_on(std::string_view cluster) const {
  auto it = preemptible_on_.find(cluster);
  if (it == preemptible_on_.end()) it = preemptible_on_.emplace(cluster, sorted_preemptible(running_on(cluster))).first;
  return it->second;
}

std::span<const CycleState::Preemptible> CycleState::preemptible_of(const ResourceGroup& group) {
  auto it = preemptible_of_.find(&group);
  if (it == preemptible_of_.end()) {
    it = preemptible_of_.emplace(&group, sorted_preemptible(running_of_group(group.name))).first;
  }
  return it->second;
}

void CycleState::begin_cycle() {
  CP_CHECK(!in_cycle_, "begin_cycle: a cycle is already open");
  in_cycle_ = true;
  stopping_memo_.clear();  // deltas since the last cycle changed what stops
  scope_stopping_memo_.clear();
  static_nodes_.clear();   // and what nodes are
  preemptible_on_.clear();  // and what runs where
  preemptible_of_.clear();
  quota_.begin_undo();
  load_saved_.resize(nodes_.size(), false);
  stopping_before_ = stopping_list_.size();
}

void CycleState::end_cycle() {
  CP_CHECK(in_cycle_, "end_cycle: no cycle is open");
  for (auto& [i, load] : saved_loads_) {
    loads_[i] = std::move(load);
    load_saved_[i] = false;
    loads_changed(i);
  }
  saved_loads_.clear();
  quota_.undo();
  // Victims of the cycle, last marked first: each index list got them in this order.
  while (stopping_list_.size() > stopping_before_) {
    std::size_t w = stopping_list_.back();
    stopping_by_cluster_[running_[w]->cluster_id].pop_back();
    if (const ResourceGroup* g = group(running_[w]->resource_group)) {
      stopping_by_group_[g].pop_back();
    } else {
      --stopping_of_unknown_groups_;
    }
    stopping_[w] = false;
    stopping_list_.pop_back();
  }
  for (std::size_t i : stopping_nodes_added_) nodes_with_stopping_.erase(i);
  stopping_nodes_added_.clear();
  for (std::size_t w : claimed_list_) claimed_[w] = false;
  claimed_list_.clear();
  stopping_memo_.clear();
  scope_stopping_memo_.clear();
  // Holds are the cycle's alone: the snapshot has none.
  nodes_with_holds_.clear();
  for (auto& held : holds_by_cluster_) held.clear();
  if (held_order_) held_order_->clear();
  node_holders_.clear();
  quota_holders_.clear();
  quota_holds_changed_.clear();
  for (std::string_view p : projects_added_) project_ids_.erase(p);
  projects_added_.clear();
  in_cycle_ = false;
}

void CycleState::index_works_on_nodes() {
  if (works_on_nodes_built_) return;
  works_on_nodes_built_ = true;
  works_on_node_.assign(nodes_.size(), {});
  for (std::size_t w = 0; w < running_.size(); ++w) {
    if (running_[w] == nullptr) continue;
    for (const auto& i : running_nodes(w)) {
      if (!i) continue;
      auto& on = works_on_node_[*i];
      if (on.empty() || on.back() != w) on.push_back(w);
    }
  }
}

void CycleState::index_everything() {
  for (std::size_t w = 0; w < running_.size(); ++w) {
    if (running_[w] != nullptr) facts(w);
  }
  index_works_on_nodes();
  running_of_group("");
}

const std::vector<std::size_t>& CycleState::running_of_group(std::string_view group) {
  if (!by_group_built_) {
    by_group_built_ = true;
    for (std::size_t w = 0; w < running_.size(); ++w) {
      if (running_[w] != nullptr) running_by_group_[running_[w]->resource_group].push_back(w);
    }
  }
  auto it = running_by_group_.find(group);
  return it == running_by_group_.end() ? none_ : it->second;
}

// The node's load as a fresh build makes it: the sum of the work on it.
void CycleState::reload_node(std::size_t node) {
  NodeLoad load;
  bool stopping = false;
  for (std::size_t w : works_on_node_[node]) {
    const RunningWork& work = *running_[w];
    auto where = running_nodes(w);
    for (std::size_t r = 0; r < where.size(); ++r) {
      if (where[r] == node) load.add(work.per_replica, work.placements[r].gpu_indices, running_project_[w]);
    }
    stopping = stopping || stopping_[w];
  }
  loads_[node] = std::move(load);
  loads_changed(node);
  if (stopping) {
    nodes_with_stopping_.insert(node);
  } else {
    nodes_with_stopping_.erase(node);
  }
}

void CycleState::rebuild_stopping_index() {
  stopping_by_cluster_.clear();
  stopping_by_group_.clear();
  stopping_of_unknown_groups_ = 0;
  for (std::size_t p = 0; p < stopping_list_.size(); ++p) index_stopping(p);
}

void CycleState::index_stopping(std::size_t p) {
  const RunningWork& work = *running_[stopping_list_[p]];
  stopping_by_cluster_[work.cluster_id].push_back(p);
  if (const ResourceGroup* g = group(work.resource_group)) {
    stopping_by_group_[g].push_back(p);
  } else {
    ++stopping_of_unknown_groups_;
  }
}

const std::vector<std::size_t>& CycleState::stopping_in_quota_scope(const ResourceGroup& g,
                                                                    const std::vector<std::string>& clusters) const {
  // Asked by most tasks short of quota: kept as stopping_within's answers are.
  return remembered(scope_stopping_memo_, g, clusters, [&] { return gather_scope_stopping(g, clusters); });
}

std::vector<std::size_t> CycleState::gather_scope_stopping(const ResourceGroup& g,
                                                           const std::vector<std::string>& clusters) const {
  // By cluster rank (in the work's facts): no name to compare. The ranks
  // are looked up only once some work is asked about.
  std::optional<ClusterRanks> ranks;
  auto on_clusters = [&](std::size_t w) {
    const int rank = facts(w).cluster;
    if (rank < 0) return std::find(clusters.begin(), clusters.end(), running_[w]->cluster_id) != clusters.end();
    if (!ranks) ranks = ranks_of(clusters);
    return std::find(ranks->begin(), ranks->end(), static_cast<std::size_t>(rank)) != ranks->end();
  };
  std::vector<std::size_t> out;
  if (stopping_of_unknown_groups_ > 0) {
    for (std::size_t w : stopping_list_) {
      if (!claimed_[w] && group(running_[w]->resource_group) == nullptr && on_clusters(w)) out.push_back(w);
    }
  }
  for (const ResourceGroup* member : quota_scope_groups(g)) {
    auto it = stopping_by_group_.find(member);
    if (it == stopping_by_group_.end()) continue;
    // stopping_within takes the group's own work anywhere.
    const bool own = member == &g || member->name == g.name;
    for (std::size_t p : it->second) {
      const std::size_t w = stopping_list_[p];
      if (claimed_[w]) continue;
      if (!own && !on_clusters(w)) continue;
      out.push_back(w);
    }
  }
  return out;
}

std::size_t CycleState::add_running(const RunningWork& work) {
  CP_CHECK(!in_cycle_, "add_running inside a cycle");
  std::size_t w = running_.size();
  if (!free_work_.empty()) {
    w = free_work_.back();
    free_work_.pop_back();
  } else {
    running_.push_back(nullptr);
    running_project_.push_back(kNoProject);
    stopping_.push_back(false);
    claimed_.push_back(false);
    replicas_.emplace_back();
  }
  running_[w] = &work;
  if (w < facts_.size()) facts_[w] = {};
  if (w < charges_.size()) charges_[w] = {};
  running_project_[w] = project(work.project_group);
  stopping_[w] = false;
  claimed_[w] = false;
  // In attempt order, as a fresh build lists it (the first of equal ones first).
  auto& on_cluster = running_by_cluster_[work.cluster_id];
  on_cluster.insert(std::upper_bound(on_cluster.begin(), on_cluster.end(), &work,
                                     [&](const RunningWork* a, std::size_t b) { return attempt_before(a, running_[b]); }),
                    w);
  charge_running(w);
  if (by_group_built_) running_by_group_[work.resource_group].push_back(w);
  if (works_on_nodes_built_) {
    for (const auto& i : running_nodes(w)) {
      if (!i) continue;
      auto& on = works_on_node_[*i];
      if (std::find(on.begin(), on.end(), w) == on.end()) on.push_back(w);
    }
  }
  if (work.stopping) set_stopping(w);
  return w;
}

void CycleState::set_stopping(std::size_t w) {
  CP_CHECK(!in_cycle_, "set_stopping inside a cycle");
  if (stopping_[w]) return;
  stopping_[w] = true;
  auto at = std::upper_bound(stopping_list_.begin(), stopping_list_.end(), running_[w],
                             [&](const RunningWork* a, std::size_t b) { return attempt_before(a, running_[b]); });
  stopping_list_.insert(at, w);
  rebuild_stopping_index();
  for (const auto& i : running_nodes(w)) {
    if (i) nodes_with_stopping_.insert(*i);
  }
}

void CycleState::remove_running(std::size_t w) {
  CP_CHECK(!in_cycle_, "remove_running inside a cycle");
  const RunningWork& work = *running_[w];
  quota_.remove_kept(work.resource_group, work.per_replica, static_cast<std::int64_t>(work.placements.size()));
  std::erase(running_by_cluster_[work.cluster_id], w);
  if (by_group_built_) std::erase(running_by_group_[work.resource_group], w);
  if (stopping_[w]) {
    std::erase(stopping_list_, w);
    rebuild_stopping_index();
  }
  index_works_on_nodes();
  std::vector<std::size_t> nodes;
  for (const auto& i : running_nodes(w)) {
    if (i && std::find(nodes.begin(), nodes.end(), *i) == nodes.end()) nodes.push_back(*i);
  }
  for (std::size_t i : nodes) std::erase(works_on_node_[i], w);
  stopping_[w] = false;
  claimed_[w] = false;
  running_[w] = nullptr;
  if (w < facts_.size()) facts_[w] = {};
  if (w < charges_.size()) charges_[w] = {};
  running_project_[w] = kNoProject;
  replicas_[w] = {0, 0};
  free_work_.push_back(w);
  for (std::size_t i : nodes) reload_node(i);
}

bool CycleState::replace_node(std::size_t index, const Node& node) {
  CP_CHECK(!in_cycle_, "replace_node inside a cycle");
  NodeView& old = nodes_[index];
  if (node.cluster_id != old.cluster_id() || node.name != old.name()) return false;
  NodeView v = view_of(node);
  if (v.gpu_types != old.gpu_types || v.has_gpus() != old.has_gpus() || v.gpu_type != old.gpu_type) return false;
  v.cluster_rank = old.cluster_rank;
  v.gpu_type_bits = old.gpu_type_bits;
  v.primary_type = old.primary_type;
  old = std::move(v);
  static_nodes_.clear();
  loads_changed(index);
  return true;
}

}  // namespace cp::sched
