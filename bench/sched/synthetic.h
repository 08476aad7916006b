// A synthetic fleet and queue for the scheduler benchmark, drawn from a
// seeded PRNG so that two runs with the same flags schedule the same input.
//
//   Fleet fleet(shape, rng);                     clusters, nodes, groups, classes
//   fleet.snapshot.running = fleet.occupy(...);  work already holding a share
//   auto queue = fleet.tasks(100000, now, rng);  mixed shapes, queued over an hour
//
// Everything here is built against sched/scheduler.h and model/ only, so the
// benchmark does not depend on how the scheduler is arranged inside.
#pragma once

#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "sched/scheduler.h"

namespace cp::bench {

// 2026-01-01T00:00:00Z, the cycle's `now` before any simulated time passes.
inline constexpr Millis kNow = 1'767'225'600'000;

struct FleetShape {
  int nodes = 10000;
  int clusters = 64;
  int groups = 500;
  int project_groups = 200;
};

// A kind of node: GPU type ("" for CPU-only), GPUs, cpu cores, memory GiB.
struct NodeKind {
  std::string gpu_type;
  int gpus = 0;
  int cpu = 0;
  int memory_gi = 0;
  int weight = 0;  // share of the fleet, percent
};

// The priority classes of the benchmark, by name.
inline constexpr std::string_view kInference = "inference-high";  // 1000, never preempted
inline constexpr std::string_view kUrgent = "urgent";             // 500, preempts after 600 s
inline constexpr std::string_view kBatch = "batch";               // 100, preemptible

// How occupy() fills nodes.
enum class Fill {
  // Each node to a fraction drawn from U(0.2, 1.0) (60% of the fleet on
  // average), by work of several groups, of every priority class.
  kPartial,
  // Every node to the last GPU (CPU-only nodes to the last core), each node
  // by one group's work, mostly batch: a fleet where nothing new fits
  // without preemption.
  kFull,
};

class Fleet {
 public:
  Fleet(const FleetShape& shape, std::mt19937_64& rng);

  // Running work on the fleet's nodes, charged to groups that use the node's
  // cluster (one whose quota still has room for it where there is one).
  std::vector<sched::RunningWork> occupy(Fill fill, Millis now, std::mt19937_64& rng);

  // Raises each group's guarantee to what `running` holds of it plus
  // `headroom` GPUs of each type, so that admission lets a new task through
  // and only the fleet being full stands in its way.
  void make_room_in_quota(const std::vector<sched::RunningWork>& running, std::int64_t headroom);

  // `n` queued tasks of mixed shapes and classes, queued over the `spread`
  // before `now`; ids continue from the previous call.
  std::vector<sched::QueuedTask> tasks(int n, Millis now, Millis spread, std::mt19937_64& rng);

  // One urgent task that must preempt to fit into the full fleet (kFull):
  // GPUs of the type of a node whose owner group is the task's, queued long
  // enough ago to be allowed to preempt.
  sched::QueuedTask urgent_preemptor(Millis now, std::mt19937_64& rng);

  // One RunningWork for a placement of `task` (what the server would make of it).
  sched::RunningWork running_from(const sched::QueuedTask& task, const sched::Placement& placement, Millis now) const;

  sched::Snapshot snapshot;

 private:
  struct NodeInfo {  // what the generator knows of a node beyond cp::Node
    int kind = 0;
    int cluster = 0;
    int owner = -1;  // kFull: the one group whose work fills it
  };

  const NodeKind& kind_of(int node) const;
  std::string gpu_resource(int kind) const;
  int group_for(int cluster, const Resources& piece, std::mt19937_64& rng);
  std::string project_group_of(int group, std::mt19937_64& rng) const;
  sched::RunningWork piece(int node, int group, std::string_view priority_class, const Resources& per_replica,
                           std::vector<int> gpu_indices, Millis now, std::mt19937_64& rng);
  Resources gpu_share(int node, int gpus) const;
  sched::QueuedTask task(Millis queued_at, std::mt19937_64& rng);
  void set_class(Task& t, std::string_view priority_class) const;

  FleetShape shape_;
  std::vector<NodeKind> kinds_;
  std::vector<NodeInfo> nodes_;
  std::vector<std::string> regions_;                 // per cluster
  std::vector<std::vector<int>> cluster_groups_;     // groups that use the cluster
  std::vector<std::vector<int>> group_clusters_;     // the group's clusters
  std::vector<std::vector<int>> project_groups_;     // resource groups of each project group
  std::vector<std::vector<int>> group_projects_;     // project groups of each resource group
  std::vector<std::vector<int>> owned_gpu_nodes_;    // kFull: GPU nodes owned, per group
  std::vector<std::map<std::string, std::int64_t>> held_;  // per group: what occupy() charged it
  std::int64_t next_task_ = 0;
  std::int64_t next_running_ = 0;
};

}  // namespace cp::bench
