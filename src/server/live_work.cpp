#include "server/live_work.h"

#include <algorithm>
#include <set>
#include <string_view>
#include <unordered_set>

#include "common/json.h"
#include "server/internal.h"

namespace cp {

namespace {

// Queued, or holding resources: the tasks the scheduler reads.
const std::set<TaskState> kLive = {TaskState::Queued, TaskState::Admitted, TaskState::Dispatched,
                                   TaskState::Running, TaskState::Preempting};

}  // namespace

std::uint64_t LiveWork::mark(Store& store) {
  ChangeJournal* journal = store.changes();
  return journal ? journal->last() : 0;
}

Status LiveWork::refresh(Tx& tx, ChangeJournal* journal, std::uint64_t mark, Millis now, bool periodic) {
  ChangedRows changed;
  // take() first, even when everything is read below: what it hands over up
  // to `mark` is then covered by this read, and must not be read again.
  const bool complete = journal != nullptr && journal->take(mark, changed);
  const bool due = periodic && (now - full_at_ >= kFullReadEveryMs || now < full_at_);
  const bool was_loaded = loaded_;
  loaded_ = false;  // until this refresh succeeds: one that fails half-way reads everything next time
  if (!was_loaded || !complete || due) {
    CP_TRY(read_everything(tx, now));
  } else {
    CP_TRY(read_changed(tx, changed));
  }
  loaded_ = true;
  return {};
}

Status LiveWork::read_everything(Tx& tx, Millis now) {
  tasks_.clear();
  queued_.clear();
  attempts_.clear();
  group_of_attempt_.clear();
  ungrouped_.clear();
  sums_ = Sums{};
  CP_ASSIGN(auto tasks, tx.tasks_in_states(kLive));
  CP_ASSIGN(auto attempts, tx.active_attempts(""));
  stats_.rows_read = static_cast<std::int64_t>(tasks.size() + attempts.size());
  for (auto& t : tasks) put(std::move(t));
  for (auto& a : attempts) put_attempt(std::move(a));
  full_at_ = now;
  stats_.full_reads++;
  touched_ = Touched{};  // everything
  return {};
}

namespace {

// `ids` without repeats, in their first order.
std::vector<std::string> distinct(const std::vector<std::string>& ids) {
  std::vector<std::string> out;
  std::unordered_set<std::string_view> seen;
  for (const auto& id : ids) {
    if (seen.insert(id).second) out.push_back(id);
  }
  return out;
}

}  // namespace

Status LiveWork::read_changed(Tx& tx, const ChangedRows& changed) {
  // One statement per table (per 1,000 rows), not a round trip per row.
  const auto task_ids = distinct(changed.tasks);
  const auto attempt_ids = distinct(changed.attempts);
  CP_ASSIGN(auto tasks, tx.get_tasks(task_ids));
  CP_ASSIGN(auto attempts, tx.get_attempts(attempt_ids));
  stats_.rows_read = static_cast<std::int64_t>(tasks.size() + attempts.size());
  // A row not read back is gone (retention), and so is a row that left the
  // live states: both leave the kept set.
  for (const auto& id : task_ids) {
    touch(touched_.tasks, id);
    erase(id);
  }
  for (auto& t : tasks) {
    if (kLive.contains(t.state)) put(std::move(t));
  }
  for (const auto& id : attempt_ids) {
    touch(touched_.attempts, id);
    erase_attempt(id);
  }
  for (auto& a : attempts) {
    if (!is_terminal(a.state)) put_attempt(std::move(a));
  }
  return {};
}

void LiveWork::apply(const WrittenRows& rows) {
  // Tasks first, as a read does: an attempt is charged to its task's group.
  for (const Task& t : rows.tasks) keep_written(t);
  for (const Attempt& a : rows.attempts) keep_written(a);
}

void LiveWork::apply(WrittenRows&& rows) {
  for (Task& t : rows.tasks) keep_written(std::move(t));
  for (Attempt& a : rows.attempts) keep_written(std::move(a));
  rows.clear();
}

void LiveWork::keep_written(Task t) {
  touch(touched_.tasks, t.id);
  erase(t.id);
  if (kLive.contains(t.state)) put(std::move(t));
}

void LiveWork::keep_written(Attempt a) {
  touch(touched_.attempts, a.id);
  erase_attempt(a.id);
  if (!is_terminal(a.state)) put_attempt(std::move(a));
}

Result<std::string> LiveWork::check_rows(Tx& tx, const WrittenRows& rows) const {
  std::string diff;
  // Each id once: the kept row (nullptr: not live) against the stored one,
  // when that is live.
  auto compare = [&](std::string_view kind, const auto& written, const auto& stored, auto kept_of, auto is_live) {
    std::unordered_map<std::string_view, const typename std::decay_t<decltype(stored)>::value_type*> by_id;
    for (const auto& row : stored) by_id.emplace(row.id, &row);
    std::unordered_set<std::string_view> seen;
    for (const auto& row : written) {
      if (!seen.insert(row.id).second) continue;
      auto it = by_id.find(row.id);
      const auto* live = it != by_id.end() && is_live(*it->second) ? it->second : nullptr;
      const auto* kept = kept_of(row.id);
      const std::string want = live != nullptr ? to_json_text(*live) : "(not live)";
      const std::string have = kept != nullptr ? to_json_text(*kept) : "(not live)";
      if (want != have) {
        diff += (diff.empty() ? "" : "; ") + std::string(kind) + " " + row.id + ": kept " + have + ", stored " + want;
      }
    }
  };
  std::vector<std::string> task_ids;
  std::vector<std::string> attempt_ids;
  for (const auto& t : rows.tasks) task_ids.push_back(t.id);
  for (const auto& a : rows.attempts) attempt_ids.push_back(a.id);
  CP_ASSIGN(auto tasks, tx.get_tasks(distinct(task_ids)));
  CP_ASSIGN(auto attempts, tx.get_attempts(distinct(attempt_ids)));
  compare("task", rows.tasks, tasks, [&](const std::string& id) { return task(id); },
          [](const Task& t) { return kLive.contains(t.state); });
  compare("attempt", rows.attempts, attempts, [&](const std::string& id) { return attempt(id); },
          [](const Attempt& a) { return !is_terminal(a.state); });
  return diff;
}

void LiveWork::put(Task t) {
  erase(t.id);
  std::string id = t.id;
  auto [it, inserted] = tasks_.emplace(std::move(id), std::move(t));
  const Task& kept = it->second;  // nodes of an unordered_map stay where they are
  if (kept.state == TaskState::Queued) queued_.emplace(std::pair{kept.created_at, kept.id}, &kept);
}

void LiveWork::erase(const std::string& id) {
  auto it = tasks_.find(id);
  if (it == tasks_.end()) return;
  if (it->second.state == TaskState::Queued) queued_.erase(std::pair{it->second.created_at, id});
  tasks_.erase(it);
}

void LiveWork::charge(Sums& sums, const Attempt& a, const std::string& group, std::int64_t sign) {
  if (!group.empty()) sums.groups[group].add(a.resources, sign * internal::attempt_replicas(a));
  if (a.placements.empty()) return;
  auto& nodes = sums.nodes[a.cluster_id];
  for (const auto& rp : a.placements) {
    NodeUse& use = nodes[rp.node];
    use.used.add(a.resources, sign);
    for (int i : rp.gpu_indices) {
      if (sign > 0) {
        use.gpus.insert(i);
      } else if (auto it = use.gpus.find(i); it != use.gpus.end()) {
        use.gpus.erase(it);
      }
    }
  }
}

void LiveWork::put_attempt(Attempt a) {
  erase_attempt(a.id);
  // The group of its task as read: tasks are read before attempts.
  const Task* t = task(a.task_id);
  std::string group = t != nullptr ? t->resource_group : std::string();
  if (t == nullptr) ungrouped_.insert(a.id);
  charge(sums_, a, group, +1);
  group_of_attempt_.insert_or_assign(a.id, std::move(group));
  std::string id = a.id;
  attempts_.insert_or_assign(std::move(id), std::move(a));
}

void LiveWork::erase_attempt(const std::string& id) {
  auto it = attempts_.find(id);
  if (it == attempts_.end()) return;
  auto g = group_of_attempt_.find(id);
  charge(sums_, it->second, g == group_of_attempt_.end() ? std::string() : g->second, -1);
  if (g != group_of_attempt_.end()) group_of_attempt_.erase(g);
  ungrouped_.erase(id);
  attempts_.erase(it);
}

const LiveWork::NodeUse* LiveWork::node_use(std::string_view cluster, std::string_view node) const {
  auto c = sums_.nodes.find(cluster);
  if (c == sums_.nodes.end()) return nullptr;
  auto n = c->second.find(node);
  return n == c->second.end() ? nullptr : &n->second;
}

namespace {

// Tallies compared by their non-zero amounts (a sum that went back to 0
// keeps its entry).
bool same_amounts(const sched::Tally& a, const sched::Tally& b) {
  auto nonzero = [](const sched::Tally& t) {
    std::vector<sched::Tally::Entry> out;
    for (const auto& e : t.amounts()) {
      if (e.second != 0) out.push_back(e);
    }
    return out;
  };
  return nonzero(a) == nonzero(b);
}

}  // namespace

std::string LiveWork::check_sums() const {
  Sums fresh;
  for (const auto& [id, a] : attempts_) {
    auto g = group_of_attempt_.find(id);
    charge(fresh, a, g == group_of_attempt_.end() ? std::string() : g->second, +1);
  }
  std::string diff;
  auto note = [&](const std::string& what) { diff += (diff.empty() ? "" : "; ") + what; };
  std::set<std::string> groups;
  for (const auto& [g, t] : fresh.groups) groups.insert(g);
  for (const auto& [g, t] : sums_.groups) groups.insert(g);
  static const sched::Tally kNone;
  for (const auto& g : groups) {
    auto a = fresh.groups.find(g);
    auto b = sums_.groups.find(g);
    if (!same_amounts(a == fresh.groups.end() ? kNone : a->second, b == sums_.groups.end() ? kNone : b->second)) {
      note("use of resource group " + g);
    }
  }
  for (const auto& [cluster, nodes] : fresh.nodes) {
    for (const auto& [name, use] : nodes) {
      const NodeUse* kept = node_use(cluster, name);
      if (kept == nullptr || !same_amounts(kept->used, use.used) || kept->gpus != use.gpus) {
        note("use of node " + cluster + "/" + name);
      }
    }
  }
  for (const auto& [cluster, nodes] : sums_.nodes) {
    for (const auto& [name, use] : nodes) {
      auto c = fresh.nodes.find(cluster);
      const bool counted = c != fresh.nodes.end() && c->second.contains(name);
      if (!counted && (!same_amounts(use.used, kNone) || !use.gpus.empty())) note("use of node " + cluster + "/" + name);
    }
  }
  for (const auto& id : ungrouped_) {
    auto g = group_of_attempt_.find(id);
    if (!attempts_.contains(id) || g == group_of_attempt_.end() || !g->second.empty()) {
      note("group of attempt " + id);
    }
  }
  return diff;
}

std::vector<const Task*> LiveWork::queued() const {
  std::vector<const Task*> out;
  out.reserve(queued_.size());
  for (const auto& [key, t] : queued_) out.push_back(t);
  return out;
}

void LiveWork::touch(std::vector<std::string>& ids, const std::string& id) {
  if (touched_.everything) return;  // nothing to list: all of it is new to the reader
  if (touched_.tasks.size() + touched_.attempts.size() >= kMaxTouched) {
    touched_ = Touched{};
    return;
  }
  ids.push_back(id);
}

LiveWork::Touched LiveWork::take_touched() {
  Touched out = std::move(touched_);
  touched_ = Touched{};
  touched_.everything = false;
  return out;
}

const Attempt* LiveWork::attempt(const std::string& id) const {
  auto it = attempts_.find(id);
  return it == attempts_.end() ? nullptr : &it->second;
}

const Task* LiveWork::task(const std::string& id) const {
  auto it = tasks_.find(id);
  return it == tasks_.end() ? nullptr : &it->second;
}

std::vector<const Attempt*> LiveWork::attempts() const {
  std::vector<const Attempt*> out;
  out.reserve(attempts_.size());
  for (const auto& [id, a] : attempts_) out.push_back(&a);
  std::sort(out.begin(), out.end(), [](const Attempt* a, const Attempt* b) {
    return a->cluster_id != b->cluster_id ? a->cluster_id < b->cluster_id : a->id < b->id;
  });
  return out;
}

}  // namespace cp
