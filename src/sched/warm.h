// The scheduler kept warm between cycles: the snapshot indexed once, then
// changed by small deltas, so a cycle does not pay for reading the whole
// fleet again (10,000 nodes and 40,000 running attempts cost some 50 ms to
// index; one urgent task's preemption decision well under 1 ms).
//
//   Scheduler s(snapshot);                    built once (what decide() builds per call)
//   Plan p = s.decide(queue, now);            == decide(s.snapshot(), queue, now)
//   s.start(work); s.stopping(id); s.end(id); s.update_node(node);   deltas
//
// Still pure: no I/O, clock, locks or randomness; the same input and deltas
// give the same plans as decide() on the equivalent snapshot (tests/sched/
// warm_test.cpp, and bench/sched checks it on its own runs). A cycle's own
// changes (placements, holds, victims) are put back after it: they become
// part of the state only as deltas, once the server has applied the plan.
#pragma once

#include <cstddef>
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "sched/scheduler.h"

namespace cp::sched {

class CycleState;
class QueueOrder;

class Scheduler {
 public:
  explicit Scheduler(Snapshot snapshot);
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // One cycle on the kept state, with the order of the snapshot's config.
  Plan decide(const std::vector<QueuedTask>& queue, Millis now);
  Plan decide(const std::vector<QueuedTask>& queue, Millis now, const QueueOrder& order);

  // Deltas. Work with an attempt id already known replaces it.
  void start(RunningWork work);
  // Told to stop (preempted, cancelled): never a victim again. False: unknown id.
  bool stopping(std::string_view attempt_id);
  // Gone: what it held is free. False: unknown id.
  bool end(std::string_view attempt_id);
  // A node changed, or is new. A change to its GPU types (or a new node)
  // builds the state again; anything else updates the node alone.
  void update_node(Node node);
  // False: no such node.
  bool remove_node(std::string_view cluster_id, std::string_view name);

  // The input the state stands for now: decide() on it gives the same plans.
  Snapshot snapshot() const;
  // Whole builds so far (the first included): node set or GPU type changes,
  // and every so often to drop the memory of work that ended.
  std::size_t builds() const { return builds_; }

 private:
  void build();

  Snapshot meta_;  // clusters, groups, classes, config; nodes and running live below
  // Every node and work handed in stays where it is until the next build:
  // the state's indexes hold views of their strings.
  std::deque<Node> node_store_;
  std::vector<const Node*> nodes_;  // the live ones, in input order
  std::deque<RunningWork> work_store_;
  struct Live {
    RunningWork* work;
    std::size_t index;  // in the state (CycleState::running)
  };
  std::unordered_map<std::string_view, Live> live_;  // by attempt id (views of the works' ids)
  std::size_t retired_ = 0;  // stored nodes and works no longer live
  std::size_t builds_ = 0;
  std::unique_ptr<CycleState> state_;
};

}  // namespace cp::sched
