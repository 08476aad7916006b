#include "sched/select.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <utility>

#include "sched/admission.h"
#include "sched/feasible.h"
#include "sched/rank.h"

namespace cp::sched {
namespace {

// Where one gang attempt may go: a cluster, and for "gpu/any" one GPU type in
// it (a gang's replicas share one per_replica, so one type).
using AttemptKey = std::pair<std::string, std::string>;

AttemptKey key_of(const NodeView& node, const Request& request) {
  return {node.cluster_id(), request.any_gpu() ? node.gpu_type : std::string()};
}

// Places all replicas on `nodes` (one attempt's nodes) or returns nullopt.
// Works on copies of the nodes' loads, so a failed attempt leaves no trace.
std::optional<std::vector<ReplicaPlacement>> place_replicas(const CycleState& state, const ResourceGroup& group,
                                                            const Request& request, const Resources& per_replica,
                                                            const std::vector<std::size_t>& nodes) {
  std::map<std::size_t, NodeLoad> loads;
  for (std::size_t i : nodes) loads.emplace(i, state.load(i));

  std::vector<ReplicaPlacement> out;
  for (int replica = 0; replica < request.replicas; ++replica) {
    std::optional<std::size_t> best;
    Score best_score{};
    for (std::size_t i : nodes) {  // ascending (cluster id, name): the first best wins ties
      const NodeView& node = state.nodes()[i];
      if (node_misfit(node, loads[i], group, request)) continue;
      Score s = score_node(group.placement, node, loads[i], request);
      if (!best || s < best_score) {
        best = i;
        best_score = s;
      }
    }
    if (!best) return std::nullopt;
    const NodeView& node = state.nodes()[*best];
    std::vector<int> gpus = lowest_free_gpus(node, loads[*best], request.gpus);
    loads[*best].add(per_replica, gpus);
    out.push_back(ReplicaPlacement{replica, node.name(), std::move(gpus)});
  }
  return out;
}

}  // namespace

Selection select_gang(const CycleState& state, const ResourceGroup& group, const Task& task, const Request& request,
                      const std::vector<std::size_t>& fit) {
  // Rank every feasible node once, as it stands before this task.
  std::vector<std::pair<Score, std::size_t>> ranked;
  ranked.reserve(fit.size());
  for (std::size_t i : fit) {
    ranked.emplace_back(score_node(group.placement, state.nodes()[i], state.load(i), request), i);
  }
  std::sort(ranked.begin(), ranked.end());

  // Attempts in the order of their best node; each with its nodes.
  std::vector<AttemptKey> order;
  std::map<AttemptKey, std::vector<std::size_t>> members;
  for (const auto& [score, i] : ranked) {
    AttemptKey key = key_of(state.nodes()[i], request);
    auto [it, added] = members.try_emplace(key);
    if (added) order.push_back(key);
    it->second.push_back(i);
  }

  Selection out;
  std::set<std::string> quota_reported;
  for (const auto& key : order) {
    auto& nodes = members[key];
    std::sort(nodes.begin(), nodes.end());
    Resources per_replica = request.any_gpu() ? request.resolved(key.second) : request.per_replica;
    auto placed = place_replicas(state, group, request, per_replica, nodes);
    if (!placed) continue;
    if (request.any_gpu()) {
      // Admission of a bare GPU count waits until here: only now is the type
      // (and so the quota entry it is charged to) known.
      auto refused = check_quota(group, state.group_used(group.name), per_replica, request.replicas);
      if (!refused.empty()) {
        for (auto& r : refused) {
          if (quota_reported.insert(r.details["resource"].as_string().c_str()).second) {
            out.quota.push_back(std::move(r));
          }
        }
        continue;
      }
    }
    out.placement = Placement{task.id, key.first, std::move(*placed), std::move(per_replica)};
    return out;
  }
  return out;
}

}  // namespace cp::sched
