// What is held right now according to the store, for re-checking a plan
// inside the write transaction that applies it (Nomad's plan_apply: the plan
// was made on a snapshot; the store may have moved on since).
//
// The placement's cluster must still be in the storage pool the task is
// bound to (Task::storage_pool; a cluster's pool can be changed meanwhile).
//
// Two books, both charged with every active attempt (Dispatched, Running,
// Stopping: a victim in its grace still holds what it was given):
//   quota  per resource group, with sched::QuotaBook, the one rule decide()
//          applied (guarantee, borrowing up to the ceiling within the cohort)
//   nodes  per node: resources and GPU indices, against the node's current
//          allocatable (a node that shrank or went away since the snapshot)
// An accepted placement is charged at once, so the next one of the same plan
// sees it.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "sched/admission.h"
#include "sched/scheduler.h"
#include "sched/tally.h"
#include "server/live_work.h"
#include "store/store.h"

namespace cp::internal {

class Holdings {
 public:
  // Reads groups, priority classes and clusters in `tx`, and the nodes that
  // `placements` use (only those: recheck() says any other node is gone),
  // and charges the active attempts of `live`, brought up to date in `tx`
  // (live_work.h): each to its task's resource group, and to those nodes.
  // Reading and charging every node of the fleet here cost the writer the
  // whole fleet at every cycle, for the few nodes a plan places on.
  static Result<std::unique_ptr<Holdings>> load(Tx& tx, const LiveWork& live,
                                                const std::vector<sched::Placement>& placements);

  Holdings(const Holdings&) = delete;
  Holdings& operator=(const Holdings&) = delete;

  // Why `pl` for task `t` cannot be applied any more; nullopt when it can.
  std::optional<std::string> recheck(const Task& t, const sched::Placement& pl) const;
  // Charges an attempt (per replica x replicas) to a group and to those of
  // its nodes that were loaded.
  void charge(const Attempt& a, const std::string& resource_group);

 private:
  Holdings() = default;

  // Resources and GPU indices in use on a node, as the live work keeps them.
  using NodeUse = LiveWork::NodeUse;
  using NodeKey = std::pair<std::string, std::string>;  // (cluster, node)

  std::optional<std::string> recheck_pool(const Task& t, const sched::Placement& pl) const;
  std::optional<std::string> recheck_quota(const Task& t, const sched::Placement& pl) const;
  std::optional<std::string> recheck_nodes(const sched::Placement& pl) const;

  std::vector<ResourceGroup> groups_;  // quota_ refers to these: never resized after load
  std::optional<sched::QuotaBook> quota_;
  std::map<std::string, bool> preemptible_;  // priority class -> preemptible
  std::map<std::string, std::string> pool_of_;  // cluster -> storage pool
  std::map<NodeKey, Node> nodes_;
  // cluster -> node -> use, of the nodes the plan places on only. Looked up
  // by string_view for every active attempt: no key is built per lookup, and
  // an attempt on a cluster the plan does not touch costs one lookup.
  using NodeUses = std::map<std::string, NodeUse, std::less<>>;
  std::map<std::string, NodeUses, std::less<>> use_;
};

}  // namespace cp::internal
