// Preemption: a task that does not fit, and may take room from others, picks
// the cheapest set of running work to stop.
//
// Who may be a victim (never work whose class is not preemptible, never work
// already stopping):
//   reclaim   work of another group of the task's cohort that holds capacity
//             above its own guarantee, when the task itself stays within its
//             group's guarantee: borrowed capacity goes back to its lender,
//             whatever the priorities;
//   priority  work of lower priority, when the task's class may preempt and
//             the task has waited at least the class's preempt_after.
// Order (cheapest first): reclaim before priority, lowest priority, work that
// keeps a checkpoint, the latest started (least work lost), attempt id.
// Victims are added in that order until the task fits; then a last pass, most
// expensive first, puts back every victim the task fits without. A task
// short of nodes whose max_victims cheapest victims free no node (they lie
// on many) is then placed node by node: on each node, its own candidates
// cheapest first until a replica fits there (a gang: a cluster's best
// `replicas` such nodes); the choice whose costliest victim is cheapest wins. When the task
// is short of quota rather than of nodes, only work that frees its quota (its
// own group, or its cohort) can help, and only that is considered.
#pragma once

#include <optional>
#include <vector>

#include "sched/fit.h"

namespace cp::sched {

struct Victim {
  std::size_t work = 0;  // index into CycleState::running()
  bool reclaim = false;
};

struct VictimSet {
  std::vector<Victim> victims;
  Placement placement;  // where the task goes once they are gone
};

// Whether the task may reclaim (it stays within its guarantee and has a
// cohort) and whether it may preempt by priority now.
bool may_reclaim(const CycleState& state, const TaskContext& c);
bool may_preempt_now(const TaskContext& c);

// The victims for the first open shape that some set makes fit, or nullopt.
std::optional<VictimSet> find_victims(CycleState& state, const TaskContext& c, Blocked blocked, int max_victims);

}  // namespace cp::sched
