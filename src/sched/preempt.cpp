#include "sched/preempt.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include <boost/container/small_vector.hpp>

namespace cp::sched {
namespace {

// The work holds some of what the request asks for.
bool frees_something(const CycleState& state, std::size_t w, const Request& request) {
  const CycleState::WorkFacts& f = state.facts(w);
  if (f.plain && !request.others) {
    // The request names only cpu, memory and one GPU type (or gpu/any): the
    // same answer from the work's figures, without a name to look up.
    if (request.cpu > 0 && f.cpu > 0) return true;
    if (request.memory > 0 && f.memory > 0) return true;
    if (request.gpus <= 0) return false;
    if (request.any_gpu()) return f.gpus > 0;
    if (f.gpus <= 0) return false;
    // Both types offered by some node: their ids say it; else the names.
    if (f.gpu_type_id >= 0 && request.gpu_type_id >= 0) return f.gpu_type_id == request.gpu_type_id;
    return f.gpu_type == request.gpu_type;
  }
  const RunningWork& work = state.running(w);
  for (const auto& [name, amount] : request.per_replica().amounts()) {
    if (amount <= 0) continue;
    if (name == kGpuAny ? work.per_replica.gpus() > 0 : work.per_replica.get(name) > 0) return true;
  }
  return false;
}

// The work borrows (holds above its group's guarantee) something the request asks for.
bool borrows_what_is_asked(const CycleState& state, const RunningWork& w, const Request& request) {
  for (const auto& [name, amount] : w.per_replica.amounts()) {
    if (amount <= 0) continue;
    bool asked = request.per_replica().get(name) > 0 || (name.starts_with(kGpuPrefix) && request.any_gpu());
    if (asked && state.quota().borrowed(w.resource_group, name) > 0) return true;
  }
  return false;
}

// A candidate with its sort key, read once: reclaim first; lowest priority;
// checkpointed first; latest start; attempt id.
struct Ranked {
  bool not_reclaim;
  int priority;
  bool not_checkpoint;
  Millis neg_started;
  const std::string* attempt;
  Victim victim;
};

bool cheaper(const Ranked& a, const Ranked& b) {
  return std::tie(a.not_reclaim, a.priority, a.not_checkpoint, a.neg_started, *a.attempt) <
         std::tie(b.not_reclaim, b.priority, b.not_checkpoint, b.neg_started, *b.attempt);
}

// Unordered: victims_for takes them cheapest first from a heap, since it
// seldom needs more than a few of hundreds.
std::vector<Ranked> candidates(CycleState& state, const TaskContext& c, const Request& request, Blocked blocked,
                               bool reclaim_ok, bool priority_ok) {
  const Task& task = *c.task;
  // Short of nodes: only work on a node the task could use at all frees room for it.
  // Per node: -1 not asked yet, else whether it could take the task at all.
  std::vector<signed char> usable_node;
  if (blocked == Blocked::kCapacity) usable_node.assign(state.nodes().size(), -1);
  auto usable = [&](std::size_t i) {
    signed char& known = usable_node[i];
    if (known < 0) known = statically_fits(state.nodes()[i], *c.group, request) ? 1 : 0;
    return known == 1;
  };
  auto on_usable_node = [&](std::size_t w) {
    for (const auto& i : state.running_nodes(w)) {
      if (i && usable(*i)) return true;
    }
    return false;
  };
  // Whether a group borrows a resource, asked of the quota once per search:
  // the works of a cohort are of a few groups and hold a few resources.
  struct Borrowing {
    const ResourceGroup* group;
    std::string_view resource;  // "cpu", "memory", or a GPU type without its prefix
    bool borrows;
  };
  std::vector<Borrowing> borrowing;
  std::string gpu_name;
  auto borrows = [&](const ResourceGroup* g, std::string_view resource, bool gpu) {
    for (const Borrowing& b : borrowing) {
      if (b.group == g && b.resource == resource) return b.borrows;
    }
    if (gpu) gpu_name.assign(kGpuPrefix).append(resource);
    bool yes = state.quota().borrowed(g->name, gpu ? std::string_view(gpu_name) : resource) > 0;
    borrowing.push_back({g, resource, yes});
    return yes;
  };
  // borrows_what_is_asked, from the work's figures where they say all it holds.
  auto reclaimable = [&](std::size_t w, const RunningWork& work) {
    const CycleState::WorkFacts& f = state.facts(w);
    if (!f.plain || f.group == nullptr || request.others) return borrows_what_is_asked(state, work, request);
    if (f.cpu > 0 && request.cpu > 0 && borrows(f.group, kCpu, false)) return true;
    if (f.memory > 0 && request.memory > 0 && borrows(f.group, kMemory, false)) return true;
    const bool gpu_asked = request.any_gpu() || (request.gpus > 0 && request.gpu_type == f.gpu_type);
    return f.gpus > 0 && gpu_asked && borrows(f.group, f.gpu_type, true);
  };
  // Short of quota, the works of the quota scope found through their groups
  // (below) are kept to the task's clusters: by rank, not by name.
  const std::vector<std::string>& clusters = c.clusters->usable;
  boost::container::small_vector<int, 4> cluster_ranks;
  if (blocked == Blocked::kQuota) {
    for (const auto& id : clusters) {
      if (int rank = state.cluster_rank(id); rank >= 0) cluster_ranks.push_back(rank);
    }
  }
  // Reclaim takes back from another group of the task's cohort (a work of a
  // group the snapshot does not know is of no cohort), and only from one
  // that borrows something the request asks for: those groups are found
  // once, from the quota, so that a walk passes over the works of the others
  // (a search finds few such groups, often none, and then its walk stops
  // at the first work it may not preempt by priority).
  boost::container::small_vector<const ResourceGroup*, 8> takers;
  if (reclaim_ok) {
    std::vector<std::string_view> held;
    for (const ResourceGroup* g : state.quota_scope_groups(*c.group)) {
      if (g == c.group) continue;
      held.clear();
      state.quota().borrowed_resources(g->name, held);
      if (std::any_of(held.begin(), held.end(), [&](std::string_view name) {
            return request.per_replica().get(name) > 0 || (name.starts_with(kGpuPrefix) && request.any_gpu());
          })) {
        takers.push_back(g);
      }
    }
    // Nothing to reclaim: a walk stops at the first work it may not preempt.
    if (takers.empty()) reclaim_ok = false;
  }
  if (!reclaim_ok && !priority_ok) return {};
  auto reclaim_from = [&](const ResourceGroup* g) {
    return g != nullptr && std::find(takers.begin(), takers.end(), g) != takers.end();
  };
  std::vector<Ranked> ranked;
  // The cheap questions first, from the work's facts; the work itself, and
  // its nodes, only for those that may be candidates.
  // `on_node_checked`: the work is on one node, already found usable.
  auto consider = [&](std::size_t w, bool on_node_checked) {
    if (state.stopping(w)) return;
    const CycleState::WorkFacts& facts = state.facts(w);
    if (!facts.preemptible) return;
    bool priority = priority_ok && facts.priority < task.priority;
    // Neither kind can hold (reclaim needs reclaim_ok): skip the lookups below.
    if (!priority && !reclaim_ok) return;
    if (!frees_something(state, w, request)) return;
    const RunningWork& work = state.running(w);
    const ResourceGroup* g = facts.group;
    // Groups are the snapshot's, one object per name: the pointer says it
    // (a work of a group the snapshot does not know compares by name).
    bool same_group = g != nullptr ? g == c.group : work.resource_group == task.resource_group;
    bool same_cohort = g != nullptr && !c.group->cohort.empty() && (g == c.group || g->cohort == c.group->cohort);
    bool reclaim = reclaim_ok && reclaim_from(g) && reclaimable(w, work);
    if (!reclaim && !priority) return;
    if (blocked == Blocked::kCapacity && !on_node_checked && !on_usable_node(w)) return;
    // Short of quota: only work charged to the task's group (or, for
    // borrowing, its cohort) gives quota back.
    if (blocked == Blocked::kQuota && !same_group && !same_cohort) return;
    if (work.task_id == task.id) return;
    ranked.push_back({!reclaim, work.priority, !work.checkpoint, -work.started_at, &work.attempt_id, {w, reclaim}});
  };
  // Only preemptible work, lowest priority first. Work of a priority not
  // below the task's can only be reclaimed: without reclaim the walk stops
  // there, with it only work of another group of the cohort goes on. Short
  // of quota, the works of the scope's groups on other clusters are passed
  // over here, before their facts are read (most of what such a walk meets).
  auto walk = [&](std::span<const CycleState::Preemptible> works) {
    for (const CycleState::Preemptible& p : works) {
      if (p.priority >= task.priority || !priority_ok) {
        if (!reclaim_ok) return;
        if (!reclaim_from(p.group)) continue;
      }
      if (blocked == Blocked::kQuota &&
          std::find(cluster_ranks.begin(), cluster_ranks.end(), p.cluster) == cluster_ranks.end()) {
        continue;
      }
      const bool one_node = blocked == Blocked::kCapacity && p.node != CycleState::Preemptible::kNotOneNode;
      if (one_node && !usable(p.node)) continue;
      consider(p.work, one_node);
    }
  };
  if (blocked == Blocked::kQuota) {
    // Only work of the group's quota scope can qualify: found through each
    // group's own list, not by walking every work of the task's clusters.
    for (const ResourceGroup* g : state.quota_scope_groups(*c.group)) walk(state.preemptible_of(*g));
    return ranked;
  }
  for (const auto& cluster : clusters) walk(state.preemptible_on(cluster));
  return ranked;
}

// Short of nodes, once victims taken cheapest first across the task's
// clusters reached max_victims without making room: they can be spread
// over many nodes, none of which they free. Node by node instead (as
// kube-scheduler does): on each node that hosts candidates, its own
// candidates cheapest first until what they free would make room for one
// replica there (cpu, memory and GPU counts: a bound, the fit below
// decides), then, most expensive first, those that were not needed after
// all. One replica: each node's set is a choice. A gang: in each cluster,
// the sets of its `replicas` best nodes together (a replica per node).
// The choice whose costliest victim is cheapest is tried first, then the
// smaller, then the one of the lower node or cluster; each try is a fit on
// that cluster with the choice's victims gone (quota asked too). Leaves
// the quota book as it found it.
std::optional<VictimSet> victims_node_by_node(CycleState& state, const TaskContext& c, const Request& request,
                                              const std::vector<Ranked>& pool, int max_victims) {
  struct OnNode {
    std::size_t node;
    std::size_t ranked;     // in `pool`
    std::int64_t replicas;  // of the work on the node
  };
  std::vector<OnNode> on;
  for (std::size_t k = 0; k < pool.size(); ++k) {
    const auto from = static_cast<std::ptrdiff_t>(on.size());  // this work's nodes, so far
    for (const auto& i : state.running_nodes(pool[k].victim.work)) {
      if (!i) continue;
      auto at = std::find_if(on.begin() + from, on.end(), [&](const OnNode& x) { return x.node == *i; });
      if (at != on.end()) {
        ++at->replicas;
      } else {
        on.push_back({*i, k, 1});
      }
    }
  }
  std::sort(on.begin(), on.end(), [&](const OnNode& a, const OnNode& b) {
    return a.node != b.node ? a.node < b.node : cheaper(pool[a.ranked], pool[b.ranked]);
  });
  struct Choice {
    std::size_t cluster;  // rank
    std::size_t node;     // the lowest of its nodes
    std::vector<std::size_t> victims;  // in `pool`, cheapest first
  };
  // Cheapest first within each set: its costliest victim is its last.
  auto better = [&](const Choice& a, const Choice& b) {
    const Ranked& ca = pool[a.victims.back()];
    const Ranked& cb = pool[b.victims.back()];
    if (cheaper(ca, cb)) return true;
    if (cheaper(cb, ca)) return false;
    return a.victims.size() != b.victims.size() ? a.victims.size() < b.victims.size() : a.node < b.node;
  };
  std::vector<Choice> nodes;  // one per node with room for a replica once its set is gone
  for (auto first = on.begin(); first != on.end();) {
    const std::size_t n = first->node;
    auto last = std::find_if(first, on.end(), [&](const OnNode& x) { return x.node != n; });
    const NodeView& node = state.nodes()[n];
    if (statically_fits(node, *c.group, request)) {
      const NodeLoad& load = state.load(n);
      Wide cpu = static_cast<Wide>(node.alloc_cpu) - cpu_in_use(load, LoadMode::kAll);
      Wide memory = static_cast<Wide>(node.alloc_memory) - memory_in_use(load, LoadMode::kAll);
      Wide gpus = free_gpus(node, load, LoadMode::kAll);
      auto room = [&] { return counts_fit(request, cpu, memory, gpus); };
      auto free = [&](const OnNode& x, Wide sign) {
        const CycleState::WorkFacts& f = state.facts(pool[x.ranked].victim.work);
        cpu += sign * f.cpu * x.replicas;
        memory += sign * f.memory * x.replicas;
        gpus += sign * f.gpus * x.replicas;
      };
      std::vector<const OnNode*> taken;
      for (auto it = first; it != last && !room() && static_cast<int>(taken.size()) < max_victims; ++it) {
        free(*it, 1);
        taken.push_back(&*it);
      }
      if (room() && !taken.empty()) {
        for (std::size_t j = taken.size(); j-- > 0;) {
          free(*taken[j], -1);
          if (room()) {
            taken.erase(taken.begin() + static_cast<std::ptrdiff_t>(j));
          } else {
            free(*taken[j], 1);
          }
        }
        Choice choice{node.cluster_rank, n, {}};
        for (const OnNode* x : taken) choice.victims.push_back(x->ranked);
        nodes.push_back(std::move(choice));
      }
    }
    first = last;
  }
  std::vector<Choice> choices;
  if (request.replicas == 1) {
    choices = std::move(nodes);
  } else {
    // Per cluster, its best `replicas` nodes' sets together.
    std::sort(nodes.begin(), nodes.end(), [&](const Choice& a, const Choice& b) {
      return a.cluster != b.cluster ? a.cluster < b.cluster : better(a, b);
    });
    const auto replicas = static_cast<std::size_t>(request.replicas);
    for (auto first = nodes.begin(); first != nodes.end();) {
      auto last = std::find_if(first, nodes.end(), [&](const Choice& x) { return x.cluster != first->cluster; });
      if (static_cast<std::size_t>(last - first) >= replicas) {
        Choice gang{first->cluster, first->node, {}};
        for (auto it = first; it != first + static_cast<std::ptrdiff_t>(replicas); ++it) {
          gang.node = std::min(gang.node, it->node);
          gang.victims.insert(gang.victims.end(), it->victims.begin(), it->victims.end());
        }
        std::sort(gang.victims.begin(), gang.victims.end(),
                  [&](std::size_t a, std::size_t b) { return cheaper(pool[a], pool[b]); });
        gang.victims.erase(std::unique(gang.victims.begin(), gang.victims.end()), gang.victims.end());
        if (static_cast<int>(gang.victims.size()) <= max_victims) choices.push_back(std::move(gang));
      }
      first = last;
    }
  }
  std::sort(choices.begin(), choices.end(), better);
  // A few tries: where counts say there is room, a fit seldom says no.
  constexpr std::size_t kTries = 4;
  for (std::size_t t = 0; t < std::min(choices.size(), kTries); ++t) {
    const Choice& choice = choices[t];
    Overlay overlay(state);
    for (std::size_t k : choice.victims) state.take_out(pool[k].victim.work, overlay);
    const std::vector<std::string> cluster{state.nodes()[choice.node].cluster_id()};
    Fit f = fit_shape(state, overlay, c, request, true, &cluster, Want::kPlacement);
    for (std::size_t k : choice.victims) state.put_back(pool[k].victim.work, overlay);
    if (!f.placement) continue;
    VictimSet set{{}, std::move(*f.placement)};
    for (std::size_t k : choice.victims) set.victims.push_back(pool[k].victim);
    return set;
  }
  return std::nullopt;
}

// Victims for one shape, or nullopt. Leaves the quota book as it found it.
std::optional<VictimSet> victims_for(CycleState& state, const TaskContext& c, const Request& request, Blocked blocked,
                                     bool reclaim_ok, bool priority_ok, int max_victims) {
  std::vector<Ranked> pool = candidates(state, c, request, blocked, reclaim_ok, priority_ok);
  if (pool.empty()) return std::nullopt;
  // Short of quota: quota only gains as victims go, so where it refuses with
  // every candidate gone, no set of them makes room. Most failed searches
  // of a big queue end here instead of trying every candidate with a fit.
  if (blocked == Blocked::kQuota) {
    std::vector<std::size_t> works;
    works.reserve(pool.size());
    for (const Ranked& r : pool) works.push_back(r.victim.work);
    if (!quota_admits_without(state, c, request, works)) return std::nullopt;
  }
  Overlay overlay(state);
  std::vector<Victim> chosen;
  std::optional<Placement> placed;
  // Short of nodes: clusters where, on the overlay as it is, no node can take
  // one replica. Only the next victim's nodes change there, so unless one of
  // them can take a replica once it is gone, asking the cluster again would
  // give the same no (a failed search tries up to max_victims victims).
  std::vector<std::string_view> nothing_fits;
  bool no_node_anywhere = false;
  auto known_empty = [&](std::string_view cluster) {
    return std::find(nothing_fits.begin(), nothing_fits.end(), cluster) != nothing_fits.end();
  };
  auto frees_a_node = [&](std::size_t w) {
    for (const auto& i : state.running_nodes(w)) {
      if (i && !node_misfit(state.nodes()[*i], overlay.load(*i), *c.group, request, overlay.mode())) return true;
    }
    return false;
  };
  // Cheapest first (a total order: attempt ids are unique, so the same
  // sequence a full sort gives).
  auto costlier = [](const Ranked& a, const Ranked& b) { return cheaper(b, a); };
  std::make_heap(pool.begin(), pool.end(), costlier);
  for (auto left = pool.end(); left != pool.begin();) {
    if (static_cast<int>(chosen.size()) >= max_victims) break;
    std::pop_heap(pool.begin(), left, costlier);
    --left;
    const Victim v = left->victim;
    state.take_out(v.work, overlay);
    chosen.push_back(v);
    // Short of nodes: the victim's cluster is the one that changed. Short of
    // quota: freed quota may be used in any cluster.
    const std::string& cluster = state.running(v.work).cluster_id;
    if (blocked == Blocked::kCapacity && known_empty(cluster) && !frees_a_node(v.work)) continue;
    // Short of quota, once quota admits it but no node anywhere can take a
    // replica: the same holds while the victims free no such node (quota
    // only gains as victims go).
    if (blocked == Blocked::kQuota && no_node_anywhere && !frees_a_node(v.work)) continue;
    std::vector<std::string> one;
    if (blocked == Blocked::kCapacity) one.push_back(cluster);
    Fit f = fit_shape(state, overlay, c, request, true, blocked == Blocked::kCapacity ? &one : nullptr, Want::kWhyNot);
    if (f.placement) {
      placed = std::move(f.placement);
      break;
    }
    if (blocked == Blocked::kCapacity) {
      std::erase(nothing_fits, std::string_view(cluster));
      if (f.no_node_fits) nothing_fits.push_back(cluster);
    } else {
      no_node_anywhere = f.blocked == Blocked::kCapacity && f.no_node_fits;
    }
  }
  if (!placed) {
    for (const Victim& v : chosen) state.put_back(v.work, overlay);
    if (blocked == Blocked::kCapacity && static_cast<int>(chosen.size()) >= max_victims) {
      return victims_node_by_node(state, c, request, pool, max_victims);
    }
    return std::nullopt;
  }
  // Drop every victim that was not needed after all, most expensive first.
  std::vector<std::string> target{placed->cluster_id};
  const std::vector<std::string>* in = blocked == Blocked::kCapacity ? &target : nullptr;
  // One replica of one GPU type (or none): the node it last fitted on. A
  // victim back elsewhere leaves that node's load as it was, so where quota
  // still admits the task it still fits there: no fit to ask.
  auto one_node = [&](std::optional<std::size_t> node,
                      const std::optional<Placement>& placement) -> std::optional<std::size_t> {
    if (request.replicas != 1 || request.any_gpu()) return std::nullopt;
    if (node) return node;
    if (placement && placement->placements.size() == 1) {
      return state.node_index(placement->cluster_id, placement->placements.front().node);
    }
    return std::nullopt;
  };
  std::optional<std::size_t> on = one_node(std::nullopt, placed);
  auto off_node = [&](std::size_t w) {
    const auto nodes = state.running_nodes(w);
    return std::none_of(nodes.begin(), nodes.end(), [&](const std::optional<std::size_t>& i) { return i == on; });
  };
  for (std::size_t i = chosen.size(); i-- > 0;) {
    state.put_back(chosen[i].work, overlay);
    // Quota as fit_shape asks it first (nothing more taken out).
    if (on && off_node(chosen[i].work) && quota_admits_without(state, c, request, {})) {
      chosen.erase(chosen.begin() + static_cast<std::ptrdiff_t>(i));
      continue;
    }
    // Whether it still fits is all this asks: the last fit below says where.
    Fit f = fit_shape(state, overlay, c, request, true, in, Want::kNode);
    if (f.found()) {
      on = one_node(f.node, f.placement);
      chosen.erase(chosen.begin() + static_cast<std::ptrdiff_t>(i));
      continue;
    }
    state.take_out(chosen[i].work, overlay);
  }
  Fit final_fit = fit_shape(state, overlay, c, request, true, in, Want::kPlacement);
  for (const Victim& v : chosen) state.put_back(v.work, overlay);
  if (!final_fit.placement) return std::nullopt;  // cannot happen: the set above made it fit
  return VictimSet{std::move(chosen), std::move(*final_fit.placement)};
}

}  // namespace

bool may_reclaim(const CycleState& state, const TaskContext& c) {
  if (c.group->cohort.empty()) return false;
  const Request& primary = c.shapes.front();
  std::optional<Resources> without_any;
  const Resources& typed = primary.typed(without_any);
  return !state.quota().borrows(*c.group, typed, primary.replicas);
}

bool may_preempt_now(const TaskContext& c) {
  const PriorityClass* pc = c.priority_class;
  return pc != nullptr && pc->may_preempt && c.waited_ms >= pc->preempt_after_s * 1000;
}

std::optional<VictimSet> find_victims(CycleState& state, const TaskContext& c, Blocked blocked, int max_victims) {
  bool reclaim_ok = may_reclaim(state, c);
  bool priority_ok = may_preempt_now(c);
  if (!reclaim_ok && !priority_ok) return std::nullopt;
  for (const Request& shape : c.shapes) {
    auto set = victims_for(state, c, shape, blocked, reclaim_ok, priority_ok, max_victims);
    if (set) return set;
  }
  return std::nullopt;
}

}  // namespace cp::sched
