#include "sched/scheduler.h"

#include <variant>

#include "sched/admission.h"
#include "sched/cycle_state.h"
#include "sched/feasible.h"
#include "sched/queue_order.h"
#include "sched/reasons.h"
#include "sched/request.h"
#include "sched/select.h"

namespace cp::sched {
namespace {

using Outcome = std::variant<Placement, std::vector<PendingReason>>;

// One task through the stages. The order, and why:
//   1. dependencies: a task whose upstream has not finished is not a
//      candidate at all; nothing else about it is worth saying yet.
//   2. request:      a malformed request cannot be judged by any later stage.
//   3. group:        quota and clusters both come from the resource group.
//   4. admission:    quota depends on the group alone, not on the fleet. It is
//                    cheap, and when both quota and capacity are short, quota
//                    is the answer a user can act on. ("gpu/any" is admitted
//                    in 7, once a type is chosen.)
//   5. clusters:     node reasons only mean something inside clusters the
//                    task may use; outages of other clusters are not its news.
//   6. nodes:        per-node filters, each node counted under its first
//                    failing one, so the reason adds up to the node total.
//   7. score+select: ranking among feasible nodes only; the gang goes whole
//                    into one cluster or not at all.
// Preemption (the next issue) slots in after 7 for a task that did not fit.
Outcome schedule_one(const CycleState& state, const QueuedTask& queued) {
  const Task& task = queued.task;

  if (!queued.unfinished_dependencies.empty()) {
    return std::vector{reasons::dependencies(queued.unfinished_dependencies)};
  }

  auto request = request_of(task);
  if (!request) return std::vector{reasons::invalid_request(request.error())};

  const ResourceGroup* group = state.group(task.resource_group);
  if (group == nullptr) return std::vector{reasons::unknown_group(task.resource_group)};

  auto refused = check_quota(*group, state.group_used(group->name), request->typed_part(), request->replicas);
  if (!refused.empty()) return refused;

  ClusterFeasibility clusters = feasible_clusters(state, *group, task);
  if (clusters.usable.empty()) {
    if (clusters.none) return std::vector{std::move(*clusters.none)};
    return std::move(clusters.offline);
  }

  NodeFeasibility nodes = feasible_nodes(state, clusters.usable, *group, *request);
  Selection selection;
  if (!nodes.fit.empty()) selection = select_gang(state, *group, task, *request, nodes.fit);
  if (selection.placement) return std::move(*selection.placement);

  std::vector<PendingReason> why = std::move(selection.quota);
  if (why.empty()) why.push_back(reasons::no_node(nodes.counts, *request, *group, clusters.usable));
  // Clusters that are down might have taken the task: say so too.
  for (auto& r : clusters.offline) why.push_back(std::move(r));
  return why;
}

}  // namespace

Plan decide(const Snapshot& snapshot, const std::vector<QueuedTask>& queue, Millis now) {
  return decide(snapshot, queue, now, PriorityOrder{});
}

Plan decide(const Snapshot& snapshot, const std::vector<QueuedTask>& queue, Millis now, const QueueOrder& order) {
  (void)now;  // v1 needs no time; preemption (a task's wait vs preempt_after_s) will.
  CycleState state(snapshot);
  Plan plan;
  for (const QueuedTask* queued : processing_order(queue, order)) {
    Outcome outcome = schedule_one(state, *queued);
    if (auto* placement = std::get_if<Placement>(&outcome)) {
      // Charged at once, so the tasks after this one see its quota and nodes taken.
      state.commit(queued->task.resource_group, *placement);
      plan.placements.push_back(std::move(*placement));
      continue;
    }
    // Head of line: v1 lets the tasks behind a blocked one try; they may be
    // smaller and fit. To keep a big gang from starving behind a stream of
    // small tasks, a reservation goes here: the blocked task's chosen nodes
    // charged to `state` like a placement, but not emitted in the plan.
    plan.pending.push_back(Pending{queued->task.id, std::get<std::vector<PendingReason>>(std::move(outcome))});
  }
  return plan;
}

}  // namespace cp::sched
