// A scheduler harness (Nomad's scheduler/testing.go, in small): build a
// fleet, resource groups and a queue from short strings, run one cycle, and
// assert on the plan.
//
//   fleet.cluster("c1").node("n1", "cpu:64,memory:256Gi,gpu/nvidia-a100-80gb:8", {{"gpu-type", "nvidia-a100-80gb"}});
//   group("rg-b", "gpu/nvidia-a100-80gb:16,cpu:128", {"c1"});
//   queue.task("t1", "rg-b", "gpu/nvidia-a100-80gb:2", /*replicas*/ 1, /*priority*/ 100);
//   Plan plan = run();
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <vector>

#include "sched/scheduler.h"

namespace cp::sched::testing {

inline constexpr Millis kT0 = 1'767'225'600'000;  // 2026-01-01T00:00:00Z
inline constexpr std::string_view kA100 = "gpu/nvidia-a100-80gb";
inline constexpr std::string_view kH100 = "gpu/nvidia-h100-80gb";

// "cpu:2,memory:4Gi,gpu/x:8" -> Resources; CHECKs on bad input (test code).
Resources res(std::string_view spec);

class Fleet;

// Adds to one cluster of a Fleet. Holds an index, not a reference, so it
// stays valid while the fleet grows.
class ClusterBuilder {
 public:
  ClusterBuilder(Fleet& fleet, std::size_t index) : fleet_(&fleet), index_(index) {}
  // A Ready node with `resources` as capacity and allocatable.
  ClusterBuilder& node(const std::string& name, std::string_view resources, Labels labels = {});
  // GPU devices on the node added last (model and indices).
  ClusterBuilder& devices(const std::string& model, const std::vector<int>& indices);
  ClusterBuilder& labels(Labels labels);
  ClusterBuilder& storage_pool(const std::string& pool);
  ClusterBuilder& state(ClusterState state, const std::string& reason, const std::string& message = "");
  Cluster& get();

 private:
  Fleet* fleet_;
  std::size_t index_;
};

class Fleet {
 public:
  // The cluster with this id, created online on first use.
  ClusterBuilder cluster(const std::string& id, Labels labels = {});
  // A node added before, to change (ready, maintenance, label_overrides ...).
  Node& node(std::string_view cluster, std::string_view name);
  // Quota spec as Resources, but an explicit 0 ("gpu/x:0") is kept as a key.
  // The reference (like running()'s) is good until the next group() call.
  ResourceGroup& group(const std::string& name, std::string_view quota, std::vector<std::string> clusters,
                       PlacementPolicy placement = PlacementPolicy::binpack);
  // A resource group's ceiling for one resource (borrowing), and its cohort.
  void borrow(const std::string& group, const std::string& resource, std::string_view max, const std::string& cohort);
  // batch (100, preemptible), urgent (1000, may preempt after `urgent_after_s`,
  // not preemptible), inference-high (2000, never preempted, never preempts).
  void priority_classes(std::int64_t urgent_after_s = 600);
  // Work holding resources: one placement per replica, as {node, gpu indices}.
  RunningWork& running(const std::string& task_id, const std::string& group, const std::string& cluster,
                       std::string_view per_replica, std::vector<ReplicaPlacement> placements);

  Snapshot snapshot;
};

// Changes one task of a Queue. Holds an index, not a reference.
class TaskBuilder {
 public:
  TaskBuilder(std::vector<QueuedTask>& tasks, std::size_t index) : tasks_(&tasks), index_(index) {}
  TaskBuilder& queued_at(Millis t);
  TaskBuilder& created_at(Millis t);
  TaskBuilder& pinned(const std::string& cluster);
  // Bound to a storage pool, as after a loss (Task::storage_pool).
  TaskBuilder& storage_pool(const std::string& pool);
  TaskBuilder& cluster_selector(Labels selector);
  TaskBuilder& waiting_for(std::vector<std::string> task_ids);
  // The class's name and value (see Fleet::priority_classes).
  TaskBuilder& priority_class(const std::string& name, int value);
  TaskBuilder& owner(const std::string& project_group, const std::string& user);
  // An alternative shape tried after `after_s` in the queue.
  TaskBuilder& fallback(std::int64_t after_s, std::string_view per_replica);
  Task& get();

 private:
  std::vector<QueuedTask>* tasks_;
  std::size_t index_;
};

class Queue {
 public:
  // Queued and created at kT0 unless changed.
  TaskBuilder task(const std::string& id, const std::string& group, std::string_view per_replica, int replicas = 1,
                   int priority = 0);
  std::vector<QueuedTask> tasks;
};

// Lookups in a plan; nullptr when absent. They point into the plan, so a
// temporary plan (run()) is refused: keep it in a variable first.
const Placement* placement_of(const Plan& plan, std::string_view task_id);
const Pending* pending_of(const Plan& plan, std::string_view task_id);
const Placement* placement_of(Plan&& plan, std::string_view task_id) = delete;
const Pending* pending_of(Plan&& plan, std::string_view task_id) = delete;
// Ids of the placed tasks, in plan order.
std::vector<std::string> placed(const Plan& plan);
// The code of the task's first pending reason, or "(placed)" / "(absent)".
std::string reason_code(const Plan& plan, std::string_view task_id);
// The task's first pending reason; fails the test when there is none.
const PendingReason& reason(const Plan& plan, std::string_view task_id);
const PendingReason& reason(Plan&& plan, std::string_view task_id) = delete;
// The nodes of a placement, by replica: {"n1", "n1", "n2"}.
std::vector<std::string> nodes_of(const Plan& plan, std::string_view task_id);
// Every field of the plan as text, for comparing whole plans.
std::string describe(const Plan& plan);

// A fixture with an empty fleet and queue.
class SchedTest : public ::testing::Test {
 protected:
  ResourceGroup& group(const std::string& name, std::string_view quota, std::vector<std::string> clusters,
                       PlacementPolicy placement = PlacementPolicy::binpack) {
    return fleet.group(name, quota, std::move(clusters), placement);
  }
  Plan run(Millis now = kT0) { return decide(fleet.snapshot, queue.tasks, now); }

  Fleet fleet;
  Queue queue;
};

}  // namespace cp::sched::testing
