#include "sched/queue_order.h"

#include <algorithm>
#include <map>
#include <string>
#include <tuple>

namespace cp::sched {

bool comes_before(const QueuedTask& a, const QueuedTask& b) {
  const Task& x = a.task;
  const Task& y = b.task;
  // Priority descending: compare y's priority to x's.
  return std::tie(y.priority, x.queued_at, x.created_at, x.id) < std::tie(x.priority, y.queued_at, y.created_at, y.id);
}

void PriorityOrder::sort_group(std::vector<const QueuedTask*>& tasks) const {
  std::sort(tasks.begin(), tasks.end(), [](const QueuedTask* a, const QueuedTask* b) { return comes_before(*a, *b); });
}

std::vector<const QueuedTask*> processing_order(const std::vector<QueuedTask>& queue, const QueueOrder& order) {
  // std::map: groups in name order, so the merge below never depends on input order.
  std::map<std::string, std::vector<const QueuedTask*>> groups;
  for (const auto& q : queue) groups[q.task.resource_group].push_back(&q);
  for (auto& [name, tasks] : groups) order.sort_group(tasks);

  struct Cursor {
    const std::vector<const QueuedTask*>* tasks;
    std::size_t next;
  };
  std::vector<Cursor> cursors;
  cursors.reserve(groups.size());
  for (const auto& [name, tasks] : groups) cursors.push_back({&tasks, 0});

  std::vector<const QueuedTask*> out;
  out.reserve(queue.size());
  while (out.size() < queue.size()) {
    Cursor* best = nullptr;
    for (auto& c : cursors) {
      if (c.next == c.tasks->size()) continue;
      // Strictly better only: on a full tie the group earlier by name wins.
      if (best == nullptr || comes_before(*(*c.tasks)[c.next], *(*best->tasks)[best->next])) best = &c;
    }
    CP_CHECK(best != nullptr, "processing_order: groups hold fewer tasks than the queue");
    out.push_back((*best->tasks)[best->next++]);
  }
  return out;
}

}  // namespace cp::sched
