// The synthetic history of cubeplane-bench-store: a year of pipelines, their
// tasks, attempts, events and usage-ledger rows, as the server would have
// written them (src/server: pipelines.cpp, scheduling.cpp, agents.cpp,
// internal.cpp).
//
// Everything is a pure function of (seed, number of tasks): pipeline p is
// drawn from its own PRNG stream, so any task can be made again on its own
// (make_pipeline) to check what the store returns against what was written.
// The loader walks the pipelines in order of submission.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "model/types.h"
#include "store/store.h"

namespace cp::bench {

// SplitMix64: small, fast, and the same stream on every platform (the std
// distributions are not), so a seed names the same data everywhere.
class Rng {
 public:
  explicit Rng(std::uint64_t seed) : s_(seed) {}
  std::uint64_t next();
  double uniform();                            // [0, 1)
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }
  std::int64_t below(std::int64_t n);          // [0, n)
  bool chance(double p) { return uniform() < p; }
  double normal();
  double lognormal(double median, double sigma);
  // Index drawn by cumulative weights (ascending, last = total).
  std::size_t pick(const std::vector<double>& cumulative);

 private:
  std::uint64_t s_;
};

struct WorldShape {
  int project_groups = 200;
  int resource_groups = 500;
  int clusters = 64;
  int users = 1000;
  int days = 365;
};

// The fleet and the organisation: names and who may use what.
struct World {
  std::vector<std::string> project_groups, resource_groups, clusters, users;
  std::vector<double> pg_cumulative;            // task share of each project group (Zipf, s = 1)
  std::vector<std::vector<int>> pg_members;     // users of each project group
  std::vector<std::vector<int>> user_groups;    // project groups of each user (1-3)
  std::vector<int> pg_default_rg;               // each group's default resource group
  std::vector<std::vector<int>> pg_extra_rgs;   // 1-3 shared resource groups it may also use
  std::vector<std::vector<int>> rg_clusters;    // 1-3 clusters of each resource group
  std::vector<std::vector<std::string>> cluster_gpu_types;  // 1-2 GPU types per cluster
};

// What a list page is checked against: one row per task, in order of
// submission (so created_at never decreases with the index).
struct TaskKey {
  Millis created_at = 0;
  std::uint16_t resource_group = 0;
  std::uint8_t project_group = 0;
  std::uint8_t state = 0;  // TaskState
};
static_assert(sizeof(TaskKey) == 16);

// One event as the server appends it, with the ledger rows it adds in the
// same transaction (those of an attempt that ended).
struct TimedEvent {
  Event event;
  std::vector<UsageRow> usage;
};

// A task as the store holds it at the end of the history: the row (its last
// state), its attempts, and every event about it and them, in time order.
struct GeneratedTask {
  Task task;
  std::vector<Attempt> attempts;
  std::vector<TimedEvent> events;
};

// Sums of the ledger per (month, project group, cluster), as usage_totals
// grouped by {project_group, cluster} over one month must return them.
struct UsageSums {
  std::int64_t attempts = 0, gpu_ms = 0, cpu_core_ms = 0, memory_mib_s = 0;
};
using UsageKey = std::tuple<int, std::string, std::string>;  // month index, project group, cluster

class Generator {
 public:
  // Draws the world, the pipelines' sizes and submission times. Tasks are
  // made by make_pipeline.
  Generator(std::uint64_t seed, std::int64_t tasks, Millis now, WorldShape shape = {});

  const World& world() const { return world_; }
  Millis now() const { return now_; }
  Millis start() const { return start_; }
  std::int64_t task_count() const { return tasks_; }
  std::int64_t pipeline_count() const { return static_cast<std::int64_t>(pipeline_first_.size()); }
  std::int64_t first_task_of(std::int64_t pipeline) const { return pipeline_first_[pipeline]; }
  std::int64_t pipeline_of(std::int64_t task) const;
  std::string task_id(std::int64_t task) const;  // from its index and submission time alone

  // The tasks of pipeline p, in order of their steps (= task index).
  std::vector<GeneratedTask> make_pipeline(std::int64_t p) const;

 private:
  std::uint64_t seed_;
  std::int64_t tasks_;
  Millis now_, start_;
  World world_;
  std::vector<std::int64_t> pipeline_first_;  // first task index of each pipeline
  std::vector<Millis> pipeline_created_;
};

// The ledger rows of an attempt that ended, one per UTC day it ran: the same
// arithmetic as the server's internal::usage_of (src/server/internal.cpp).
std::vector<UsageRow> usage_of(const Task& task, const Attempt& a);

inline constexpr Millis kDayMs = 86'400'000;
inline Millis day_start(Millis t) { return t - ((t % kDayMs) + kDayMs) % kDayMs; }
// 00:00 UTC of the first day of the month `months` after the one holding t.
Millis month_start(Millis t, int months = 0);

}  // namespace cp::bench
