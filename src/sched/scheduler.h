// The scheduler: plan = decide(snapshot, queue, now). Pure: no I/O, no clock
// reads, no locks, no randomness. The server builds the Snapshot from the
// store, calls decide(), and applies the Plan in one transaction, re-checking
// it there (Nomad's Planner / plan_apply split).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "common/clock.h"
#include "model/types.h"

namespace cp::sched {

// Work that holds resources now (an attempt Dispatched/Running/Stopping).
struct RunningWork {
  std::string task_id;
  std::string attempt_id;
  std::string resource_group;
  std::string project_group;
  std::string cluster_id;
  int priority = 0;
  bool preemptible = true;
  Resources per_replica;  // gpu entries name the concrete type placed on
  std::vector<ReplicaPlacement> placements;
  Millis started_at = 0;
};

struct Snapshot {
  std::vector<Cluster> clusters;
  std::vector<Node> nodes;
  std::vector<ResourceGroup> resource_groups;
  std::vector<PriorityClass> priority_classes;
  std::vector<RunningWork> running;
};

// A task waiting in the queue, with what the scheduler needs to know about it.
struct QueuedTask {
  Task task;
  // Tasks this one depends on that have not Succeeded yet ("" when none).
  std::vector<std::string> unfinished_dependencies;
};

struct Placement {
  std::string task_id;
  std::string cluster_id;
  std::vector<ReplicaPlacement> placements;  // one per replica
  // Per replica, with a step's bare "gpu" request resolved to "gpu/<type>" of
  // the chosen nodes: this is what quota is charged.
  Resources per_replica;
};

struct Pending {
  std::string task_id;
  std::vector<PendingReason> reasons;  // at least one
};

struct Plan {
  std::vector<Placement> placements;
  std::vector<Pending> pending;
};

// Reason codes (PendingReason::code).
inline constexpr std::string_view kReasonQuota = "quota_exceeded";
inline constexpr std::string_view kReasonNoNode = "no_matching_node";
inline constexpr std::string_view kReasonClusterOffline = "cluster_offline";
inline constexpr std::string_view kReasonNoCluster = "no_cluster";
inline constexpr std::string_view kReasonDependencies = "waiting_for_dependencies";
inline constexpr std::string_view kReasonUnknownGroup = "unknown_resource_group";
// The task's own request is unusable (replicas out of range, negative amounts,
// two GPU types); validation at submit should make this unreachable.
inline constexpr std::string_view kReasonInvalidRequest = "invalid_request";

// A step's GPU count without a type: any GPU node will do, and the plan names
// the concrete type placed on (Placement::per_replica).
inline constexpr std::string_view kGpuAny = "gpu/any";

class QueueOrder;  // queue_order.h

// One scheduling cycle with the default order (priority, submit time, id).
Plan decide(const Snapshot& snapshot, const std::vector<QueuedTask>& queue, Millis now);
// The same with the order within each resource group supplied (fair share).
Plan decide(const Snapshot& snapshot, const std::vector<QueuedTask>& queue, Millis now, const QueueOrder& order);

}  // namespace cp::sched
