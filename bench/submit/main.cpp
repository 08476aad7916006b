// cubeplane-bench-submit: how many tasks a second go from an HTTP submit to
// Dispatched (durable in the store, placed by the scheduler, an attempt
// created for the agent), against how many a second the same rows go into the
// same store by a raw batched insert, measured in the same run.
//
//   cubeplane-bench-submit [--store URL] [--tasks N] [--clients C] [--cold-scheduler] [--no-journal]
//
// The server is the real one in this process: ControlPlane, the HTTP server
// with the API routes (4 threads, as `cubeplane server`), the background
// scheduling loop. Clients are C threads, each with its own keep-alive
// connection (libcurl), each submitting a one-step pipeline (1 CPU) at a
// time. One cluster of 64 nodes (--nodes) with room for every task; its agent is
// simulated in process (it registers, then syncs its nodes every 5 s), since
// what an agent does after Dispatched is the agent benchmark's business.
//
// The last line is machine-readable:
//   submit_to_dispatch_per_sec=N raw_insert_per_sec=N ratio=R tasks=N
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <thread>

#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "common/clock.h"
#include "common/http_client.h"
#include "common/ids.h"
#include "common/log.h"
#include "http/metrics.h"
#include "http/router.h"
#include "http/routes.h"
#include "http/server.h"
#include "../common/server_bench.h"
#include "objstore/object_store.h"
#include "server/control_plane.h"
#include "server/fleet_config.h"
#include "store/postgres/postgres_store.h"
#include "store/sqlite/sqlite_store.h"
#include "store/sqlite/wal_batching_vfs.h"
#include "store/store.h"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

int g_nodes = 64;  // --nodes

std::string fleet_yaml(int tasks) {
  const int cpus = std::max(1, tasks);
  return "apiVersion: cubeplane/v1\nkind: Cluster\nmetadata: {name: bench}\n"
         "spec: {executor: local, storage_pool: pool-a, embedded_agent: false}\n---\n"
         "apiVersion: cubeplane/v1\nkind: ResourceGroup\nmetadata: {name: rg-bench}\n"
         "spec:\n  clusters: [bench]\n  quota:\n    cpu: {guaranteed: \"" +
         std::to_string(2 * cpus) + "\"}\n    memory: {guaranteed: " + std::to_string(2 * cpus) +
         "Gi}\n  default_request: {memory: 64Mi}\n---\n"
         "apiVersion: cubeplane/v1\nkind: ProjectGroup\nmetadata: {name: pg-bench}\n"
         "spec: {default_resource_group: rg-bench}\n";
}

constexpr const char* kPipeline =
    "{\"apiVersion\":\"cubeplane/v1\",\"kind\":\"Pipeline\",\"metadata\":{\"name\":\"bench\","
    "\"project_group\":\"pg-bench\"},\"spec\":{\"steps\":[{\"name\":\"step\",\"command\":[\"true\"],"
    "\"resources\":{\"cpu\":\"1\"}}]}}";

cp::NodeReport node(int i, int tasks) {
  cp::NodeReport n;
  n.name = "n" + std::to_string(i);
  // Room for every task, spread over the nodes, and some to spare.
  const int cpus = tasks / g_nodes + 16;
  n.capacity = cp::Resources::parse_or_die("cpu:" + std::to_string(cpus) + ",memory:" + std::to_string(cpus) + "Gi");
  n.allocatable = n.capacity;
  return n;
}

// CPU seconds this process has used (every thread: server, clients, agent).
double cpu_seconds() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  auto s = [](const timeval& t) { return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6; };
  return s(u.ru_utime) + s(u.ru_stime);
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<std::size_t>(p * static_cast<double>(v.size())))];
}

using cp::bench::must;

// Tasks in the store: all of them, or those that left the queue.
std::int64_t task_count(cp::Store& store, bool only_dispatched = false) {
  std::int64_t n = 0;
  must(store.read([&](cp::Tx& tx) -> cp::Status {
         CP_ASSIGN(auto counts, tx.count_tasks());
         for (const auto& [group, state, count] : counts) {
           if (!only_dispatched || state != cp::TaskState::Queued) n += count;
         }
         return {};
       }),
       "count tasks");
  return n;
}

// The store without its change journal: the scheduler then reads all live
// work at every cycle, as it did before the journal (for --no-journal).
class WithoutJournal final : public cp::Store {
 public:
  explicit WithoutJournal(cp::Store& inner) : inner_(inner) {}
  cp::Status migrate() override { return inner_.migrate(); }
  cp::Status write(const std::function<cp::Status(cp::Tx&)>& body) override { return inner_.write(body); }
  cp::Status read(const std::function<cp::Status(cp::Tx&)>& body) override { return inner_.read(body); }
  int schema_version() override { return inner_.schema_version(); }
  std::string backend() const override { return inner_.backend(); }

 private:
  cp::Store& inner_;
};

struct EndToEnd {
  double seconds_to_accept = 0;
  double seconds_to_dispatch = 0;
  std::int64_t accepted = 0;
  std::int64_t dispatched = 0;
  std::vector<double> latencies_ms;
  cp::ControlPlane::AuditStats audit;  // audit rows: with their change, or in batches of their own
};

EndToEnd run_end_to_end(cp::Store& store, cp::ObjectStore& objects, int tasks, int clients, int http_threads,
                        bool schedule, bool warm_scheduler) {
  cp::ServerConfig config;
  config.warm_scheduler = warm_scheduler;
  cp::ControlPlane control(store, objects, cp::SystemClock::instance(), config);
  cp::Principal admin;
  admin.user = "admin";
  admin.role = cp::PlatformRole::admin;
  must(control.ensure_admin_token(), "admin token");
  must(cp::apply_fleet(control, must(cp::parse_fleet_config(fleet_yaml(tasks)), "fleet")), "apply fleet");
  auto token = must(control.create_token(admin, "admin", cp::json::value(nullptr)), "token");
  const std::string bearer = "Bearer " + std::string(token.at("token").as_string());

  // The agent: register, then report the nodes every 5 s.
  std::vector<cp::NodeReport> nodes;
  for (int i = 0; i < g_nodes; ++i) nodes.push_back(node(i, tasks));
  auto [agent, sync] = cp::bench::connect_agent(control, admin, "bench", std::move(nodes));

  cp::http::Metrics metrics;
  cp::http::Router router;
  cp::http::add_api_routes(router, control, &metrics, "");
  cp::http::HttpServer http(router, {}, &metrics);
  const auto port = must(http.listen("127.0.0.1:0"), "listen");
  http.run(http_threads);
  if (schedule) control.start_background();
  const std::string url = "http://127.0.0.1:" + std::to_string(port) + "/api/v1/pipelines";

  std::atomic<bool> done{false};
  std::thread agent_thread([&] {
    auto next = Clock::now();
    while (!done) {
      if (Clock::now() >= next) {
        sync.seq++;
        (void)control.agent_sync(agent, sync);
        next = Clock::now() + std::chrono::seconds(5);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  });

  EndToEnd out;
  std::atomic<int> next_task{0};
  std::atomic<std::int64_t> accepted{0};
  std::vector<std::vector<double>> latencies(static_cast<std::size_t>(clients));
  const auto t0 = Clock::now();
  std::vector<std::thread> workers;
  for (int c = 0; c < clients; ++c) {
    workers.emplace_back([&, c] {
      cp::HttpClient client;
      cp::HttpRequestOptions opts;
      opts.headers["Authorization"] = bearer;
      while (next_task.fetch_add(1) < tasks) {
        const auto s = Clock::now();
        auto r = client.request("POST", url, kPipeline, "application/json", opts);
        const double ms = std::chrono::duration<double, std::milli>(Clock::now() - s).count();
        if (r.ok() && r->status == 201) {
          accepted++;
          latencies[static_cast<std::size_t>(c)].push_back(ms);
        } else {
          std::fprintf(stderr, "submit failed: %s\n",
                       r.ok() ? (std::to_string(r->status) + " " + r->body).c_str() : r.error().to_string().c_str());
        }
      }
    });
  }
  for (auto& w : workers) w.join();
  out.seconds_to_accept = std::chrono::duration<double>(Clock::now() - t0).count();
  out.accepted = accepted;
  const auto deadline = Clock::now() + std::chrono::seconds(schedule ? 300 : 0);
  while ((out.dispatched = task_count(store, true)) < out.accepted && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  out.seconds_to_dispatch = std::chrono::duration<double>(Clock::now() - t0).count();
  for (auto& l : latencies) out.latencies_ms.insert(out.latencies_ms.end(), l.begin(), l.end());
  out.audit = control.audit_stats();
  done = true;
  agent_thread.join();
  control.stop_background();
  http.stop();
  return out;
}

// The rows one submit writes (a pipeline, its task, the task's first event),
// written `batch` tasks to a transaction.
double raw_insert_per_sec(cp::Store& store, int tasks, int batch) {
  const auto t0 = Clock::now();
  for (int done = 0; done < tasks;) {
    const int n = std::min(batch, tasks - done);
    must(store.write([&](cp::Tx& tx) -> cp::Status {
           tx.hold_writes();  // as a submit does: PostgreSQL sends the rows in pipelines
           const cp::Millis now = cp::SystemClock::instance().now_ms();
           const cp::bench::Submitted one{now, "pg-bench", "rg-bench", "admin",
                                          cp::Resources::parse_or_die("cpu:1,memory:64Mi")};
           for (int i = 0; i < n; ++i) CP_TRY(cp::bench::insert_submitted(tx, one));
           return {};
         }),
         "raw insert");
    done += n;
  }
  return tasks / std::chrono::duration<double>(Clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Cubeplane write path: HTTP submit -> durable -> dispatched, vs a raw batched insert"};
  std::string store_url;
  int tasks = 20000;
  int clients = 16;
  int batch = 1000;
  int http_threads = cp::ServerSettings::kDefaultHttpThreads;
  bool quick = false;
  bool no_scheduler = false;
  bool no_journal = false;
  bool cold_scheduler = false;
  std::string log_level = "warn";
  app.add_option("--store", store_url, "Store URL (default: a new SQLite file in a temporary directory)");
  app.add_option("--tasks", tasks, "Tasks to submit (one-step pipelines)")->check(CLI::PositiveNumber);
  app.add_option("--clients", clients, "Concurrent HTTP clients")->check(CLI::PositiveNumber);
  app.add_option("--http-threads", http_threads, "The HTTP server's threads (as cubeplane server: its Server document's http_threads, 16 by default)")
      ->check(CLI::PositiveNumber);
  app.add_option("--nodes", g_nodes, "Nodes of the one cluster (each scheduling cycle reads them all)")
      ->check(CLI::PositiveNumber);
  app.add_option("--batch", batch, "Tasks per transaction of the raw insert")->check(CLI::PositiveNumber);
  app.add_flag("--quick", quick, "A small run for CI: 1,000 tasks, 8 clients, temporary SQLite");
  app.add_flag("--no-journal", no_journal,
               "Hide the store's change journal: every scheduling cycle reads all live work (as before it)");
  app.add_flag("--cold-scheduler", cold_scheduler,
               "Build the scheduler's state from all live work at every cycle (as before it was kept warm)");
  app.add_flag("--no-scheduler", no_scheduler, "Only submit (what the HTTP and store path alone sustain)");
  app.add_option("--log-level", log_level, "The server's log level (debug shows each scheduling cycle's times)");
  CLI11_PARSE(app, argc, argv);
  if (quick) {
    tasks = 1000;
    clients = 8;
    store_url.clear();
  }
  cp::setup_logging(log_level);

  const fs::path dir = fs::temp_directory_path() / ("cubeplane-bench-submit-" + std::to_string(::getpid()));
  fs::create_directories(dir / "objects");
  const bool temp_store = store_url.empty();
  if (temp_store) store_url = "sqlite://" + (dir / "cubeplane.db").string();
  auto objects = must(cp::open_object_store("file://" + (dir / "objects").string()), "objects");

  EndToEnd e2e;
  double e2e_cpu = 0;
  double raw = 0;
  std::string backend;
  std::string group_commit;  // SQLite only
  {
    auto store = must(cp::open_store(store_url), "open store");
    must(store->migrate(), "migrate");
    backend = store->backend();
    // The rates count every task that left the queue: tasks of an earlier
    // run in the same database would count as this run's.
    if (const std::int64_t existing = task_count(*store); existing > 0) {
      std::fprintf(stderr,
                   "ERROR the store already holds %lld tasks (an earlier run's?): give the benchmark an empty "
                   "database, e.g. CREATE DATABASE for each run on PostgreSQL\n",
                   static_cast<long long>(existing));
      return 1;
    }
    const double cpu0 = cpu_seconds();
    WithoutJournal without_journal(*store);
    cp::Store& served = no_journal ? static_cast<cp::Store&>(without_journal) : *store;
    const auto wal0 = cp::sqlite::wal_batching_stats();
    auto* postgres = dynamic_cast<const cp::PostgresStore*>(store.get());
    const std::int64_t trips0 = postgres != nullptr ? postgres->round_trips() : 0;
    const auto pg_groups0 = postgres != nullptr ? postgres->group_stats() : cp::PostgresStore::GroupStats{};
    e2e = run_end_to_end(served, *objects, tasks, clients, http_threads, !no_scheduler, !cold_scheduler);
    e2e_cpu = cpu_seconds() - cpu0;
    if (const auto* sqlite = dynamic_cast<const cp::SqliteStore*>(store.get())) {
      // Group commit: how many write()s shared a transaction, and how much
      // of the run the single writer was busy (near all: it is the limit).
      const auto g = sqlite->group_stats();
      const auto wal = cp::sqlite::wal_batching_stats();
      group_commit = fmt::format(
          "group commit: {} transactions for {} writes ({:.2f} a transaction), writer busy {:.1f} s of {:.1f} s "
          "({:.1f} s of it on a CPU); WAL: {} writes by SQLite in {} to the file",
          g.groups, g.writes, g.groups ? static_cast<double>(g.writes) / static_cast<double>(g.groups) : 0.0,
          g.busy_s, e2e.seconds_to_dispatch, g.busy_cpu_s, wal.writes - wal0.writes, wal.flushes - wal0.flushes);
      const auto ck = sqlite->checkpoint_stats();
      group_commit += fmt::format("; checkpoints: {} in the background, {} by the writer", ck.background, ck.by_writer);
    }
    if (postgres != nullptr) {
      // Every exchange with the server costs both sides a send and a wake-up.
      const std::int64_t trips = postgres->round_trips() - trips0;
      // Group commit of write_shared() (the submits): transactions of more
      // than one write, and those writes.
      const auto g = postgres->group_stats();
      const std::int64_t groups = g.groups - pg_groups0.groups;
      const std::int64_t grouped = g.grouped_writes - pg_groups0.grouped_writes;
      group_commit = fmt::format(
          "round trips to PostgreSQL: {} ({:.1f} a task); group commit: {} transactions of {} submits ({:.2f} a "
          "transaction)",
          trips, static_cast<double>(trips) / std::max(1, tasks), groups, grouped,
          groups ? static_cast<double>(grouped) / static_cast<double>(groups) : 0.0);
    }
    // The same rows, into the same database, with nothing else running.
    raw = raw_insert_per_sec(*store, tasks, batch);
  }
  if (temp_store) fs::remove_all(dir);

  const double rate = static_cast<double>(e2e.dispatched) / e2e.seconds_to_dispatch;
  std::printf("backend=%s tasks=%d clients=%d\n", backend.c_str(), tasks, clients);
  std::printf("accepted=%lld in %.3f s (%.0f/s); submit latency p50=%.2f ms p99=%.2f ms\n",
              static_cast<long long>(e2e.accepted), e2e.seconds_to_accept,
              static_cast<double>(e2e.accepted) / e2e.seconds_to_accept, percentile(e2e.latencies_ms, 0.5),
              percentile(e2e.latencies_ms, 0.99));
  std::printf("dispatched=%lld in %.3f s from the first submit\n", static_cast<long long>(e2e.dispatched),
              e2e.seconds_to_dispatch);
  // On a shared machine the rate moves with the neighbours' load; the CPU
  // a task costs (server and clients together) much less.
  std::printf("cpu: %.1f s for the end-to-end run, %.0f us a task (clients included)\n", e2e_cpu,
              e2e_cpu * 1e6 / std::max<double>(1, static_cast<double>(e2e.accepted)));
  if (!group_commit.empty()) std::printf("%s\n", group_commit.c_str());
  std::printf("audit: %lld rows committed with their change, %lld in %lld transactions of their own\n",
              static_cast<long long>(e2e.audit.with_changes), static_cast<long long>(e2e.audit.batched.rows),
              static_cast<long long>(e2e.audit.batched.batches));
  std::printf("raw batched insert (%d tasks a transaction): %.0f tasks/s\n", batch, raw);
  if (e2e.accepted != tasks || e2e.dispatched < e2e.accepted) {
    std::printf("ERROR not every task was accepted and dispatched\n");
    return 1;
  }
  std::printf("submit_to_dispatch_per_sec=%.0f raw_insert_per_sec=%.0f ratio=%.3f tasks=%d\n", rate, raw, rate / raw,
              tasks);
  return 0;
}
