// One task against one view of the fleet: quota, nodes, gang selection,
// every open shape in order. decide() uses it on the cycle's own loads; the
// what-if questions (without reservations, with stopping work gone, without
// some victims, drained) ask it again on an overlay.
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <boost/container/small_vector.hpp>

#include "sched/cycle_state.h"
#include "sched/feasible.h"
#include "sched/request.h"

namespace cp::sched {

// What one task brings to the cycle, worked out once.
struct TaskContext {
  const QueuedTask* queued = nullptr;
  const Task* task = nullptr;
  const ResourceGroup* group = nullptr;
  const PriorityClass* priority_class = nullptr;  // nullptr: unknown class (defaults apply)
  bool may_borrow = true;  // its class is preemptible: borrowed capacity can be taken back
  Millis waited_ms = 0;    // in the queue, now - queued_at
  ProjectId project = kNoProject;  // the task's project group, as the cycle numbers it
  // Shared by the tasks of a group that neither pin a cluster, select
  // clusters nor are bound to a storage pool: theirs depend on the group alone.
  std::shared_ptr<const ClusterFeasibility> clusters;
  // The shapes open now, primary first: nearly always one or two, kept in
  // place (no allocation per task).
  boost::container::small_vector<Request, 2> shapes;
};

enum class Blocked { kNo, kQuota, kCapacity };

struct Fit {
  std::optional<Placement> placement;
  // Asked for Want::kNode: the node of a one-replica fit found in the free
  // order, in place of its placement (none built).
  std::optional<std::size_t> node;
  Reasons reasons;
  Blocked blocked = Blocked::kNo;  // of the primary shape
  // It fits: a placement, or (Want::kNode) the node of one.
  bool found() const { return placement.has_value() || node.has_value(); }
  // Quota admitted it, and no node of the clusters looked at could take even
  // one replica (fit_shape only).
  bool no_node_fits = false;
};

// What a caller reads of a Fit. The what-if questions ask many times and
// need no words:
//   kNode       as kPlacement, but a one replica fit from the free order
//               gives only its node (Fit::node), no Placement;
//   kPlacement  whether and where it fits, nothing more (blocked and
//               no_node_fits are not worked out the same way: not to be read);
//   kWhyNot     also blocked and no_node_fits (the victim search);
//   kReasons    also the reasons, in words.
enum class Want { kNode, kPlacement, kWhyNot, kReasons };

// One shape. `clusters` narrows the usable clusters (nullptr: all of them).
Fit fit_shape(const CycleState& state, const LoadView& loads, const TaskContext& c, const Request& request,
              bool count_held, const std::vector<std::string>* clusters = nullptr, Want want = Want::kReasons);

// Whether quota admits `request` as fit_shape asks it first (holds counted)
// once every work of `works` is gone. Leaves the quota book as it found it.
// Quota only gains as work goes, so where this says no, no subset of
// `works` gone makes the request fit.
bool quota_admits_without(CycleState& state, const TaskContext& c, const Request& request,
                          std::span<const std::size_t> works);

// Every open shape in order; the first that fits wins. Reasons of fallback
// shapes are kept after the primary's, marked with their shape.
Fit fit_shapes(const CycleState& state, const LoadView& loads, const TaskContext& c, bool count_held,
               Want want = Want::kReasons);

}  // namespace cp::sched
