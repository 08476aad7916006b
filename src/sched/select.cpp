#include "sched/select.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <utility>

#include "sched/admission.h"
#include "sched/feasible.h"
#include "sched/rank.h"
#include "sched/reasons.h"

namespace cp::sched {
namespace {

// Where one gang attempt may go: a cluster (its rank in the cycle), and for
// "gpu/any" one GPU type in it (a gang's replicas share one per_replica, so
// one type), with the nodes it may use. A task's clusters and types are a
// handful: a flat list, searched by the cluster's number first.
struct Attempt {
  std::size_t cluster_rank;
  std::string_view gpu_type;  // "" unless gpu/any
  std::string_view cluster_id;
  std::vector<std::size_t> nodes;  // gangs only
  std::pair<Score, std::size_t> best;  // its best node, ranked (score, then index)
  bool has_best = false;
};

Attempt& attempt_for(std::vector<Attempt>& attempts, const NodeView& node, const Request& request) {
  std::string_view type = request.any_gpu() ? node.gpu_type : std::string_view();
  for (Attempt& a : attempts) {
    if (a.cluster_rank == node.cluster_rank && a.gpu_type == type) return a;
  }
  return attempts.emplace_back(Attempt{node.cluster_rank, type, node.cluster_id(), {}, {}, false});
}

// Places all replicas on `nodes` (one attempt's nodes) or returns nullopt.
// Works on copies of the nodes' loads, so a failed attempt leaves no trace.
std::optional<std::vector<ReplicaPlacement>> place_replicas(const CycleState& state, const ResourceGroup& group,
                                                            const Request& request,
                                                            const Resources& per_replica,
                                                            const std::vector<std::size_t>& nodes,
                                                            const SelectOptions& options) {
  // A one-replica task needs no copies: the first best node is the answer.
  std::map<std::size_t, NodeLoad> loads;
  std::map<std::size_t, NodeLoad> score_loads;
  const bool separate_scores = options.score_loads != nullptr && options.score_loads != options.loads;
  const LoadMode fit_mode = options.loads->mode();
  const LoadMode score_mode = separate_scores ? options.score_loads->mode() : fit_mode;
  auto fit_load = [&](std::size_t i) -> const NodeLoad& {
    auto it = loads.find(i);
    return it == loads.end() ? options.loads->load(i) : it->second;
  };
  auto score_load = [&](std::size_t i) -> const NodeLoad& {
    if (!separate_scores) return fit_load(i);
    auto it = score_loads.find(i);
    return it == score_loads.end() ? options.score_loads->load(i) : it->second;
  };

  std::vector<ReplicaPlacement> out;
  for (int replica = 0; replica < request.replicas; ++replica) {
    std::optional<std::size_t> best;
    Score best_score{};
    for (std::size_t i : nodes) {  // ascending (cluster id, name): the first best wins ties
      const NodeView& node = state.nodes()[i];
      if (node_misfit(node, fit_load(i), group, request, fit_mode)) continue;
      Score s = score_node(options.policy, node, score_load(i), request, options.project, score_mode);
      if (!best || s < best_score) {
        best = i;
        best_score = s;
      }
    }
    if (!best) return std::nullopt;
    const NodeView& node = state.nodes()[*best];
    std::vector<int> gpus = lowest_free_gpus(node, fit_load(*best), request.gpus, fit_mode);
    if (request.replicas > 1) {
      // The next replica sees this one: as a hold where only holds count.
      auto charge = [&](NodeLoad& load, LoadMode mode) {
        if (mode == LoadMode::kDrained) {
          load.hold(per_replica);
        } else {
          load.add(per_replica, gpus, options.project);
        }
      };
      if (!loads.contains(*best)) loads.emplace(*best, options.loads->load(*best));
      charge(loads[*best], fit_mode);
      if (separate_scores) {
        if (!score_loads.contains(*best)) score_loads.emplace(*best, options.score_loads->load(*best));
        charge(score_loads[*best], score_mode);
      }
    }
    out.push_back(ReplicaPlacement{replica, node.name(), std::move(gpus)});
  }
  return out;
}


// Tries the attempts in the order of their best node (score, then index):
// all replicas in the attempt's cluster (and for gpu/any, of its GPU type),
// or the next attempt.
Selection try_attempts(const CycleState& state, const ResourceGroup& group, const Task& task, const Request& request,
                       std::vector<Attempt>& attempts, const SelectOptions& options) {
  std::sort(attempts.begin(), attempts.end(), [](const Attempt& a, const Attempt& b) { return a.best < b.best; });
  Selection out;
  std::set<std::string> quota_reported;
  // gpu/any: the GPU types whose quota refused an attempt already (quota is
  // not per cluster: another cluster's attempt of the type gets the same no).
  std::vector<std::string_view> refused_types;
  for (Attempt& attempt : attempts) {
    if (request.any_gpu() &&
        std::find(refused_types.begin(), refused_types.end(), attempt.gpu_type) != refused_types.end()) {
      continue;
    }
    Resources per_replica = request.any_gpu() ? request.resolved(attempt.gpu_type) : request.per_replica();
    std::optional<std::vector<ReplicaPlacement>> placed;
    if (request.replicas == 1) {
      // The best-ranked node of the attempt is where place_replicas would put it.
      const std::size_t i = attempt.best.second;
      const NodeView& node = state.nodes()[i];
      placed.emplace(
          1, ReplicaPlacement{0, node.name(),
                              lowest_free_gpus(node, options.loads->load(i), request.gpus, options.loads->mode())});
    } else {
      std::sort(attempt.nodes.begin(), attempt.nodes.end());
      placed = place_replicas(state, group, request, per_replica, attempt.nodes, options);
    }
    if (!placed) continue;
    if (request.any_gpu()) {
      // Admission of a bare GPU count waits until here: only now is the type
      // (and so the quota entry it is charged to) known.
      std::vector<Reasons::Shared> refused;  // to explain: why quota says no
      if (!state.quota().admits(group, per_replica, request.replicas, options.may_borrow, options.count_held,
                                options.explain ? &refused : nullptr)) {
        out.quota_refused = true;
        refused_types.push_back(attempt.gpu_type);
        for (auto& r : refused) {
          if (quota_reported.insert(std::string(reasons::quota_resource(*r))).second) {
            out.quota.add(std::move(r));
          }
        }
        continue;
      }
    }
    out.placement =
        Placement{task.id, std::string(attempt.cluster_id), std::move(*placed), std::move(per_replica), request.shape,
                  false};
    return out;
  }
  return out;
}

}  // namespace

Placement place_on(const CycleState& state, const Task& task, const Request& request, std::size_t node,
                   const LoadView& loads) {
  const NodeView& v = state.nodes()[node];
  std::vector<ReplicaPlacement> placed{
      ReplicaPlacement{0, v.name(), lowest_free_gpus(v, loads.load(node), request.gpus, loads.mode())}};
  return Placement{task.id, v.cluster_id(), std::move(placed), request.per_replica(), request.shape, false};
}

Selection select_gang(const CycleState& state, const ResourceGroup& group, const Task& task, const Request& request,
                      const std::vector<std::size_t>& fit, const SelectOptions& options) {
  const LoadView& score_loads = options.score_loads ? *options.score_loads : *options.loads;
  if (request.replicas == 1 && !request.any_gpu()) {
    // One replica of one type: the best node of all is the answer; no need
    // to sort them (the common case, and the hot path of a big queue).
    std::optional<std::pair<Score, std::size_t>> best;
    for (std::size_t i : fit) {
      std::pair<Score, std::size_t> ranked{score_node(options.policy, state.nodes()[i], score_loads.load(i), request,
                                                      options.project, score_loads.mode()),
                                           i};
      if (!best || ranked < *best) best = ranked;
    }
    Selection out;
    if (!best) return out;
    out.placement = place_on(state, task, request, best->second, *options.loads);
    return out;
  }
  // Rank every feasible node once, as it stands before this task, and try
  // the attempts in the order of their best node. Only each attempt's best
  // needs its rank: a gang's replicas are placed by walking its nodes again.
  std::vector<Attempt> attempts;
  for (std::size_t i : fit) {
    std::pair<Score, std::size_t> ranked{score_node(options.policy, state.nodes()[i], score_loads.load(i), request,
                                                    options.project, score_loads.mode()),
                                         i};
    Attempt& attempt = attempt_for(attempts, state.nodes()[i], request);
    if (!attempt.has_best || ranked < attempt.best) attempt.best = ranked;
    attempt.has_best = true;
    // One replica goes on the attempt's best node: its other nodes are not needed.
    if (request.replicas > 1) attempt.nodes.push_back(i);
  }
  return try_attempts(state, group, task, request, attempts, options);
}


namespace {

// A (cluster, type)'s best node as try_attempts ranks it.
std::pair<Score, std::size_t> ranked(const CycleState& state, const Request& request, std::size_t node,
                                     const SelectOptions& options) {
  const LoadView& score_loads = options.score_loads ? *options.score_loads : *options.loads;
  return {score_node(options.policy, state.nodes()[node], score_loads.load(node), request, options.project,
                     score_loads.mode()),
          node};
}

}  // namespace

Selection select_any_single(const CycleState& state, const ResourceGroup& group, const Task& task,
                            const Request& request, const std::vector<CycleState::TypedBest>& best,
                            const SelectOptions& options) {
  std::vector<Attempt> attempts;
  attempts.reserve(best.size());
  for (const CycleState::TypedBest& b : best) {
    attempts.push_back(Attempt{b.cluster_rank, b.gpu_type, state.nodes()[b.node].cluster_id(), {},
                               ranked(state, request, b.node, options), true});
  }
  return try_attempts(state, group, task, request, attempts, options);
}

std::optional<std::size_t> any_single_node(const CycleState& state, const Request& request,
                                           const std::vector<CycleState::TypedBest>& best,
                                           const SelectOptions& options) {
  // try_attempts takes the attempts in this order, and with every type
  // admitted the first one places: its best node is the answer.
  std::optional<std::pair<Score, std::size_t>> first;
  for (const CycleState::TypedBest& b : best) {
    auto r = ranked(state, request, b.node, options);
    if (!first || r < *first) first = r;
  }
  if (!first) return std::nullopt;
  return first->second;
}

}  // namespace cp::sched
