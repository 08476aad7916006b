#include "sched/warm.h"

#include <algorithm>
#include <tuple>
#include <utility>

#include "sched/cycle.h"
#include "sched/cycle_state.h"
#include "sched/queue_order.h"

namespace cp::sched {
namespace {

// Below this many ended works kept in memory, no build just to drop them.
constexpr std::size_t kRetiredBeforeBuild = 4096;

}  // namespace

Scheduler::Scheduler(Snapshot snapshot) {
  for (auto& n : snapshot.nodes) node_store_.push_back(std::move(n));
  for (auto& w : snapshot.running) work_store_.push_back(std::move(w));
  snapshot.nodes.clear();
  snapshot.running.clear();
  meta_ = std::move(snapshot);
  for (const Node& n : node_store_) nodes_.push_back(&n);
  // Attempt ids are the store's keys: a repeated one keeps its first work.
  for (RunningWork& w : work_store_) {
    if (!live_.try_emplace(w.attempt_id, Live{&w, 0}).second) ++retired_;
  }
  build();
}

Scheduler::~Scheduler() = default;

namespace {

bool by_attempt(const RunningWork* a, const RunningWork* b) {
  return std::tie(a->attempt_id, a->task_id) < std::tie(b->attempt_id, b->task_id);
}

}  // namespace

void Scheduler::build() {
  ++builds_;
  state_.reset();  // it views the stores, which may be compacted below
  // The live works in the order the state indexes them (attempt id), so
  // that index i of the state is works[i].
  std::vector<RunningWork*> works;
  works.reserve(live_.size());
  for (auto& [id, l] : live_) works.push_back(l.work);
  std::sort(works.begin(), works.end(), by_attempt);
  live_.clear();
  if (retired_ > 0) {
    // Drop nodes and works that are no longer live.
    std::deque<Node> nodes;
    for (const Node* n : nodes_) nodes.push_back(*n);
    std::deque<RunningWork> store;
    for (RunningWork* w : works) store.push_back(std::move(*w));
    node_store_ = std::move(nodes);
    work_store_ = std::move(store);
    nodes_.clear();
    for (const Node& n : node_store_) nodes_.push_back(&n);
    works.clear();
    for (RunningWork& w : work_store_) works.push_back(&w);
    retired_ = 0;
  }
  for (std::size_t i = 0; i < works.size(); ++i) live_.emplace(works[i]->attempt_id, Live{works[i], i});
  state_ = std::make_unique<CycleState>(meta_, nodes_, std::vector<const RunningWork*>(works.begin(), works.end()));
  state_->index_everything();
}

void Scheduler::start(RunningWork work) {
  end(work.attempt_id);
  RunningWork& w = work_store_.emplace_back(std::move(work));
  std::size_t index = state_->add_running(w);
  live_.insert_or_assign(std::string_view(w.attempt_id), Live{&w, index});
}

bool Scheduler::stopping(std::string_view attempt_id) {
  auto it = live_.find(attempt_id);
  if (it == live_.end()) return false;
  it->second.work->stopping = true;
  state_->set_stopping(it->second.index);
  return true;
}

bool Scheduler::end(std::string_view attempt_id) {
  auto it = live_.find(attempt_id);
  if (it == live_.end()) return false;
  state_->remove_running(it->second.index);
  live_.erase(it);
  ++retired_;
  if (retired_ > kRetiredBeforeBuild && retired_ > live_.size()) build();
  return true;
}

void Scheduler::update_node(Node node) {
  const Node& n = node_store_.emplace_back(std::move(node));
  std::size_t pos = nodes_.size();
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    if (nodes_[i]->cluster_id == n.cluster_id && nodes_[i]->name == n.name) {
      pos = i;
      break;
    }
  }
  if (pos == nodes_.size()) {
    nodes_.push_back(&n);
    build();
    return;
  }
  const Node* old = nodes_[pos];
  nodes_[pos] = &n;
  ++retired_;
  auto index = state_->node_index(n.cluster_id, n.name);
  if (!index) return;  // a cluster the state does not know: nothing indexed
  if (state_->nodes()[*index].node != old || !state_->replace_node(*index, n)) build();
}

bool Scheduler::remove_node(std::string_view cluster_id, std::string_view name) {
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    if (nodes_[i]->cluster_id == cluster_id && nodes_[i]->name == name) {
      nodes_.erase(nodes_.begin() + static_cast<std::ptrdiff_t>(i));
      ++retired_;
      build();
      return true;
    }
  }
  return false;
}

Snapshot Scheduler::snapshot() const {
  Snapshot out = meta_;
  for (const Node* n : nodes_) out.nodes.push_back(*n);
  std::vector<const RunningWork*> works;
  for (const auto& [id, l] : live_) works.push_back(l.work);
  std::sort(works.begin(), works.end(), by_attempt);
  for (const RunningWork* w : works) out.running.push_back(*w);
  return out;
}

Plan Scheduler::decide(const std::vector<QueuedTask>& queue, Millis now) {
  if (!meta_.config.fair_share) return decide(queue, now, PriorityOrder{});
  FairShareOrder order(meta_.resource_groups, queue);
  for (std::string_view group : order.groups_to_count()) {
    for (std::size_t w : state_->running_of_group(group)) order.count(state_->running(w));
  }
  return decide(queue, now, order);
}

Plan Scheduler::decide(const std::vector<QueuedTask>& queue, Millis now, const QueueOrder& order) {
  state_->begin_cycle();
  // The cycle's changes are put back however it ends.
  struct Close {
    CycleState& state;
    ~Close() { state.end_cycle(); }
  } close{*state_};
  return run_cycle(*state_, meta_.config, queue, now, order);
}

}  // namespace cp::sched
