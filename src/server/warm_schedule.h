// The scheduler's indexed state kept between cycles (sched::Scheduler,
// sched/warm.h), fed by what the live work read again (live_work.h).
//
// A cycle used to hand decide() a whole Snapshot: every active attempt
// turned into a RunningWork, sorted, and indexed again by the scheduler
// (CycleState), so its cost grew with the work running, not with what
// changed. Now:
//
//   live_work_.refresh()  ──► rows read again (LiveWork::take_touched)
//   sync(meta, live)      ──► Scheduler deltas: start / end per attempt whose
//                             attempt or task row changed; update_node /
//                             remove_node per node whose document changed
//   Scheduler::decide()   ──► the plan, as decide() on the same snapshot
//
// It is built again from everything when the live work was read whole (first
// cycle, a journal that dropped ids, the 5-minute safety read), or when the
// clusters, resource groups, priority classes or the scheduler's knobs
// differ from those it was built with (rare, and each can change what every
// running work means to the scheduler, e.g. whether it is preemptible).
//
// Pure bookkeeping, no I/O: the caller reads the store. Not thread-safe: used
// under the scheduler's lock.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "model/types.h"
#include "sched/scheduler.h"
#include "sched/warm.h"
#include "server/fleet_nodes.h"
#include "server/live_work.h"

namespace cp {

// What the scheduler knows of an active attempt: its amounts and nodes, and
// from its task (when the task is live) group, user, priority, checkpoint,
// whether its class may be preempted, and whether it is told to stop.
sched::RunningWork running_work_of(const Attempt& a, const LiveWork& live,
                                   const std::map<std::string, bool>& preemptible);

// Priority class name -> may be preempted.
std::map<std::string, bool> preemptible_classes(const std::vector<PriorityClass>& classes);

// The fleet's nodes as the scheduling cycle reads them, decoded and kept per
// cluster. A cluster's nodes are read again only after a commit wrote them
// (FleetNodes::changed; the cycle takes FleetNodes::marks() before its read
// transaction opens, and fleet_nodes.h says why that never keeps stale
// rows), and every cluster every kFullReadEveryMs, for rows written behind
// this process's back. Decoding every node at every cycle was most of a
// cycle's read at 2,000 nodes (about 17 us a node).
class SchedulerNodes {
 public:
  static constexpr Millis kFullReadEveryMs = 5 * 60 * 1000;

  // Brings the kept nodes up to date for `clusters` (as listed in `tx`).
  Status refresh(Tx& tx, const FleetNodes::Marks& marks, const std::vector<Cluster>& clusters, Millis now);
  // The clusters whose nodes were read again or dropped since the last call
  // (kept until taken, so that a cycle that fails after its read loses none).
  std::set<std::string> take_changed() { return std::exchange(changed_, {}); }
  // Every kept node, by cluster id, then as the store lists them.
  std::vector<Node> all() const;
  // A cluster's nodes; empty when it has none or is not kept.
  const std::vector<Node>& of(const std::string& cluster) const;

 private:
  struct Entry {
    std::uint64_t gen = 0;
    std::vector<Node> nodes;
  };
  std::map<std::string, Entry, std::less<>> clusters_;
  std::set<std::string> changed_;
  bool loaded_ = false;
  Millis full_at_ = 0;
};

class WarmSchedule {
 public:
  // Brings the kept scheduler in line with `meta` (clusters, groups, classes
  // and config as read this cycle; its nodes and running are ignored), the
  // nodes of the clusters that `nodes` read again, and the rows `live` read
  // again, each since the last call; returns it.
  sched::Scheduler& sync(sched::Snapshot meta, SchedulerNodes& nodes, LiveWork& live);

  // What the kept state and the live work disagree on ("" when nothing):
  // the running work by attempt id, field by field, and the nodes. For the
  // tests and ServerConfig::verify_warm_scheduler.
  std::string differences(const sched::Snapshot& meta, const LiveWork& live) const;

  // Drops the kept state: the next sync() builds it from everything.
  void reset() { sched_.reset(); }

  struct Stats {
    std::int64_t builds = 0;       // from everything
    std::int64_t work_deltas = 0;  // start / end handed to the scheduler
    std::int64_t node_deltas = 0;  // update_node / remove_node
  };
  const Stats& stats() const { return stats_; }

 private:
  void build(sched::Snapshot meta, const SchedulerNodes& nodes, const LiveWork& live);
  void sync_nodes(const std::string& cluster, const std::vector<Node>& nodes);
  void sync_work(const std::string& attempt_id, const LiveWork& live);

  std::unique_ptr<sched::Scheduler> sched_;
  std::string meta_key_;                                     // clusters, groups, classes, config
  std::map<std::string, bool> preemptible_;                  // of the classes it was built with
  // cluster -> node name -> its document (what the scheduler reads of it)
  std::unordered_map<std::string, std::unordered_map<std::string, std::string>> node_docs_;
  std::unordered_map<std::string, sched::RunningWork> works_;  // attempt id -> as handed in
  std::unordered_map<std::string, std::vector<std::string>> attempts_of_task_;
  Stats stats_;
};

}  // namespace cp
