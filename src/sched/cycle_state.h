// The fleet as one cycle sees it: the snapshot indexed for lookups, and what
// is in use on every node and by every resource group. "In use" is the
// running work of the snapshot plus what this cycle has already placed or
// holds, so a task placed early in the cycle is charged before the next one
// is tried.
//
// Two kinds of charge on a node, both inside NodeLoad::used:
//   running/placed  work with GPU indices (gpus_taken); running work told to
//                   stop (preempted, cancelled) stays charged until it is
//                   gone, and is never picked as a victim again;
//   held            room reserved for a blocked task or a preemptor: counted
//                   like use, but without GPU indices (also in `held`).
// The "what if" views that explanation, preemption and reservation need:
// without holds and drained (only holds) are modes of counting (ModeView,
// no copies); without some running work is an Overlay, a copy of the few
// loads it changes.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <ranges>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <boost/container/small_vector.hpp>
#include <boost/unordered/unordered_flat_map.hpp>

#include "common/string_hash.h"
#include "sched/admission.h"
#include "sched/gpu_set.h"
#include "sched/request.h"
#include "sched/scheduler.h"
#include "sched/tally.h"

namespace cp::sched {

// A project group as a small number, given by the cycle (CycleState::project):
// anti-affinity asks "does another project run GPU work here" for every
// node it scores. kNoProject: the work names none.
using ProjectId = int;
inline constexpr ProjectId kNoProject = -1;

// What is in use on one node. Copied for every what-if overlay and every
// replica of a gang, so nothing here is a tree: GPU indices are a bitmask,
// the holders a short list of project ids.
// Amounts on one node, kept as the filters and scores ask for them: cpu,
// memory and GPUs (every gpu/<type> together) are plain sums, found without
// comparing a name; anything else (rare) in a Tally.
struct NodeAmounts {
  Wide cpu = 0;
  Wide memory = 0;
  Wide gpus = 0;
  Tally other;

  // Returns the GPUs it added (every gpu/* entry, times `times`).
  Wide add(const Resources& r, std::int64_t times = 1);
  // cpu, memory, or a resource that is not a GPU (GPUs: `gpus`).
  Wide get(std::string_view name) const;
};

// Members in the order node_misfit reads them: a node asked about on the
// cycle's own loads costs two cache lines, not four.
struct NodeLoad {
  NodeAmounts used;           // everything below, and placed/running work
  std::int64_t held_gpus = 0;
  GpuIndexSet gpus_taken;     // device indices of running and placed work
  NodeAmounts held;           // part of `used`: reservations (no indices)
  // Project groups with GPU work here, and how many replicas (soft
  // anti-affinity); a handful at most, in no particular order.
  std::vector<std::pair<ProjectId, int>> gpu_holders;

  void add(const Resources& per_replica, const std::vector<int>& gpu_indices, ProjectId project);
  void remove(const Resources& per_replica, const std::vector<int>& gpu_indices, ProjectId project);
  void hold(const Resources& per_replica, std::int64_t times = 1);
  // GPU work of a project group other than `project` is here.
  bool hosts_other_project(ProjectId project) const;
};

// A node with what the scheduler derives from it once per cycle. The
// strings are views of the snapshot's node (or of `overridden`, whose map
// nodes stay put when the view is moved): 10,000 nodes are indexed per
// cycle, so nothing is copied that need not be.
struct NodeView {
  // First, in one cache line: what node_misfit asks of every node it looks
  // at (a scan of a cluster's nodes then reads no more of each).
  bool ready = false;  // node->ready, read once
  bool maintenance = false;
  bool has_overrides = false;
  bool dense_gpu_indices = false;  // gpu_indices are exactly 0..size-1
  int primary_type = -1;  // the cycle id of gpu_type (-1: none)
  // Bits of the cycle ids (CycleState::gpu_type_id) below 64 of gpu_types.
  std::uint64_t gpu_type_bits = 0;
  std::int64_t alloc_cpu = 0;  // allocatable cpu and memory, read once
  std::int64_t alloc_memory = 0;
  // Schedulable GPUs: allocatable "gpu/<gpu_type>", else every gpu/* entry.
  std::int64_t gpu_capacity = 0;
  std::int64_t gpu_index_count = 0;  // gpu_indices.size()
  std::size_t cluster_rank = 0;  // its cluster's position among the cycle's clusters

  const Node* node = nullptr;
  Labels overridden;  // the effective labels, only when admin overrides change them
  // The node's GPU type: label gpu-type, else the first device's model, else
  // the first "gpu/<type>" of allocatable; "" for a node without GPUs.
  std::string_view gpu_type;
  // Device indices, ascending: node.gpus[].index, or 0..gpu_capacity-1 when
  // the agent reported no devices.
  std::vector<int> gpu_indices;
  // Every GPU type the node offers (see offers_gpu_type).
  std::vector<std::string_view> gpu_types;

  const std::string& cluster_id() const { return node->cluster_id; }
  const std::string& name() const { return node->name; }
  // Effective labels (admin overrides applied).
  const Labels& labels() const { return has_overrides ? overridden : node->labels; }
  bool has_gpus() const { return gpu_capacity > 0 || !node->gpus.empty(); }
  // Label gpu-type=T, or a device of model T; a node that says nothing about
  // its type but lists "gpu/T" as allocatable counts too.
  bool offers_gpu_type(std::string_view type) const;
  // The same for a request whose type the cycle has resolved to an id.
  bool offers_gpu_type(std::string_view type, int id) const {
    if (id >= 0 && id < 64) return (gpu_type_bits >> id) & 1u;
    if (id == -1) return false;  // Request::kGpuTypeNowhere
    return offers_gpu_type(type);
  }
};

// How a view counts what is on a node.
enum class LoadMode {
  kAll,      // running, placed and held
  kNoHolds,  // as if nothing were held (is a task only behind reservations?)
  kDrained,  // only the holds: the node once its running work has ended
};

// The amount of `name` (or of every GPU) in use on the node, as `mode` counts it.
Wide in_use(const NodeLoad& load, std::string_view name, LoadMode mode);
// What `mode` counts of one figure a load keeps used and held. Inline: every
// node a fit asks about reads three of them.
inline Wide counted(Wide used, Wide held, LoadMode mode) {
  switch (mode) {
    case LoadMode::kAll: return used;
    case LoadMode::kNoHolds: return used - held;
    case LoadMode::kDrained: return held;
  }
  return used;
}
inline Wide gpus_in_use(const NodeLoad& load, LoadMode mode) { return counted(load.used.gpus, load.held.gpus, mode); }
// in_use(load, kCpu / kMemory, mode), without a name to compare.
inline Wide cpu_in_use(const NodeLoad& load, LoadMode mode) { return counted(load.used.cpu, load.held.cpu, mode); }
inline Wide memory_in_use(const NodeLoad& load, LoadMode mode) {
  return counted(load.used.memory, load.held.memory, mode);
}

// Where the loads of the nodes come from: the cycle's own, or an overlay,
// counted in one mode.
class LoadView {
 public:
  virtual ~LoadView() = default;
  virtual const NodeLoad& load(std::size_t node) const = 0;
  virtual LoadMode mode() const { return LoadMode::kAll; }
};

// Another view's loads, counted differently (no copies).
class ModeView final : public LoadView {
 public:
  ModeView(const LoadView& base, LoadMode mode) : base_(&base), mode_(mode) {}
  const NodeLoad& load(std::size_t node) const override { return base_->load(node); }
  LoadMode mode() const override { return mode_; }
  const LoadView* base() const { return base_; }

 private:
  const LoadView* base_;
  LoadMode mode_;
};

class CycleState;
class FreeOrder;  // free_order.h

// The cycle's loads with some nodes replaced by changed copies.
class Overlay final : public LoadView {
 public:
  explicit Overlay(const LoadView& base) : base_(&base) {}
  const NodeLoad& load(std::size_t node) const override;
  LoadMode mode() const override { return base_->mode(); }
  // A copy of the node's load to change (made on first use).
  NodeLoad& edit(std::size_t node);
  const LoadView* base() const { return base_; }
  // The nodes whose loads this overlay replaces, ascending.
  auto changed_nodes() const { return std::views::keys(changed_); }
  bool changed(std::size_t node) const { return changed_.contains(node); }

 private:
  const LoadView* base_;
  std::map<std::size_t, NodeLoad> changed_;
};

class CycleState final : public LoadView {
 public:
  explicit CycleState(const Snapshot& snapshot);
  // The same from `nodes` and `running` the caller keeps alive (a Scheduler,
  // which owns them); the snapshot's own nodes and running are not read.
  CycleState(const Snapshot& snapshot, const std::vector<const Node*>& nodes, std::vector<const RunningWork*> running);
  CycleState(const CycleState&) = delete;
  CycleState& operator=(const CycleState&) = delete;
  ~CycleState() override;

  const Snapshot& snapshot() const { return *snapshot_; }
  const Cluster* cluster(std::string_view id) const;
  const ResourceGroup* group(std::string_view name) const;
  const PriorityClass* priority_class(std::string_view name) const;
  // The group's cluster ids, ascending, each once (asked for every task).
  const std::vector<std::string>& clusters_of(const ResourceGroup& group) const;
  // The groups whose work is charged to the group's quota scope: the group
  // alone, or every group of its cohort (the snapshot's groups, in input
  // order; the first of a name).
  const std::vector<const ResourceGroup*>& quota_scope_groups(const ResourceGroup& group) const;

  // All nodes of known clusters, sorted by (cluster id, node name); a node's
  // position here is its index everywhere in the cycle.
  const std::vector<NodeView>& nodes() const { return nodes_; }
  // Indices of a cluster's nodes, ascending (so by name).
  std::ranges::iota_view<std::size_t, std::size_t> nodes_of(std::string_view cluster_id) const;
  std::optional<std::size_t> node_index(std::string_view cluster_id, std::string_view name) const;
  // Nodes of a cluster that offer a GPU type ("any": every node with GPUs), ascending.
  const std::vector<std::size_t>& nodes_offering(std::string_view cluster_id, std::string_view gpu_type) const;

  // The id of a project group ("" : kNoProject), given on first sight.
  ProjectId project(std::string_view project_group);

  // A small id for a GPU type some node offers, Request::kGpuTypeNowhere for others.
  int gpu_type_id(std::string_view type) const;
  // A cluster's rank among the cycle's clusters (ascending id), -1 when unknown.
  int cluster_rank(std::string_view id) const {
    auto it = cluster_rank_.find(id);
    return it == cluster_rank_.end() ? -1 : static_cast<int>(it->second);
  }

  const NodeLoad& load(std::size_t node) const override { return loads_[node]; }
  const QuotaBook& quota() const { return quota_; }
  QuotaBook& quota() { return quota_; }

  // Running work of the snapshot, by index (in attempt id order when built;
  // work added later takes a free index); `stopping` as the snapshot says or
  // as this cycle decided (mark_stopping).
  const RunningWork& running(std::size_t work) const { return *running_[work]; }
  // The node index of each replica of running work (nullopt: the node is gone).
  std::span<const std::optional<std::size_t>> running_nodes(std::size_t work) const {
    return {replica_nodes_.data() + replicas_[work].first, replicas_[work].second - replicas_[work].first};
  }
  bool stopping(std::size_t work) const { return stopping_[work]; }
  // What preemption asks of every candidate, read once per work (on first
  // question) instead of by name for each blocked task.
  // One cache line, in the order a victim search asks (a search walks
  // hundreds of works: one line each).
  struct alignas(64) WorkFacts {
    bool known = false;  // read yet (reset when the work changes)
    bool preemptible = false;
    // per_replica names nothing but cpu, memory and at most one GPU type.
    bool plain = true;
    int priority = 0;
    int gpu_type_id = -1;  // gpu_type's id (gpu_type_id()), -1 when no node offers it
    int cluster = -1;  // its cluster's rank among the cycle's clusters (cluster_rank()), -1 when unknown
    std::int64_t cpu = 0;  // per replica
    std::int64_t memory = 0;
    std::int64_t gpus = 0;  // every gpu/* entry together
    const ResourceGroup* group = nullptr;  // nullptr: not a group of the snapshot
    std::string_view gpu_type;  // of its only gpu/<type> entry ("" when none)
  };
  static_assert(sizeof(WorkFacts) == 64);
  // Asked for every candidate of every victim search: read once, then inline.
  const WorkFacts& facts(std::size_t work) const {
    if (work < facts_.size() && facts_[work].known) return facts_[work];
    return read_facts(work);
  }
  // Indices of all stopping work (the snapshot's and this cycle's victims).
  const std::vector<std::size_t>& stopping_work() const { return stopping_list_; }
  // Of those, the work not claimed yet that could make room for a task of
  // `group` using `clusters` (ascending ids): on one of the clusters, or
  // charged to the group's quota. In stopping_work() order, found through
  // an index rather than by looking at all of it for every blocked task.
  // `group` is one of the snapshot's. Kept until work is marked stopping or
  // claimed, by the addresses of `group` and of `clusters`: both must live
  // through the cycle (a cycle's list of usable clusters). The list
  // returned is valid until the next such call.
  const std::vector<std::size_t>& stopping_within(const ResourceGroup& group,
                                                  const std::vector<std::string>& clusters) const;
  // Of what stopping_within(group, clusters) gives, the work charged to
  // a group of the group's quota scope (quota_scope_groups), or to a group
  // the snapshot does not know (counted as in every scope), in no
  // particular order. Found through the scope's groups' own lists, and kept
  // as stopping_within's answers are.
  const std::vector<std::size_t>& stopping_in_quota_scope(const ResourceGroup& group,
                                                          const std::vector<std::string>& clusters) const;
  // Running work on the cluster, by index into running().
  const std::vector<std::size_t>& running_on(std::string_view cluster_id) const;
  // Nodes whose load has stopping work, and nodes with holds.
  const std::set<std::size_t>& nodes_with_stopping() const { return nodes_with_stopping_; }
  const std::set<std::size_t>& nodes_with_holds() const { return nodes_with_holds_; }
  // Who holds room: task ids, by node; and by resource group (quota holds).
  // Appended to `out`: views, valid until the state next changes.
  void holders_on(const std::vector<std::size_t>& nodes, std::vector<std::string_view>& out) const;
  void quota_holders(std::string_view group, std::vector<std::string_view>& out) const;

  // Charges a placement to its group and its nodes. `group` and `project`,
  // where the caller has them (state.group(task.resource_group) and
  // project(task.project_group)), spare looking them up again. The task
  // must outlive the cycle: the quota book keeps views of its project group
  // and, where the placement charges what the task's shape asks as it is
  // (no "gpu/any" resolved), of that shape's resources.
  void commit(const Task& task, const Placement& placement);
  void commit(const Task& task, const ResourceGroup* group, ProjectId project, const Placement& placement);
  // Holds room for a blocked task: on the placement's nodes (when it has
  // any) and in its group's quota.
  void hold(const Task& task, const Placement& placement);
  void hold_quota(const Task& task, const Resources& per_replica, int replicas);
  // Holds for a task that takes over the room of `claimed` running work once
  // it stops (its victims, or work already stopping). That work stays charged
  // until it is gone, so only what the task needs beyond it is held, on each
  // node and in the group's quota. Claimed work is never claimed again.
  void hold_over(const Task& task, const Placement& placement, const std::vector<std::size_t>& claimed);
  bool claimed(std::size_t work) const { return claimed_[work]; }
  // Running work chosen as a victim in this cycle: stopping from now on.
  void mark_stopping(std::size_t work);

  // Clusters as their ranks among the cycle's (cluster_rank()), in the
  // order given, the ids this state does not know left out: what the node
  // questions below walk (nodes_unchanged_since, best_single...). A list
  // asked about for many tasks (a group's usable clusters) is turned into
  // ranks once (ClusterFeasibility).
  using ClusterRanks = boost::container::small_vector<std::size_t, 16>;
  ClusterRanks ranks_of(const std::vector<std::string>& clusters) const;

  // A mark of the state as it is now, and whether some part of it has
  // changed since a mark. Lets the cycle reuse a what-if answer for the next
  // task alike (Cycle's "behind reservation" memo) instead of asking again.
  std::uint64_t mark() const { return changes_; }
  // Loads and holds of the nodes of `clusters` that `request` looks at (those
  // offering its GPU type, those with GPUs for gpu/any, else every node).
  bool nodes_unchanged_since(std::uint64_t mark, const std::vector<std::string>& clusters,
                             const Request& request) const;
  bool nodes_unchanged_since(std::uint64_t mark, const ClusterRanks& ranks, const Request& request) const;
  // Quota use and holds of the group and its cohort (its quota scope).
  bool quota_unchanged_since(std::uint64_t mark, const ResourceGroup& group) const;
  // Quota held for tasks of the group (who holds it: quota_holders()).
  bool quota_holds_unchanged_since(std::uint64_t mark, std::string_view group) const;

  // Removes (or puts back) running work from a what-if overlay and the quota.
  void take_out(std::size_t work, Overlay& overlay);
  void put_back(std::size_t work, Overlay& overlay);
  // The same for the quota alone.
  void take_out_quota(std::size_t work) { charge_quota(work, -1); }
  void put_back_quota(std::size_t work) { charge_quota(work, 1); }

  // The best node for one replica of `request` among `clusters`, as
  // select_gang ranks them (score, then index), found by walking FreeOrder
  // (built on first use) instead of scoring every node. It applies to this
  // state's own loads and a ModeView of them without holds, for a request of
  // one GPU type or none; `applies` false otherwise (ask feasible_nodes).
  struct Best {
    bool applies = false;
    std::optional<std::size_t> node;  // nullopt: no node can take it
  };
  Best best_single(const LoadView& loads, const std::vector<std::string>& clusters, const ResourceGroup& group,
                   const Request& request, ProjectId project, PlacementPolicy policy) const;
  Best best_single(const LoadView& loads, const ClusterRanks& ranks, const ResourceGroup& group,
                   const Request& request, ProjectId project, PlacementPolicy policy) const;
  // The nodes of `clusters` that can take one replica of `request` on
  // `loads`, ascending: what feasible_nodes(..., count = false) gives, found
  // through FreeOrder from the first node with room enough instead of
  // asking every node. Applies to the views best_single takes and to an
  // Overlay of this state (its nodes asked one by one); nullopt otherwise.
  std::optional<std::vector<std::size_t>> fitting_nodes(const LoadView& loads, const std::vector<std::string>& clusters,
                                                        const ResourceGroup& group, const Request& request) const;
  std::optional<std::vector<std::size_t>> fitting_nodes(const LoadView& loads, const ClusterRanks& ranks,
                                                        const ResourceGroup& group, const Request& request) const;
  // One replica of a "gpu/any" request: per (cluster, GPU type of the node)
  // among `clusters`, the node select_gang would rank best of those that
  // can take it, found by walking FreeOrder per type as best_single does
  // (select_gang ranks every fitting node, but reads only each such best).
  // The views best_single takes, and an Overlay of this state; nullopt otherwise.
  struct TypedBest {
    std::size_t cluster_rank = 0;
    std::string_view gpu_type;  // the node's NodeView::gpu_type
    std::size_t node = 0;
  };
  // Which GPU types (by a node's NodeView::gpu_type) to look at; empty: all.
  using TypeFilter = std::function<bool(std::string_view)>;
  std::optional<std::vector<TypedBest>> best_single_per_type(const LoadView& loads,
                                                             const std::vector<std::string>& clusters,
                                                             const ResourceGroup& group, const Request& request,
                                                             ProjectId project, PlacementPolicy policy,
                                                             const TypeFilter& only = {}) const;
  std::optional<std::vector<TypedBest>> best_single_per_type(const LoadView& loads, const ClusterRanks& ranks,
                                                             const ResourceGroup& group, const Request& request,
                                                             ProjectId project, PlacementPolicy policy,
                                                             const TypeFilter& only = {}) const;

  // The nodes of a cluster past the filters that do not change within a
  // cycle (Ready, not in maintenance, the group's node selector, the GPU
  // type: static_misfit in feasible.h), ascending, and how many each of
  // those filters dropped: a task's reasons count every node, but only the
  // nodes past them need their loads read. Kept per (cluster, node
  // selector, GPU type asked) until the nodes or the cycle change.
  struct StaticNodes {
    std::int64_t total = 0;
    std::array<std::int64_t, 4> dropped{};  // by NodeMisfit: not ready, maintenance, selector, GPU type
    std::vector<std::size_t> nodes;
  };
  const StaticNodes& static_nodes(std::string_view cluster, const ResourceGroup& group, const Request& request) const;

  // ---- Kept between cycles (Scheduler, warm.h).
  // What a cycle changes (placements, holds, victims, claims, project ids of
  // the queue) is recorded from begin_cycle() and put back by end_cycle(), so
  // the state is again the snapshot's, indexed.
  void begin_cycle();
  void end_cycle();
  // Deltas between cycles, each leaving the state as a fresh build from the
  // changed input would be (same answers, same plans). The caller keeps
  // `work` alive, and every work and node it ever handed in, until the state
  // is dropped: indexes hold views of their strings.
  std::size_t add_running(const RunningWork& work);
  void remove_running(std::size_t work);
  // The work's own `stopping` is already true (the caller set it).
  void set_stopping(std::size_t work);
  // Node `index` is now `node` (same cluster and name). False, with nothing
  // changed, when the change reaches past the node's own view (its GPU types,
  // or whether it has GPUs): then the state must be built again.
  bool replace_node(std::size_t index, const Node& node);
  // Works out now what a kept state would otherwise work out on first use
  // (each work's facts, running work by node and by group), so that no
  // cycle or delta pays for it.
  void index_everything();
  // Live running work of a group (for fair share), in no particular order.
  const std::vector<std::size_t>& running_of_group(std::string_view group);
  // Preemptible running work on a cluster, or of a group, lowest priority
  // first (then by index): a victim search that may only preempt by
  // priority reads the works below the task's and stops, instead of every
  // work there. Built on first use in a cycle (works do not change inside one).
  struct Preemptible {
    static constexpr std::uint32_t kNotOneNode = 0xffffffff;
    int priority;
    int cluster;                 // WorkFacts::cluster: a walk skips other clusters' work without its facts
    const ResourceGroup* group;  // WorkFacts::group
    std::size_t work;
    // The node every replica runs on, kNotOneNode when several (or none):
    // a walk short of nodes passes over work on nodes the task cannot use
    // without reading the work.
    std::uint32_t node;
  };
  std::span<const Preemptible> preemptible_on(std::string_view cluster) const;
  std::span<const Preemptible> preemptible_of(const ResourceGroup& group);

 private:
  void changed_nodes(const Placement& placement);
  void changed_node(std::size_t node);  // its buckets to changes_ (the caller counted the change)
  void changed_quota(std::string_view group);
  void changed_quota(const ResourceGroup* group);  // nullptr: a group the snapshot does not know
  // Whose quota a group's answers read: its cohort's, or its own outside one.
  std::string_view quota_scope(const ResourceGroup& g) const { return g.cohort.empty() ? g.name : g.cohort; }

  const Snapshot* snapshot_;
  // Changes so far; the last change per (cluster, node kind) bucket (kinds:
  // each GPU type id, then "has GPUs", then "any node"), per quota scope, and
  // per group's quota holds. Views of the snapshot's and queue's strings.
  std::uint64_t changes_ = 0;
  std::uint64_t unscoped_change_ = 0;  // quota of a group the snapshot does not know
  std::size_t kinds_ = 0;              // buckets per cluster
  std::vector<std::uint64_t> bucket_changed_;
  std::unordered_map<std::string_view, std::uint64_t> quota_changed_;
  std::unordered_map<std::string_view, std::uint64_t> quota_holds_changed_;
  std::unordered_map<std::string_view, std::size_t> cluster_rank_;  // position of the id among clusters_
  std::unordered_map<std::string_view, int> gpu_type_ids_;  // views of the nodes' strings
  std::unordered_map<std::string_view, ProjectId> project_ids_;  // views of the snapshot's and queue's strings
  std::vector<ProjectId> running_project_;                      // per running work
  mutable std::vector<WorkFacts> facts_;          // per running work, on first use
  // Per running work, its quota charge resolved on first take_out (nullopt
  // inside: a group the book does not know, charged by name).
  struct Resolved {
    bool done = false;
    std::optional<QuotaBook::Charge> charge;
  };
  std::vector<Resolved> charges_;
  // Charges `sign` x the work's replicas of its per_replica to its group.
  void charge_quota(std::size_t work, std::int64_t sign);
  const WorkFacts& read_facts(std::size_t work) const;
  std::map<std::string, const Cluster*, std::less<>> clusters_;
  // Asked for every task and every preemption candidate: hashes of views of
  // the snapshot's names (the first of a name counts, as in QuotaBook).
  std::unordered_map<std::string_view, const ResourceGroup*> groups_;
  std::unordered_map<std::string_view, const PriorityClass*> classes_;
  // Sorted on first use; a cache in a const state: one cycle, one thread.
  mutable std::unordered_map<const ResourceGroup*, std::vector<std::string>> group_clusters_;
  mutable std::unordered_map<const ResourceGroup*, std::vector<const ResourceGroup*>> scope_groups_;
  mutable std::unordered_map<std::string_view, std::vector<const ResourceGroup*>> cohort_groups_;
  // stopping_within's answers, by (group, clusters) as asked, while neither
  // a work has been marked stopping nor a stopping one claimed since
  // (stopping_changes_); dropped at each cycle's start and end, around the
  // deltas. The key holds addresses of what lives through a cycle (see
  // stopping_within); the group's name is compared too (`group`).
  struct StoppingMemo {
    std::uint64_t changes = 0;
    std::string_view group;
    std::vector<std::size_t> works;
  };
  struct PairHash {
    std::size_t operator()(const std::pair<const void*, const void*>& p) const {
      return std::hash<const void*>{}(p.first) * 31 + std::hash<const void*>{}(p.second);
    }
  };
  using StoppingMemos = boost::unordered_flat_map<std::pair<const void*, const void*>, StoppingMemo, PairHash>;
  mutable StoppingMemos stopping_memo_;
  // stopping_in_quota_scope's answers, kept the same way.
  mutable StoppingMemos scope_stopping_memo_;
  // The memo's answer for (group, clusters) when current, else gather()'s, kept.
  template <class Gather>
  const std::vector<std::size_t>& remembered(StoppingMemos& memos, const ResourceGroup& group,
                                             const std::vector<std::string>& clusters, Gather gather) const;
  std::vector<std::size_t> gather_scope_stopping(const ResourceGroup& group,
                                                 const std::vector<std::string>& clusters) const;
  std::uint64_t stopping_changes_ = 1;  // a memo of 0 changes is never current
  std::vector<std::size_t> gather_stopping(const ResourceGroup& group, const std::vector<std::string>& clusters) const;
  // preemptible_on() by cluster, preemptible_of() by group; dropped at begin_cycle.
  std::vector<Preemptible> sorted_preemptible(const std::vector<std::size_t>& works) const;
  mutable StringMap<std::vector<Preemptible>> preemptible_on_;
  std::unordered_map<const ResourceGroup*, std::vector<Preemptible>> preemptible_of_;
  // static_nodes() by a byte key (group address or none, GPU type asked, cluster).
  mutable FlatStringMap<StaticNodes> static_nodes_;
  mutable std::string static_key_;  // a buffer
  std::vector<NodeView> nodes_;
  std::vector<NodeLoad> loads_;
  QuotaBook quota_;
  std::vector<const RunningWork*> running_;
  // Per running work, the node index of each replica (nullopt: node gone).
  // All of them in one array (work w: [replicas_[w].first, replicas_[w].second)),
  // not one small vector per attempt to allocate and free.
  std::vector<std::optional<std::size_t>> replica_nodes_;
  std::vector<std::pair<std::size_t, std::size_t>> replicas_;
  void charge_running(std::size_t w);
  void rebuild_stopping_index();
  void reload_node(std::size_t node);
  void index_works_on_nodes();
  NodeLoad& changing_load(std::size_t node);
  // The node's load (or view) changed: FreeOrder follows, once built.
  void loads_changed(std::size_t node);
  // How FreeOrder can answer for `loads` (best_single, fitting_nodes): the
  // mode it counts in, and the nodes it must ask one by one because their
  // load there is not the one the order has (held ones without holds, those
  // an overlay replaces). `applies` false: FreeOrder cannot answer.
  struct Ordered {
    bool applies = false;
    LoadMode mode = LoadMode::kAll;
    const Overlay* overlay = nullptr;
    bool out_of_order(std::size_t node, const NodeLoad& load) const;
  };
  Ordered ordered(const LoadView& loads) const;
  // The nodes of `ranks`' clusters that Ordered::out_of_order says, of
  // those `request` could use by type (its GPU type, any GPU for gpu/any,
  // every node when it wants none).
  // A few node indices, kept inline (asked for every fit: no heap).
  using FewNodes = boost::container::small_vector<std::size_t, 16>;
  FewNodes out_of_order_nodes(const Ordered& o, const ClusterRanks& ranks, const Request& request) const;
  // FreeOrder, built once the state has been asked often enough (false: not yet).
  bool order_ready() const;
  mutable std::unique_ptr<FreeOrder> order_;
  // With order_: the nodes holding something, ordered by what they have
  // free without their holds (what "behind a reservation" asks), instead
  // of each asked on its own in that mode.
  mutable std::unique_ptr<FreeOrder> held_order_;
  // GPU nodes whose own GPU type is not among the types they are ordered
  // by (best_single_per_type asks them one by one); none in practice.
  std::vector<std::size_t> unordered_primary_;
  static constexpr std::size_t kAsksBeforeOrder = 64;
  mutable std::size_t asks_before_order_ = 0;
  // Kept between cycles: free indices of running_ (removed work), running
  // work per node and per group (built on first need), and the open cycle's
  // record of what to put back (begin_cycle).
  std::vector<std::size_t> free_work_;
  bool works_on_nodes_built_ = false;
  std::vector<std::vector<std::size_t>> works_on_node_;
  bool by_group_built_ = false;
  std::unordered_map<std::string_view, std::vector<std::size_t>> running_by_group_;
  bool in_cycle_ = false;
  std::vector<std::pair<std::size_t, NodeLoad>> saved_loads_;
  std::vector<bool> load_saved_;
  std::size_t stopping_before_ = 0;
  std::vector<std::size_t> stopping_nodes_added_;
  std::vector<std::size_t> claimed_list_;
  std::vector<std::string_view> projects_added_;
  std::vector<bool> stopping_;
  std::vector<bool> claimed_;
  std::vector<std::size_t> stopping_list_;
  // Positions in stopping_list_, by the work's cluster, and by its group
  // when the snapshot knows it (one object per name, CycleState::group: a
  // quota scope's members are found without their names).
  std::unordered_map<std::string_view, std::vector<std::size_t>> stopping_by_cluster_;
  boost::unordered_flat_map<const ResourceGroup*, std::vector<std::size_t>> stopping_by_group_;
  std::size_t stopping_of_unknown_groups_ = 0;  // in stopping_list_, charged to a group the snapshot does not know
  void index_stopping(std::size_t position);  // stopping_list_[position] into the indexes
  std::unordered_map<std::string_view, std::vector<std::size_t>> running_by_cluster_;
  std::set<std::size_t> nodes_with_stopping_;
  std::set<std::size_t> nodes_with_holds_;
  std::vector<std::vector<std::size_t>> holds_by_cluster_;  // the same, by cluster rank
  void held_on(std::size_t node);
  boost::unordered_flat_map<std::size_t, std::vector<std::string>> node_holders_;
  FlatStringMap<std::vector<std::string>> quota_holders_;
  std::vector<std::size_t> none_;
  std::map<std::string, std::pair<std::size_t, std::size_t>, std::less<>> node_range_;
  // (cluster id, node name) -> index: looked up for every replica of every
  // running attempt when the state is built, so a hash, not a search over strings.
  struct NodeKeyHash {
    std::size_t operator()(const std::pair<std::string_view, std::string_view>& k) const {
      std::size_t h = std::hash<std::string_view>{}(k.first);
      return h ^ (std::hash<std::string_view>{}(k.second) + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2));
    }
  };
  boost::unordered_flat_map<std::pair<std::string_view, std::string_view>, std::size_t, NodeKeyHash> node_at_;
  // (cluster, type) -> nodes
  std::map<std::pair<std::string_view, std::string_view>, std::vector<std::size_t>> nodes_by_type_;
};

}  // namespace cp::sched
