// cubeplane-bench-sched: how fast decide() plans on a synthetic fleet.
//
//   1. placements per second: one decide() over the whole queue;
//   2. cycle time p50/p99: cycles where placements start running, some work
//      finishes, new tasks arrive, victims of preemption go away;
//   3. preemption decision time: one urgent task, past its wait, against a
//      fleet full to the last GPU, many times: on the state kept between
//      cycles (sched::Scheduler, warm.h), as a server keeps it, and rebuilt
//      from the snapshot by decide() (cold), both timed;
//   4. memory per queued task (the allocator's count around building the queue);
//   5. --series: (1) at 1k, 5k, 10k, 20k nodes, ns per decision.
//
// Before it, `plan_digest=<hex>`: a digest of every plan of the run
// (plan_digest.h), the same for the same flags unless a plan changed. Warm
// plans must equal cold ones: a sample of cycles and every preemption plan
// are decided both ways and compared (a difference fails the run).
// The last line is for scripts and CI, always in this form:
//   placements_per_sec=N nodes=N p99_cycle_ms=X preempt_p99_ms=X
// Targets are judged in docs/benchmarks.md, never asserted here.
#include <malloc.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <map>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/clock.h"
#include "plan_digest.h"
#include "sched/warm.h"
#include "synthetic.h"

namespace cp::bench {
namespace {

using SteadyClock = std::chrono::steady_clock;
constexpr Millis kCycleInterval = 10'000;

struct Options {
  FleetShape shape;
  int tasks = 100000;
  int cycles = 30;
  int preemption_scenarios = 200;
  double finish_fraction = 0.05;  // of running work, per cycle
  int arrivals = -1;              // new tasks per cycle; -1: tasks / 20
  std::uint64_t seed = 1;
  bool quick = false;
  bool series = false;
  int series_tasks_per_node = 1;
  int series_repeat = 3;  // decide() runs per size; the fastest counts (least disturbed by other load)
};

struct Timed {
  sched::Plan plan;
  double ms = 0;      // wall (steady_clock): the figure reported
  double cpu_ms = 0;  // this thread's CPU time
};

Timed timed_decide(const sched::Snapshot& snapshot, const std::vector<sched::QueuedTask>& queue, Millis now) {
  double cpu_start = thread_cpu_ms();
  auto start = SteadyClock::now();
  sched::Plan plan = sched::decide(snapshot, queue, now);
  auto end = SteadyClock::now();
  double cpu = thread_cpu_ms() - cpu_start;
  return Timed{std::move(plan), std::chrono::duration<double, std::milli>(end - start).count(), cpu};
}

Timed timed_decide(sched::Scheduler& warm, const std::vector<sched::QueuedTask>& queue, Millis now) {
  double cpu_start = thread_cpu_ms();
  auto start = SteadyClock::now();
  sched::Plan plan = warm.decide(queue, now);
  auto end = SteadyClock::now();
  double cpu = thread_cpu_ms() - cpu_start;
  return Timed{std::move(plan), std::chrono::duration<double, std::milli>(end - start).count(), cpu};
}

double ms_since(SteadyClock::time_point start) {
  return std::chrono::duration<double, std::milli>(SteadyClock::now() - start).count();
}

std::string digest_of(const sched::Plan& plan) {
  PlanDigest d;
  d.add(plan);
  return d.hex();
}

// Of the tasks waiting in both of two consecutive cycles' plans: all, those
// whose reasons changed (Reasons::same_as), and of these those whose codes
// changed (a new why). The server's apply writes a waiting task again when
// its codes changed, and when only its figures did, at most every
// reasons_refresh_s (docs/operations.md).
struct Rewritten {
  std::size_t both = 0, changed = 0, codes = 0;
};
Rewritten rewritten(const sched::Plan& before, const sched::Plan& after) {
  std::unordered_map<std::string_view, const sched::Reasons*> was;
  was.reserve(before.pending.size());
  for (const auto& p : before.pending) was.emplace(p.task_id, &p.reasons);
  Rewritten out;
  for (const auto& p : after.pending) {
    auto it = was.find(p.task_id);
    if (it == was.end()) continue;
    ++out.both;
    if (it->second->same_as(p.reasons)) continue;
    ++out.changed;
    const sched::Reasons& a = *it->second;
    bool same_codes = a.size() == p.reasons.size();
    for (std::size_t i = 0; same_codes && i < a.size(); ++i) same_codes = a[i].code == p.reasons[i].code;
    if (!same_codes) ++out.codes;
  }
  return out;
}

// Nearest rank: the smallest value with at least p of the samples at or below it.
double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  auto rank = static_cast<std::size_t>(std::ceil(p * static_cast<double>(v.size())));
  return v[std::clamp<std::size_t>(rank, 1, v.size()) - 1];
}

}  // namespace
}  // namespace cp::bench

// jemalloc's control interface, when the binary is linked with it (the
// default build): weak, so that a build with glibc's malloc links too.
extern "C" int mallctl(const char* name, void* oldp, std::size_t* oldlenp, void* newp, std::size_t newlen)
    __attribute__((weak));

namespace cp::bench {
namespace {

// Bytes the program has allocated and not freed. With jemalloc, its own
// count (glibc's mallinfo2() knows nothing of jemalloc's heap and says 0);
// with glibc's malloc, mallinfo2().
std::size_t heap_in_use() {
  if (mallctl != nullptr) {
    // jemalloc's statistics are a snapshot, refreshed by writing "epoch".
    std::uint64_t epoch = 1;
    std::size_t size = sizeof epoch;
    mallctl("epoch", &epoch, &size, &epoch, size);
    std::size_t allocated = 0;
    size = sizeof allocated;
    if (mallctl("stats.allocated", &allocated, &size, nullptr, 0) == 0) return allocated;
  }
  struct mallinfo2 mi = mallinfo2();
  return mi.uordblks + mi.hblkhd;  // small chunks in use + mmapped (large) ones
}

// "no_matching_node 812, quota_exceeded 4410, ..." by each pending task's first reason.
std::string pending_summary(const sched::Plan& plan) {
  std::map<std::string, std::size_t> by_code;
  for (const auto& p : plan.pending) by_code[p.reasons.empty() ? "(none)" : p.reasons.front().code]++;
  std::vector<std::pair<std::size_t, std::string>> sorted;
  for (const auto& [code, n] : by_code) sorted.emplace_back(n, code);
  std::sort(sorted.rbegin(), sorted.rend());
  std::string s;
  for (const auto& [n, code] : sorted) s += (s.empty() ? "" : ", ") + code + " " + std::to_string(n);
  return s.empty() ? "-" : s;
}

void print_fleet(const Fleet& fleet) {
  std::map<std::string, std::int64_t> capacity, held;
  for (const auto& n : fleet.snapshot.nodes) {
    for (const auto& [name, amount] : n.allocatable.amounts()) capacity[name] += amount;
  }
  std::size_t stopping = 0;
  for (const auto& w : fleet.snapshot.running) {
    for (const auto& [name, amount] : w.per_replica.amounts()) {
      held[name] += amount * static_cast<std::int64_t>(w.placements.size());
    }
    if (w.stopping) ++stopping;
  }
  std::printf("fleet: %zu nodes, %zu clusters, %zu resource groups, %zu running (%zu stopping)\n",
              fleet.snapshot.nodes.size(), fleet.snapshot.clusters.size(), fleet.snapshot.resource_groups.size(),
              fleet.snapshot.running.size(), stopping);
  for (const auto& [name, cap] : capacity) {
    double pct = cap > 0 ? 100.0 * static_cast<double>(held[name]) / static_cast<double>(cap) : 0.0;
    std::printf("  %-22s %s of %s in use (%.0f%%)\n", name.c_str(), format_quantity(name, held[name]).c_str(),
                format_quantity(name, cap).c_str(), pct);
  }
}

// Turns a plan into the next cycle's input, as the server and agents would:
// victims told to stop in the previous cycle are gone, placed tasks run,
// victims of this plan are stopping, some work finishes, new tasks arrive.
// The same changes go to `warm` as deltas, as a server would hand them to the
// state it keeps.
class CycleDriver {
 public:
  CycleDriver(Fleet& fleet, std::vector<sched::QueuedTask>& queue, const Options& o, std::mt19937_64& rng,
              sched::Scheduler& warm)
      : fleet_(fleet), queue_(queue), options_(o), rng_(rng), warm_(warm) {}

  void apply(const sched::Plan& plan, Millis now) {
    auto& running = fleet_.snapshot.running;
    std::bernoulli_distribution finishes(options_.finish_fraction);
    std::size_t left = 0;
    for (std::size_t i = 0; i < running.size(); ++i) {
      // Told to stop last cycle: gone now.
      if (running[i].stopping) {
        warm_.end(running[i].attempt_id);
        continue;
      }
      if (finishes(rng_)) {
        warm_.end(running[i].attempt_id);
        continue;
      }
      if (left != i) running[left] = std::move(running[i]);
      ++left;
    }
    running.resize(left);

    std::unordered_map<std::string, std::size_t> by_id;
    for (std::size_t i = 0; i < queue_.size(); ++i) by_id.emplace(queue_[i].task.id, i);
    std::vector<bool> placed(queue_.size(), false);
    for (const auto& p : plan.placements) {
      auto it = by_id.find(p.task_id);
      if (it == by_id.end()) continue;
      running.push_back(fleet_.running_from(queue_[it->second], p, now));
      warm_.start(running.back());
      placed[it->second] = true;
    }
    std::size_t kept = 0;
    for (std::size_t i = 0; i < queue_.size(); ++i) {
      if (placed[i]) continue;
      if (kept != i) queue_[kept] = std::move(queue_[i]);
      ++kept;
    }
    queue_.resize(kept);

    std::unordered_map<std::string, std::size_t> by_attempt;
    for (std::size_t i = 0; i < running.size(); ++i) by_attempt.emplace(running[i].attempt_id, i);
    for (const auto& v : plan.preemptions) {
      if (auto it = by_attempt.find(v.attempt_id); it != by_attempt.end()) {
        running[it->second].stopping = true;
        warm_.stopping(v.attempt_id);
      }
    }

    int arrivals = options_.arrivals >= 0 ? options_.arrivals : options_.tasks / 20;
    auto fresh = fleet_.tasks(arrivals, now + kCycleInterval, kCycleInterval, rng_);
    for (auto& t : fresh) queue_.push_back(std::move(t));
  }

 private:
  Fleet& fleet_;
  std::vector<sched::QueuedTask>& queue_;
  const Options& options_;
  std::mt19937_64& rng_;
  sched::Scheduler& warm_;
};

struct Throughput {
  std::size_t tasks = 0;
  std::size_t placements = 0;
  double ms = 0;
  double cpu_ms = 0;
  double per_sec() const { return ms > 0 ? static_cast<double>(placements) / (ms / 1000.0) : 0; }
  double ns_per_decision() const { return tasks > 0 ? ms * 1e6 / static_cast<double>(tasks) : 0; }
  double cpu_ns_per_decision() const { return tasks > 0 ? cpu_ms * 1e6 / static_cast<double>(tasks) : 0; }
};

struct SeriesPoint {
  int nodes = 0;
  Throughput t;
};

SeriesPoint series_point(const Options& o, int nodes, PlanDigest& digest) {
  FleetShape shape = o.shape;
  shape.nodes = nodes;
  std::mt19937_64 rng(o.seed);
  Fleet fleet(shape, rng);
  fleet.snapshot.running = fleet.occupy(Fill::kPartial, kNow, rng);
  auto queue = fleet.tasks(nodes * o.series_tasks_per_node, kNow, 3600 * 1000, rng);
  Throughput best{queue.size(), 0, 0, 0};
  for (int i = 0; i < o.series_repeat; ++i) {
    Timed run = timed_decide(fleet.snapshot, queue, kNow);
    if (i == 0) digest.add(run.plan);
    best.placements = run.plan.placements.size();
    best.ms = i == 0 ? run.ms : std::min(best.ms, run.ms);
    best.cpu_ms = i == 0 ? run.cpu_ms : std::min(best.cpu_ms, run.cpu_ms);
  }
  return SeriesPoint{nodes, best};
}

int run(const Options& o) {
  std::printf("cubeplane-bench-sched: seed=%llu nodes=%d clusters=%d groups=%d project_groups=%d tasks=%d%s\n",
              static_cast<unsigned long long>(o.seed), o.shape.nodes, o.shape.clusters, o.shape.groups,
              o.shape.project_groups, o.tasks, o.quick ? " (quick)" : "");
  std::mt19937_64 rng(o.seed);
  Fleet fleet(o.shape, rng);
  fleet.snapshot.running = fleet.occupy(Fill::kPartial, kNow, rng);
  print_fleet(fleet);

  // 4. Memory per queued task: everything the queue allocates, strings and maps included.
  std::size_t before = heap_in_use();
  auto queue = fleet.tasks(o.tasks, kNow, 3600 * 1000, rng);
  double queue_bytes = static_cast<double>(heap_in_use()) - static_cast<double>(before);
  double bytes_per_task = o.tasks > 0 ? queue_bytes / o.tasks : 0;
  std::printf("memory: %.0f bytes per queued task (%zu tasks, %.1f MiB; sizeof(QueuedTask)=%zu)\n", bytes_per_task,
              queue.size(), queue_bytes / (1 << 20), sizeof(sched::QueuedTask));

  // Per measurement, and all of them together for the line before the last.
  PlanDigest all_plans, throughput_plans, cycle_plans, preemption_plans, series_plans;
  auto digest = [&](PlanDigest& part, const sched::Plan& p) {
    part.add(p);
    all_plans.add(p);
  };

  // 1. Placements per second over the full queue; this is also the first cycle of 2.
  Timed first = timed_decide(fleet.snapshot, queue, kNow);
  digest(throughput_plans, first.plan);
  Throughput full{queue.size(), first.plan.placements.size(), first.ms, first.cpu_ms};
  std::printf("throughput: decide() over %zu tasks: %zu placed, %zu preemptions, %zu pending in %.3f ms "
              "(cpu %.3f ms)\n",
              full.tasks, full.placements, first.plan.preemptions.size(), first.plan.pending.size(), full.ms,
              first.cpu_ms);
  std::printf("  pending by first reason: %s\n", pending_summary(first.plan).c_str());
  std::printf("  placements/s: %.0f   ns per decision: %.0f\n", full.per_sec(), full.ns_per_decision());

  // 2. Scheduling cycles.
  std::vector<double> cycle_ms{first.ms}, cycle_cpu_ms{first.cpu_ms};
  std::printf("cycle %2d: queue %7zu  placed %6zu  preempted %4zu  running %7zu  %10.3f ms (cpu %.3f)\n", 1,
              queue.size(), first.plan.placements.size(), first.plan.preemptions.size(),
              fleet.snapshot.running.size(), first.ms, first.cpu_ms);
  // The state a server keeps, built once from the snapshot the first cycle
  // saw, then following it by deltas; on a sample of cycles it plans too,
  // and its plan must be the cold one.
  auto warm_start = SteadyClock::now();
  sched::Scheduler warm(fleet.snapshot);
  double warm_build_ms = ms_since(warm_start);
  std::printf("warm state: built in %.3f ms\n", warm_build_ms);
  CycleDriver driver(fleet, queue, o, rng, warm);
  sched::Plan plan = std::move(first.plan);
  Millis now = kNow;
  int warm_checked = 0, warm_equal = 0;
  std::vector<double> warm_cycle_ms;
  std::vector<double> rewritten_share, new_why_share;  // per cycle: of the tasks waiting in both
  std::size_t rewritten_max = 0, new_why_max = 0;
  for (int c = 2; c <= o.cycles; ++c) {
    driver.apply(plan, now);
    now += kCycleInterval;
    Timed t = timed_decide(fleet.snapshot, queue, now);
    digest(cycle_plans, t.plan);
    cycle_ms.push_back(t.ms);
    cycle_cpu_ms.push_back(t.cpu_ms);
    const Rewritten r = rewritten(plan, t.plan);
    const double both = static_cast<double>(std::max<std::size_t>(r.both, 1));
    rewritten_share.push_back(static_cast<double>(r.changed) / both);
    new_why_share.push_back(static_cast<double>(r.codes) / both);
    rewritten_max = std::max(rewritten_max, r.changed);
    new_why_max = std::max(new_why_max, r.codes);
    std::printf("cycle %2d: queue %7zu  placed %6zu  preempted %4zu  running %7zu  %10.3f ms (cpu %.3f)  "
                "of %zu still waiting, reasons changed %zu, codes %zu\n",
                c, queue.size(), t.plan.placements.size(), t.plan.preemptions.size(), fleet.snapshot.running.size(),
                t.ms, t.cpu_ms, r.both, r.changed, r.codes);
    if (c == 2 || c == o.cycles || c % 10 == 0) {
      Timed w = timed_decide(warm, queue, now);
      ++warm_checked;
      bool same = digest_of(w.plan) == digest_of(t.plan);
      warm_equal += same ? 1 : 0;
      warm_cycle_ms.push_back(w.ms);
      std::printf("  warm: %10.3f ms (cpu %.3f), plan %s the cold one\n", w.ms, w.cpu_ms,
                  same ? "equal to" : "DIFFERENT FROM");
    }
    plan = std::move(t.plan);
  }
  double p50_cycle = percentile(cycle_ms, 0.50), p99_cycle = percentile(cycle_ms, 0.99);
  std::printf("cycles: %zu, p50 %.3f ms, p99 %.3f ms, max %.3f ms (cpu p50 %.3f ms, p99 %.3f ms)\n",
              cycle_ms.size(), p50_cycle, p99_cycle, *std::max_element(cycle_ms.begin(), cycle_ms.end()),
              percentile(cycle_cpu_ms, 0.50), percentile(cycle_cpu_ms, 0.99));
  if (!rewritten_share.empty()) {
    std::printf("tasks waiting through a cycle: reasons changed p50 %.1f%% (max %zu tasks), codes changed "
                "p50 %.1f%% (max %zu tasks)\n",
                100 * percentile(rewritten_share, 0.5), rewritten_max, 100 * percentile(new_why_share, 0.5),
                new_why_max);
  }
  // Freed before the latency figures, so that they do not pay for a heap
  // fragmented by the big queue and its plan.
  queue = {};
  plan = {};
  malloc_trim(0);

  // 3. Preemption: the same fleet (same seed), every node full of one group's
  // work, mostly batch; each group guaranteed room for more, so only the full
  // fleet stands in an urgent task's way.
  std::mt19937_64 prng(o.seed);
  Fleet full_fleet(o.shape, prng);
  full_fleet.snapshot.running = full_fleet.occupy(Fill::kFull, kNow, prng);
  full_fleet.make_room_in_quota(full_fleet.snapshot.running, 16);
  std::vector<double> empty_ms;
  for (int i = 0; i < 10; ++i) {
    Timed t = timed_decide(full_fleet.snapshot, {}, kNow);
    if (i == 0) digest(preemption_plans, t.plan);
    empty_ms.push_back(t.ms);
  }
  // The scenarios first, so that cold and warm decide the same tasks.
  std::vector<sched::QueuedTask> scenarios;
  for (int i = 0; i < o.preemption_scenarios; ++i) scenarios.push_back(full_fleet.urgent_preemptor(kNow, prng));
  std::vector<double> all_ms, preempting_ms, preempting_cpu_ms;
  std::vector<std::string> cold_digests;
  std::vector<bool> preempted;
  std::map<std::string, int> outcomes;
  for (const auto& task : scenarios) {
    std::vector<sched::QueuedTask> one{task};
    Timed t = timed_decide(full_fleet.snapshot, one, kNow);
    digest(preemption_plans, t.plan);
    cold_digests.push_back(digest_of(t.plan));
    all_ms.push_back(t.ms);
    preempted.push_back(!t.plan.preemptions.empty());
    if (!t.plan.preemptions.empty()) {
      preempting_ms.push_back(t.ms);
      preempting_cpu_ms.push_back(t.cpu_ms);
      outcomes["preempted"]++;
    } else if (!t.plan.placements.empty()) {
      outcomes["placed"]++;
    } else {
      outcomes["pending: " + pending_summary(t.plan)]++;
    }
  }
  // Warm, apart from the cold calls (whose freed state would otherwise be
  // what the next call's allocator tidies up): built once, as a server keeps
  // it; after each plan the server's deltas (victims told to stop, then gone;
  // here they start again, so that every scenario meets the same fleet, as
  // the cold decide() does).
  malloc_trim(0);
  auto warm_full_start = SteadyClock::now();
  sched::Scheduler warm_full(full_fleet.snapshot);
  double warm_full_build_ms = ms_since(warm_full_start);
  std::vector<double> warm_empty_ms;
  for (int i = 0; i < 10; ++i) {
    Timed t = timed_decide(warm_full, {}, kNow);
    warm_empty_ms.push_back(t.ms);
  }
  std::unordered_map<std::string, const sched::RunningWork*> full_by_attempt;
  for (const auto& w : full_fleet.snapshot.running) full_by_attempt.emplace(w.attempt_id, &w);
  std::vector<double> warm_all_ms, warm_preempting_ms, warm_preempting_cpu_ms, delta_us;
  int warm_preempt_equal = 0;
  for (std::size_t i = 0; i < scenarios.size(); ++i) {
    std::vector<sched::QueuedTask> one{scenarios[i]};
    Timed w = timed_decide(warm_full, one, kNow);
    warm_preempt_equal += digest_of(w.plan) == cold_digests[i] ? 1 : 0;
    warm_all_ms.push_back(w.ms);
    if (preempted[i]) {
      warm_preempting_ms.push_back(w.ms);
      warm_preempting_cpu_ms.push_back(w.cpu_ms);
    }
    auto delta_start = SteadyClock::now();
    for (const auto& v : w.plan.preemptions) warm_full.stopping(v.attempt_id);
    for (const auto& v : w.plan.preemptions) warm_full.end(v.attempt_id);
    for (const auto& v : w.plan.preemptions) {
      if (auto it = full_by_attempt.find(v.attempt_id); it != full_by_attempt.end()) warm_full.start(*it->second);
    }
    delta_us.push_back(ms_since(delta_start) * 1000);
  }
  std::printf("preemption: %zu running on a full fleet; %zu of %d urgent tasks preempted\n",
              full_fleet.snapshot.running.size(), preempting_ms.size(), o.preemption_scenarios);
  for (const auto& [what, n] : outcomes) std::printf("  %-40s %d\n", what.c_str(), n);
  std::printf("  cold, decide(snapshot) indexing the snapshot on every call:\n");
  std::printf("    empty queue:                 p50 %.3f ms\n", percentile(empty_ms, 0.5));
  std::printf("    one urgent task, all:        p50 %.3f ms, p99 %.3f ms\n", percentile(all_ms, 0.5),
              percentile(all_ms, 0.99));
  double cold_preempt_p99 = percentile(preempting_ms.empty() ? all_ms : preempting_ms, 0.99);
  if (!preempting_ms.empty()) {
    std::printf("    one urgent task, preempting: p50 %.3f ms, p99 %.3f ms (cpu p99 %.3f ms)\n",
                percentile(preempting_ms, 0.5), cold_preempt_p99, percentile(preempting_cpu_ms, 0.99));
  }
  std::printf("  warm, Scheduler::decide on the state kept between calls (built once in %.3f ms):\n",
              warm_full_build_ms);
  std::printf("    empty queue:                 p50 %.3f ms\n", percentile(warm_empty_ms, 0.5));
  std::printf("    one urgent task, all:        p50 %.3f ms, p99 %.3f ms\n", percentile(warm_all_ms, 0.5),
              percentile(warm_all_ms, 0.99));
  double preempt_p99 = percentile(warm_preempting_ms.empty() ? warm_all_ms : warm_preempting_ms, 0.99);
  if (preempting_ms.empty()) {
    std::printf("  WARNING: no plan preempted; preempt_p99_ms below is over all scenarios\n");
  } else {
    std::printf("    one urgent task, preempting: p50 %.3f ms, p99 %.3f ms (cpu p99 %.3f ms)\n",
                percentile(warm_preempting_ms, 0.5), preempt_p99, percentile(warm_preempting_cpu_ms, 0.99));
  }
  std::printf("    deltas after each plan (victims stopping, gone, back): p50 %.1f us, p99 %.1f us\n",
              percentile(delta_us, 0.5), percentile(delta_us, 0.99));
  std::printf("  warm plans equal to cold: preemption %d of %d, cycles %d of %d\n", warm_preempt_equal,
              o.preemption_scenarios, warm_equal, warm_checked);

  // 5. Growth in nodes: clusters, groups and project groups fixed, tasks
  // scaled with the fleet (series_tasks_per_node per node) so that the
  // fleet is as loaded at every size.
  if (o.series) {
    std::printf("series: clusters %d, groups %d, project groups %d fixed; %d queued task(s) per node; "
                "fastest of %d runs\n",
                o.shape.clusters, o.shape.groups, o.shape.project_groups, o.series_tasks_per_node, o.series_repeat);
    std::vector<SeriesPoint> points;
    for (int nodes : {1000, 5000, 10000, 20000}) {
      points.push_back(series_point(o, nodes, series_plans));
      const auto& p = points.back();
      std::printf("series: nodes %6d  tasks %7zu  placed %6zu  decide %11.3f ms  placements/s %8.0f  "
                  "ns/decision %9.0f (cpu %9.0f)\n",
                  p.nodes, p.t.tasks, p.t.placements, p.t.ms, p.t.per_sec(), p.t.ns_per_decision(),
                  p.t.cpu_ns_per_decision());
    }
    // The exponent k in ns/decision ~ nodes^k between two sizes: below 1 is sub-linear.
    auto exponent = [](const SeriesPoint& a, const SeriesPoint& b, bool cpu) {
      double ta = cpu ? a.t.cpu_ns_per_decision() : a.t.ns_per_decision();
      double tb = cpu ? b.t.cpu_ns_per_decision() : b.t.ns_per_decision();
      return std::log(tb / ta) / std::log(static_cast<double>(b.nodes) / a.nodes);
    };
    // Sub-linear only when every step is: one size pair alone is too noisy a judge.
    bool every_step_below_1 = true;
    for (std::size_t i = 1; i < points.size(); ++i) {
      double k = exponent(points[i - 1], points[i], false);
      every_step_below_1 = every_step_below_1 && k < 1.0;
      std::printf("  ns/decision ~ nodes^%.2f (cpu: ^%.2f) from %d to %d nodes\n", k,
                  exponent(points[i - 1], points[i], true), points[i - 1].nodes, points[i].nodes);
    }
    std::printf("  overall: ns/decision ~ nodes^%.2f (cpu: ^%.2f) from %d to %d nodes; every step below ^1: %s\n",
                exponent(points.front(), points.back(), false), exponent(points.front(), points.back(), true),
                points.front().nodes, points.back().nodes, every_step_below_1 ? "yes (sub-linear)" : "no");
  }

  if (warm_preempt_equal != o.preemption_scenarios || warm_equal != warm_checked) {
    std::printf("ERROR: a plan of the warm state differs from decide() on the same snapshot\n");
    return 1;
  }
  if (full.placements == 0) {
    // A scheduler that places nothing on a fleet 40% idle, or a generator
    // that asks for nothing placeable: either way the figures mean nothing.
    std::printf("ERROR: decide() placed no task; the benchmark is broken\n");
    return 1;
  }
  if (o.series) all_plans.add(series_plans);
  std::printf("plans: throughput %s, cycles %s, preemption %s%s%s\n", throughput_plans.hex().c_str(),
              cycle_plans.hex().c_str(), preemption_plans.hex().c_str(), o.series ? ", series " : "",
              o.series ? series_plans.hex().c_str() : "");
  std::printf("plan_digest=%s\n", all_plans.hex().c_str());
  std::printf("preemption p99: warm %.3f ms (preempt_p99_ms below), cold %.3f ms\n", preempt_p99, cold_preempt_p99);
  std::printf("placements_per_sec=%.0f nodes=%d p99_cycle_ms=%.3f preempt_p99_ms=%.3f\n", full.per_sec(),
              o.shape.nodes, p99_cycle, preempt_p99);
  return 0;
}

}  // namespace
}  // namespace cp::bench

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // progress shows when piped to a file
  cp::bench::Options o;
  CLI::App app{"cubeplane-bench-sched: scheduler throughput, cycle time and preemption latency"};
  app.add_option("--nodes", o.shape.nodes, "nodes in the fleet")->check(CLI::Range(1, 1'000'000));
  app.add_option("--clusters", o.shape.clusters, "clusters the nodes are spread over")->check(CLI::Range(1, 10'000));
  app.add_option("--groups", o.shape.groups, "resource groups (1-3 clusters each)")->check(CLI::Range(1, 100'000));
  app.add_option("--project-groups", o.shape.project_groups, "project groups")->check(CLI::Range(1, 100'000));
  app.add_option("--tasks", o.tasks, "queued tasks")->check(CLI::Range(0, 10'000'000));
  app.add_option("--cycles", o.cycles, "scheduling cycles for the cycle-time figures")->check(CLI::Range(1, 10'000));
  app.add_option("--preemptions", o.preemption_scenarios, "urgent tasks timed against the full fleet")
      ->check(CLI::Range(1, 100'000));
  app.add_option("--arrivals", o.arrivals, "new tasks per cycle (default: tasks / 20)");
  app.add_option("--finish", o.finish_fraction, "fraction of running work that finishes each cycle")
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--seed", o.seed, "PRNG seed");
  app.add_flag("--quick", o.quick, "a small configuration (500 nodes, 2000 tasks, 3 cycles), for CI");
  app.add_flag("--series", o.series, "also measure throughput at 1k, 5k, 10k and 20k nodes");
  app.add_option("--series-tasks-per-node", o.series_tasks_per_node, "queued tasks per node in --series")
      ->check(CLI::Range(1, 1000));
  app.add_option("--series-repeat", o.series_repeat, "decide() runs per size in --series (the fastest counts)")
      ->check(CLI::Range(1, 100));
  CLI11_PARSE(app, argc, argv);
  if (o.quick) {
    o.shape = cp::bench::FleetShape{500, 8, 40, 16};
    o.tasks = 2000;
    o.cycles = 3;
    o.preemption_scenarios = 20;
  }
  return cp::bench::run(o);
}
