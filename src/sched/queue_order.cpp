#include "sched/queue_order.h"

#include <algorithm>
#include <map>
#include <queue>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

namespace cp::sched {
namespace {

// Per-resource denominators of a resource group's shares, in name order.
// Only a resource with a denominator can be a dominant share, so amounts are
// kept for those alone, index for index (Amounts): a share is then a walk
// over a few doubles, not a map search per resource held.
struct Denominators {
  std::vector<std::string_view> names;  // views of the group's quota keys (and kGpuAny)
  std::vector<double> values;

  std::ptrdiff_t index(std::string_view name) const {
    for (std::size_t i = 0; i < names.size(); ++i) {
      if (names[i] == name) return static_cast<std::ptrdiff_t>(i);
    }
    return -1;
  }
};

Denominators denominators(const ResourceGroup* group) {
  std::map<std::string_view, double> by_name;
  if (group != nullptr) {
    double gpus = 0;
    for (const auto& [resource, q] : group->quota) {
      std::int64_t d = q.guaranteed > 0 ? q.guaranteed : q.max.value_or(0);
      if (d <= 0) continue;
      by_name[resource] = static_cast<double>(d);
      if (resource.starts_with(kGpuPrefix)) gpus += static_cast<double>(d);
    }
    // A bare GPU count is judged against every GPU the group may use.
    if (gpus > 0) by_name[kGpuAny] = gpus;
  }
  Denominators out;
  for (const auto& [name, d] : by_name) {
    out.names.push_back(name);
    out.values.push_back(d);
  }
  return out;
}

// Amounts held, as doubles for the share arithmetic: amounts[i] is of denom.names[i].
using Amounts = std::vector<double>;

double dominant(const Amounts& held, const Denominators& denom) {
  double best = 0;
  for (std::size_t i = 0; i < held.size(); ++i) best = std::max(best, held[i] / denom.values[i]);
  return best;
}

Amounts amounts_of(const Tally& t, const Denominators& denom) {
  Amounts out(denom.names.size(), 0.0);
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = static_cast<double>(t.get(denom.names[i]));
  return out;
}

// What the task adds to a holder's amounts, into `out` (sized as denom).
void amounts_of(const Task& t, const Denominators& denom, Amounts& out) {
  std::fill(out.begin(), out.end(), 0.0);
  for (const auto& [name, v] : t.step.resources.amounts()) {
    if (auto i = denom.index(name); i >= 0) {
      out[static_cast<std::size_t>(i)] += static_cast<double>(v) * std::max(1, t.step.replicas);
    }
  }
}

void add(Amounts& a, const Amounts& more) {
  for (std::size_t i = 0; i < a.size(); ++i) a[i] += more[i];
}

std::string user_key(std::string_view project, std::string_view user) {
  std::string k(project);
  k += '\0';
  k += user;
  return k;
}

// Orders tasks of one priority (already in submit order) by fair share.
void fair_run(std::vector<const QueuedTask*>::iterator first, std::vector<const QueuedTask*>::iterator last,
              const Denominators& denom, const Amounts& empty,
              const std::map<std::string, Tally, std::less<>>* by_project,
              const std::map<std::string, Tally, std::less<>>* by_user) {
  struct User {
    Amounts held;
    double share = 0;  // dominant(held), kept as held changes
    std::vector<const QueuedTask*> tasks;  // submit order
    std::size_t next = 0;
  };
  struct Project {
    Amounts held;
    std::map<std::string_view, User> users;  // views of the queue's strings
  };
  std::map<std::string_view, Project> projects;
  for (auto it = first; it != last; ++it) {
    const Task& t = (*it)->task;
    auto [p, new_project] = projects.try_emplace(t.project_group);
    if (new_project && by_project) {
      auto h = by_project->find(t.project_group);
      p->second.held = h == by_project->end() ? empty : amounts_of(h->second, denom);
    } else if (new_project) {
      p->second.held = empty;
    }
    auto [u, new_user] = p->second.users.try_emplace(t.user);
    if (new_user && by_user) {
      auto h = by_user->find(user_key(t.project_group, t.user));
      u->second.held = h == by_user->end() ? empty : amounts_of(h->second, denom);
    } else if (new_user) {
      u->second.held = empty;
    }
    if (new_user) u->second.share = dominant(u->second.held, denom);
    u->second.tasks.push_back(*it);
  }
  // The user of a project to go next: smallest share, then earliest head.
  auto next_user = [&](Project& p) -> User* {
    User* best = nullptr;
    double best_share = 0;
    for (auto& [name, u] : p.users) {
      if (u.next == u.tasks.size()) continue;
      double s = u.share;
      if (best == nullptr || s < best_share ||
          (s == best_share && comes_before(*u.tasks[u.next], *best->tasks[best->next]))) {
        best = &u;
        best_share = s;
      }
    }
    return best;
  };
  // Projects in a heap keyed by (share, head task): recomputed when popped.
  struct Entry {
    double share;
    const QueuedTask* head;
    Project* project;
  };
  auto later = [](const Entry& a, const Entry& b) {
    if (a.share != b.share) return a.share > b.share;
    return comes_before(*b.head, *a.head);
  };
  std::priority_queue<Entry, std::vector<Entry>, decltype(later)> heap(later);
  for (auto& [name, p] : projects) {
    User* u = next_user(p);
    heap.push({dominant(p.held, denom), u->tasks[u->next], &p});
  }
  auto out = first;
  Amounts taken(denom.names.size(), 0.0);  // the task's, read once for its project and its user
  while (!heap.empty()) {
    Entry e = heap.top();
    heap.pop();
    User* u = next_user(*e.project);
    const QueuedTask* q = u->tasks[u->next++];
    *out++ = q;
    amounts_of(q->task, denom, taken);
    add(e.project->held, taken);
    add(u->held, taken);
    u->share = dominant(u->held, denom);
    if (User* again = next_user(*e.project)) {
      heap.push({dominant(e.project->held, denom), again->tasks[again->next], e.project});
    }
  }
}

}  // namespace

bool comes_before(const QueuedTask& a, const QueuedTask& b) {
  const Task& x = a.task;
  const Task& y = b.task;
  // Priority descending: compare y's priority to x's.
  return std::tie(y.priority, x.queued_at, x.created_at, x.id) < std::tie(x.priority, y.queued_at, y.created_at, y.id);
}

void PriorityOrder::sort_group(std::vector<const QueuedTask*>& tasks) const {
  std::sort(tasks.begin(), tasks.end(), [](const QueuedTask* a, const QueuedTask* b) { return comes_before(*a, *b); });
}

FairShareOrder::FairShareOrder(const Snapshot& snapshot) {
  for (const auto& g : snapshot.resource_groups) groups_.emplace(g.name, &g);
  for (const auto& w : snapshot.running) count(w);
}

namespace {

// Groups with two or more tasks in the queue: the only ones whose order
// depends on shares.
std::unordered_set<std::string_view> groups_to_order(const std::vector<QueuedTask>& queue) {
  std::unordered_map<std::string_view, int> tasks;
  for (const auto& q : queue) ++tasks[q.task.resource_group];
  std::unordered_set<std::string_view> out;
  for (const auto& [name, n] : tasks) {
    if (n > 1) out.insert(name);
  }
  return out;
}

}  // namespace

FairShareOrder::FairShareOrder(const Snapshot& snapshot, const std::vector<QueuedTask>& queue) {
  std::unordered_set<std::string_view> queued = groups_to_order(queue);
  if (queued.empty()) return;
  for (const auto& g : snapshot.resource_groups) {
    if (queued.contains(g.name)) groups_.emplace(g.name, &g);
  }
  for (const auto& w : snapshot.running) {
    if (queued.contains(w.resource_group)) count(w);
  }
}

FairShareOrder::FairShareOrder(const std::vector<ResourceGroup>& groups, const std::vector<QueuedTask>& queue) {
  std::unordered_set<std::string_view> queued = groups_to_order(queue);
  if (queued.empty()) return;
  for (const auto& g : groups) {
    if (queued.contains(g.name)) groups_.emplace(g.name, &g);
  }
  to_count_.assign(queued.begin(), queued.end());
}

void FairShareOrder::count(const RunningWork& w) {
  Usage& u = usage_[w.resource_group];
  auto replicas = static_cast<std::int64_t>(w.placements.size());
  u.by_project[w.project_group].add(w.per_replica, replicas);
  u.by_user[user_key(w.project_group, w.user)].add(w.per_replica, replicas);
}

double FairShareOrder::share(std::string_view group, std::string_view project_group, std::string_view user) const {
  auto g = groups_.find(group);
  auto denom = denominators(g == groups_.end() ? nullptr : g->second);
  auto u = usage_.find(group);
  if (u == usage_.end()) return 0;
  const auto& table = user.empty() ? u->second.by_project : u->second.by_user;
  auto it = table.find(user.empty() ? std::string(project_group) : user_key(project_group, user));
  return it == table.end() ? 0 : dominant(amounts_of(it->second, denom), denom);
}

void FairShareOrder::sort_group(std::vector<const QueuedTask*>& tasks) const {
  PriorityOrder{}.sort_group(tasks);
  if (tasks.empty()) return;
  const std::string& name = tasks.front()->task.resource_group;
  auto g = groups_.find(name);
  auto denom = denominators(g == groups_.end() ? nullptr : g->second);
  auto u = usage_.find(name);
  const auto* by_project = u == usage_.end() ? nullptr : &u->second.by_project;
  const auto* by_user = u == usage_.end() ? nullptr : &u->second.by_user;
  Amounts empty(denom.names.size(), 0.0);
  auto first = tasks.begin();
  while (first != tasks.end()) {
    int priority = (*first)->task.priority;
    auto last = std::find_if(first, tasks.end(), [&](const QueuedTask* q) { return q->task.priority != priority; });
    fair_run(first, last, denom, empty, by_project, by_user);
    first = last;
  }
}

std::vector<const QueuedTask*> processing_order(const std::vector<QueuedTask>& queue, const QueueOrder& order) {
  // Groups in name order, so the merge below never depends on input order
  // (gathered by a hash of views of the queue's names, then sorted by name).
  std::unordered_map<std::string_view, std::vector<const QueuedTask*>> by_name;
  for (const auto& q : queue) by_name[q.task.resource_group].push_back(&q);
  std::vector<std::pair<std::string_view, std::vector<const QueuedTask*>>> groups(
      std::make_move_iterator(by_name.begin()), std::make_move_iterator(by_name.end()));
  std::sort(groups.begin(), groups.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  for (auto& [name, tasks] : groups) order.sort_group(tasks);

  // Merge the groups by their heads; on a full tie the group earlier by name wins.
  struct Cursor {
    const std::vector<const QueuedTask*>* tasks;
    std::size_t next;
    std::size_t rank;  // the group's position by name
  };
  auto later = [](const Cursor& a, const Cursor& b) {
    const QueuedTask& x = *(*a.tasks)[a.next];
    const QueuedTask& y = *(*b.tasks)[b.next];
    if (comes_before(y, x)) return true;
    if (comes_before(x, y)) return false;
    return a.rank > b.rank;
  };
  std::priority_queue<Cursor, std::vector<Cursor>, decltype(later)> heap(later);
  std::size_t rank = 0;
  for (const auto& [name, tasks] : groups) heap.push({&tasks, 0, rank++});

  std::vector<const QueuedTask*> out;
  out.reserve(queue.size());
  while (!heap.empty()) {
    Cursor c = heap.top();
    heap.pop();
    out.push_back((*c.tasks)[c.next++]);
    if (c.next < c.tasks->size()) heap.push(c);
  }
  return out;
}

}  // namespace cp::sched
