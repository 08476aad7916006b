#include "sched/queue_order.h"

#include <algorithm>
#include <map>
#include <queue>
#include <set>
#include <span>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "common/string_hash.h"
#include "sched/prefetch.h"
#include "sched/tally.h"

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

// What comes_before compares, read once from a task (the id only on a tie):
// sorts and merges compare these side by side rather than reading tasks
// that lie far apart in memory at every comparison.
struct OrderKey {
  int priority = 0;
  Millis queued_at = 0;
  Millis created_at = 0;
  const QueuedTask* q = nullptr;

  static OrderKey of(const QueuedTask& q) { return {q.task.priority, q.task.queued_at, q.task.created_at, &q}; }
  // < 0 when a goes first: priority descending, then submit time, creation
  // time and id ascending.
  friend int compare(const OrderKey& a, const OrderKey& b) {
    if (a.priority != b.priority) return a.priority > b.priority ? -1 : 1;
    if (a.queued_at != b.queued_at) return a.queued_at < b.queued_at ? -1 : 1;
    if (a.created_at != b.created_at) return a.created_at < b.created_at ? -1 : 1;
    return a.q->task.id.compare(b.q->task.id);
  }
  friend bool operator<(const OrderKey& a, const OrderKey& b) { return compare(a, b) < 0; }
};

// Amounts held, as doubles for the share arithmetic: amounts[i] is of denom.names[i].
using Amounts = std::vector<double>;

// Over a holder's amounts, wherever they are kept (`held` sized as denom).
double dominant(std::span<const double> held, const Denominators& denom) {
  double best = 0;
  for (std::size_t i = 0; i < held.size(); ++i) best = std::max(best, held[i] / denom.values[i]);
  return best;
}

// What the task adds to a holder's amounts, into `out` (sized as denom, zeros).
void amounts_of(const Task& t, const Denominators& denom, std::span<double> out) {
  for (const auto& [name, v] : t.step.resources.amounts()) {
    if (auto i = denom.index(name); i >= 0) {
      out[static_cast<std::size_t>(i)] += static_cast<double>(v) * std::max(1, t.step.replicas);
    }
  }
}

// Names to positions 0, 1, 2... as they are added. A run's tasks name a
// few projects, and each project a few users: those are found by a walk
// over views kept side by side (no hash); past kLinear names, by a hash.
// The names viewed outlive the index (the queue's, the snapshot's).
class NameIndex {
 public:
  static constexpr std::size_t npos = static_cast<std::size_t>(-1);

  std::size_t find(std::string_view name) const {
    if (names_.size() <= kLinear) {
      for (std::size_t i = 0; i < names_.size(); ++i) {
        if (names_[i] == name) return i;
      }
      return npos;
    }
    auto it = many_.find(name);
    return it == many_.end() ? npos : it->second;
  }
  // `name`'s position (find() said npos).
  std::size_t add(std::string_view name) {
    const std::size_t at = names_.size();
    names_.push_back(name);
    if (names_.size() == kLinear + 1) {
      for (std::size_t i = 0; i < names_.size(); ++i) many_.emplace(names_[i], i);
    } else if (names_.size() > kLinear + 1) {
      many_.emplace(names_.back(), at);
    }
    return at;
  }

 private:
  static constexpr std::size_t kLinear = 8;
  std::vector<std::string_view> names_;
  std::unordered_map<std::string_view, std::size_t, StringHash, std::equal_to<>> many_;
};

// What the running work of one resource group holds, per project group and
// per user inside it: only the denominators' amounts (index for index),
// summed without overflow.
class Held {
 public:
  Held(std::span<const RunningWork* const> works, const Denominators& denom) : width_(denom.names.size()) {
    if (width_ == 0) return;  // no share to work out: every share is 0
    for (const RunningWork* w : works) {
      std::size_t p = projects_.find(w->project_group);
      if (p == NameIndex::npos) {
        p = projects_.add(w->project_group);
        by_project_.push_back({grow(), {}, {}});
      }
      Project& project = by_project_[p];
      std::size_t u = project.users.find(w->user);
      if (u == NameIndex::npos) {
        u = project.users.add(w->user);
        project.user_at.push_back(grow());
      }
      const std::size_t user_at = project.user_at[u];
      const auto replicas = static_cast<std::int64_t>(w->placements.size());
      for (const auto& [name, amount] : w->per_replica.amounts()) {
        if (auto i = denom.index(name); i >= 0) {
          const Wide add = static_cast<Wide>(amount) * replicas;
          amounts_[project.at + static_cast<std::size_t>(i)] += add;
          amounts_[user_at + static_cast<std::size_t>(i)] += add;
        }
      }
    }
  }
  // Into `out` (sized as denom, zeros): what the project group, or one of
  // its users, holds.
  void project(std::string_view name, std::span<double> out) const {
    if (std::size_t p = projects_.find(name); p != NameIndex::npos) copy(by_project_[p].at, out);
  }
  void user(std::string_view project, std::string_view name, std::span<double> out) const {
    const std::size_t p = projects_.find(project);
    if (p == NameIndex::npos) return;
    const Project& of = by_project_[p];
    if (std::size_t u = of.users.find(name); u != NameIndex::npos) copy(of.user_at[u], out);
  }

 private:
  struct Project {
    std::size_t at;  // offset of its amounts
    NameIndex users;
    std::vector<std::size_t> user_at;  // per user: offset of its amounts
  };
  std::size_t grow() {
    const std::size_t at = amounts_.size();
    amounts_.resize(at + width_, 0);
    return at;
  }
  void copy(std::size_t at, std::span<double> out) const {
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = static_cast<double>(amounts_[at + i]);
  }

  std::size_t width_;
  std::vector<Wide> amounts_;
  NameIndex projects_;
  std::vector<Project> by_project_;
};

// Orders tasks of one priority (already in submit order) by fair share.
// Projects and users are numbered as they are first seen and kept in flat
// vectors: the answer does not depend on their order (every choice below
// breaks ties with comes_before, a total order), and a big queue asks for
// the next user of a project twice for every task. The run is in
// comes_before order, so a task's position in it says the same as
// comes_before: ties are broken by positions, without reading the tasks
// (which lie far apart in memory) again.
void fair_run(std::vector<const QueuedTask*>::iterator first, std::vector<const QueuedTask*>::iterator last,
              const Denominators& denom, const Held& held) {
  const std::size_t width = denom.names.size();
  struct User {
    std::size_t held;  // offset of its amounts in `amounts`
    double share = 0;  // dominant(held), kept as held changes
    std::vector<std::size_t> tasks;  // positions in the run, submit order
    std::size_t next = 0;
  };
  struct Project {
    std::size_t held;
    std::vector<std::size_t> users;  // positions in `users`, in the order of user_at's names
    NameIndex user_at;
  };
  std::vector<double> amounts;  // every project's and user's held amounts, `width` each
  std::vector<Project> projects;
  std::vector<User> users;
  NameIndex project_at;  // positions in `projects`
  auto held_at = [&](std::size_t at) { return std::span<double>(amounts).subspan(at, width); };
  // Amounts of a new holder (zero when nothing), appended: its offset.
  auto appended = [&] {
    const std::size_t at = amounts.size();
    amounts.resize(at + width, 0.0);
    return at;
  };
  auto dominant_at = [&](std::size_t at) { return dominant(held_at(at), denom); };
  // The run's tasks in submit order, and what each adds to its holders,
  // read once while the task is at hand (`width` each).
  const std::vector<const QueuedTask*> run(first, last);
  std::vector<double> adds(run.size() * width, 0.0);
  for (std::size_t k = 0; k < run.size(); ++k) {
    if (k + 4 < run.size()) prefetch::holders(run[k + 4]->task);
    if (k + 2 < run.size()) prefetch::holder_names(run[k + 2]->task);
    if (k + 1 < run.size()) prefetch::names(run[k + 1]->task);
    const Task& t = run[k]->task;
    std::size_t p = project_at.find(t.project_group);
    if (p == NameIndex::npos) {
      p = project_at.add(t.project_group);
      const std::size_t at = appended();
      held.project(t.project_group, held_at(at));
      projects.push_back({at, {}, {}});
    }
    Project& project = projects[p];
    std::size_t u = project.user_at.find(t.user);
    if (u == NameIndex::npos) {
      project.user_at.add(t.user);
      u = users.size();
      const std::size_t at = appended();
      held.user(t.project_group, t.user, held_at(at));
      users.push_back({at, dominant_at(at), {}, 0});
      project.users.push_back(u);
    } else {
      u = project.users[u];
    }
    users[u].tasks.push_back(k);
    amounts_of(t, denom, std::span<double>(adds).subspan(k * width, width));
  }
  // A user's next task, as its position in the run.
  auto head = [&](const User& u) { return u.tasks[u.next]; };
  // The user of a project to go next: smallest share, then earliest head.
  auto next_user = [&](const Project& p) -> User* {
    User* best = nullptr;
    for (std::size_t i : p.users) {
      User& u = users[i];
      if (u.next == u.tasks.size()) continue;
      if (best == nullptr || u.share < best->share || (u.share == best->share && head(u) < head(*best))) {
        best = &u;
      }
    }
    return best;
  };
  // Projects in a heap keyed by (share, head task): recomputed when popped.
  struct Entry {
    double share;
    std::size_t head;  // position in the run
    std::size_t project;
  };
  auto later = [](const Entry& a, const Entry& b) {
    if (a.share != b.share) return a.share > b.share;
    return b.head < a.head;
  };
  std::vector<Entry> heap;
  heap.reserve(projects.size());
  for (std::size_t i = 0; i < projects.size(); ++i) {
    User* u = next_user(projects[i]);
    heap.push_back({dominant_at(projects[i].held), head(*u), i});
  }
  std::make_heap(heap.begin(), heap.end(), later);
  auto out = first;
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), later);
    const std::size_t pi = heap.back().project;
    heap.pop_back();
    Project& project = projects[pi];
    User* u = next_user(project);
    const std::size_t k = u->tasks[u->next++];
    *out++ = run[k];
    const double* taken = adds.data() + k * width;
    for (std::size_t i = 0; i < width; ++i) {
      amounts[project.held + i] += taken[i];
      amounts[u->held + i] += taken[i];
    }
    u->share = dominant_at(u->held);
    if (User* again = next_user(project)) {
      heap.push_back({dominant_at(project.held), head(*again), pi});
      std::push_heap(heap.begin(), heap.end(), later);
    }
  }
}

}  // namespace

bool comes_before(const QueuedTask& a, const QueuedTask& b) { return OrderKey::of(a) < OrderKey::of(b); }

void PriorityOrder::sort_group(std::vector<const QueuedTask*>& tasks) const {
  std::vector<OrderKey> keyed;
  keyed.reserve(tasks.size());
  for (std::size_t i = 0; i < tasks.size(); ++i) {
    // A group's tasks lie far apart: the ones after this are fetched meanwhile.
    if (i + 4 < tasks.size()) prefetch::order_fields(tasks[i + 4]->task);
    keyed.push_back(OrderKey::of(*tasks[i]));
  }
  std::sort(keyed.begin(), keyed.end());
  for (std::size_t i = 0; i < tasks.size(); ++i) tasks[i] = keyed[i].q;
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

FairShareOrder::FairShareOrder(const std::vector<ResourceGroup>& groups, const std::vector<QueuedTask>& queue) {
  std::unordered_set<std::string_view> queued = groups_to_order(queue);
  if (queued.empty()) return;
  for (const auto& g : groups) {
    if (queued.contains(g.name)) groups_.emplace(g.name, &g);
  }
  to_count_.assign(queued.begin(), queued.end());
}

std::span<const RunningWork* const> FairShareOrder::running_of(std::string_view group) const {
  auto it = running_.find(group);
  if (it == running_.end()) return {};
  return it->second;
}

void FairShareOrder::count(const RunningWork& w) {
  auto it = running_.find(w.resource_group);
  if (it == running_.end()) it = running_.try_emplace(w.resource_group).first;
  it->second.push_back(&w);
}

double FairShareOrder::share(std::string_view group, std::string_view project_group, std::string_view user) const {
  auto g = groups_.find(group);
  auto denom = denominators(g == groups_.end() ? nullptr : g->second);
  const Held held(running_of(group), denom);
  Amounts amounts(denom.names.size(), 0.0);
  if (user.empty()) {
    held.project(project_group, amounts);
  } else {
    held.user(project_group, user, amounts);
  }
  return dominant(amounts, denom);
}

void FairShareOrder::sort_group(std::vector<const QueuedTask*>& tasks) const {
  PriorityOrder{}.sort_group(tasks);
  if (tasks.size() < 2) return;  // one order, whatever the shares
  const std::string& name = tasks.front()->task.resource_group;
  auto g = groups_.find(name);
  auto denom = denominators(g == groups_.end() ? nullptr : g->second);
  // What the group's running work holds, added up once for all its priorities.
  const Held held(running_of(name), denom);
  auto first = tasks.begin();
  while (first != tasks.end()) {
    int priority = (*first)->task.priority;
    auto last = std::find_if(first, tasks.end(), [&](const QueuedTask* q) { return q->task.priority != priority; });
    fair_run(first, last, denom, held);
    first = last;
  }
}

std::vector<const QueuedTask*> processing_order(const std::vector<QueuedTask>& queue, const QueueOrder& order) {
  return std::move(grouped_order(queue, order).tasks);
}

GroupedOrder grouped_order(const std::vector<QueuedTask>& queue, const QueueOrder& order) {
  // Groups in name order, so the merge below never depends on input order
  // (gathered by a hash of views of the queue's names, then sorted by name).
  std::unordered_map<std::string_view, std::vector<const QueuedTask*>> by_name;
  for (const auto& q : queue) by_name[q.task.resource_group].push_back(&q);
  std::vector<std::pair<std::string_view, std::vector<const QueuedTask*>>> groups(
      std::make_move_iterator(by_name.begin()), std::make_move_iterator(by_name.end()));
  std::sort(groups.begin(), groups.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  for (auto& [name, tasks] : groups) order.sort_group(tasks);

  // Merge the groups by their heads; on a full tie the group earlier by name
  // wins. A cursor keeps its head's key, so the heap compares numbers and
  // reads a task only on a tie (its id) or when it becomes a head.
  struct Cursor {
    OrderKey head;
    const std::vector<const QueuedTask*>* tasks;
    std::size_t next;
    std::size_t rank;  // the group's position by name
    void read() { head = OrderKey::of(*(*tasks)[next]); }
  };
  // a's head goes after b's: comes_before(b's head, a's head), then the rank.
  auto later = [](const Cursor& a, const Cursor& b) {
    const int c = compare(b.head, a.head);
    return c != 0 ? c < 0 : a.rank > b.rank;
  };
  std::vector<Cursor> heap;
  heap.reserve(groups.size());
  std::size_t rank = 0;
  for (const auto& [name, tasks] : groups) {
    heap.push_back({{}, &tasks, 0, rank++});
    heap.back().read();
  }
  std::make_heap(heap.begin(), heap.end(), later);

  GroupedOrder out;
  out.tasks.reserve(queue.size());
  out.group_of.reserve(queue.size());
  out.groups.reserve(groups.size());
  for (const auto& [name, tasks] : groups) out.groups.push_back(name);
  // The top cursor, its head taken, moves down to where its next head
  // belongs: one pass down the heap, not a pop and a push (a total order:
  // the same sequence either way).
  auto sift_top = [&] {
    const std::size_t n = heap.size();
    Cursor moving = heap.front();
    std::size_t at = 0;
    for (std::size_t child = 1; child < n; child = 2 * at + 1) {
      if (child + 1 < n && later(heap[child], heap[child + 1])) ++child;
      if (!later(moving, heap[child])) break;
      heap[at] = heap[child];
      at = child;
    }
    heap[at] = moving;
  };
  while (!heap.empty()) {
    Cursor& c = heap.front();
    out.tasks.push_back((*c.tasks)[c.next++]);
    out.group_of.push_back(static_cast<std::uint32_t>(c.rank));
    if (c.next < c.tasks->size()) {
      c.read();
      // The group's next head after this one, on its way while others are merged.
      if (c.next + 1 < c.tasks->size()) prefetch::order_fields((*c.tasks)[c.next + 1]->task);
    } else {
      c = heap.back();
      heap.pop_back();
      if (heap.empty()) break;
    }
    sift_top();
  }
  return out;
}

}  // namespace cp::sched
