#include "sched/fit.h"

#include "sched/reasons.h"
#include "sched/select.h"

namespace cp::sched {

Fit fit_shape(const CycleState& state, const LoadView& loads, const TaskContext& c, const Request& request,
              bool count_held, const std::vector<std::string>* clusters, Want want) {
  const bool explain = want == Want::kReasons;
  Fit out;
  const ResourceGroup& group = *c.group;
  std::optional<Resources> without_any;
  const Resources& typed = request.typed(without_any);
  std::vector<Reasons::Shared> refused;  // to explain: why quota says no
  if (!state.quota().admits(group, typed, request.replicas, c.may_borrow, count_held, explain ? &refused : nullptr)) {
    for (auto& r : refused) out.reasons.add(std::move(r));
    out.blocked = Blocked::kQuota;
    return out;
  }
  const auto& usable = clusters ? *clusters : c.clusters->usable;
  // As ranks: kept with the task's own clusters, else worked out here.
  const std::optional<CycleState::ClusterRanks>& kept = c.clusters->usable_ranks;
  std::optional<CycleState::ClusterRanks> asked;
  if (clusters || !kept) asked = state.ranks_of(usable);
  const CycleState::ClusterRanks& ranks = asked ? *asked : *kept;
  Selection selection;
  // One replica of one type, on the cycle's loads (with or without holds,
  // or an overlay of them): the best node straight from the free order.
  // Otherwise, first only where it can fit (from the free order too, where
  // it applies); every node, counted per cause, only to explain a failure.
  CycleState::Best best = state.best_single(loads, ranks, group, request, c.project, group.placement);
  if (best.applies) {
    out.no_node_fits = !best.node;
    if (best.node && want == Want::kNode) {
      out.node = best.node;
      return out;
    }
    if (best.node) selection.placement = place_on(state, *c.task, request, *best.node, loads);
  } else {
    SelectOptions options;
    options.loads = &loads;
    options.policy = group.placement;
    options.may_borrow = c.may_borrow;
    options.count_held = count_held;
    options.explain = explain;
    options.project = c.project;
    // One replica of gpu/any: each (cluster, type)'s best node, from the free order.
    // Asked only whether and where: a type quota refuses can give no
    // placement (select_any_single would pass over its nodes), so its
    // nodes are not walked. Quota admitted the rest of the request above,
    // so the type's GPUs decide.
    std::string gpu_name(kGpuPrefix);
    auto type_ok = [&](std::string_view type) {
      gpu_name.resize(kGpuPrefix.size());
      gpu_name += type;
      return state.quota().fits(group, gpu_name, request.gpus, request.replicas, c.may_borrow, count_held);
    };
    const bool where_only = want == Want::kPlacement || want == Want::kNode;
    const CycleState::TypeFilter filter = where_only ? CycleState::TypeFilter(type_ok) : CycleState::TypeFilter();
    if (auto best =
            state.best_single_per_type(loads, ranks, group, request, c.project, group.placement, filter)) {
      out.no_node_fits = best->empty();
      if (!best->empty() && want == Want::kNode) {
        // Every type the walk offered is admitted (the filter above): the
        // first attempt places, so its node is the answer.
        out.node = any_single_node(state, request, *best, options);
        return out;
      }
      if (!best->empty()) selection = select_any_single(state, group, *c.task, request, *best, options);
    } else {
      std::vector<std::size_t> fit;
      if (auto ordered = state.fitting_nodes(loads, ranks, group, request)) {
        fit = std::move(*ordered);
      } else {
        fit = std::move(feasible_nodes(state, loads, usable, group, request, false).fit);
      }
      out.no_node_fits = fit.empty();
      if (!fit.empty()) selection = select_gang(state, group, *c.task, request, fit, options);
    }
  }
  if (selection.placement) {
    Placement& p = *selection.placement;
    p.borrowing = state.quota().borrows(group, p.per_replica, static_cast<int>(p.placements.size()));
    out.placement = std::move(selection.placement);
    return out;
  }
  if (selection.quota_refused) {
    out.reasons = std::move(selection.quota);
    out.blocked = Blocked::kQuota;
    return out;
  }
  if (explain) {
    NodeFeasibility counted = feasible_nodes(state, loads, usable, group, request, true);
    out.reasons.add(reasons::no_node(counted.counts, request, group, usable));
  }
  out.blocked = Blocked::kCapacity;
  return out;
}

bool quota_admits_without(CycleState& state, const TaskContext& c, const Request& request,
                          std::span<const std::size_t> works) {
  for (std::size_t w : works) state.take_out_quota(w);
  std::optional<Resources> without_any;
  const Resources& typed = request.typed(without_any);
  const bool admits = state.quota().fits(*c.group, typed, request.replicas, c.may_borrow, true);
  for (std::size_t w : works) state.put_back_quota(w);
  return admits;
}

Fit fit_shapes(const CycleState& state, const LoadView& loads, const TaskContext& c, bool count_held, Want want) {
  Fit first;
  for (std::size_t i = 0; i < c.shapes.size(); ++i) {
    Fit f = fit_shape(state, loads, c, c.shapes[i], count_held, nullptr, want);
    if (f.found()) return f;
    if (i == 0) {
      first = std::move(f);
      continue;
    }
    for (const PendingReason& r : f.reasons) first.reasons.add(reasons::for_shape(r, c.shapes[i].shape));
  }
  return first;
}

}  // namespace cp::sched
