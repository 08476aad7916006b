// cubeplane-bench-cycle: one scheduling cycle of the real server over a big
// queue, in its three parts (load the snapshot, decide, apply the plan: its
// placements in one transaction, then the waiting tasks' reasons 1,000 a
// transaction), how many waiting tasks' reasons the apply writes, and the
// longest any one transaction held the store's writer.
//
//   cubeplane-bench-cycle [--store URL] [--tasks N] [--nodes N] [--groups N] [--quick]
//   (defaults: 100,000 tasks, 20 groups, 1,953 nodes; --quick: 2,000 tasks, 39 nodes)
//
// The server is the real one in this process (ControlPlane, no HTTP), on a
// simulated clock; its cluster's agent is simulated too (it registers and
// reports its nodes once). N queued one-step tasks (1-4 CPUs each) are
// written straight into the store, spread over --groups resource groups whose
// cpu guarantees admit about a quarter of them; the nodes have room for twice
// that, so most of the queue waits on quota. Four cycles, 10 s apart:
//   1. first:     every task is new; a quarter placed, the rest explained (all written);
//   2. unchanged: nothing moved: nothing to place, nothing to write;
//   3. figures:   every guarantee raised by a tenth: more placed, and every
//                 waiting task's quota figures move; those whose codes move
//                 too (a new why) are written, the others kept until
//                 reasons_refresh_s (60 s);
//   4. refresh:   61 s later: the new figures kept back written, at most
//                 reasons_refresh_per_cycle (10,000) a cycle; then cycles
//                 10 s apart until all are ("catch-up").
//
// The last line is machine-readable:
//   first_cycle_ms=X unchanged_cycle_ms=X figures_cycle_ms=X refresh_cycle_ms=X refresh_cycles=N waiting=N tasks=N
//   longest_write_ms=X write_beside_max_ms=X
// (write_beside_max_ms: the longest an empty write from another thread
// waited during the first and figures cycles, WriteProbe.)
// (refresh_cycles: the catch-up cycles that wrote something, and the last one that wrote nothing.)
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <random>
#include <thread>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "common/clock.h"
#include "common/ids.h"
#include "common/log.h"
#include "../common/server_bench.h"
#include "objstore/object_store.h"
#include "server/control_plane.h"
#include "server/fleet_config.h"
#include "store/store.h"

namespace {

namespace fs = std::filesystem;

using cp::bench::must;

struct Shape {
  int tasks = 100'000;
  int nodes = 0;  // 0: room for twice what the guarantees admit
  int groups = 20;
  int projects = 10;
  int users = 50;
  static constexpr int kNodeCpus = 64;
};

// Each group's cpu guarantee: a quarter of what its tasks ask (2.5 CPUs on
// average), times `scale`.
std::int64_t guarantee(const Shape& s, double scale) {
  const double asked = 2.5 * s.tasks / s.groups;
  return std::max<std::int64_t>(1, static_cast<std::int64_t>(asked / 4 * scale));
}

std::string fleet_yaml(const Shape& s, double scale) {
  std::string y =
      "apiVersion: cubeplane/v1\nkind: Cluster\nmetadata: {name: bench}\n"
      "spec: {executor: local, storage_pool: pool-a, embedded_agent: false}\n";
  for (int g = 0; g < s.groups; ++g) {
    y += fmt::format(
        "---\napiVersion: cubeplane/v1\nkind: ResourceGroup\nmetadata: {{name: rg-{}}}\n"
        "spec:\n  clusters: [bench]\n  quota:\n    cpu: {{guaranteed: \"{}\"}}\n",
        g, guarantee(s, scale));
  }
  for (int p = 0; p < s.projects; ++p) {
    y += fmt::format(
        "---\napiVersion: cubeplane/v1\nkind: ProjectGroup\nmetadata: {{name: pg-{}}}\n"
        "spec: {{default_resource_group: rg-{}}}\n",
        p, p % s.groups);
  }
  return y;
}

// The queue, written as a submit writes it (a pipeline, its task, the
// task's first event), 1,000 tasks to a transaction.
void write_queue(cp::Store& store, const Shape& s, cp::Millis now) {
  std::mt19937_64 rng(1);
  std::uniform_int_distribution<int> cpus(1, 4), gib(1, 8), age_s(0, 3600);
  constexpr int kBatch = 1000;
  for (int done = 0; done < s.tasks;) {
    const int n = std::min(kBatch, s.tasks - done);
    must(store.write([&](cp::Tx& tx) -> cp::Status {
           tx.hold_writes();
           for (int i = done; i < done + n; ++i) {
             cp::bench::Submitted one;
             one.at = now - 1000 * age_s(rng);
             one.project_group = "pg-" + std::to_string(i % s.projects);
             one.resource_group = "rg-" + std::to_string(i % s.groups);
             one.user = "u" + std::to_string(i % s.users);
             one.resources = cp::Resources::parse_or_die("cpu:" + std::to_string(cpus(rng)) +
                                                        ",memory:" + std::to_string(gib(rng)) + "Gi");
             one.priority = i % 10 == 0 ? 100 : 0;
             CP_TRY(cp::bench::insert_submitted(tx, one));
           }
           return {};
         }),
         "write the queue");
    done += n;
  }
}

// Another writer beside the cycle: an empty write transaction every 10 ms
// from its own thread, timed from the call to its commit. A submit waits
// for the store's writer the same way, so the longest of these is how long
// a submit made during the cycle could be held up by it.
class WriteProbe {
 public:
  explicit WriteProbe(cp::Store& store) : thread_([this, &store] { run(store); }) {}
  ~WriteProbe() { stop(); }
  struct Figures {
    std::size_t writes = 0;
    double p50_ms = 0, max_ms = 0;
  };
  Figures stop() {
    if (thread_.joinable()) {
      stop_ = true;
      thread_.join();
    }
    Figures f;
    f.writes = ms_.size();
    if (ms_.empty()) return f;
    std::sort(ms_.begin(), ms_.end());
    f.p50_ms = ms_[ms_.size() / 2];
    f.max_ms = ms_.back();
    return f;
  }

 private:
  void run(cp::Store& store) {
    while (!stop_) {
      const auto t0 = std::chrono::steady_clock::now();
      must(store.write([](cp::Tx&) -> cp::Status { return {}; }), "probe write");
      ms_.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  std::atomic<bool> stop_{false};
  std::vector<double> ms_;
  std::thread thread_;
};

struct Cycle {
  const char* name;
  double wall_ms = 0;
  cp::ControlPlane::CycleStats stats;
  WriteProbe::Figures beside;  // where a probe ran
};

Cycle timed_cycle(cp::ControlPlane& control, const char* name) {
  const auto t0 = std::chrono::steady_clock::now();
  must(control.schedule_once(), name);
  Cycle c{name, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count(),
          control.last_cycle()};
  const auto& s = c.stats;
  std::printf(
      "cycle %-9s %8.1f ms: load %7.1f, decide %7.1f, apply %7.1f ms | queued %6zu, placed %6zu, waiting %6zu, "
      "reasons written %6lld, %3lld transactions (longest %6.1f ms)\n",
      name, c.wall_ms, s.load_ms, s.decide_ms, s.apply_ms, s.queued, s.placed, s.waiting,
      static_cast<long long>(s.reasons_written), static_cast<long long>(s.apply_writes), s.longest_write_ms);
  return c;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Cubeplane: one scheduling cycle of the server over a big queue (load, decide, apply)"};
  Shape shape;
  std::string store_url;
  bool quick = false;
  std::string log_level = "warn";
  app.add_option("--store", store_url, "Store URL (default: a new SQLite file in a temporary directory)");
  app.add_option("--tasks", shape.tasks, "Queued tasks")->check(CLI::PositiveNumber);
  app.add_option("--nodes", shape.nodes, "Nodes of the one cluster, 64 CPUs each (default: room for twice what the guarantees admit)")
      ->check(CLI::PositiveNumber);
  app.add_option("--groups", shape.groups, "Resource groups the tasks are spread over")->check(CLI::PositiveNumber);
  app.add_flag("--quick", quick, "A small run for CI: 2,000 tasks, temporary SQLite");
  app.add_option("--log-level", log_level, "The server's log level");
  CLI11_PARSE(app, argc, argv);
  if (quick) {
    shape.tasks = 2000;
    store_url.clear();
  }
  if (shape.nodes == 0) {
    const double admitted = static_cast<double>(guarantee(shape, 1.0)) * shape.groups;
    shape.nodes = std::max(1, static_cast<int>(2 * admitted / Shape::kNodeCpus));
  }
  cp::setup_logging(log_level);

  const fs::path dir = fs::temp_directory_path() / ("cubeplane-bench-cycle-" + std::to_string(::getpid()));
  fs::create_directories(dir / "objects");
  const bool temp_store = store_url.empty();
  if (temp_store) store_url = "sqlite://" + (dir / "cubeplane.db").string();
  std::vector<Cycle> cycles;
  std::string backend;
  {
    auto objects = must(cp::open_object_store("file://" + (dir / "objects").string()), "objects");
    auto store = must(cp::open_store(store_url), "open store");
    must(store->migrate(), "migrate");
    backend = store->backend();
    cp::SimulatedClock clock(cp::SystemClock::instance().now_ms());
    cp::ServerConfig config;
    cp::ControlPlane control(*store, *objects, clock, config);
    cp::Principal admin;
    admin.user = "admin";
    admin.role = cp::PlatformRole::admin;
    must(control.ensure_admin_token(), "admin token");
    must(cp::apply_fleet(control, must(cp::parse_fleet_config(fleet_yaml(shape, 1.0)), "fleet")), "apply fleet");

    // The agent registers and reports its nodes once (no liveness pass runs).
    std::vector<cp::NodeReport> nodes;
    for (int i = 0; i < shape.nodes; ++i) {
      cp::NodeReport n;
      n.name = "n" + std::to_string(i);
      n.capacity = cp::Resources::parse_or_die("cpu:" + std::to_string(Shape::kNodeCpus) + ",memory:512Gi");
      n.allocatable = n.capacity;
      nodes.push_back(std::move(n));
    }
    (void)cp::bench::connect_agent(control, admin, "bench", std::move(nodes));

    const auto t0 = std::chrono::steady_clock::now();
    write_queue(*store, shape, clock.now_ms());
    std::printf("backend=%s tasks=%d nodes=%d groups=%d: queue written in %.1f s\n", backend.c_str(), shape.tasks,
                shape.nodes, shape.groups,
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());

    auto probed_cycle = [&](const char* name) {
      WriteProbe probe(*store);
      Cycle c = timed_cycle(control, name);
      c.beside = probe.stop();
      std::printf("  %zu empty writes beside it (one every 10 ms): waited p50 %.1f ms, max %.1f ms\n", c.beside.writes,
                  c.beside.p50_ms, c.beside.max_ms);
      return c;
    };
    cycles.push_back(probed_cycle("first"));
    clock.advance_ms(10'000);
    cycles.push_back(timed_cycle(control, "unchanged"));
    must(cp::apply_fleet(control, must(cp::parse_fleet_config(fleet_yaml(shape, 1.1)), "fleet")), "raise quotas");
    clock.advance_ms(10'000);
    cycles.push_back(probed_cycle("figures"));
    clock.advance_ms(61'000);
    cycles.push_back(timed_cycle(control, "refresh"));
    // What the refresh kept back (reasons_refresh_per_cycle), written at the next cycles.
    for (int i = 0; i < 30 && cycles.back().stats.reasons_written > 0; ++i) {
      clock.advance_ms(10'000);
      cycles.push_back(timed_cycle(control, "catch-up"));
    }
  }
  if (temp_store) fs::remove_all(dir);

  // Each cycle did what it is there for, or its timing means nothing.
  const auto& first = cycles[0].stats;
  const auto& unchanged = cycles[1].stats;
  const auto& figures = cycles[2].stats;
  const auto& refresh = cycles[3].stats;
  std::string wrong;
  if (first.placed == 0 || first.waiting == 0) wrong += " the first cycle placed nothing or explained nothing;";
  if (first.reasons_written != static_cast<std::int64_t>(first.waiting)) wrong += " the first cycle left some waiting task unwritten;";
  if (unchanged.placed != 0 || unchanged.reasons_written != 0) wrong += " the unchanged cycle placed or wrote;";
  if (figures.placed == 0) wrong += " raised guarantees placed nothing;";
  // New figures under the same codes wait for the refresh; a new why does not.
  if (figures.reasons_written >= static_cast<std::int64_t>(figures.waiting)) wrong += " the figures cycle kept nothing back;";
  if (refresh.reasons_written == 0) wrong += " the refresh wrote nothing;";
  if (cycles.back().stats.reasons_written != 0) wrong += " the refresh did not catch up in 30 cycles;";
  if (!wrong.empty()) {
    std::printf("ERROR%s\n", wrong.c_str());
    return 1;
  }
  double longest_write = 0;
  for (const Cycle& c : cycles) longest_write = std::max(longest_write, c.stats.longest_write_ms);
  std::printf("first_cycle_ms=%.1f unchanged_cycle_ms=%.1f figures_cycle_ms=%.1f refresh_cycle_ms=%.1f "
              "refresh_cycles=%zu waiting=%zu tasks=%d longest_write_ms=%.1f write_beside_max_ms=%.1f\n",
              cycles[0].wall_ms, cycles[1].wall_ms, cycles[2].wall_ms, cycles[3].wall_ms, cycles.size() - 4,
              first.waiting, shape.tasks, longest_write,
              std::max(cycles[0].beside.max_ms, cycles[2].beside.max_ms));
  return 0;
}
