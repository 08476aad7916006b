// The scheduler: plan = decide(snapshot, queue, now). Pure: no I/O, no clock
// reads, no locks, no randomness. The server builds the Snapshot from the
// store, calls decide(), and applies the Plan in one transaction, re-checking
// it there (Nomad's Planner / plan_apply split).
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <boost/container/small_vector.hpp>
#include <boost/iterator/transform_iterator.hpp>

#include "common/clock.h"
#include "model/types.h"

namespace cp::sched {

// Work that holds resources now (an attempt Dispatched/Running/Stopping).
struct RunningWork {
  std::string task_id;
  std::string attempt_id;
  std::string resource_group;
  std::string project_group;
  std::string user;
  std::string cluster_id;
  int priority = 0;
  bool preemptible = true;  // its priority class lets others preempt it
  bool checkpoint = false;  // the step keeps a checkpoint: little work is lost
  // Already told to stop (Preempting, or cancelled and in its grace): what it
  // holds is freed soon, so it is never chosen as a victim again.
  bool stopping = false;
  Resources per_replica;  // gpu entries name the concrete type placed on
  std::vector<ReplicaPlacement> placements;
  Millis started_at = 0;  // 0: not started yet (Dispatched)
};

// Knobs of the cycle; the defaults are what the server runs with.
struct SchedulerConfig {
  // Order inside a resource group by dominant resource share of the project
  // group, then of the user, after priority (false: submit time only).
  bool fair_share = true;
  // Blocked tasks per resource group that reserve what they wait for
  // (nodes, and quota of their group), so smaller tasks behind them cannot
  // starve them. 0: no reservations (pure best-effort backfill).
  int reservations_per_group = 1;
  // The most victims one preemption may pick.
  int max_victims = 64;
};

struct Snapshot {
  std::vector<Cluster> clusters;
  std::vector<Node> nodes;
  std::vector<ResourceGroup> resource_groups;
  std::vector<PriorityClass> priority_classes;
  std::vector<RunningWork> running;
  SchedulerConfig config;
};

// A task waiting in the queue, with what the scheduler needs to know about it.
struct QueuedTask {
  Task task;
  // Tasks this one depends on that have not Succeeded yet ("" when none).
  std::vector<std::string> unfinished_dependencies;
};

struct Placement {
  std::string task_id;
  std::string cluster_id;
  std::vector<ReplicaPlacement> placements;  // one per replica
  // Per replica, with a step's bare "gpu" request resolved to "gpu/<type>" of
  // the chosen nodes: this is what quota is charged.
  Resources per_replica;
  // 0: the step's own resources; i > 0: step.fallbacks[i - 1].
  int shape = 0;
  // Part of this placement is capacity borrowed from the group's cohort
  // (above its guarantee): reclaimable by the lenders.
  bool borrowing = false;
};

// Running work to stop so that a waiting task fits. The preemptor is not
// placed in the same plan: it waits (kReasonPreemptionGrace) until its
// victims have checkpointed and gone, holding the room they free.
struct Preemption {
  std::string attempt_id;
  std::string task_id;     // the victim
  std::string cluster_id;
  std::string preemptor;   // the task that needs the room
  std::string kind;        // "reclaim" (it borrowed from the preemptor's group) | "priority"
  std::string message;     // en, names the preemptor and why
  std::string message_zh;
};

// One reason in a plan. Most are worded when made; some kinds keep only their
// figures and are worded when first read (Figured): a big cycle refuses tens
// of thousands of task classes on quota, each refusal's words and details
// about 1.5 KiB, and the server reads few of them (same_as() tells an
// unchanged reason by its figures). A reason is never changed once made.
class Reason {
 public:
  virtual ~Reason() = default;
  // The words and details (worded on the first call where kept as figures;
  // safe to call from several threads).
  virtual const PendingReason& worded() const = 0;
  // Its code; where kept as figures, told by them without wording it.
  virtual std::string_view code() const { return worded().code; }
  // Whether `other` says the same: by their figures where both are figures
  // of one kind, else by code and English message (the figures are in it).
  virtual bool same_as(const Reason& other) const;
};

// A reason worded when made.
class WordedReason final : public Reason {
 public:
  explicit WordedReason(PendingReason r) : reason_(std::move(r)) {}
  const PendingReason& worded() const override { return reason_; }

 private:
  PendingReason reason_;
};

// A reason kept as its figures, worded when first read. `Figures` has
// operator== and free functions `PendingReason word(const Figures&)` and
// `std::string_view code_of(const Figures&)` (the code word() gives).
template <class Figures>
class FiguredReason final : public Reason {
 public:
  explicit FiguredReason(Figures f) : figures_(std::move(f)) {}
  FiguredReason(const FiguredReason&) = delete;
  FiguredReason& operator=(const FiguredReason&) = delete;
  ~FiguredReason() override { delete worded_.load(std::memory_order_acquire); }
  const Figures& figures() const { return figures_; }
  // No lock: two first readers may both word it; one wording is kept.
  const PendingReason& worded() const override {
    const PendingReason* w = worded_.load(std::memory_order_acquire);
    if (w != nullptr) return *w;
    auto made = std::make_unique<const PendingReason>(word(figures_));
    if (worded_.compare_exchange_strong(w, made.get(), std::memory_order_acq_rel)) return *made.release();
    return *w;
  }
  std::string_view code() const override { return code_of(figures_); }
  bool same_as(const Reason& other) const override {
    if (const auto* o = dynamic_cast<const FiguredReason*>(&other)) return figures_ == o->figures_;
    return Reason::same_as(other);
  }

 private:
  Figures figures_;
  mutable std::atomic<const PendingReason*> worded_{nullptr};
};

// A task's reasons in a plan, read like a vector of PendingReason. Tasks of
// one class that wait for the same cause in a cycle share the reason itself
// (tens of thousands of waiting tasks, a few thousand distinct reasons), so a
// copy is a reference count, not a JSON tree.
class Reasons {
 public:
  using Shared = std::shared_ptr<const Reason>;
  // Most waiting tasks have one or two reasons: kept in place, not in an
  // allocation of their own per task.
  using Items = boost::container::small_vector<Shared, 2>;
  struct Word {
    const PendingReason& operator()(const Shared& r) const { return r->worded(); }
  };
  using const_iterator = boost::transform_iterator<Word, Items::const_iterator>;

  Reasons() = default;
  explicit Reasons(std::vector<PendingReason> reasons) {
    items_.reserve(reasons.size());
    for (auto& r : reasons) add(std::move(r));
  }

  static Shared make(PendingReason r) { return std::make_shared<const WordedReason>(std::move(r)); }
  void add(Shared r) { items_.push_back(std::move(r)); }
  void add(PendingReason r) { add(make(std::move(r))); }
  void add_front(Shared r) { items_.insert(items_.begin(), std::move(r)); }
  void add_front(PendingReason r) { add_front(make(std::move(r))); }

  std::size_t size() const { return items_.size(); }
  bool empty() const { return items_.empty(); }
  const PendingReason& operator[](std::size_t i) const { return items_[i]->worded(); }
  const PendingReason& front() const { return items_.front()->worded(); }
  const PendingReason& back() const { return items_.back()->worded(); }
  const_iterator begin() const { return const_iterator(items_.begin()); }
  const_iterator end() const { return const_iterator(items_.end()); }
  const Items& items() const { return items_; }

  // The same reasons in the same order (Reason::same_as; the same object is
  // the same reason without a look).
  bool same_as(const Reasons& other) const;
  // The reasons as a task keeps them (Task::reasons).
  std::vector<PendingReason> copied() const { return {begin(), end()}; }

 private:
  Items items_;
};

struct Pending {
  std::string task_id;
  Reasons reasons;  // at least one
};

struct Plan {
  std::vector<Placement> placements;
  std::vector<Preemption> preemptions;
  std::vector<Pending> pending;
};

// Reason codes (PendingReason::code).
inline constexpr std::string_view kReasonQuota = "quota_exceeded";
inline constexpr std::string_view kReasonNoNode = "no_matching_node";
inline constexpr std::string_view kReasonClusterOffline = "cluster_offline";
inline constexpr std::string_view kReasonNoCluster = "no_cluster";
inline constexpr std::string_view kReasonDependencies = "waiting_for_dependencies";
inline constexpr std::string_view kReasonUnknownGroup = "unknown_resource_group";
// The task's own request is unusable (replicas out of range, negative amounts,
// two GPU types); validation at submit should make this unreachable.
inline constexpr std::string_view kReasonInvalidRequest = "invalid_request";
// Victims were told to stop for this task; it waits out their grace period.
inline constexpr std::string_view kReasonPreemptionGrace = "waiting_for_preemption";
// It would fit, but on room held for an earlier blocked task (no starvation).
inline constexpr std::string_view kReasonReservation = "behind_reservation";
// Some replicas of the gang fit, not all of them in one cluster.
inline constexpr std::string_view kReasonGang = "waiting_for_gang";
// Bound to a storage pool (after a loss, or checkpointing): clusters of other
// pools are not considered; details {storage_pool, clusters_excluded, ...}.
inline constexpr std::string_view kReasonStoragePool = "storage_pool";
// Tried with a fallback shape too (details name the shapes and their waits).
inline constexpr std::string_view kReasonFallback = "fallback_shapes";
// Its class may preempt, but only once it has waited preempt_after.
inline constexpr std::string_view kReasonPreemptLater = "preemption_not_yet";

// A step's GPU count without a type: any GPU node will do, and the plan names
// the concrete type placed on (Placement::per_replica).
inline constexpr std::string_view kGpuAny = "gpu/any";

class QueueOrder;  // queue_order.h

// One scheduling cycle with the order of snapshot.config (priority, fair
// share when on, submit time, id).
Plan decide(const Snapshot& snapshot, const std::vector<QueuedTask>& queue, Millis now);
// The same with the order within each resource group supplied (fair share).
Plan decide(const Snapshot& snapshot, const std::vector<QueuedTask>& queue, Millis now, const QueueOrder& order);

}  // namespace cp::sched
