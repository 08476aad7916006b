// Stage 4b, selection: place every replica of the task (a gang) in one
// cluster, or none. Clusters are tried in the order of their best-ranked
// node, so a one-replica task lands on the best node of all; within a
// cluster, replicas are placed one by one on the best node left (a node may
// take several). A cluster that cannot take them all is released whole.
#pragma once

#include <optional>
#include <vector>

#include "sched/cycle_state.h"
#include "sched/request.h"

namespace cp::sched {

struct Selection {
  std::optional<Placement> placement;
  // For "gpu/any": GPU types that had room in some cluster but not in the
  // group's quota (one reason per type). Empty otherwise.
  Reasons quota;
  bool quota_refused = false;  // some type was refused by quota (the reasons only when explaining)
};

struct SelectOptions {
  const LoadView* loads = nullptr;        // what fits: the cycle's loads or an overlay
  const LoadView* score_loads = nullptr;  // what ranks nodes (nullptr: `loads`)
  PlacementPolicy policy = PlacementPolicy::binpack;
  bool may_borrow = true;  // for the quota of "gpu/any", known only here
  bool count_held = true;
  bool explain = true;  // false: Selection::quota stays empty (quota_refused still says)
  ProjectId project = kNoProject;  // the task's (CycleState::project), for anti-affinity
};

// One replica on `node` (the best node for it): the placement select_gang
// makes for a one-replica task of one GPU type, or none.
Placement place_on(const CycleState& state, const Task& task, const Request& request, std::size_t node,
                   const LoadView& loads);

// `fit`: the nodes that passed feasibility for one replica (ascending index).
Selection select_gang(const CycleState& state, const ResourceGroup& group, const Task& task, const Request& request,
                      const std::vector<std::size_t>& fit, const SelectOptions& options);

// The same for one replica of "gpu/any" from the best node of each
// (cluster, GPU type) alone (CycleState::best_single_per_type), which is all
// select_gang reads of `fit` for such a request.
Selection select_any_single(const CycleState& state, const ResourceGroup& group, const Task& task,
                            const Request& request, const std::vector<CycleState::TypedBest>& best,
                            const SelectOptions& options);

// The node select_any_single places on when quota admits every type of
// `best` (a walk filtered by quota, as Want::kNode asks), without a
// placement; nullopt when `best` is empty.
std::optional<std::size_t> any_single_node(const CycleState& state, const Request& request,
                                           const std::vector<CycleState::TypedBest>& best,
                                           const SelectOptions& options);

}  // namespace cp::sched
