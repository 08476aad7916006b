#include "server/live_work.h"

#include <algorithm>
#include <set>
#include <string_view>
#include <unordered_set>

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
  CP_ASSIGN(auto tasks, tx.tasks_in_states(kLive));
  CP_ASSIGN(auto attempts, tx.active_attempts(""));
  stats_.rows_read = static_cast<std::int64_t>(tasks.size() + attempts.size());
  for (auto& t : tasks) put(std::move(t));
  for (auto& a : attempts) {
    std::string id = a.id;
    attempts_.emplace(std::move(id), std::move(a));
  }
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
    attempts_.erase(id);
  }
  for (auto& a : attempts) {
    if (is_terminal(a.state)) continue;
    std::string id = a.id;
    attempts_.insert_or_assign(std::move(id), std::move(a));
  }
  return {};
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
