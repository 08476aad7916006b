#include "sched/scheduler.h"

#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <unordered_map>

#include <boost/container/small_vector.hpp>

#include "common/string_hash.h"
#include "sched/admission.h"
#include "sched/cycle.h"
#include "sched/cycle_state.h"
#include "sched/feasible.h"
#include "sched/fit.h"
#include "sched/preempt.h"
#include "sched/prefetch.h"
#include "sched/queue_order.h"
#include "sched/reasons.h"
#include "sched/request.h"
#include "sched/select.h"

namespace cp::sched {
namespace {

// The gates before any fitting, cheapest first; a reason when the task cannot
// be a candidate at all:
//   1. dependencies: a task whose upstream has not finished is not a
//      candidate; nothing else about it is worth saying yet.
//   2. request:      a malformed request cannot be judged by any later stage.
//   3. group:        quota and clusters both come from the resource group.
//   4. clusters:     node reasons only mean something inside clusters the
//                    task may use; outages of other clusters are not its news.
// Quota comes first inside fit_shape(): it depends on the group alone, and
// when both quota and capacity are short, quota is the answer a user can act on.
// The clusters of tasks of a group with no pin, cluster selector or storage
// pool: cluster states do not change within a cycle, so one answer per
// group, kept by the group's position in the cycle's order (GroupedOrder).
using GroupClusters = std::shared_ptr<const ClusterFeasibility>;
// The same for the others, by what feasible_clusters reads of them (a byte
// key: the group's address, then where_key).
struct PinnedClusters {
  std::unordered_map<std::string, std::shared_ptr<const ClusterFeasibility>> by_key;
  std::string key;  // a buffer
};

// Appends where the task may run, as it names it: the pinned cluster, the
// storage pool, the cluster selector's entries, each ended by '\x1f' (names
// hold none; a selector entry holds '=').
void append_where(std::string& k, const Task& t) {
  k += t.cluster;
  k += '\x1f';
  k += t.storage_pool;
  k += '\x1f';
  for (const auto& [key, value] : t.cluster_selector) {
    k += key;
    k += '=';
    k += value;
    k += '\x1f';
  }
}

// `group`: state.group(task.resource_group), looked up once per group by the
// caller; `plain`: that group's answer for tasks with no pin, selector or pool.
std::optional<std::vector<PendingReason>> prepare(const CycleState& state, const QueuedTask& queued,
                                                  const ResourceGroup* group, Millis now, GroupClusters& plain,
                                                  PinnedClusters& pinned, TaskContext& c) {
  const Task& task = queued.task;
  c.queued = &queued;
  c.task = &task;
  if (!queued.unfinished_dependencies.empty()) {
    return std::vector{reasons::dependencies(queued.unfinished_dependencies)};
  }
  c.waited_ms = std::max<Millis>(0, now - task.queued_at);
  const int shapes = 1 + static_cast<int>(task.step.fallbacks.size());
  for (int shape = 0; shape < shapes; ++shape) {
    if (!shape_open(task, shape, c.waited_ms)) continue;
    auto request = request_of(task, shape);
    if (!request) return std::vector{reasons::invalid_request(request.error())};
    // Node filters then compare the type as an int.
    if (request->wants_gpus() && !request->any_gpu()) request->gpu_type_id = state.gpu_type_id(request->gpu_type);
    c.shapes.push_back(std::move(*request));
  }
  c.group = group;
  if (c.group == nullptr) return std::vector{reasons::unknown_group(task.resource_group)};
  c.priority_class = state.priority_class(task.priority_class);
  c.may_borrow = c.priority_class == nullptr || c.priority_class->preemptible;
  if (task.cluster.empty() && task.cluster_selector.empty() && task.storage_pool.empty()) {
    if (!plain) plain = std::make_shared<const ClusterFeasibility>(feasible_clusters(state, *c.group, task));
    c.clusters = plain;
  } else {
    // Pinned, selecting or bound to a pool: one answer per (group, pin,
    // pool, selector) too, all that feasible_clusters reads of the task.
    std::string& key = pinned.key;
    key.clear();
    append_bytes(key, c.group);
    append_where(key, task);
    auto& known = pinned.by_key[key];
    if (!known) known = std::make_shared<const ClusterFeasibility>(feasible_clusters(state, *c.group, task));
    c.clusters = known;
  }
  const ClusterFeasibility& clusters = *c.clusters;
  if (clusters.usable.empty()) {
    if (clusters.none) return std::vector{*clusters.none};
    // Bound to a storage pool: that is why it waits, then which of the pool's clusters are down.
    std::vector<PendingReason> why;
    if (clusters.pool) why.push_back(clusters.pool->worded());
    for (const auto& r : clusters.offline) why.push_back(r->worded());
    return why;
  }
  return std::nullopt;
}

// Tasks alike in everything a failed fit depends on: once one of them fails
// in a cycle, the others fail too (the cycle only adds load, holds and
// claims), so their answers are remembered (equivalence classes, as
// Kubernetes and Kueue do). Only failures are remembered.
// Into `k` (cleared first): a buffer kept by the cycle, so that a task whose
// class is known allocates nothing for its key.
void class_key(const TaskContext& c, std::string& k) {
  const Task& t = *c.task;
  k.clear();
  append_bytes(k, c.group);  // one object per group name
  append_where(k, t);
  k += t.priority_class;
  k += '\x1f';
  // A shape as the figures its Request read from its amounts: cpu, memory,
  // GPUs and the GPU type's cycle id say every amount of a request that
  // names nothing else and a type some node offers; otherwise the amounts
  // follow by name (resource names hold no '=', amounts are 8 bytes, so
  // the key reads back one way only).
  struct Figures {  // no padding (append_bytes checks): the key is its bytes
    std::int64_t cpu, memory, gpus;
    std::int32_t gpu_type, replicas, priority;
    char flags[4];
  };
  constexpr std::int32_t kAnyGpu = -100;
  // The primary shape is always open: the priority and flags are always in.
  for (const Request& r : c.shapes) {
    const bool by_name = r.others || (r.wants_gpus() && !r.any_gpu() && r.gpu_type_id < 0);
    Figures f{r.cpu, r.memory, r.gpus, r.any_gpu() ? kAnyGpu : r.gpu_type_id, r.replicas, t.priority,
              {c.may_borrow ? 'b' : '-', may_preempt_now(c) ? 'p' : '-', by_name ? 'n' : '-', '\x1f'}};
    append_bytes(k, f);
    if (!by_name) continue;
    for (const auto& [name, amount] : r.per_replica().amounts()) {
      k += name;
      k += '=';
      append_bytes(k, amount);
    }
  }
}

std::vector<std::string> node_names(const Placement& p) {
  std::vector<std::string> out;
  for (const auto& r : p.placements) {
    std::string n = p.cluster_id + "/" + r.node;
    out.push_back(std::move(n));
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

class Cycle {
 public:
  Cycle(CycleState& state, const SchedulerConfig& config, Millis now) : state_(state), now_(now), config_(config) {}

  Plan run(const std::vector<QueuedTask>& queue, const QueueOrder& order) {
    // Most of a big queue waits: room for all of it at once, rather than
    // moving every entry each time the list outgrows its room.
    plan_.pending.reserve(queue.size());
    // About one class in three tasks fails (a big queue's shapes vary):
    // room for them at once rather than moving every one as they grow.
    failed_.reserve(queue.size() / 3);
    failures_.reserve(queue.size() / 3);
    const GroupedOrder ordered = grouped_order(queue, order);
    const std::vector<const QueuedTask*>& tasks = ordered.tasks;
    std::vector<const ResourceGroup*> groups;
    groups.reserve(ordered.groups.size());
    for (std::string_view name : ordered.groups) groups.push_back(state_.group(name));
    std::vector<PerGroup> per_group(groups.size());
    for (std::size_t i = 0; i < tasks.size(); ++i) {
      if (i + 3 < tasks.size()) prefetch::lines(*tasks[i + 3]);
      if (i + 2 < tasks.size()) prefetch::heap(tasks[i + 2]->task);
      if (i + 1 < tasks.size()) prefetch::names(tasks[i + 1]->task);
      one(*tasks[i], groups[ordered.group_of[i]], per_group[ordered.group_of[i]]);
    }
    return std::move(plan_);
  }

 private:
  // What is known of a class of tasks that failed to fit in this cycle.
  struct Failed {
    Reasons reasons;
    Blocked blocked = Blocked::kNo;
    bool not_behind_holds = false;   // a. does not fit even without holds
    bool not_after_stopping = false; // b. does not fit even once stopping work is gone
    bool no_victims = false;         // c. no victim set makes it fit
    // a. the last "behind reservation" answer, still the answer while
    // nothing it read has changed (state mark) for a task of the same
    // project group (nodes are ranked by it).
    struct Behind {
      std::uint64_t mark = 0;
      ProjectId project = kNoProject;
      // Per shape, whether quota admitted it as fit_shape asks (holds not
      // counted); -1 for gpu/any, whose admission is per type: then the
      // group's quota must be unchanged.
      std::vector<signed char> quota_fits;
      Reasons::Shared reason;
    };
    std::optional<Behind> behind;
  };

  // What the cycle keeps per resource group of the queue.
  struct PerGroup {
    GroupClusters plain;  // the clusters of its tasks with no pin, selector or pool
    // Its tasks' project groups as the state numbers them: a group's tasks
    // name a few, found by a walk rather than a hash of the name per task.
    boost::container::small_vector<std::pair<std::string_view, ProjectId>, 4> projects;
  };

  ProjectId project(PerGroup& g, std::string_view name) {
    for (const auto& [known, id] : g.projects) {
      if (known == name) return id;
    }
    const ProjectId id = state_.project(name);
    if (g.projects.size() < kProjectsPerGroup) g.projects.emplace_back(name, id);
    return id;
  }
  static constexpr std::size_t kProjectsPerGroup = 8;  // past these, the state's hash

  void one(const QueuedTask& queued, const ResourceGroup* group, PerGroup& per_group) {
    TaskContext c;
    c.project = project(per_group, queued.task.project_group);
    if (auto refused = prepare(state_, queued, group, now_, per_group.plain, pinned_clusters_, c)) {
      pend(queued.task.id, Reasons(std::move(*refused)));
      return;
    }
    class_key(c, key_);
    auto known = failed_.find(std::string_view(key_));
    if (known == failed_.end()) {
      Fit fit = fit_shapes(state_, state_, c, true);
      if (fit.placement) {
        // Charged at once, so the tasks after this one see its quota and nodes taken.
        state_.commit(*c.task, c.group, c.project, *fit.placement);
        plan_.placements.push_back(std::move(*fit.placement));
        return;
      }
      failures_.push_back(Failed{std::move(fit.reasons), fit.blocked});
      known = failed_.emplace(key_, static_cast<std::uint32_t>(failures_.size() - 1)).first;
    }
    Failed& f = failures_[known->second];
    // Worded in place, in the plan (room for every task was made at the start).
    Reasons& why = pend(c.task->id, f.reasons);
    // Bound to a storage pool that kept clusters out: say so (they might have had room).
    if (c.clusters->pool) why.add(c.clusters->pool);
    // Clusters that are down might have taken the task: say so too.
    for (const auto& r : c.clusters->offline) why.add(r);
    if (f.blocked != Blocked::kNo) blocked(c, f, why);
    if (!c.task->step.fallbacks.empty()) why.add(reasons::fallbacks(*c.task, c.waited_ms));
  }

  // The task is short of quota or nodes. In this order, the first that applies:
  //   a. it would fit but for room held for earlier tasks: it waits behind them;
  //   b. it fits once work already stopping is gone: it holds that room;
  //   c. it may preempt and a victim set exists: victims stop, it holds the room;
  //   d. it is the first blocked task of its group: it reserves what it waits for.
  void blocked(const TaskContext& c, Failed& f, Reasons& why) {
    if (!f.not_behind_holds) {
      if (behind_holds(c, f, why)) return;
      f.not_behind_holds = true;
    }
    if (!f.not_after_stopping) {
      if (after_stopping(c, f.blocked, why)) return;
      f.not_after_stopping = true;
    }
    if (!f.no_victims) {
      if (preempt(c, f.blocked, why)) return;
      f.no_victims = true;
    }
    Blocked how = f.blocked;
    if (c.priority_class != nullptr && c.priority_class->may_preempt && !may_preempt_now(c)) {
      why.add(reasons::preempt_later(c.priority_class->name, c.priority_class->preempt_after_s, c.task->queued_at));
    }
    reserve(c, how, why);
  }

  bool behind_holds(const TaskContext& c, Failed& failed, Reasons& why) {
    if (state_.nodes_with_holds().empty() && !state_.quota().has_holds()) return false;
    if (failed.behind && still_behind(c, *failed.behind)) {
      why.add_front(failed.behind->reason);
      return true;
    }
    ModeView free_of_holds(state_, LoadMode::kNoHolds);
    Fit f = fit_shapes(state_, free_of_holds, c, false, Want::kNode);
    if (!f.found()) return false;
    // The cycle's buffers (asked for most tasks short of quota): no allocation per answer.
    std::vector<std::size_t>& nodes = behind_nodes_;
    nodes.clear();
    if (f.node) {
      nodes.push_back(*f.node);
    } else {
      for (const auto& r : f.placement->placements) {
        if (auto i = state_.node_index(f.placement->cluster_id, r.node)) nodes.push_back(*i);
      }
    }
    std::vector<std::string_view>& holders = behind_holders_;  // views: the state does not change below
    holders.clear();
    state_.holders_on(nodes, holders);
    state_.quota_holders(c.group->name, holders);
    std::sort(holders.begin(), holders.end());
    holders.erase(std::unique(holders.begin(), holders.end()), holders.end());
    // Behind the same tasks as an earlier answer (of any class): the same
    // reason. Found by the ids joined (an id holds no NUL).
    std::string& key = behind_key_;
    key.clear();
    for (std::string_view h : holders) key.append(h).push_back('\0');
    auto known = behind_reasons_.find(std::string_view(key));
    if (known == behind_reasons_.end()) {
      known = behind_reasons_.emplace(key, reasons::reservation({holders.begin(), holders.end()})).first;
    }
    const Reasons::Shared& reason = known->second;
    // One shape that fits without holds: quota admitted it (gpu/any: per type).
    std::vector<signed char> admitted;
    if (c.shapes.size() == 1) {
      admitted.push_back(static_cast<signed char>(c.shapes.front().any_gpu() ? -1 : 1));
    } else {
      admitted = quota_fits(c);
    }
    failed.behind = Failed::Behind{state_.mark(), c.project, std::move(admitted), reason};
    why.add_front(failed.behind->reason);
    return true;
  }

  // What fit_shapes in behind_holds reads of the quota: per shape, whether it
  // is admitted (holds not counted), or -1 for gpu/any (admitted per type).
  std::vector<signed char> quota_fits(const TaskContext& c) const {
    std::vector<signed char> out;
    for (const Request& r : c.shapes) out.push_back(r.any_gpu() ? -1 : admitted_without_holds(c, r));
    return out;
  }

  signed char admitted_without_holds(const TaskContext& c, const Request& r) const {
    return state_.quota().fits(*c.group, r.per_replica(), r.replicas, c.may_borrow, false) ? 1 : 0;
  }

  // The remembered answer still holds: same project group (nodes are ranked
  // by it), and nothing it read has changed since: the nodes each shape looks
  // at, quota's answer for each shape (for gpu/any: the quota itself), who
  // holds the group's quota.
  bool still_behind(const TaskContext& c, const Failed::Behind& b) const {
    if (b.project != c.project || b.quota_fits.size() != c.shapes.size()) return false;
    if (!state_.quota_holds_unchanged_since(b.mark, c.group->name)) return false;
    for (std::size_t i = 0; i < c.shapes.size(); ++i) {
      const Request& r = c.shapes[i];
      const auto& ranks = c.clusters->usable_ranks;  // set by feasible_clusters
      if (!(ranks ? state_.nodes_unchanged_since(b.mark, *ranks, r)
                  : state_.nodes_unchanged_since(b.mark, c.clusters->usable, r))) {
        return false;
      }
      if (b.quota_fits[i] < 0 ? !state_.quota_unchanged_since(b.mark, *c.group)
                              : b.quota_fits[i] != admitted_without_holds(c, r)) {
        return false;
      }
    }
    return true;
  }

  bool after_stopping(const TaskContext& c, Blocked how, Reasons& why) {
    if (state_.nodes_with_stopping().empty()) return false;
    // Short of quota, with no other shape to try and a GPU type of its own
    // (gpu/any is admitted per type, once nodes are found): quota is asked
    // before any node, and only work charged to the group's quota scope (its
    // cohort, or itself outside one) gives back what it asks; other work
    // going changes no answer.
    const bool quota_only = how == Blocked::kQuota && c.shapes.size() == 1 && !c.shapes.front().any_gpu();
    if (quota_only) {
      // Quota is asked before any node, and only the stopping work of the
      // quota scope gives any back: where quota refuses with all of that
      // gone, the fit below would refuse too, so no node load is taken out.
      const std::vector<std::size_t>& in_scope = state_.stopping_in_quota_scope(*c.group, c.clusters->usable);
      if (in_scope.empty() || !quota_admits_without(state_, c, c.shapes.front(), in_scope)) return false;
    }
    // Work stopping and not yet claimed by an earlier task of this cycle.
    // Only what could make room for this task: in its clusters, or its group's quota.
    // The memo's list: nothing below asks for it again or marks work stopping
    // before it is last read (hold_over, at the end, claims).
    const std::vector<std::size_t>& stopping = state_.stopping_within(*c.group, c.clusters->usable);
    if (stopping.empty()) return false;
    if (!may_fit_once_gone(c, how, stopping)) return false;
    Overlay freed(state_);
    for (std::size_t w : stopping) state_.take_out(w, freed);
    Fit f = fit_shapes(state_, freed, c, true, Want::kPlacement);
    for (std::size_t w : stopping) state_.put_back(w, freed);
    if (!f.placement) return false;
    // It takes over what stops on its nodes (and, for quota, in its group).
    std::set<std::string> nodes;
    for (const auto& r : f.placement->placements) nodes.insert(r.node);
    std::vector<std::size_t> claimed;
    std::vector<reasons::VictimFigure> victims;
    for (std::size_t w : stopping) {
      const RunningWork& work = state_.running(w);
      bool here = work.cluster_id == f.placement->cluster_id &&
                  std::any_of(work.placements.begin(), work.placements.end(),
                              [&](const ReplicaPlacement& r) { return nodes.contains(r.node); });
      if (!here && work.resource_group != c.task->resource_group) continue;
      claimed.push_back(w);
      if (here) victims.push_back({work.attempt_id, work.task_id, "stopping"});
    }
    state_.hold_over(*c.task, *f.placement, claimed);
    why.add_front(reasons::preemption_grace(std::move(victims), true));
    return true;
  }

  // False when the fit of after_stopping would surely fail, asked without
  // taking any work out. Short of nodes, one shape of one replica of one
  // GPU type (or none): only the nodes that host some of the stopping work
  // change, and every other node refused the task already (loads only grow
  // within a cycle). So unless one of those nodes could take the replica
  // by what it is and by what it would have free (counts, an upper bound),
  // there is nothing to find. gpu/any and gangs are not judged here: freed
  // quota can open a GPU type's other nodes, and a gang is placed by a
  // search that is not exhaustive.
  bool may_fit_once_gone(const TaskContext& c, Blocked how, const std::vector<std::size_t>& stopping) const {
    if (how != Blocked::kCapacity || c.shapes.size() != 1) return true;
    const Request& r = c.shapes.front();
    if (r.replicas != 1 || r.any_gpu()) return true;
    struct Freed {
      std::size_t node;
      Wide cpu = 0, memory = 0, gpus = 0;
    };
    std::vector<Freed> freed;
    for (std::size_t w : stopping) {
      const CycleState::WorkFacts& f = state_.facts(w);
      for (const auto& i : state_.running_nodes(w)) {
        if (!i) continue;
        auto at = std::find_if(freed.begin(), freed.end(), [&](const Freed& x) { return x.node == *i; });
        if (at == freed.end()) at = freed.insert(freed.end(), Freed{*i});
        at->cpu += f.cpu;
        at->memory += f.memory;
        at->gpus += f.gpus;
      }
    }
    const std::vector<std::string>& usable = c.clusters->usable;
    for (const Freed& x : freed) {
      const NodeView& v = state_.nodes()[x.node];
      if (!std::binary_search(usable.begin(), usable.end(), v.cluster_id())) continue;
      if (static_misfit(v, *c.group, r)) continue;
      const NodeLoad& load = state_.load(x.node);
      if (counts_fit(r, static_cast<Wide>(v.alloc_cpu) - cpu_in_use(load, LoadMode::kAll) + x.cpu,
                     static_cast<Wide>(v.alloc_memory) - memory_in_use(load, LoadMode::kAll) + x.memory,
                     static_cast<Wide>(v.gpu_capacity) - gpus_in_use(load, LoadMode::kAll) + x.gpus)) {
        return true;
      }
    }
    return false;
  }

  bool preempt(const TaskContext& c, Blocked how, Reasons& why) {
    auto set = find_victims(state_, c, how, config_.max_victims);
    if (!set) return false;
    std::vector<reasons::VictimFigure> figures;
    std::vector<std::size_t> claimed;
    const Task& t = *c.task;
    std::string by = t.id + " (" + (t.priority_class.empty() ? "priority" : t.priority_class) + " " +
                     std::to_string(t.priority) + ")";
    for (const Victim& v : set->victims) {
      const RunningWork& w = state_.running(v.work);
      Preemption p;
      p.attempt_id = w.attempt_id;
      p.task_id = w.task_id;
      p.cluster_id = w.cluster_id;
      p.preemptor = t.id;
      p.kind = v.reclaim ? "reclaim" : "priority";
      if (v.reclaim) {
        p.message = "preempted by " + by + ": " + t.resource_group + " reclaims capacity that " + w.resource_group +
                    " borrowed";
        p.message_zh = "被任务 " + by + " 抢占：" + t.resource_group + " 收回被 " + w.resource_group + " 借用的资源";
      } else {
        p.message = "preempted by " + by + ", which outranks priority " + std::to_string(w.priority);
        p.message_zh = "被更高优先级的任务 " + by + " 抢占（本任务优先级 " + std::to_string(w.priority) + "）";
      }
      figures.push_back({w.attempt_id, w.task_id, p.kind});
      plan_.preemptions.push_back(std::move(p));
      state_.mark_stopping(v.work);
      claimed.push_back(v.work);
    }
    state_.hold_over(t, set->placement, claimed);
    why.add_front(reasons::preemption_grace(std::move(figures), false));
    return true;
  }

  void reserve(const TaskContext& c, Blocked how, Reasons& why) {
    int& left = reservations_.try_emplace(c.group, config_.reservations_per_group).first->second;
    if (left <= 0) return;
    // A few tries per group and cycle: a group whose blocked tasks cannot
    // reserve (nothing big enough) must not make every one of them try.
    if (++reservation_tries_[c.group] > 4 * config_.reservations_per_group) return;
    const Request& primary = c.shapes.front();
    if (!state_.quota().could_ever_fit(*c.group, primary.typed_part(), primary.replicas, c.may_borrow)) return;
    if (how == Blocked::kQuota) {
      // A bare GPU count is refused per type; which type it would wait for is not known.
      if (primary.any_gpu()) return;
      --left;
      state_.hold_quota(*c.task, primary.per_replica(), primary.replicas);
      why.add(reasons::reserved({}, c.group->name));
      return;
    }
    // Where it would fit once running work there ends; among those, the nodes
    // with the most free now (the shortest wait).
    ModeView drained(state_, LoadMode::kDrained);
    NodeFeasibility nodes = feasible_nodes(state_, drained, c.clusters->usable, *c.group, primary);
    if (nodes.fit.empty()) return;
    SelectOptions options;
    options.project = c.project;
    options.loads = &drained;
    options.score_loads = &state_;
    options.policy = PlacementPolicy::spread;
    options.may_borrow = c.may_borrow;
    Selection s = select_gang(state_, *c.group, *c.task, primary, nodes.fit, options);
    if (!s.placement) return;
    --left;
    state_.hold(*c.task, *s.placement);
    why.add(reasons::reserved(node_names(*s.placement), c.group->name));
  }

  // The task's entry in the plan, with its reasons so far. Nothing else is
  // added to plan_.pending while it is used: one entry per task, and room
  // for all of them was made at the start (no reallocation moves it).
  Reasons& pend(const std::string& id, Reasons&& why) {
    return plan_.pending.emplace_back(id, std::move(why)).reasons;
  }
  Reasons& pend(const std::string& id, const Reasons& why) { return plan_.pending.emplace_back(id, why).reasons; }

  CycleState& state_;
  Millis now_;
  SchedulerConfig config_;
  // Found, never walked: hashes (asked for every task, with long keys).
  // By group: one object per group name (CycleState::group).
  std::unordered_map<const ResourceGroup*, int> reservations_;
  std::unordered_map<const ResourceGroup*, int> reservation_tries_;
  // Found by a view of key_ (no string built per task: transparent hash).
  // By class key, a position in failures_: the table's slots stay small
  // (tens of thousands of classes; a slot is touched at random), the
  // classes' answers lie side by side as they were made.
  FlatBytesMap<std::uint32_t> failed_;
  std::vector<Failed> failures_;
  std::string key_;
  PinnedClusters pinned_clusters_;
  // "Behind reservation" reasons by who the room is held for: the reason
  // says no more than that, and most blocked tasks of a group wait behind
  // the same one or two.
  FlatBytesMap<Reasons::Shared> behind_reasons_;
  std::string behind_key_;
  std::vector<std::size_t> behind_nodes_;
  std::vector<std::string_view> behind_holders_;
  Plan plan_;
};

}  // namespace

bool Reason::same_as(const Reason& other) const {
  const PendingReason& a = worded();
  const PendingReason& b = other.worded();
  return a.code == b.code && a.message == b.message;
}

bool Reasons::same_as(const Reasons& other) const {
  if (items_.size() != other.items_.size()) return false;
  for (std::size_t i = 0; i < items_.size(); ++i) {
    if (items_[i] != other.items_[i] && !items_[i]->same_as(*other.items_[i])) return false;
  }
  return true;
}

Plan decide(const Snapshot& snapshot, const std::vector<QueuedTask>& queue, Millis now) {
  if (snapshot.config.fair_share) return decide(snapshot, queue, now, FairShareOrder(snapshot));
  return decide(snapshot, queue, now, PriorityOrder{});
}

Plan run_cycle(CycleState& state, const SchedulerConfig& config, const std::vector<QueuedTask>& queue, Millis now,
               const QueueOrder& order) {
  return Cycle(state, config, now).run(queue, order);
}

Plan decide(const Snapshot& snapshot, const std::vector<QueuedTask>& queue, Millis now, const QueueOrder& order) {
  CycleState state(snapshot);
  return run_cycle(state, snapshot.config, queue, now, order);
}

}  // namespace cp::sched
