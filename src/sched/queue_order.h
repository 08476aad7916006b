// Stage 1, order: which queued task is tried first. Kept behind a small
// interface so that fair share (dominant resource share between users and
// project groups, DESIGN.md "Scheduler") can replace the order inside a
// resource group without touching the rest of the cycle (Mesos's sorter).
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/string_hash.h"
#include "sched/scheduler.h"

namespace cp::sched {

class QueueOrder {
 public:
  virtual ~QueueOrder() = default;
  // Reorders the tasks of ONE resource group, best first. Must be a strict,
  // total order on distinct task ids so that the cycle is deterministic.
  virtual void sort_group(std::vector<const QueuedTask*>& tasks) const = 0;
};

// v1: priority (higher first), then time in the queue (earlier first), then
// creation time, then id: a total order, whatever the input order was.
class PriorityOrder final : public QueueOrder {
 public:
  void sort_group(std::vector<const QueuedTask*>& tasks) const override;
};

// Fair share (DRF, as in Mesos and YuniKorn): among tasks of equal priority,
// the project group with the smallest dominant resource share of the
// resource group goes first, and inside it the user with the smallest share;
// each user's own tasks keep their submit order. A share is the largest, over
// the resources the group's quota names, of held / guaranteed (max where no
// guarantee). Shares start from the running work of the snapshot and grow as
// the order is built, as if each task ahead were placed: a team that queued
// a hundred tasks gets its turn, then every other team gets one.
class FairShareOrder final : public QueueOrder {
 public:
  // Shares from the snapshot's running work. Each resource group's work is
  // added up only when sort_group() is asked about the group with two or
  // more tasks (a group with one queued task has one order): one urgent task
  // does not pay for adding up the running work of every group of the fleet.
  explicit FairShareOrder(const Snapshot& snapshot);
  // The same shares, counted by the caller: for each of groups_to_count()
  // (the groups with two or more tasks in `queue`), count() every running
  // work of that group. For a caller that keeps running work indexed by
  // group (Scheduler) and need not look at all of it.
  FairShareOrder(const std::vector<ResourceGroup>& groups, const std::vector<QueuedTask>& queue);
  const std::vector<std::string_view>& groups_to_count() const { return to_count_; }
  // Kept by address: `w` outlives this order.
  void count(const RunningWork& w);
  void sort_group(std::vector<const QueuedTask*>& tasks) const override;
  // The dominant share held now by a project group (or by one of its users,
  // when `user` is given) in a resource group.
  double share(std::string_view group, std::string_view project_group, std::string_view user = {}) const;

 private:
  // Found by name (a view, no copy), never walked.
  template <class T>
  using ByName = StringMap<T>;

  ByName<const ResourceGroup*> groups_;
  std::vector<std::string_view> to_count_;  // views of the queue's group names
  ByName<std::vector<const RunningWork*>> running_;  // by resource group
  std::span<const RunningWork* const> running_of(std::string_view group) const;  // none: empty
};

// The (priority desc, queued_at asc, created_at asc, id asc) comparison.
bool comes_before(const QueuedTask& a, const QueuedTask& b);

// The order the cycle processes the whole queue in: the queue is split by
// resource group, each group is sorted by `order`, and the groups are merged
// by comparing their heads with comes_before(). With PriorityOrder this is
// one global sort; with a fair-share order, each group keeps its own order
// while a high-priority head in one group still goes before a low one in
// another (the groups may share nodes).
std::vector<const QueuedTask*> processing_order(const std::vector<QueuedTask>& queue, const QueueOrder& order);

// The same order, with the resource group of each task as a position among
// the names the queue holds (each name read once here, so that the cycle
// looks each group up once, not once per task).
struct GroupedOrder {
  std::vector<const QueuedTask*> tasks;
  std::vector<std::uint32_t> group_of;   // per task: a position in `groups`
  std::vector<std::string_view> groups;  // the queue's resource group names, ascending (views of its strings)
};
GroupedOrder grouped_order(const std::vector<QueuedTask>& queue, const QueueOrder& order);

}  // namespace cp::sched
